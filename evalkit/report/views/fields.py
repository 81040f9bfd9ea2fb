"""Flat fields (an item table with a ``field`` column): the score view and the report view."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalkit.report import frames
from evalkit.report.views import charts
from evalkit.report.views.base import heading, items_frame, para
from evalkit.report.views.charts import _alt, field_outcome_chart, outcome_distribution
from evalkit.report.views.sections import gate, members_table, metrics_table, mismatches


def fields_view(result: Any, items: pd.DataFrame | None = None) -> None:
    """Flat fields: every metric, the gate, the mismatches with their reasons, outcomes by field."""
    items = items_frame(result) if items is None else items
    heading("Metrics")
    metrics_table(result)
    heading("Gate")
    gate(result)
    heading("Mismatches")
    para("Every item whose outcome is not match, with the scorer's reason.")
    mismatches(items)
    heading("Outcomes by field")
    charts.chart(field_outcome_chart(items))


def accuracy_heatmap(accuracy: pd.DataFrame | None) -> Any:
    """Field × member accuracy (a frame from report.field_accuracy) as a heatmap."""
    alt = _alt()
    if accuracy is None or accuracy.empty:
        return None
    long = accuracy.reset_index(names="field").melt(id_vars="field", var_name="member", value_name="accuracy")
    long = long.dropna(subset=["accuracy"]).astype({"field": str, "member": str})
    fields = [str(f) for f in accuracy.index]
    members = [str(m) for m in accuracy.columns]
    if len(members) > charts.CHART_MEMBERS:
        return charts.binned_heatmap(long.rename(columns={"accuracy": "value"}), "field", fields, len(members),
                                     "accuracy")
    base = alt.Chart(long).encode(
        x=alt.X("member:N", sort=members, title=None, axis=alt.Axis(labelAngle=-40, labelLimit=180)),
        y=alt.Y("field:N", sort=fields, title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("accuracy:Q", scale=alt.Scale(domain=[0, 1], scheme="redyellowgreen"), title="accuracy"),
    )
    label = base.mark_text(fontSize=10).encode(text=alt.Text("accuracy:Q", format=".0%"))
    return (rect + label).properties(width=alt.Step(48), height=alt.Step(20))


def fields_report(members: pd.DataFrame, items: pd.DataFrame) -> None:
    heading("Members")
    members_table(members)
    heading("Field accuracy")
    para("Share of each member's items for a field whose outcome is match.")
    charts.chart(accuracy_heatmap(frames.field_accuracy(items)),
          missing="(this task's items have no field/outcome columns: no heatmap)")
    heading("Outcomes")
    charts.chart(outcome_distribution(items))
