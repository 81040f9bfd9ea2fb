"""Pages that render at scale: a 1,000-member task report and a 1,000-member diff keep every section and
every chart (aggregated: binned heatmaps, outcomes summed, a histogram of B − A), no chart carries more than
`CHART_ROWS` rows of data, long tables say where the rest is; a chart that cannot be drawn is a one-line
note, never the loss of the page after it. The runs are synthetic score.json files (benchmarks/bench_diff.py),
not 1,000 extractions."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from evalkit.compare import diff as diff_mod
from evalkit.execution.execute import execute, plan_report
from evalkit.report.frames import field_accuracy, load_scores, metric_matrix
from evalkit.report.render import render_notebook
from evalkit.report.views import base, charts, fields
from evalkit.report.views import delta as delta_views

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = 1000
ALTAIR_ROWS = 5000


def _bench():
    spec = importlib.util.spec_from_file_location("bench_diff", ROOT / "benchmarks" / "bench_diff.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _bench().synthetic_runs(tmp_path_factory.mktemp("scale"), MEMBERS)


def _headings(page: str) -> list[str]:
    return [re.sub(r"<[^>]+>|¶", "", h).strip() for h in re.findall(r"<h[1-4][^>]*>(.*?)</h[1-4]>", page, re.S)]


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, re.S)


def test_a_1000_member_task_report_keeps_every_section_and_chart(runs):
    run_a, _ = runs
    job = plan_report(run_a, "deal-memos")
    result, = execute([job], workers=1)
    assert result.ok, result.error
    page = render_notebook(job.output).read_text()
    heads = _headings(page)
    for section in ("Calls per backend", "Members", "Field accuracy", "Outcomes", "Trend"):
        assert section in heads, (section, heads)
    assert heads.index("Members") < heads.index("Field accuracy") < heads.index("Outcomes") < heads.index("Trend")
    svgs = _svgs(page)
    assert len(svgs) == 2 and "chart not drawn" not in page  # the heatmap and the outcomes, both drawn
    assert "1,000 members: how many per accuracy band" in page and "1,000 members: items per outcome" in page
    assert all(len(s) < 100_000 for s in svgs), [len(s) for s in svgs]  # small SVGs, not 13,000 cells
    assert f"first {base.TABLE_ROWS:,} of {MEMBERS:,} rows; the full table is in each member" in page

    members, items = load_scores(run_a, "deal-memos")
    for c in (fields.accuracy_heatmap(field_accuracy(items)), charts.outcome_distribution(items),
              charts.score_heatmap(metric_matrix(members, {"score": "score"}))):
        assert 0 < charts.chart_rows(c) <= charts.CHART_ROWS < ALTAIR_ROWS


def test_a_1000_member_diff_keeps_every_section_and_chart(runs):
    page = diff_mod.diff_notebook(*runs, workers=1).read_text()
    heads = _headings(page)
    for section in ("Configuration", "deal-memos", "Per-field accuracy", "Verdict flips", "Held-out members",
                    "Items whose outcome changed: B:fake against A:fake"):
        assert section in heads, (section, heads)
    svgs = _svgs(page)
    assert len(svgs) == 2 and "chart not drawn" not in page  # tuned and held-out: a histogram each
    assert "members, a histogram" in page and all(len(s) < 100_000 for s in svgs)
    pairs = [{"member": f"m{i:05d}", "a": 1.0, "b": 1.0 - (i % 7) / 10} for i in range(MEMBERS)]
    d = {"metric": "score", "pairs": pairs, "mean": -0.3, "ci": [-0.31, -0.29]}
    assert 0 < charts.chart_rows(delta_views.paired_chart(d)) <= charts.CHART_ROWS


def test_a_chart_that_cannot_be_drawn_is_a_note_and_the_page_goes_on(monkeypatch, capsys):
    import altair as alt
    import pandas as pd

    shown = []
    monkeypatch.setattr(charts.IPython.display, "display", lambda *a, **k: shown.append(a))
    too_many = alt.Chart(pd.DataFrame({"x": range(charts.CHART_ROWS + 1)})).mark_tick().encode(x="x:Q")
    charts.chart(too_many)
    charts.chart({"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "mark": "nonsense"})
    charts.chart(alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_tick().encode(x="x:Q"))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"(chart not drawn: {charts.CHART_ROWS + 1:,} rows of data, more than the "
                      f"{charts.CHART_ROWS:,} a chart may carry; the figures are in the tables and score.json)")
    assert out[1].startswith("(chart not drawn: ") and len(out) == 2
    assert len(shown) == 1 and "image/svg+xml" in shown[0][0]  # the chart after them is drawn


def test_a_long_table_shows_its_first_rows_and_says_where_the_rest_is(monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(base.IPython.display, "display", lambda *a, **k: shown.append(a[0]["text/html"]))
    base.table([{"n": i} for i in range(base.TABLE_ROWS + 5)], full="the moon")
    assert shown[0].count("<td>") == base.TABLE_ROWS  # the first rows only
    assert capsys.readouterr().out == f"first {base.TABLE_ROWS:,} of {base.TABLE_ROWS + 5:,} rows; the full table is in the moon\n"
    base.table([{"n": i} for i in range(3)])
    assert shown[1].count("<td>") == 3 and capsys.readouterr().out == ""


def test_a_1000_member_index_keeps_every_section_and_cuts_its_member_table(runs):
    """The index's member table grows with the members: its first `chrome.TABLE_ROWS` rows, and a line saying
    how many there are and where each is; the overview above it still counts every member."""
    from evalkit.report import chrome
    from evalkit.report.render import render_index
    from evalkit.results.summary import write_summary

    run_a, _ = runs
    write_summary(run_a)
    page = render_index(run_a).read_text()
    assert _headings(page) == ["evalkit run", "Results per task and backend", "deal-memos"]
    members = page.split("<h2>deal-memos</h2>")[1]
    assert members.count("<tr>") == chrome.TABLE_ROWS + 1  # the header and the first rows
    assert f"first {chrome.TABLE_ROWS:,} of {MEMBERS:,} rows; the full table is in each member&#x27;s score.json" in members
    assert f">{MEMBERS}/{MEMBERS}<" in page.split("<h2>deal-memos</h2>")[0]  # the overview counts every member
