"""The run history: ``runs/index.jsonl``, one line per scored or errored member × backend of every run.

Each line (compact JSON, sorted keys)::

    {"run_id": "20261130-101500-gemma", "time": "2026-11-30T10:15:00+00:00", "task": "deal-memos",
     "member": "clean-single-term", "backend": "gemma", "model": "gemma-3-270m", "status": "scored",
     "score": 0.93, "passed": true, "metrics": {...},
     "cost": {"input_tokens": 812, "output_tokens": 95, "usd": 0.0004, "calls": 1},
     "command": "evalkit run --backend gemma=...", "heldout": true}

``command`` is run.json's (redacted when it was written: `spec.redacted_command`); ``heldout`` is present (true) only
for a held-out member, whose figures the runs page (`evalkit.report.runspage`) shows apart.

An errored member × backend (`evalkit.status`) has ``"status": "error"``, its ``cause`` and
``message``, and no score, verdict or metrics: it never enters a trend's mean.

Appends are serialized with a file lock (``index.jsonl.lock``) and are idempotent:
a line whose (run_id, time, task, member, backend) is already in the file is not
written again. `history_frame` / `trend_frame` read it back for the trend charts
(metric over runs, per backend).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit._util import jsonio
from evalkit._util.typed import Bool, Num, Record, Str
from evalkit.results.runfolder import scan, sweep_of
from evalkit.results.scoreboard import Metric, RunOutcomes, _selected, locked, numeric_metrics
from evalkit.status import ERROR, SCORED

if TYPE_CHECKING:  # pandas is imported lazily (start-up cost); for the annotations only
    import pandas as pd  # type: ignore[import-untyped]  # pandas has no types (no pandas-stubs dependency)

__all__ = ["INDEX_NAME", "index_path", "history_lines", "append_history", "read_history", "history_frame",
           "trend_frame", "run_means", "HistoryLine"]

INDEX_NAME = "index.jsonl"
# A line has no ``schema_version`` (one a line would be most of a short line): a line without one is version 1,
# and a format that changed would add the key to its lines.


class HistoryLine(Record):
    """One line of the history (module docstring): a scored or errored member × backend of one run."""

    run_id: Str
    time: Str | None = None
    task: Str | None = None
    member: Str | None = None
    backend: Str | None = None
    model: Str | None = None
    status: Str = SCORED  # lines written before errors were recorded are all scored
    score: Num | None = None
    passed: Bool | None = None
    metrics: dict[str, Metric] = {}
    cause: Str | None = None  # of an error
    message: Str | None = None
    cost: dict[str, Any] = {}
    command: Str | None = None
    heldout: Bool = False  # written (true) only for a held-out member


def index_path(run_dir: str | Path) -> Path:
    """``runs/index.jsonl`` for ``runs/<run-id>``: the index lives beside the run folders."""
    return (sweep_of(run_dir) or Path(run_dir)).parent / INDEX_NAME


def _key(line: HistoryLine) -> tuple[str, str | None, str | None, str | None, str | None]:
    return line.run_id, line.time, line.task, line.member, line.backend


def _finite(value: Any) -> Any:
    """A NaN / Infinity (in a score.json written before evalkit refused them) as null: no figure."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def history_lines(run_result: RunOutcomes | str | Path) -> list[HistoryLine]:
    """The index lines of a run: a RunResult / SweepResult (scored and errored outcomes) or a run folder path."""
    root, keys = _selected(run_result, (SCORED, ERROR))
    lines = []
    for s in scan(root, status=None):
        if keys is not None and (s.task, s.member, s.backend) not in keys:
            continue
        score, ext, rj = s.score(), s.extraction(), s.run_json()
        if score.reference:
            continue  # a similarity to another backend (--reference) is not a point on an accuracy trend
        failed = score.failure
        lines.append(HistoryLine.from_json({
            "run_id": s.run_id,
            "time": s.started(rj) or datetime.now(UTC).isoformat(timespec="seconds"),
            "task": s.task,
            "member": s.member,
            "backend": s.backend,
            "model": ext.backend.model,
            **({"status": SCORED, "score": _finite(score.score), "passed": score.passed,
                "metrics": {k: _finite(v) for k, v in numeric_metrics(score.metrics).items()}}
               if failed is None else
               {"status": ERROR, "cause": failed.cause, "message": failed.message}),
            "cost": {k: getattr(ext.run, k) for k in ("input_tokens", "output_tokens", "usd", "calls")},
            "command": rj.command,
            **({"heldout": True} if f"{s.task}/{s.member}" in rj.heldout else {}),
        }, s.home))
    return lines


