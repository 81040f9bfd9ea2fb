"""The notebooks' pages: the extract page, a member's score page and a task's report page (each
dispatched on the item table's shape to the fields, graph, tree or generic views), and the trend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from evalkit.report import frames
from evalkit.report.frames import mean_field_accuracy
from evalkit.report.views import charts, fields, generic, graph, samples, tree
from evalkit.report.views.base import _get, heading, items_frame, kv, para, table, verdict
from evalkit.results.records import ExtractionRecord
from evalkit.results.summary import BackendEntry, TaskSummary
from evalkit.status import ERROR, OK

# --------------------------------------------------------------------------- extract page

def run_block(extraction: ExtractionRecord) -> None:
    """Who answered and what it cost: backend, model, parse outcome, tokens, usd, latency."""
    run, backend = extraction.run, extraction.backend
    # A replayed call made no live call (its `calls` is 0): say so, and that its figures are the recording's.
    recorded = " (recorded)" if run.replayed else ""
    rows = {
        "member": extraction.member,
        "backend": backend.label,
        "model": backend.model,
        "parse": run.parse,
        # schema_invalid: where the record breaks the task's output schema (each row's `schema` column says how)
        "schema violations": ", ".join(dict.fromkeys(v["path"] for v in run.schema_violations))
        if run.schema_violations else None,
        f"input tokens{recorded}": run.input_tokens,
        f"output tokens{recorded}": run.output_tokens,
        "usd": run.usd,
        f"latency s{recorded}": run.latency_s,
        "call": "replayed from the cassette" if run.replayed else run.calls,
        "finish reason": run.finish_reason,
        "truncated": run.truncated,
        "error": run.error,
    }
    failed = extraction.failure
    if failed is not None:  # no answer to score: say why, first
        rows = {"status": f"ERROR ({failed.cause})", **rows}
    kv(rows, "run", "value")


def record(extraction: ExtractionRecord) -> None:
    """The extracted record, one row per top-level field; the raw text when nothing parsed."""
    rec = extraction.record
    if isinstance(rec, Mapping):
        table([{"field": k, "value": v} for k, v in rec.items()], max_chars=1000, empty="(empty record)")
        return
    print(f"no record (parse: {extraction.run.parse}; error: {extraction.run.error})")
    raw = extraction.raw
    if raw:
        print("raw output:")
        print(raw)


# --------------------------------------------------------------------------- score page

def summary(result: Any) -> None:
    """Headline: score and verdict (the figures behind it are on the shape's page, see `score_page`),
    or ERROR with its cause when there is no score (`evalkit.status`)."""
    if _get(result, "status") == ERROR:
        print(f"ERROR ({_get(result, 'cause')}): {_get(result, 'message')}")
        print("No score: this member × backend is left out of every mean, band and test, and counted as an error.")
    else:
        score = _get(result, "score")
        score = "n/a" if score is None else f"{score:.3f}"
        headline = (_get(result, "details") or {}).get("headline")
        print(f"score {score}   verdict {verdict(_get(result, 'passed'))}" + (f"   (score = {headline})" if headline else ""))
    samples.member_samples(result)  # --samples K > 1: every sample of this member × backend


def all_items(result: Any) -> None:
    """The whole item table, problems first (the page's script sorts it and filters it: failures only, by
    field, by outcome)."""
    # lazy: a cycle, report.views.sections imports this module (via report.views)
    from evalkit.report.views.sections import _problems_first

    df = items_frame(result)
    table(_problems_first(df).drop(columns=[c for c in ("member",) if c in df.columns]), empty="(no items)")


def notes(result: Any) -> None:
    for n in _get(result, "notes") or []:
        print(f"- {n}")
    if not _get(result, "notes"):
        print("(no notes)")


def score_page(result: Any, shape: str | None = None) -> None:
    """Everything a member's score page shows below its headline, chosen by the item table's shape.

    `shape` ("fields", "graph", "tree", "items") defaults to `evalkit.report.frames.item_shape` of the items:
    a ``field`` column → the flat-fields view, ``axis`` → the graph view, ``family`` → the tree view,
    anything else → a generic one. Each view writes its own section headings.
    """
    if _get(result, "status") == ERROR:
        return  # nothing was scored: the headline says why
    items = items_frame(result)
    shape = shape or frames.item_shape(items)
    view = {"fields": fields.fields_view, "graph": graph.graph_view, "tree": tree.tree_view}.get(shape, generic.items_view)
    view(result, items)


# --------------------------------------------------------------------------- report page

def report_summary(members: pd.DataFrame, items: pd.DataFrame, summary: TaskSummary) -> None:
    """One line per backend: members scored, verdicts, errors (the counts and calls of `summary`, the task's
    summary.json figures: `evalkit.results.summary.task_summary`), mean score (and mean field accuracy for fields)."""
    if members is None or members.empty:
        print("0 member run(s)")
        return
    backends = sorted(members["backend"].map(str).unique()) if "backend" in members.columns else [None]
    fields = frames.item_shape(items) == "fields"
    for backend in backends:
        m = members if backend is None else members[members["backend"].map(str) == backend]
        c = summary.backend(str(backend)) if backend is not None else next(iter(summary.backends), None)
        if c is None:  # a backend summary.json has no entry for: nothing was attempted
            c = BackendEntry(backend=str(backend), members=0, scored=0, passed=0, failed=0, errors=0)
        parts = ([f"backend {backend}"] if len(backends) > 1 else []) + [f"{c.members} member run(s)"]
        parts += [f"{c.passed} PASS", f"{c.failed} FAIL"]
        if c.scored - c.passed - c.failed:
            parts.append(f"{c.scored - c.passed - c.failed} n/a")
        errors = c.errors
        if errors:  # no score: out of the means below, counted here
            parts.append(f"{errors} ERROR (error rate {c.error_rate:.0%})")
        parts += [f"{n} {o.replace('_', ' ')}" for o, n in c.parse.items() if o != OK and n]  # scored, not errors
        scores = pd.to_numeric(m["score"], errors="coerce").dropna() if "score" in m.columns else pd.Series([])
        parts.append("mean score " + (f"{scores.mean():.3f}" if len(scores) else "n/a")
                     + (f" over {len(scores)} scored" if errors else ""))
        if fields:
            its = items if backend is None or "backend" not in items.columns else items[items["backend"].map(str) == backend]
            acc = mean_field_accuracy(its)
            parts.append("mean field accuracy " + ("n/a" if acc is None else f"{acc:.3f}"))
        print(" · ".join(parts))
    heading("Calls per backend")
    para("One call per member's extraction (replayed calls report their recorded latency and tokens).")
    table(frames.backend_calls(summary))


def report_page(members: pd.DataFrame, items: pd.DataFrame, shape: str | None = None) -> None:
    """Everything a task report shows about a run's members, chosen by the item table's shape
    (see `score_page`; with no items, by the members' metrics). Every backend of the run is shown:
    member rows carry a backend column, heatmaps label rows ``member [backend]``, corpus figures are
    per backend."""
    if shape is None:
        shape = frames.item_shape(items)
        if shape == "items" and members is not None:
            cols = {str(c) for c in members.columns}
            shape = ("graph" if any(c.endswith("s_f1") and c.startswith("metric.relations") for c in cols)
                     else "tree" if any(c.endswith("_score") and c != "metric.score" for c in cols) else "items")
    report_view = {"fields": fields.fields_report, "graph": graph.graph_report,
                   "tree": tree.tree_report}.get(shape, generic.items_report)
    report_view(members, items)
    samples.samples_section(members, items)  # --samples K > 1 only


def trend(run_dir: Any, task: str, metric: str | None = None) -> None:
    """The task's headline metric over the runs of the run history, per backend (`evalkit.report.frames.run_trend`),
    or a one-line note while the history holds fewer than two earlier runs of the task."""
    frame, metric, _ = frames.run_trend(run_dir, task, metric)
    if frame is None:
        print(f"No trend yet: the run history (index.jsonl beside the run folder) holds fewer than "
              f"{frames.TREND_MIN_RUNS} earlier runs of this task.")
        return
    runs = frame["run_id"].nunique()
    print(f"{metric}: mean over members, per backend, over {runs} runs (the history and this run)")
    charts.chart(charts.trend_chart(frame, metric))
