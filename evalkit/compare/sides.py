"""Backends side by side for one task of a run: what ``compare.ipynb`` shows, and `evalkit compare`.

Everything here reads the run folder only (run.json, summary.json, each member's
extraction.json / score.json / judgments.json, the task's pairwise.json). For every shape:

* `summary_table`: per backend passed/N, errors, skipped and the headline's mean with its CI, from
  summary.json (`evalkit.results.summary`);
* `paired`: the first backend against each other over the members both scored (`evalkit.scoring.delta`):
  every metric's mean difference with a paired bootstrap CI and sign-flip p, the one-line statement
  (with the task's noise band when band.json has one), per-field accuracy (flat fields), verdict flips
  and the items whose outcome changed; `nothing_comparable` says why a task has none;
* `calls_table`: per backend, errors and error rate, the answers' parse outcomes, latency percentiles,
  tokens and USD, read from summary.json (`task_summary`: its one computation of them, never a second
  count here), and, under a strict ontology, vocabulary compliance.

Graph tasks add:

* `f1_table`: per backend and axis, strict and judged micro F1 with a
  bootstrap confidence interval over members (`evalkit.scoring.stats.micro_f1_ci`:
  members resampled with replacement, micro F1 recomputed from the
  resample's summed tp/fp/fn; a fixed seed, so the same run gives the same
  interval), and `relation_type_f1`: the same per relation type;
* `pairwise_table` / `win_rate_matrix` / `win_rate_chart`: the blind pairwise
  results, as a table and as an altair matrix (row backend's win rate against
  the column backend, ties excluded; cells whose order inconsistency exceeds
  20 % are outlined and starred);
* `disagreements`: per member, the pairwise items where the judge's verdict
  changed with the slot order or went against the strict F1, and
  `judge_accepted`: the pairs the reference judge matched that the strict pass
  had not.

Tree tasks add `family_table`: each family's mean score per backend with its CI (summary.json).

`compare_run` executes the notebook with papermill (`evalkit.execution.execute`) and
renders its HTML (`evalkit.report.render.render_notebook`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalkit.compare.diff import band_of
from evalkit.compare.diff import band_width as width
from evalkit.errors import CorpusError, EvalkitError
from evalkit.execution.execute import NOTEBOOKS_DIR, NotebookJob, execute
from evalkit.report.frames import item_shape
from evalkit.report.views import figure
from evalkit.results import runfolder
from evalkit.results.records import JudgmentsRecord, PairwiseRecord, RunBlock, RunRecord, ScoreRecord
from evalkit.results.summary import BackendEntry, Summary, TaskSummary, completion_of, read_summary, summarize
from evalkit.scoring.delta import compare_sides
from evalkit.scoring.ontology import aggregate_compliance
from evalkit.scoring.stats import CONFIDENCE, RESAMPLES, SEED, micro_f1, micro_f1_ci, sub_seed
from evalkit.status import PARSE_OUTCOMES, SCORED

AXES = ("entities", "relations")
INCONSISTENCY_MARK = 0.20


def _quietly(read: Any) -> Any:
    """What `read()` returns, or None for a missing or unreadable file: a comparison shows what is there."""
    try:
        return read()
    except CorpusError:
        return None


@dataclass
class Comparison:
    run_dir: Path
    task: str
    backends: list[str]
    members: pd.DataFrame  # one row per member × backend: member, backend, metrics (flattened), parse, error
    calls: dict[str, list[Any]]  # backend -> Completions (run blocks of extraction.json)
    run: RunRecord = field(default_factory=RunRecord)
    pairwise: PairwiseRecord | None = None
    judgments: dict[tuple[str, str], JudgmentsRecord] = field(default_factory=dict)
    judge_mode: str | None = None
    scores: dict[str, dict[str, ScoreRecord]] = field(default_factory=dict)  # backend → member → score.json

    @property
    def ontology_mode(self) -> str:
        return self.run.ontology_mode


_completion = completion_of


def load(run_dir: str | Path, task: str, backends: list[str] | None = None, judge_mode: str | None = None) -> Comparison:
    """Read one task of a run folder. `backends`: only these (default: every backend of the run, in run order).
    A member × backend that errored (`evalkit.status`) is not ``scored``: out of every F1 and bootstrap,
    counted in its backend's error rate (its extraction call is among the calls)."""
    run_dir = Path(run_dir)
    run = _quietly(lambda: runfolder.read_run_json(run_dir)) or RunRecord()
    order = [b.label for b in run.backends]
    found_results = runfolder.task_results(run_dir, task)
    labels = {s.backend for s in found_results}
    found = list(dict.fromkeys([b for b in order if b in labels] + sorted(labels - set(order))))
    chosen = [b for b in (backends or found) if b in found]
    rows, calls, judgments, scores = [], {b: [] for b in chosen}, {}, {b: {} for b in chosen}
    for s in found_results:
        member, backend = s.member, s.backend
        if backend not in chosen:
            continue
        scores[backend][member] = s.record
        ext = _quietly(s.extraction)
        run_block = ext.run if ext else RunBlock()
        if ext:
            calls[backend].append(_completion(run_block))
        j = runfolder.read_judgments(s.home)
        if j is not None:
            judgments[(member, backend)] = j
        rows.append({"member": member, "backend": backend, "scored": s.status == SCORED,
                     **s.record.count_row(s.status), "parse": run_block.parse, "error": run_block.error,
                     "truncated": run_block.truncated, **{f"metric.{k}": v for k, v in sorted(s.score().metrics.items())}})
    members = pd.DataFrame(rows, columns=None if rows else ["member", "backend", "scored", "parse", "error"])
    pw = runfolder.read_pairwise(run_dir, task)
    if pw is not None and chosen:
        pw = pw.among(chosen)
    mode = judge_mode or run.judge.get("mode")
    return Comparison(run_dir=run_dir, task=task, backends=chosen, members=members, calls=calls, run=run,
                      pairwise=pw, judgments=judgments, judge_mode=mode,
                      scores=scores)