def read_history(index: str | Path) -> list[HistoryLine]:
    """Every line of the index (a torn line from a crashed writer, or one that is not an object, is ignored); a
    value of the wrong type is one `RecordError` naming the file, the line and the key."""
    index = Path(index)
    if not index.exists():
        return []
    out = []
    for n, text in enumerate(index.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and data.get("run_id"):
            out.append(HistoryLine.from_json(data, f"{index}:{n}"))
    return out


def append_history(run_result: RunOutcomes | str | Path, index: str | Path | None = None) -> int:
    """Append the run's lines to the index (default ``<runs>/index.jsonl``); return how many were new."""
    root, _ = _selected(run_result)
    index = Path(index) if index is not None else index_path(root)
    lines = history_lines(run_result)
    if not lines:
        return 0
    with locked(index):
        seen = {_key(line) for line in read_history(index)}
        new = [line for line in lines if _key(line) not in seen]
        if new:
            index.parent.mkdir(parents=True, exist_ok=True)
            with open(index, "a", encoding="utf-8") as f:
                for line in new:
                    f.write(jsonio.line(line.to_json(), index))
    return len(new)


def history_frame(index: str | Path) -> pd.DataFrame:
    """Long pandas frame: run_id, time, task, member, backend, model, metric, value (numeric metrics only)."""
    import pandas as pd  # lazy: pandas is loaded only where it is used (import cost)

    rows = []
    for line in read_history(index):
        for metric, value in line.metrics.items():
            if value is None:
                continue
            rows.append({"run_id": line.run_id, "time": line.time, "task": line.task, "member": line.member,
                         "backend": line.backend, "model": line.model, "metric": metric, "value": float(value)})
    cols = ["run_id", "time", "task", "member", "backend", "model", "metric", "value"]
    return pd.DataFrame(rows, columns=cols)


def trend_frame(index: str | Path, task: str | None = None, metric: str = "score") -> pd.DataFrame:
    """Corpus mean of `metric` per (run, backend), ordered by time: the data of a trend chart."""
    import pandas as pd  # lazy: pandas is loaded only where it is used (import cost)

    df = history_frame(index)
    df = df[df.metric == metric]
    if task is not None:
        df = df[df.task == task]
    if df.empty:
        return pd.DataFrame(columns=["task", "backend", "run_id", "time", "value", "members"])
    return run_means(df)


def run_means(lines: pd.DataFrame) -> pd.DataFrame:
    """The points of a trend: per (task, backend, run), the mean `value` over its members (`member`
    counted), at the run's earliest `time`; ordered by task, backend and time.

    ``series`` names the line a point belongs to: a mean over other members is another quantity, so
    only runs over the same member set join. A backend whose runs cover one member set keeps its
    label; otherwise each set is labelled with its size (``label · N=3``, then ``#2``… if sizes tie)."""
    import pandas as pd

    keys = ["task", "backend", "run_id"]
    g = (lines.groupby(keys, as_index=False)
              .agg(time=("time", "min"), value=("value", "mean"), members=("member", "nunique")))
    sets = lines.groupby(keys)["member"].agg(lambda m: tuple(sorted(set(map(str, m)))))
    g["member_set"] = [sets[tuple(k)] for k in g[keys].itertuples(index=False)]
    g = g.sort_values(["task", "backend", "time", "run_id"]).reset_index(drop=True)
    names: dict[tuple[Any, Any, tuple[str, ...]], str] = {}
    for (task, backend), runs in g.groupby(["task", "backend"], sort=False):
        distinct = list(dict.fromkeys(runs["member_set"]))
        for members in distinct:
            name = str(backend) if len(distinct) == 1 else f"{backend} · N={len(members)}"
            taken = set(names.values())
            k, base = 2, name
            while name in taken:
                name, k = f"{base} #{k}", k + 1
            names[(task, backend, members)] = name
    g["series"] = pd.Series([names[(t, b, m)] for t, b, m in zip(g["task"], g["backend"], g["member_set"])],
                            index=g.index, dtype=object)
    return g.drop(columns=["member_set"])
