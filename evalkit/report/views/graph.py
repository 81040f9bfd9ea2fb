"""Graphs (an item table with an ``axis`` column: entities / relations / summary): per-axis strict and
judged precision, recall and F1, for one member (score view) and across a run (report view)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from evalkit.report import frames
from evalkit.report.views import charts
from evalkit.report.views.base import NULL, _get, figure, fmt, heading, items_frame, para, table
from evalkit.report.views.charts import field_outcome_chart, outcome_distribution, score_heatmap
from evalkit.report.views.sections import (
    _member_columns,
    _outcome_summary,
    _problems_first,
    _set_aside_line,
    gate,
    linked_members,
)

# --------------------------------------------------------------------------- score view

GRAPH_ITEM_COLUMNS = ["key", "expected", "extracted", "outcome", "judged", "reason", "score"]


def _axes(items: pd.DataFrame, metrics: Mapping[str, Any]) -> list[str]:
    seen = list(dict.fromkeys(str(a) for a in items["axis"])) if "axis" in items.columns else []
    from_metrics = [k[: -len("_f1")] for k in metrics if k.endswith("_f1") and not k.startswith("judged_")]
    return list(dict.fromkeys(seen + from_metrics))


def _compact(value: Any) -> Any:
    """An item as one line: a structure's values joined by " · " (``Orla Fenwick · place of birth · Cork``)."""
    if isinstance(value, Mapping):
        return " · ".join(fmt(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return " · ".join(fmt(v) for v in value)
    return value


def graph_axis_table(metrics: Mapping[str, Any], axes: Iterable[str]) -> pd.DataFrame:
    """Per axis: strict precision / recall / F1 and tp / fp / fn beside the judged figures (null: "—")."""
    rows = []
    for axis in axes:
        row = {"axis": axis}
        for m in ("precision", "recall", "f1", "tp", "fp", "fn"):
            row[m] = figure(metrics.get(f"{axis}_{m}"))
        for m in ("precision", "recall", "f1"):
            row[f"judged {m}"] = figure(metrics.get(f"judged_{axis}_{m}"))
        rows.append(row)
    return pd.DataFrame(rows)


def graph_view(result: Any, items: pd.DataFrame | None = None) -> None:
    """Graph (entities / relations / summary): per-axis P/R/F1 strict beside judged, outcomes per axis,
    and each axis's item table (problems first)."""
    items = items_frame(result) if items is None else items
    metrics = _get(result, "metrics") or {}
    axes = _axes(items, metrics)
    heading("Precision, recall and F1 per axis")
    para("Strict: items match when their normalized keys are equal. Judged: an LLM judge's verdicts, "
         f"{NULL} until a judge has looked at this result (never 0). The summary is scored by token F1 alone.")
    table(graph_axis_table(metrics, axes))
    shown = {f"{p}{a}_{m}" for p in ("", "judged_") for a in axes
             for m in ("precision", "recall", "f1", "tp", "fp", "fn")}
    others = {k: v for k, v in metrics.items() if k not in shown}
    if others:
        print(" · ".join(f"{k} {figure(v)}" for k, v in others.items()))
    if (_get(result, "details") or {}).get("gate") is not None:
        heading("Gate")
        gate(result)
    heading("Outcomes per axis")
    para("matched: on both sides; missed: in the truth only; spurious: extracted only.")
    charts.chart(field_outcome_chart(items))
    heading("Items")
    para("One table per axis, problems (missed, spurious) first, with the scorer's reason.")
    if "axis" not in items.columns or items.empty:
        print("(no items)")
    for axis in [a for a in axes if "axis" in items.columns and (items["axis"].map(str) == a).any()]:
        rows = items[items["axis"].map(str) == axis]
        heading(f"{axis}: {_outcome_summary(rows)}", 3)
        cols = [c for c in GRAPH_ITEM_COLUMNS
                if c in rows.columns and (c not in ("score", "judged") or rows[c].notna().any())]
        shown = _problems_first(rows).copy()
        for c in ("key", "expected", "extracted"):
            if c in shown.columns:
                shown[c] = [_compact(v) for v in shown[c]]
        table(shown, cols, empty=f"(no {axis} items)")
        note = _set_aside_line(rows)
        if note:
            print(note)


# --------------------------------------------------------------------------- report view

def graph_corpus_table(corpus: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """`evalkit.report.frames.graph_corpus` as rows of backend × axis: members with a figure, micro precision /
    recall / F1, macro F1 and the judged F1 (the summary: its mean token F1 as the macro figure)."""
    rows = []
    for rec in corpus.to_dict("records"):
        for axis in axes:
            rows.append({"backend": rec["backend"], "axis": axis, "members": figure(rec.get(f"{axis}_members")),
                         "micro precision": figure(rec.get(f"{axis}_precision")),
                         "micro recall": figure(rec.get(f"{axis}_recall")),
                         "micro f1": figure(rec.get(f"{axis}_f1")), "macro f1": figure(rec.get(f"{axis}_macro_f1")),
                         "judged f1": figure(rec.get(f"judged_{axis}_f1"))})
        if "summary_f1" in rec:
            rows.append({"backend": rec["backend"], "axis": "summary", "members": figure(rec.get("summary_members")),
                         "micro precision": NULL, "micro recall": NULL, "micro f1": NULL,
                         "macro f1": figure(rec.get("summary_f1")), "judged f1": NULL})
    return pd.DataFrame(rows)


def graph_report(members: pd.DataFrame, items: pd.DataFrame) -> None:
    axes = [a for a in ("entities", "relations") if f"metric.{a}_f1" in members.columns]
    axes += [str(a) for a in (items["axis"].unique() if "axis" in items.columns else [])
             if str(a) not in axes and str(a) != "summary" and f"metric.{a}_f1" in members.columns]
    names = {f"{a} {m}": f"{a}_{m}" for a in axes for m in ("precision", "recall", "f1")}
    if "metric.summary_f1" in members.columns:
        names["summary f1"] = "summary_f1"
    names.update({f"judged {a} f1": f"judged_{a}_f1" for a in axes})
    heading("Members")
    para(f"Strict precision, recall and F1 per member and backend; {NULL}: undefined (an empty denominator) "
         "or not judged yet (judged figures stay null until a judge has looked at the result).")
    linked_members(_member_columns(members, names))
    heading("Corpus")
    para("Per backend and axis. Micro: precision, recall and F1 from the members' summed tp / fp / fn; macro: "
         "the mean of the members' non-null F1 (members: how many had one; for the summary, the mean token F1 "
         f"over members whose truth has a summary); judged: {NULL} until a judge has looked at the results.")
    table(graph_corpus_table(frames.graph_corpus(members), axes), empty="(no scored members)")
    heading("F1 by member and axis")
    charts.chart(score_heatmap(frames.metric_matrix(members, {a: f"{a}_f1" for a in axes + ["summary"]
                                                       if f"metric.{a}_f1" in members.columns}), "F1"),
          missing="(no scored members)")
    heading("Outcomes")
    charts.chart(outcome_distribution(items))
