"""Safe display helpers for the notebooks: tables, text and static charts.

Everything a notebook shows goes through here, because documents and model
outputs are untrusted text:

* tables are ``DataFrame.to_html(escape=True)`` (never a Styler, never raw
  ``IPython.display.HTML``/``Markdown`` built from data);
* text is ``print``-ed (a stream output: rendered as text everywhere);
* charts are altair specs drawn to static images by vl-convert (offline,
  deterministic) and shown as one bundle holding both ``image/svg+xml`` (what
  nbconvert HTML uses: inspectable marks) and ``image/png`` (what JupyterLab
  shows for an untrusted, papermill-made notebook). No vega-embed, no CDN;
  altair's own renderer is switched to the same bundle, so a chart left as a
  cell's last expression is safe too.

Pages dispatch on the item table's shape (`evalkit.report.frames.item_shape`: a
``field`` column → flat fields, ``axis`` → graph, ``family`` → tree, else a
generic view): :func:`score_page` for one member, :func:`report_page` for a
task across a run's members and backends, :func:`trend` for the headline
metric over the run history. The notebooks call these and hold no
task-specific code. Outcomes: ``match``/``matched`` are fine; ``ignored`` and
``excluded`` are set aside by design (the scorer counted them toward
nothing), so they are never listed as problems: problem tables leave them out
and say how many, and pages show them in their own "set aside" table. Null
figures show as "—", never 0.

Chart builders return an ``alt.Chart`` (or None when the table cannot make
one) so a researcher can adjust it before passing it to :func:`chart`.

The modules: `base` (formatting, escaped primitives), `charts` (static SVG + PNG
bundles, outcome charts), `sections` (what every shape's pages reuse), `fields`,
`graph`, `tree` and `generic` (one shape's score and report views each) and
`pages` (the extract, score and report pages, the trend), `member` (the member page's document with the
extracted values located in it, the rendered prompt, the raw response). This package is their
one namespace: use the names below from ``evalkit.report.views``.
"""

from __future__ import annotations

from evalkit.report.views import base, charts, fields, generic, graph, member, pages, sections, tree  # noqa: F401 (the submodules, for patching and direct use)
from evalkit.report.views.base import (
    NULL,
    SET_ASIDE,
    SUCCESS,
    figure,
    fmt,
    heading,
    items_frame,
    kv,
    para,
    show_json,
    table,
    text,
    verdict,
)
from evalkit.report.views.charts import (
    OUTCOME_COLORS,
    OUTCOMES,
    chart,
    chart_bundle,
    field_outcome_chart,
    outcome_distribution,
    score_heatmap,
    trend_chart,
    win_rate_chart,
)
from evalkit.report.views.fields import accuracy_heatmap, fields_report, fields_view
from evalkit.report.views.generic import items_report, items_view
from evalkit.report.views.graph import graph_axis_table, graph_report, graph_view
from evalkit.report.views.member import document, prompt, response
from evalkit.report.views.pages import (
    all_items,
    notes,
    record,
    report_page,
    report_summary,
    run_block,
    score_page,
    summary,
    trend,
)
from evalkit.report.views.sections import gate, members_table, metrics_table, mismatches, set_aside
from evalkit.report.views.tree import (
    FAMILY_ORDER,
    edge_graph_chart,
    family_figures,
    family_score_chart,
    ordered_families,
    site_table,
    tree_report,
    tree_view,
)

__all__ = [
    "OUTCOMES", "OUTCOME_COLORS", "SUCCESS", "SET_ASIDE", "NULL", "verdict", "fmt", "figure", "text", "heading",
    "para", "show_json", "table", "kv", "chart_bundle", "chart", "items_frame", "run_block", "record", "summary",
    "metrics_table", "gate", "mismatches", "set_aside", "notes", "field_outcome_chart",
    "score_page", "fields_view", "graph_view", "tree_view", "items_view", "graph_axis_table", "family_figures",
    "family_score_chart", "site_table", "edge_graph_chart", "ordered_families", "FAMILY_ORDER",
    "report_page", "fields_report", "graph_report", "tree_report", "items_report", "trend",
    "members_table", "report_summary", "accuracy_heatmap", "score_heatmap", "outcome_distribution",
    "trend_chart", "win_rate_chart",
    "document", "prompt", "response", "all_items",
]
