"""Any other item table (shape ``items``: no field, axis or family column): the score and report views."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalkit.report import frames
from evalkit.report.views import charts
from evalkit.report.views.base import _get, heading, items_frame, para
from evalkit.report.views.charts import field_outcome_chart, outcome_distribution
from evalkit.report.views.sections import gate, members_table, metrics_table, mismatches, set_aside


def items_view(result: Any, items: pd.DataFrame | None = None) -> None:
    """Any other item table: every metric, the gate when there is one, the problems, outcome counts."""
    items = items_frame(result) if items is None else items
    heading("Metrics")
    metrics_table(result)
    if (_get(result, "details") or {}).get("gate") is not None:
        heading("Gate")
        gate(result)
    heading("Problems")
    para("Every item whose outcome is not a success (set-aside items are counted under the table).")
    mismatches(items, empty="(no problems)")
    aside = frames.set_aside_rows(items)
    if not aside.empty:
        heading("Set aside", 3)
        set_aside(aside)
    heading("Outcomes")
    charts.chart(field_outcome_chart(items))


def items_report(members: pd.DataFrame, items: pd.DataFrame) -> None:
    heading("Members")
    members_table(members)
    heading("Outcomes")
    charts.chart(outcome_distribution(items))