# ----------------------------------------------------------------------------- F1 with bootstrap CIs

def _counts(members: pd.DataFrame, backend: str, prefix: str) -> np.ndarray | None:
    """(n, 3) tp/fp/fn per scored member of one backend; None when some member lacks them (e.g. not judged)."""
    cols = [f"metric.{prefix}_{c}" for c in ("tp", "fp", "fn")]
    rows = members[(members["backend"] == backend) & (members["scored"])] if not members.empty else members
    if rows.empty or not all(c in rows.columns for c in cols):
        return None
    values = rows[cols]
    if values.isna().any().any():
        return None
    return values.to_numpy(dtype=float)


def f1_figures(c: Comparison, n_boot: int = RESAMPLES, seed: int = SEED) -> list[dict[str, Any]]:
    """Per backend, axis and kind (strict / judged): micro F1, its bootstrap CI (`evalkit.scoring.stats`), members."""
    out = []
    for b in c.backends:
        for axis in AXES:
            for kind, prefix in (("strict", axis), ("judged", f"judged_{axis}")):
                counts = _counts(c.members, b, prefix)
                f1 = micro_f1(counts) if counts is not None else None
                lo, hi = (micro_f1_ci(counts, seed, n_boot) if f1 is not None else None) or (None, None)
                out.append({"backend": b, "axis": axis, "kind": kind, "f1": f1, "ci_low": lo, "ci_high": hi,
                            "members": 0 if counts is None else len(counts)})
    return out


def _fig(value: Any, digits: int = 3) -> str:
    return figure(value, digits)


