"""evalkit's Python API: run a corpus, score predictions made elsewhere, load a run's tables.

    import evalkit
    result = evalkit.run("corpus", ["fake"], out="runs/self-test")
    tables = evalkit.load_run(result.run_dir)
    tables.members.groupby("backend")["score"].mean()

The command line is a thin layer over the same functions (`evalkit run`, `evalkit score`); what a
run writes is the same whichever calls it. Bad input raises an `evalkit.errors.EvalkitError`
(its `exit_code` is the CLI's).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.backends import BackendSpec
from evalkit.errors import EvalkitError
from evalkit.report.frames import MEMBER_COLUMNS, load_scores
from evalkit.results.runfolder import read_run_json, scan
from evalkit.results.summary import read_summary
from evalkit.stages.runner import run as run_with
from evalkit.stages.runner import run_options
from evalkit.status import NOT_COVERED, SKIPPED, count, shown

if TYPE_CHECKING:
    import pandas as pd

    from evalkit.stages.runner import RunResult

__all__ = ["run", "score", "load_run", "RunTables"]


def run(corpus: str | Path, backends: Iterable[str | BackendSpec], *, out: str | Path | None = None,
        sources: str | Path | None = None, tasks: list[str] | None = None, only: list[str] | None = None,
        threshold: float | None = None, notebooks: bool = True, html: bool = True,
        record: list[str] | None = None, max_usd: float | None = None, workers: int | None = None) -> RunResult:
    """Extract, score and report every selected member of `corpus` with each backend, as `evalkit run`.

    Its options are built as the command line builds them (`runner.run_options`), so it writes the same files:
    the run folder and a line per outcome in the history beside it (``runs/index.jsonl``).

    `backends`: specs as on the command line (``"fake"``, ``"mine=openai:url=http://…/v1"``,
    ``"cassette:path=P"``) or `BackendSpec`s. `out`: the run folder (default ``runs/<time>-<backends>``).
    `sources`: the folder of pointer sources (default ``$EVALKIT_SOURCES``). `tasks`, `only`: task ids
    and member ids (``MEMBER`` or ``TASK/MEMBER``) to run (default: all). `notebooks=False` scores
    in this process (no notebooks, no HTML). `record`: ``NAME=PATH`` cassettes to record to.

    Returns the `RunResult`: ``run_dir``, one `Outcome` per member × backend (status, score, passed,
    metrics) and ``exit_code`` (what `evalkit run` would exit with). Load its tables with `load_run`.
    """
    return run_with(run_options(corpus=corpus, backends=backends, sources=sources, tasks=tasks, only=only,
                                out=out, threshold=threshold, notebooks=notebooks, html=html and notebooks,
                                record=record, max_usd=max_usd, workers=workers))


def score(corpus: str | Path, predictions: str | Path, **kwargs) -> RunResult:
    """Score predictions made elsewhere (a folder of ``<member-id>.json`` records), as `evalkit score`.

    Takes `run`'s keyword arguments (`out`, `sources`, `tasks`, `only`, `threshold`, `notebooks`, `html`,
    `workers`); the backend is labelled ``predictions``."""
    if not Path(predictions).is_dir():
        raise EvalkitError(f"{predictions}: predictions folder not found")
    return run(corpus, [BackendSpec("predictions", "predictions", {"dir": str(predictions)})], **kwargs)


@dataclass(frozen=True)
class RunTables:
    """A run's results as two tidy pandas frames, every task of the run stacked.

    `members`: one row per member × backend: task, member, backend, status (``scored`` / ``error`` /
    ``not_covered`` / ``skipped`` / ``refused``: `evalkit.status`), cause, heldout (bool), score, passed,
    verdict, answer (a scored answer's parse outcome: ok / malformed / truncated / schema_invalid),
    recovered, token counts, cost, latency and every metric as ``metric.<name>``.
    `items`: one row per scored item (a field, a triple, an area…) with its outcome and the scorer's
    reason, keyed by task, member and backend."""

    members: pd.DataFrame
    items: pd.DataFrame

    def counts(self) -> pd.DataFrame:
        """One row per task × backend: every count of summary.json (`evalkit.status.count`, the one counter)."""
        import pandas as pd  # lazy: pandas is loaded only where it is used (import cost)

        rows = [{"task": task, "backend": backend, **count(m.to_dict("records")).to_json()}
                for (task, backend), m in self.members.groupby(["task", "backend"], sort=False)]
        return pd.DataFrame(rows)


def _unscored_rows(path: str | Path) -> list[dict]:
    """The member × backends a run has no result folder for, from its summary.json: not covered (per
    backend) and skipped or refused (the task's members the gate left out, for each backend)."""

    heldout = read_run_json(path).heldout
    rows = []
    summary = read_summary(path)
    for task, t in (summary.tasks if summary else {}).items():
        for b in t.backends:
            unscored = [(m, NOT_COVERED, NOT_COVERED) for m in b.not_covered]
            unscored += [(s.member, s.status or SKIPPED, s.reason) for s in b.skipped]
            rows += [{"task": task, "member": m, "backend": b.backend, "status": status, "cause": cause,
                      "label": m if len(t.backends) <= 1 else f"{m} [{b.backend}]", "verdict": shown(status),
                      "heldout": f"{task}/{m}" in heldout} for m, status, cause in unscored]
    return rows


def load_run(path: str | Path) -> RunTables:
    """The member and item tables of the run folder at `path` (`evalkit.report.frames.load_scores` per task, and a
    row for each member × backend that was not covered or skipped); `RunTables.counts` counts them.

    Raises `evalkit.errors.CorpusError` when `path` is not a folder."""
    import pandas as pd  # lazy: pandas is loaded only where it is used (import cost)

    tasks = sorted({s.task for s in scan(path, status=None, unscored=True)})
    frames = [load_scores(path, t) for t in tasks]
    keys = ["task", "member", "backend", "label"]
    members = [m for m, _ in frames if len(m)]
    if extra := _unscored_rows(path):
        members.append(pd.DataFrame(extra))
    members = pd.concat(members, ignore_index=True) if members else pd.DataFrame(columns=MEMBER_COLUMNS)
    members["heldout"] = members["heldout"].fillna(False).astype(bool)
    items = [i for _, i in frames if len(i)]
    return RunTables(members, pd.concat(items, ignore_index=True) if items else pd.DataFrame(columns=keys))
