"""A task's results across a run, as pandas frames to present or slice.

Reads every member × backend's score.json of a task (`runfolder.scan`, written by
``pipeline.score_home``)::

    from evalkit.report.frames import load_scores, field_accuracy
    members, items = load_scores("runs/2026-11-30", "deal-memos")
    items[items.outcome == "hallucinated"].groupby("field").size()

`members` has one row per (member, backend); `items` is every score.json's
item table stacked, with ``member``, ``backend`` and ``label`` columns added
(``label`` is the member id, or ``member [backend]`` when the run holds more
than one backend). Nothing here assumes the flat-fields item shape except the
helpers that say so (they need ``field`` and ``outcome`` columns).

Item tables come in shapes, told apart by their columns (`item_shape`):
``field`` → "fields" (flat fields), ``axis`` → "graph" (entities / relations /
summary), ``family`` → "tree" (nested structure: families of metrics), anything
else → "items". An outcome is a **problem** unless it is a success
(``match``/``matched``) or set aside by design (``ignored``/``excluded``: the
scorer counted it toward nothing); `problem_rows` / `set_aside_rows` split a table.

Across members of a run: `member_metrics` (each member × backend's metric
dict), `graph_corpus` (micro/macro P/R/F1 per backend, through
`evalkit.scoring.graph.corpus_metrics`), `tree_corpus` (the mean of every
metric per backend, through `evalkit.scoring.tree.mean_metrics`),
`metric_matrix` (member × column frame of chosen metrics, for tables and
heatmaps) and `run_trend` (the headline metric over the runs of the run
history, ``<runs>/index.jsonl``, per backend).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd

from evalkit.errors import EvalkitError
from evalkit.results.history import HistoryLine, history_lines, index_path, read_history, run_means
from evalkit.results.records import ScoreRecord
from evalkit.results.runfolder import SCORE, read_run_json, scan, task_dir, task_results
from evalkit.results.samples import headline, member_figures, unstable
from evalkit.results.summary import TaskSummary
from evalkit.scoring.graph import corpus_metrics
from evalkit.scoring.tree import mean_metrics
from evalkit.status import ERROR, PARSE_OUTCOMES, SCORED, parse_outcome, recovered, shown

__all__ = ["load_scores", "field_accuracy", "mean_field_accuracy", "outcome_counts", "verdict", "SUCCESS",
           "SET_ASIDE", "item_shape", "problem_rows", "set_aside_rows", "member_metrics", "metric_matrix",
           "graph_corpus", "tree_corpus", "headline_metric", "run_trend", "TREND_MIN_RUNS"]

SUCCESS = ("match", "matched")  # outcomes that are fine
SET_ASIDE = ("ignored", "excluded")  # outcomes a scorer sets aside by design: counted toward nothing, not problems

MEMBER_COLUMNS = ["task", "member", "backend", "label", "status", "cause", "heldout", "score", "passed", "verdict",
                  "answer", "recovered", "faults", "parse",
                  "input_tokens", "output_tokens", "usd", "latency_s", "error", "truncated", "items", "notes", "path"]


def verdict(passed: Any, status: str = SCORED) -> str:
    """PASS / FAIL / n/a for a scored member; ERROR, NOT COVERED, SKIPPED for one that has no score
    (`evalkit.status`)."""
    if status != SCORED:
        return shown(status or ERROR)
    if passed is None:
        return "n/a"
    return "PASS" if passed else "FAIL"


def answer_faults(score: ScoreRecord) -> str | None:
    """A score.json's answer faults (`pipeline.answer_faults`: schema_invalid, truncated), each marked FAIL when
    it decided the verdict (the task's ``verdict:`` policy); None when the answer had none."""
    faults = score.details.get("answer_faults") or {}
    return ", ".join(f + (" (FAIL)" if v.get("fails_verdict") else "") for f, v in faults.items()) or None


def load_scores(run_dir: str | Path, task: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(members, items) for one task of a run.

    ``status`` is ``scored`` or ``error`` (`evalkit.status`); an errored member × backend has its
    ``cause``, verdict "ERROR", no score, metrics or items. A member folder with an extraction.json
    but no score.json (its notebook failed before the runner could say so) is an error too. A scored
    one's ``answer`` is its parse outcome (ok / malformed / truncated / schema_invalid, `evalkit.status`;
    ``recovered`` notes an ok answer that needed a repair); ``parse`` is the backend's own word.
    ``heldout``: the member is held out (run.json), its figures reported apart.
    """
    found = task_results(run_dir, task)
    backends = {s.backend for s in found}
    heldout: dict[Path, set[str]] = {}
    for s in found:
        if s.run_dir not in heldout:
            heldout[s.run_dir] = read_run_json(s.run_dir).heldout
    sampled = any(s.sampled for s in found)  # --samples K > 1: the columns below appear only then
    rows: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for s in found:
        member, backend, data = s.member, s.backend, s.score()
        samples = s.samples() if sampled else [data]
        if sampled:  # the member's headline: the mean over its scored samples (`samples.headline`)
            data = headline(samples)
        status, label, run = data.status, member if len(backends) <= 1 else f"{member} [{backend}]", data.run
        rows.append({
            "task": task, "member": member, "backend": backend, "label": label,
            "status": status, "cause": data.cause, "heldout": f"{task}/{member}" in heldout[s.run_dir],
            "score": data.score, "passed": data.passed,
            "verdict": verdict(data.passed, status),
            "answer": parse_outcome(run.parse, run.truncated) if status == SCORED else None,
            "recovered": recovered(run.parse, run.truncated) if status == SCORED else None,
            "faults": answer_faults(data),
            "parse": run.parse, "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens, "usd": run.usd, "latency_s": run.latency_s,
            "error": run.error, "truncated": run.truncated, "items": len(data.rows), "notes": len(data.notes),
            "path": f"{member}/{s.home.name}/{SCORE}" if s.has_score else None,
            **(_sample_columns(member_figures(samples)) if sampled else {}),
            **{f"metric.{k}": v for k, v in sorted(data.metrics.items())},
        })
        for sample in samples:  # under --samples every sample's items, told apart by a ``sample`` column
            for item in sample.rows if sampled else data.rows:
                items.append({**item, "task": task, "member": member, "backend": backend, "label": label,
                              **({"sample": sample.sample} if sampled else {})})
    members_df = pd.DataFrame(rows, columns=None if rows else MEMBER_COLUMNS)
    if not items:
        return members_df, pd.DataFrame(columns=["task", "member", "backend", "label"])
    items_df = pd.DataFrame(items)
    first = ["task", "member", "backend", "label", *(["sample"] if sampled else [])]
    items_df = items_df[first + [c for c in items_df.columns if c not in first]]
    return members_df, items_df


SAMPLE_COLUMNS = ["samples", "k_scored", "score_sd", "pass_at_k", "pass_hat_k", "agreement", "sample_scores"]


def _sample_columns(f: dict[str, Any]) -> dict[str, Any]:
    """A member row's sample columns (`samples.member_figures`); its ``score`` is then the mean over them."""
    return {"samples": f["k"], "k_scored": f["k_scored"], "score_sd": f["sd"], "pass_at_k": f["pass_at_k"],
            "pass_hat_k": f["pass_hat_k"], "agreement": f["agreement"], "sample_scores": f["scores"]}


def sample_spread(members: pd.DataFrame) -> pd.DataFrame:
    """One row per scored sample of each member × backend (``label``, ``sample``, ``score``): the strip of K
    points per member the task report draws; empty without samples. An errored sample has no point."""
    if members is None or "sample_scores" not in members.columns:
        return pd.DataFrame(columns=["label", "member", "backend", "sample", "score", "mean"])
    rows = [{"label": m["label"], "member": m["member"], "backend": m["backend"], "sample": i, "score": x,
             "mean": m["score"]}
            for _, m in members.iterrows() if isinstance(m["sample_scores"], list)
            for i, x in enumerate(m["sample_scores"]) if x is not None]
    return pd.DataFrame(rows, columns=["label", "member", "backend", "sample", "score", "mean"])


def unstable_items(items: pd.DataFrame, limit: int | None = None) -> pd.DataFrame:
    """The items whose outcome flips between samples (`samples.unstable`), most unstable first: ``label``,
    ``item``, ``agreement`` (share of samples with the modal outcome), ``modal`` and each sample's outcome;
    empty without a ``sample`` column."""
    columns = ["label", "item", "agreement", "modal", "outcomes"]
    if not _has(items, "sample", "outcome", "label"):
        return pd.DataFrame(columns=columns)
    tables: dict[str, list[list[dict[str, Any]]]] = {}
    for (label, _), rows in items.groupby([items["label"].map(str), "sample"], sort=True):  # scored samples only
        cells = rows.drop(columns=["task", "member", "backend", "label", "sample"]).to_dict("records")
        tables.setdefault(label, []).append([{k: v for k, v in c.items() if not _null(v)} for c in cells])
    out = unstable(tables, limit)
    return pd.DataFrame([{"label": r["member"], "item": _item_name(r["item"]), "agreement": r["agreement"], "modal": r["modal"],
                          "outcomes": " · ".join(r["outcomes"])} for r in out], columns=columns)


def _item_name(item: str) -> str:
    """`samples.item_id` as people read it: its identity values (``rate``, ``relations Acme→Beta``), ``#n`` kept."""
    import json

    name, sep, n = item.rpartition("#") if item.rsplit("#", 1)[-1].isdigit() and not item.endswith("}") else (item, "", "")
    try:
        values = json.loads(name)
    except ValueError:
        return item
    return " ".join(str(v) for v in values.values()) + (f" #{n}" if sep else "")


def _null(v: Any) -> bool:
    """A cell pandas filled in for a column the row's own table lacks."""
    return v is None or (isinstance(v, float) and v != v)


def _has(items: pd.DataFrame | None, *columns: str) -> bool:
    return items is not None and not items.empty and all(c in items.columns for c in columns)


def field_accuracy(items: pd.DataFrame, by: str = "label") -> pd.DataFrame:
    """Field × member accuracy: the share of each cell's items whose outcome is a success
    (``match``, or ``matched`` for set-shaped scorers).

    Rows keep the fields' first-seen order, columns are sorted; empty when the
    item table has no ``field``/``outcome`` columns.
    """
    if not _has(items, "field", "outcome", by):
        return pd.DataFrame()
    df = pd.DataFrame({"field": items["field"].map(str), by: items[by].map(str),
                       "match": items["outcome"].isin(SUCCESS).astype(float)})
    table = df.pivot_table(index="field", columns=by, values="match", aggfunc="mean", sort=True)
    order = list(dict.fromkeys(df["field"]))
    table = table.reindex(index=order, columns=sorted(table.columns))
    table.columns.name = None
    return table


def mean_field_accuracy(items: pd.DataFrame, by: str = "label") -> float | None:
    """The mean of the field × member accuracy table (each cell weighs the same); None when undefined."""
    table = field_accuracy(items, by)
    if table.empty:
        return None
    values = table.to_numpy().ravel()
    values = values[~pd.isna(values)]
    return float(values.mean()) if len(values) else None


def outcome_counts(items: pd.DataFrame, by: str = "label") -> pd.DataFrame:
    """Member × outcome item counts (empty without an ``outcome`` column)."""
    if not _has(items, "outcome", by):
        return pd.DataFrame()
    counts = items.groupby([by, "outcome"]).size().unstack("outcome", fill_value=0)
    counts.columns.name = None
    return counts


# --------------------------------------------------------------------------- shapes and problems

SHAPES = {"field": "fields", "axis": "graph", "family": "tree"}  # item column → shape (checked in this order)


def item_shape(items: Any) -> str:
    """"fields", "graph", "tree" or "items" (any other table), from the item table's columns."""
    columns = set(items.columns) if isinstance(items, pd.DataFrame) else set().union(*(set(r) for r in items or []))
    return next((shape for column, shape in SHAPES.items() if column in columns), "items")


def problem_rows(items: pd.DataFrame) -> pd.DataFrame:
    """Rows whose outcome is neither a success nor set aside (every row when there is no outcome column)."""
    if "outcome" not in items.columns:
        return items
    return items[~items["outcome"].isin(SUCCESS + SET_ASIDE)]


def set_aside_rows(items: pd.DataFrame) -> pd.DataFrame:
    """Rows the scorer set aside by design (``ignored``, ``excluded``)."""
    if "outcome" not in items.columns:
        return items.iloc[0:0]
    return items[items["outcome"].isin(SET_ASIDE)]


# --------------------------------------------------------------------------- metrics across members

def _value(v: Any) -> Any:
    try:
        return None if v is None or bool(pd.isna(v)) else v
    except (TypeError, ValueError):
        return v


def member_metrics(members: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per scored member × backend: member, backend, label, score, verdict and ``metrics``
    (its metric dict back from the ``metric.*`` columns; NaN → None, absent metrics left out).
    Errored members are left out: every figure built from these is over the scored ones."""
    cols = [c for c in members.columns if str(c).startswith("metric.")]
    out = []
    for _, row in members.iterrows():
        if row.get("status", SCORED) != SCORED:
            continue
        metrics = {c[len("metric."):]: _value(row[c]) for c in cols}
        out.append({"member": row["member"], "backend": row["backend"], "label": row["label"],
                    "score": _value(row.get("score")), "verdict": row.get("verdict"), "metrics": metrics})
    return out


def metric_matrix(members: pd.DataFrame, names: dict[str, str], by: str = "label") -> pd.DataFrame:
    """Member × column frame: column ``title`` holds metric ``name`` for each ``{title: name}`` in `names`
    (rows: `by`, in the members' order; null where a member has no value)."""
    rows = member_metrics(members)
    data = {title: [r["metrics"].get(name) for r in rows] for title, name in names.items()}
    return pd.DataFrame(data, index=pd.Index([r[by] for r in rows], name=by), dtype=object)


def graph_corpus(members: pd.DataFrame) -> pd.DataFrame:
    """Corpus figures of a graph task per backend (`evalkit.scoring.graph.corpus_metrics`): micro
    precision / recall / F1 from the summed tp/fp/fn, macro F1, mean summary F1; judged ones null."""
    rows = member_metrics(members)
    out = []
    for backend in sorted({r["backend"] for r in rows}):
        results = [SimpleNamespace(metrics=r["metrics"]) for r in rows if r["backend"] == backend]
        out.append({"backend": backend, **corpus_metrics(results)})
    return pd.DataFrame(out)


def tree_corpus(members: pd.DataFrame) -> pd.DataFrame:
    """Metric × backend frame: each metric's corpus mean over the members where it is non-null
    (`evalkit.scoring.tree.mean_metrics`), in the metrics' first-seen order."""
    rows = member_metrics(members)
    means = {b: mean_metrics(r["metrics"] for r in rows if r["backend"] == b) for b in sorted({r["backend"] for r in rows})}
    names = list(dict.fromkeys(n for m in means.values() for n in m))
    return pd.DataFrame({b: [m.get(n) for n in names] for b, m in means.items()},
                        index=pd.Index(names, name="metric"), dtype=object)


# --------------------------------------------------------------------------- trend over runs

TREND_MIN_RUNS = 2  # earlier runs of the task the history must hold before a trend is drawn


def headline_metric(run_dir: str | Path, task: str) -> str:
    """The metric a task's score is (its scorer's ``details.headline``, e.g. ``relations_f1``), else "score"."""
    base = task_dir(run_dir, task)
    for s in scan(base) if base.is_dir() else []:  # scored only: an error has no details to tell by
        return s.score().headline
    return "score"


def run_trend(run_dir: str | Path, task: str, metric: str | None = None,
              min_runs: int = TREND_MIN_RUNS) -> tuple[pd.DataFrame | None, str, int]:
    """(frame, metric, earlier runs): the trend of `metric` (default: the task's headline) per backend.

    The history is ``<runs>/index.jsonl`` (`evalkit.results.history.index_path`), which
    a run joins when it has finished, so this run is usually not in it yet.
    When it holds at least `min_runs` earlier runs of the task, the frame
    (one row per backend × run: the mean of `metric` over the members,
    `evalkit.results.history.run_means`) has those runs and this one (its member ×
    backend lines replace any of the history); otherwise the frame is None.
    Counting *earlier* runs keeps the report of a run independent of the one
    before it until there is a trend to show.
    """
    run_dir = Path(run_dir).resolve()
    metric = metric or headline_metric(run_dir, task)

    def usable(line: HistoryLine) -> bool:
        value = line.metrics.get(metric)
        return line.task == task and isinstance(value, (int, float)) and not isinstance(value, bool)

    try:
        current = [line for line in history_lines(run_dir) if usable(line)]
    except (EvalkitError, OSError, ValueError):
        current = []
    ids = {line.run_id for line in current}
    past = [line for line in read_history(index_path(run_dir)) if usable(line)]
    earlier = len({line.run_id for line in past} - ids)
    if earlier < min_runs:
        return None, metric, earlier
    mine = {(line.run_id, line.member, line.backend) for line in current}
    lines = [line for line in past if (line.run_id, line.member, line.backend) not in mine]
    df = pd.DataFrame([{"task": task, "backend": line.backend, "run_id": line.run_id, "time": line.time,
                        "member": line.member, "value": float(line.metrics[metric])} for line in lines + current])
    return run_means(df), metric, earlier


def backend_calls(task: TaskSummary) -> pd.DataFrame:
    """Per backend: calls, errors and error rate, latency p50/p90/p99, the answers' parse outcomes, tokens, USD —
    summary.json's figures (`evalkit.results.summary.task_summary`), the one place they are computed.

    A call is one member's extraction: ``calls`` is the members attempted (scored + errors: not covered and
    skipped members made none); an error is a member with no score; a malformed, truncated or schema-invalid
    answer is scored, counted under its parse outcome, never an error. ``recovered``: ok answers that needed
    a repair (a note)."""
    columns = ["backend", "calls", "errors", "error_rate", "latency_p50_s", "latency_p90_s", "latency_p99_s",
               *PARSE_OUTCOMES, "recovered", "input_tokens", "output_tokens", "usd"]
    rows = [{"backend": e.backend, "calls": e.members, "errors": e.errors, "error_rate": e.error_rate,
             "latency_p50_s": e.calls.latency_p50, "latency_p90_s": e.calls.latency_p90,
             "latency_p99_s": e.calls.latency_p99, **{o: e.parse.get(o, 0) for o in PARSE_OUTCOMES},
             "recovered": e.recovered, "input_tokens": e.calls.input_tokens, "output_tokens": e.calls.output_tokens,
             "usd": e.calls.usd} for e in sorted(task.backends, key=lambda e: e.backend)]
    return pd.DataFrame(rows, columns=columns)