def f1_table(c: Comparison, n_boot: int = RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    rows = []
    for r in f1_figures(c, n_boot, seed):
        ci = "—" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        rows.append({"backend": r["backend"], "axis": r["axis"], "kind": r["kind"], "micro F1": _fig(r["f1"]),
                     f"{CONFIDENCE:.0%} CI": ci, "members": r["members"]})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- calls

def task_summary(c: Comparison) -> TaskSummary:
    """The task's block of the run's summary.json (`evalkit.results.summary`): the one place a backend's counts,
    error rate and call figures are computed. A folder without one (a run stopped before it was written) is
    summarized here by the same function, never counted another way."""
    summary = _quietly(lambda: read_summary(c.run_dir)) or Summary.from_json(
        summarize(runfolder.scan(c.run_dir, status=None, unscored=True), runfolder.read_run_json(c.run_dir)),
        c.run_dir / runfolder.SUMMARY_JSON)
    return summary.tasks.get(c.task) or TaskSummary()


def calls_figures(c: Comparison) -> list[dict[str, Any]]:
    """Per backend: its counts and what its calls took, as summary.json has them (`task_summary`): errors are
    members with no score; the scored answers' parse outcomes; latency percentiles, tokens, USD."""
    scored = runfolder.scan(runfolder.task_dir(c.run_dir, c.task)) if c.ontology_mode == "strict" else []
    task = task_summary(c)
    out = []
    for b in c.backends:
        e = task.backend(b) or BackendEntry(backend=b, members=0, scored=0, passed=0, failed=0, errors=0)
        s = e.calls
        row = {"backend": b, "calls": e.members, "errors": e.errors, "error_rate": e.error_rate,
               "latency_p50": s.latency_p50, "latency_p90": s.latency_p90, "latency_p99": s.latency_p99,
               **{f"parse_{k}": e.parse.get(k, 0) for k in PARSE_OUTCOMES}, "recovered": e.recovered,
               "input_tokens": s.input_tokens, "output_tokens": s.output_tokens, "usd": s.usd,
               "replayed": s.replayed}
        if c.ontology_mode == "strict":  # micro: summed inside / summed emitted over the scored members
            figures = [v for r in scored
                       if r.backend == b and (v := r.score().details.get("vocabulary"))]
            row["vocabulary_compliance"] = aggregate_compliance(figures)["vocabulary_compliance"] if figures else None
        out.append(row)
    return out


def calls_table(c: Comparison) -> pd.DataFrame:
    rows = []
    for r in calls_figures(c):
        row = {"backend": r["backend"], "calls": r["calls"], "errors": r["errors"], "error rate": _fig(r["error_rate"]),
               "latency p50 s": _fig(r["latency_p50"], 2), "p90 s": _fig(r["latency_p90"], 2),
               "p99 s": _fig(r["latency_p99"], 2),
               **{k.replace("_", " "): r[f"parse_{k}"] for k in PARSE_OUTCOMES}, "recovered": r["recovered"],
               "input tokens": r["input_tokens"], "output tokens": r["output_tokens"], "USD": f"{r['usd']:.4f}",
               "replayed": r["replayed"]}
        if "vocabulary_compliance" in r:
            row["vocabulary compliance"] = _fig(r["vocabulary_compliance"])
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- pairwise

def pairwise_table(c: Comparison) -> pd.DataFrame:
    if not c.pairwise:
        return pd.DataFrame()
    rows = []
    for r in c.pairwise.pairs:
        rows.append({"backend": r["a"], "against": r["b"], "axis": r["axis"], "wins": r["wins"],
                     "losses": r["losses"], "ties": r["ties"], "win rate": _fig(r["win_rate"]),
                     "order inconsistency": _fig(r["order_inconsistency_rate"]),
                     "compared": r["compared"], "identical": r["identical"], "skipped": r["skipped"],
                     "errors": r["errors"]})
    return pd.DataFrame(rows)


def win_rate_matrix(c: Comparison) -> pd.DataFrame:
    """Long frame: axis, backend (row), against (column), win_rate of the row against the column
    (ties excluded), inconsistency, flagged (> 20 %), label."""
    rows = []
    if not c.pairwise:
        return pd.DataFrame(rows)
    for r in c.pairwise.pairs:
        wr, rate = r["win_rate"], r["order_inconsistency_rate"]
        flagged = rate is not None and rate > INCONSISTENCY_MARK
        for row, col, value, won, lost in ((r["a"], r["b"], wr, r["wins"], r["losses"]),
                                           (r["b"], r["a"], None if wr is None else 1 - wr, r["losses"], r["wins"])):
            label = "—" if value is None else f"{value:.0%}"
            rows.append({"axis": r["axis"], "backend": row, "against": col, "win_rate": value,
                         "inconsistency": rate, "flagged": flagged, "label": label + (" *" if flagged else ""),
                         "record": f"{won}-{lost}-{r['ties']}"})
    return pd.DataFrame(rows)


def win_rate_chart(c: Comparison) -> Any:
    """Altair matrix per axis (`evalkit.report.views.win_rate_chart` of `win_rate_matrix`); None without pairwise
    results. Draw it with `evalkit.report.views.chart`."""
    from evalkit.report.views.charts import win_rate_chart  # start-up cost: IPython and altair, for a chart only

    return win_rate_chart(win_rate_matrix(c), list(c.backends))


def disagreements(c: Comparison) -> pd.DataFrame:
    """Per member: pairwise items whose verdict changed with the slot order, or whose winner has the
    lower strict F1 on that axis (summary: token F1)."""
    if not c.pairwise:
        return pd.DataFrame()
    metric = {"entities": "entities_f1", "relations": "relations_f1", "summary": "summary_f1"}
    strict: dict[tuple[str, str, str], Any] = {}
    for _, row in c.members.iterrows():
        for axis, name in metric.items():
            v = row.get(f"metric.{name}")
            strict[(row["member"], row["backend"], axis)] = None if v is None or pd.isna(v) else float(v)
    rows = []
    for i in c.pairwise.items:
        if i.get("status") != "judged":
            continue
        fa, fb = strict.get((i["member"], i["a"], i["axis"])), strict.get((i["member"], i["b"], i["axis"]))
        leader = None if fa is None or fb is None or fa == fb else (i["a"] if fa > fb else i["b"])
        kinds = []
        if i.get("inconsistent"):
            kinds.append("order: the verdict changed with the slot order")
        if leader is not None and i["outcome"] not in ("tie", leader):
            kinds.append(f"judge vs strict: the judge prefers {i['outcome']}, strict F1 {leader}")
        if not kinds:
            continue
        o = i.get("orders") or [{}, {}]
        rows.append({"member": i["member"], "axis": i["axis"], "pair": f"{i['a']} vs {i['b']}",
                     "disagreement": "; ".join(kinds),
                     "first order (A / B → winner)": f"{o[0].get('slot_a')} / {o[0].get('slot_b')} → {o[0].get('winner')}",
                     "second order (A / B → winner)": f"{o[1].get('slot_a')} / {o[1].get('slot_b')} → {o[1].get('winner')}",
                     "outcome": i["outcome"], f"strict {i['a']}": _fig(fa), f"strict {i['b']}": _fig(fb),
                     "reasons": " | ".join(x.get("reason") or "" for x in o)})
    return pd.DataFrame(rows).sort_values(["member", "axis", "pair"], kind="stable") if rows else pd.DataFrame()


def judge_accepted(c: Comparison) -> pd.DataFrame:
    """Per member × backend: the pairs the reference judge accepted (strict: a miss plus a spurious item)."""
    rows = []
    for (member, backend), j in sorted(c.judgments.items()):
        if backend not in c.backends:
            continue
        for axis, v in j.axes.items():
            if v.get("status") == "error":
                rows.append({"member": member, "backend": backend, "axis": axis, "truth": "", "extracted": "",
                             "judge": f"error: {v.get('error')}"})
            for p in v.get("accepted") or []:
                rows.append({"member": member, "backend": backend, "axis": axis,
                             "truth": " / ".join(str(x) for x in (p.get("expected") or {}).values()),
                             "extracted": " / ".join(str(x) for x in (p.get("extracted") or {}).values()),
                             "judge": p.get("reason") or ""})
    return pd.DataFrame(rows)


def header(c: Comparison) -> dict[str, Any]:
    judge = c.run.judge
    scored = int(c.members["scored"].sum()) if not c.members.empty else 0
    return {"task": c.task, "backends": ", ".join(c.backends) or "(none)",
            "members": c.members["member"].nunique() if not c.members.empty else 0,
            "scored member × backend": scored, "errored (no score, left out)": len(c.members) - scored,
            "ontology mode": c.ontology_mode,
            "judge": f"{judge.get('spec')} ({judge.get('model')})" if judge else "none (judged figures are null)",
            "judge mode": c.judge_mode or "—"}


# ----------------------------------------------------------------------------- every shape: paired differences

def shape(c: Comparison) -> str:
    """The task's item shape (`report.item_shape`): fields, graph, tree or items."""
    return item_shape([i for side in c.scores.values() for d in side.values() for i in d.rows[:1]])


def nothing_comparable(c: Comparison) -> str | None:
    """Why this task has nothing to compare between backends, or None."""
    if len(c.backends) < 2:
        return (f"{c.task}: only one backend ({', '.join(c.backends) or 'none'}) in this run: nothing to compare "
                "(add one with `evalkit compare RUN --backend NAME=SPEC`)")
    scored = [{m for m, d in c.scores[b].items() if d.is_scored} for b in c.backends]
    if not any(scored[0] & other for other in scored[1:]):
        return f"{c.task}: no member scored by {c.backends[0]} and another backend: nothing to compare"
    return None


def band_width(c: Comparison) -> float | None:
    """The noise band of the task's score (the corpus's band.json named in run.json), if measured."""
    return width(band_of(c.run_dir), c.task, "score")


def paired(c: Comparison) -> list[dict[str, Any]]:
    """The first backend (A) against each other (B): `delta.compare_sides` — metric deltas with paired
    CIs, the one-line statement, verdict flips, changed items, per-field accuracy; held-out members apart."""
    if nothing_comparable(c):
        return []
    a, band = c.backends[0], band_width(c)
    heldout = runfolder.read_run_json(c.run_dir).heldout
    side = lambda label: {m: d.to_json() for m, d in c.scores[label].items()}  # noqa: E731 - delta reads JSON
    return [compare_sides(c.task, side(a), side(b), a, b, band, heldout) for b in c.backends[1:]]


def summary_table(c: Comparison) -> pd.DataFrame:
    """Per backend, from summary.json (`evalkit.results.summary`): passed/N, errors, skipped, the headline's mean
    with its CI."""
    task = task_summary(c)
    rows = []
    for e in task.backends:
        if e.backend not in c.backends:
            continue
        name, f = e.headline(task.headline)
        ci = f"[{f.ci[0]:.3f}, {f.ci[1]:.3f}]" if f.ci else "—"
        rows.append({"backend": e.backend, "passed": f"{e.passed}/{e.members}", "errors": e.errors,
                     "skipped": len(e.skipped), f"mean {name}": _fig(f.mean), f"{CONFIDENCE:.0%} CI": ci,
                     "scored": f.n})
    return pd.DataFrame(rows)


def family_table(c: Comparison) -> pd.DataFrame:
    """Tree tasks: per family (a ``<family>_score`` metric), each backend's mean with its CI (summary.json)."""
    entries = [e for e in task_summary(c).backends if e.backend in c.backends]
    names = sorted({n for e in entries for n in e.metrics if n.endswith("_score") and n != "score"})
    rows = []
    for n in names:
        row: dict[str, Any] = {"family": n[: -len("_score")]}
        for e in entries:
            f = e.metrics.get(n)
            ci = f" [{f.ci[0]:.3f}, {f.ci[1]:.3f}]" if f and f.ci else ""
            row[e.backend] = _fig(f.mean if f else None) + ci
        rows.append(row)
    return pd.DataFrame(rows)


def relation_type_f1(c: Comparison, n_boot: int = RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    """Graph tasks: per relation type (the relation item's label) and backend, micro F1 over the scored
    members from the relation items' matched / spurious / missed, with a bootstrap CI over members."""
    per: dict[tuple[str, str], dict[str, list[int]]] = {}
    for b in c.backends:
        for member, d in sorted(c.scores[b].items()):
            if not d.is_scored:
                continue
            for i in d.rows:
                key = i.get("key")
                if i.get("axis") != "relations" or not isinstance(key, list) or len(key) != 3:
                    continue
                counts = per.setdefault((str(key[1]), b), {}).setdefault(member, [0, 0, 0])
                slot = {"matched": 0, "spurious": 1, "missed": 2}.get(i.get("outcome"))
                if slot is not None:
                    counts[slot] += 1
    rows = []
    for (label, b), members in sorted(per.items()):
        counts = list(members.values())
        ci = micro_f1_ci(counts, sub_seed(seed, c.task, "relation", label), n_boot)
        tp, fp, fn = (sum(x[i] for x in counts) for i in range(3))
        rows.append({"relation": label, "backend": b, "micro F1": _fig(micro_f1(counts)), "tp": tp, "fp": fp,
                     "fn": fn, f"{CONFIDENCE:.0%} CI": f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—",
                     "members": len(counts)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- running the notebook

def plan_compare(run_dir: str | Path, task: str, backends: list[str] | None = None, judge_mode: str | None = None,
                 notebooks: str | Path | None = None) -> Any:
    """compare.ipynb for one task, written to ``<run>/<task>/compare.ipynb`` (run_dir passed relative)."""
    folder = runfolder.task_dir(run_dir, task)
    folder.mkdir(parents=True, exist_ok=True)
    return NotebookJob(Path(notebooks or NOTEBOOKS_DIR) / runfolder.COMPARE, folder / runfolder.COMPARE,
                       {"run_dir": "..", "task": task, "backends": backends, "judge_mode": judge_mode})


def run_tasks(run_dir: str | Path) -> list[str]:
    """Every task of a run with a result (scored or not) in it."""
    return [p.name for p in sorted(Path(run_dir).iterdir())
            if p.is_dir() and not p.name.startswith(".") and runfolder.task_results(run_dir, p.name)]


def text(run_dir: str | Path, tasks: list[str] | None = None, backends: list[str] | None = None) -> str:
    """The comparison's headline for a terminal: per task, each backend's passed/N, errors and headline mean
    with its CI (summary.json), then each paired statement (tuned and held-out apart)."""
    lines = []
    for task in tasks or run_tasks(run_dir):
        c = load(run_dir, task, backends)
        lines.append(task)
        for r in summary_table(c).to_dict("records"):
            mean = next(k for k in r if k.startswith("mean "))
            ci = next(k for k in r if k.endswith(" CI"))
            lines.append(f"  {r['backend']}: {r['passed']} passed · {r['errors']} errors · {mean} {r[mean]} {r[ci]}")
        why = nothing_comparable(c)
        if why:
            lines.append(f"  {why}")
        for p in paired(c):
            lines.append(f"  {p['statement']}")
            if p.get("heldout"):
                lines.append(f"  {p['heldout']['statement']}")
    return "\n".join(lines) + "\n" if lines else ""


def compare_run(run_dir: str | Path, tasks: list[str] | None = None, backends: list[str] | None = None,
                judge_mode: str | None = None, workers: int | None = None) -> list[Path]:
    """Execute compare.ipynb per task (default: every task of the run) and render its HTML; returns the pages."""
    # lazy: read per call: tests patch render.render_notebook
    from evalkit.report.render import render_index, render_notebook

    run_dir = Path(run_dir)
    tasks = tasks or run_tasks(run_dir)
    if not tasks:
        raise EvalkitError(f"{run_dir}: no task with results to compare")
    jobs = [plan_compare(run_dir, t, backends, judge_mode) for t in tasks]
    results = execute(jobs, workers=workers)
    failed = [r for r in results if not r.ok]
    if failed:
        raise EvalkitError("compare notebook failed: " + "; ".join(f"{r.job.output}: {r.error}" for r in failed))
    pages = [render_notebook(j.output) for j in jobs]
    render_index(run_dir)  # link the comparison from the run's index page
    return pages
