"""evalkit.report.views by item shape: the dispatch, what counts as a problem, nulls, the tree and graph
pages, and hostile text. No kernel: `display` is captured in-process."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import IPython.display
import pandas as pd
import pytest
from conftest import HOSTILE_FIELD, HOSTILE_IMG, HOSTILE_SCRIPT, TASK_ID
from test_render import tags

from evalkit.corpus.tasks import load_task
from evalkit.report import frames, views
from evalkit.report.render import clean_output_html, safe_svg
from evalkit.scoring import ScoreContext, ScoreResult

ADVENTURE = Path(__file__).resolve().parent.parent / "corpus" / "adventure"


class Page:
    """What a view displayed: bundles (tables, headings, charts) and printed text, in order."""

    def __init__(self, monkeypatch, capsys, draw: bool = False) -> None:
        self.shown: list[dict] = []
        self.capsys = capsys
        monkeypatch.setattr(IPython.display, "display", lambda data, **kw: self.shown.append(data))
        if not draw:  # charts cost a vl-convert call each: record the chart objects instead
            monkeypatch.setattr(views.charts, "chart", lambda c, missing="": self.shown.append({"chart": c}))

    @property
    def html(self) -> str:
        return "\n".join(d["text/html"] for d in self.shown if "text/html" in d)

    def headings(self, level: int | None = None) -> list[str]:
        pattern = rf"<h{level or '[1-6]'}>(.*?)</h{level or '[1-6]'}>"
        return [h for d in self.shown if "text/html" in d for h in re.findall(pattern, d["text/html"])]

    def tables(self) -> list[str]:
        return [d["text/html"] for d in self.shown if "<table" in d.get("text/html", "")]

    def charts(self) -> list:
        return [d["chart"] for d in self.shown if "chart" in d]

    def printed(self) -> str:
        return self.capsys.readouterr().out


class _Table(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def read_table(html: str) -> pd.DataFrame:
    """An escaped views table back as text cells (header row → columns)."""
    p = _Table()
    p.feed(html)
    return pd.DataFrame(p.rows[1:], columns=p.rows[0])


def fields_items() -> pd.DataFrame:
    return pd.DataFrame([
        {"member": "m", "field": "a", "kind": "text", "weight": 1, "expected": "x", "extracted": "x",
         "outcome": "match", "credit": 1, "reason": "equal"},
        {"member": "m", "field": "b", "kind": "text", "weight": 1, "expected": "x", "extracted": "y",
         "outcome": "mismatch", "credit": 0, "reason": "differs"},
    ])


def graph_result(extra_rows=()) -> ScoreResult:
    items = [
        {"member": "m", "axis": "entities", "key": ["a", "PER"], "expected": {"name": "A", "type": "PER"},
         "extracted": {"name": "A", "type": "PER"}, "outcome": "matched", "reason": "same", "score": None},
        {"member": "m", "axis": "relations", "key": ["a", "r", "b"], "expected": None,
         "extracted": {"head": "A", "relation": "r", "tail": "B"}, "outcome": "spurious",
         "reason": "extracted, not in the truth", "score": None},
        *extra_rows,
    ]
    metrics = {"entities_precision": 1.0, "entities_recall": 1.0, "entities_f1": 1.0, "entities_tp": 1,
               "entities_fp": 0, "entities_fn": 0, "relations_precision": 0.0, "relations_recall": None,
               "relations_f1": 0.0, "relations_tp": 0, "relations_fp": 1, "relations_fn": 0, "summary_f1": None,
               **{f"judged_{a}_{m}": None for a in ("entities", "relations") for m in ("precision", "recall", "f1")}}
    return ScoreResult(score=0.0, passed=False, metrics=metrics, items=items, details={"headline": "relations_f1"})


# ------------------------------------------------------------------- a real tree result

TRUTH = {"dungeons": [{
    "name": "Keep",
    "levels": [
        {"number": 1, "areas": [
            {"key": "1", "connections": ["2"], "doors": {"2": {"kind": "door", "locked": True}},
             "encounters": [{"name": "orc", "template": "orc", "count": 2}], "treasure": {"present": True}},
            {"key": "2", "connections": ["1"], "encounters": [{"name": "bog thing"}]},
            {"key": "3"},
        ]},
        {"number": 2, "areas": [{"key": "4", "encounters": []}]},
    ],
    "transitions": [{"from_level": 1, "from_key": "2", "to_level": 2, "to_key": "4", "kind": "stairs"}],
    "entrance": {"level": 1, "key": "1"},
}]}


@pytest.fixture(scope="module")
def adventure():
    return load_task(ADVENTURE)


def score_tree(task, extraction) -> ScoreResult:
    truth = task.scorer.truth_model.model_validate(TRUTH)
    ctx = ScoreContext(task_id="adventure", member_id="m", source_text="", options=task.options, threshold=0.9,
                       extra={"task_dir": str(ADVENTURE), "scope": None})
    return task.scorer.score(extraction, truth, ctx)


def hostile_extraction() -> dict:
    return {"dungeons": [
        {"name": "Keep", "levels": [
            {"number": 1, "areas": [
                {"key": "1", "connections": ["2", HOSTILE_IMG], "doors": {"2": "secret door"},
                 "encounters": [{"name": "orc", "template": "orc", "count": 3}, {"name": HOSTILE_SCRIPT}],
                 "treasure": {"present": True}},
                {"key": "2", "connections": ["1"], "encounters": [{"name": "bog thing"}]},
                {"key": HOSTILE_IMG, "connections": ["1"]},
            ]},
            {"number": 2, "areas": [{"key": "4", "encounters": []}]},
        ], "transitions": [], "entrance": "1"},
        {"name": HOSTILE_FIELD, "levels": [{"number": 1, "areas": [{"key": "99"}]}]},
    ]}


# ------------------------------------------------------------------- dispatch

@pytest.mark.parametrize("columns, shape", [
    ({"field": "a", "outcome": "match"}, "fields"),
    ({"axis": "entities", "outcome": "matched"}, "graph"),
    ({"family": "areas", "outcome": "matched"}, "tree"),
    ({"node": 1}, "items"),
])
def test_dispatch_picks_the_view_of_the_item_shape(monkeypatch, columns, shape):
    assert frames.item_shape(pd.DataFrame([columns])) == shape
    assert frames.item_shape([columns]) == shape
    called = []
    modules = {"fields": views.fields, "graph": views.graph, "tree": views.tree, "items": views.generic}
    for shape_name, module in modules.items():
        name = f"{shape_name}_view"
        monkeypatch.setattr(module, name, lambda result, items, name=name: called.append(name))
    views.score_page(ScoreResult(score=None, passed=None, metrics={}, items=[columns]))
    assert called == [{"fields": "fields_view", "graph": "graph_view", "tree": "tree_view",
                       "items": "items_view"}[shape]]
    reports = []
    for shape_name, module in modules.items():
        name = f"{shape_name}_report"
        monkeypatch.setattr(module, name, lambda members, items, name=name: reports.append(name))
    views.report_page(pd.DataFrame(), pd.DataFrame([columns]))
    assert reports == [called[0].replace("_view", "_report")]


def test_fields_view_keeps_its_sections(monkeypatch, capsys):
    page = Page(monkeypatch, capsys)
    result = ScoreResult(score=0.5, passed=False, metrics={"score": 0.5}, items=fields_items().to_dict("records"),
                         details={"gate": {"blocking": False}})
    views.score_page(result)
    assert page.headings(2) == ["Metrics", "Gate", "Mismatches", "Outcomes by field"]
    assert len(page.charts()) == 1 and page.charts()[0] is not None


# ------------------------------------------------------------------- problems

def test_matched_ignored_and_excluded_are_not_problems(monkeypatch, capsys):
    outcomes = ["match", "matched", "ignored", "excluded", "mismatch", "missed", "spurious", "hallucinated"]
    df = pd.DataFrame([{"family": "f", "area": f"area-{o}", "outcome": o, "reason": f"why {o}"} for o in outcomes])
    assert list(frames.problem_rows(df)["outcome"]) == ["mismatch", "missed", "spurious", "hallucinated"]
    assert list(frames.set_aside_rows(df)["outcome"]) == ["ignored", "excluded"]
    page = Page(monkeypatch, capsys)
    views.mismatches(df)
    html = page.tables()[0]
    for o in ("match", "matched", "ignored", "excluded"):
        assert f"area-{o}<" not in html
    for o in ("mismatch", "missed", "spurious", "hallucinated"):
        assert f"area-{o}<" in html
    assert "2 item(s) set aside by design (ignored 1, excluded 1)" in page.printed()
    views.set_aside(df)
    aside = page.tables()[1]
    assert "area-ignored<" in aside and "area-excluded<" in aside and "area-missed<" not in aside


def test_a_table_of_successes_and_set_aside_rows_shows_no_mismatch(monkeypatch, capsys):
    page = Page(monkeypatch, capsys)
    views.mismatches(pd.DataFrame([{"outcome": "matched"}, {"outcome": "ignored"}]))
    out = page.printed()
    assert "(no mismatches)" in out and "1 item(s) set aside" in out and not page.tables()


# ------------------------------------------------------------------- graph

def test_graph_view_shows_null_judged_metrics_as_a_dash(monkeypatch, capsys):
    page = Page(monkeypatch, capsys)
    views.score_page(graph_result())
    assert page.headings(2) == ["Precision, recall and F1 per axis", "Outcomes per axis", "Items"]
    prf = read_table(page.tables()[0])
    assert list(prf["axis"]) == ["entities", "relations", "summary"]
    for col in ("judged precision", "judged recall", "judged f1"):
        assert set(prf[col]) == {views.NULL}
    rel = prf.set_index("axis").loc["relations"]
    assert rel["recall"] == views.NULL and rel["precision"] == "0.000" and rel["fp"] == "1"
    assert prf.set_index("axis").loc["summary", "f1"] == views.NULL  # null summary F1: a dash, not 0
    assert list(page.headings(3)) == ["entities: 1 item (1 matched)", "relations: 1 item (1 spurious)"]
    assert page.charts()[0] is not None
    assert views.figure(None) == views.NULL and views.figure(float("nan")) == views.NULL
    assert views.figure(0.0) == "0.000" and views.figure(0) == "0"


def test_graph_report_corpus_figures_per_backend(monkeypatch, capsys):
    rows = []
    for backend, tp in (("a", 2), ("b", 1)):
        for member in ("m1", "m2"):
            rows.append({"member": member, "backend": backend, "label": f"{member} [{backend}]", "score": 0.5,
                         "verdict": "PASS", "metric.entities_tp": tp, "metric.entities_fp": 1, "metric.entities_fn": 0,
                         "metric.entities_f1": 0.8, "metric.relations_tp": 0, "metric.relations_fp": 0,
                         "metric.relations_fn": 0, "metric.relations_f1": None, "metric.summary_f1": None,
                         "metric.judged_entities_f1": None})
    members = pd.DataFrame(rows)
    corpus = frames.graph_corpus(members).set_index("backend")
    assert corpus.loc["a", "entities_precision"] == pytest.approx(4 / 6)
    assert corpus.loc["b", "entities_precision"] == pytest.approx(2 / 4)
    assert corpus.loc["a", "relations_f1"] is None and corpus.loc["a", "judged_entities_f1"] is None
    page = Page(monkeypatch, capsys)
    views.report_page(members, pd.DataFrame([{"axis": "entities", "outcome": "matched", "label": "m1 [a]"}]))
    assert page.headings(2) == ["Members", "Corpus", "F1 by member and axis", "Outcomes"]
    members_html, corpus_html = page.tables()
    shown = read_table(members_html)
    assert list(zip(shown["member"], shown["backend"])) == [("m1", "a"), ("m2", "a"), ("m1", "b"), ("m2", "b")]
    assert set(shown["judged entities f1"]) == {views.NULL} and set(shown["relations f1"]) == {views.NULL}
    table = read_table(corpus_html)
    assert list(zip(table["backend"], table["axis"])) == [("a", "entities"), ("a", "relations"), ("a", "summary"),
                                                          ("b", "entities"), ("b", "relations"), ("b", "summary")]
    assert set(table[table.axis == "relations"]["micro f1"]) == {views.NULL}
    assert set(table["judged f1"]) == {views.NULL}
    heat = page.charts()[0].to_dict()
    values = next(iter(heat["datasets"].values()))
    assert {v["label"] for v in values if v["column"] == "relations"} == {views.NULL}


# ------------------------------------------------------------------- tree

def test_tree_view_renders_each_family_section_and_a_site_table(monkeypatch, capsys, adventure):
    result = score_tree(adventure, hostile_extraction())
    page = Page(monkeypatch, capsys)
    views.score_page(result)
    h2 = page.headings(2)
    assert h2[:3] == ["Families", "Sites", "Connection graph"]
    families = [h.split(":")[0] for h in h2[3:]]
    assert families == ["areas", "encounters", "connections", "treasure", "doors", "transitions", "entrance"]
    for fam in families:  # each family: its figures, then its item table
        assert any(h.startswith(f"{fam} items: ") for h in page.headings(3)), fam
    overview, sites = page.tables()[:2]
    assert all(f"<td>{fam}</td>" in overview for fam in families)
    site_frame = read_table(sites)
    assert list(site_frame.columns[:4]) == ["site", "extracted site", "shared keys", "score"]
    assert set(families) <= set(site_frame.columns)
    assert "Keep" in list(site_frame["site"])
    # the encounters section: problems first, the set-aside (non-SRD) row apart
    enc = page.html.split("<h2>encounters: ")[1].split("<h2>connections")[0]
    assert "<h3>encounters items set aside: 1 " in enc
    counted, aside = enc.split("<h3>encounters items set aside")
    assert "<td>excluded</td>" not in counted and "<td>excluded</td>" in aside
    assert counted.index("<td>mismatch</td>") < counted.index("<td>matched</td>")
    bars, graph = page.charts()[:2]
    assert bars is not None and graph is not None
    assert views.family_figures(result.metrics, "encounters")[0]["measure"].tolist() == \
        ["name", "count", "resolution", "custom"]


def test_tree_report_tables_and_corpus_means(monkeypatch, capsys):
    rows = []
    for member, backend, areas, transitions in (("m1", "a", 1.0, None), ("m2", "a", 0.5, 1.0), ("m1", "b", 0.0, None)):
        rows.append({"member": member, "backend": backend, "label": f"{member} [{backend}]", "score": areas,
                     "verdict": "PASS", "metric.score": areas, "metric.areas_f1": areas, "metric.areas_score": areas,
                     "metric.transitions_f1": transitions, "metric.transitions_score": transitions})
    members = pd.DataFrame(rows)
    corpus = frames.tree_corpus(members)
    assert corpus.loc["areas_score", "a"] == 0.75 and corpus.loc["transitions_score", "a"] == 1.0
    assert corpus.loc["transitions_score", "b"] is None  # defined for no member: null, not 0
    page = Page(monkeypatch, capsys)
    views.report_page(members, pd.DataFrame([{"family": "areas", "outcome": "matched", "label": "m1 [a]"}]))
    assert page.headings(2) == ["Members", "Corpus mean per metric", "Family scores by member", "Outcomes"]
    member_table = read_table(page.tables()[0])
    assert list(member_table.columns) == ["member", "backend", "score", "verdict", "areas", "transitions"]
    assert list(member_table["transitions"]) == [views.NULL, "1.000", views.NULL]
    means = read_table(page.tables()[1])
    assert list(zip(means["backend"], means["family"])) == [("a", "areas"), ("a", "transitions"),
                                                            ("b", "areas"), ("b", "transitions")]
    assert list(means["family score"]) == ["0.750", "1.000", "0.000", views.NULL]


# ------------------------------------------------------------------- hostile text

def _no_active_markup(html: str) -> None:
    assert "<script" not in html and "<img" not in html, html[:500]
    assert not any(t in ("script", "img") or any(k.startswith("on") for k in a) for t, a in tags(html))


def test_hostile_item_values_are_escaped_in_every_view(monkeypatch, capsys, adventure):
    tree = score_tree(adventure, hostile_extraction())
    values = {str(v) for row in tree.items for v in row.values()}
    assert {HOSTILE_SCRIPT, HOSTILE_IMG, HOSTILE_FIELD} <= values  # the payloads reach the item table
    graph = graph_result([{"member": "m", "axis": HOSTILE_FIELD, "key": [HOSTILE_SCRIPT], "expected": HOSTILE_IMG,
                           "extracted": {"name": HOSTILE_SCRIPT}, "outcome": "missed", "reason": HOSTILE_IMG,
                           "score": None}])
    page = Page(monkeypatch, capsys, draw=True)
    for result in (tree, graph):
        views.score_page(result)
        views.mismatches(result)
        views.set_aside(result)
    views.heading(HOSTILE_SCRIPT)
    views.para(HOSTILE_IMG)
    html = page.html
    _no_active_markup(html)
    _no_active_markup(clean_output_html(html))
    assert "&lt;/script&gt;&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=\"document.title='PWNED'\"&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    svgs = [d["image/svg+xml"] for d in page.shown if "image/svg+xml" in d]
    assert len(svgs) == 3  # tree: family bars, connection graph; graph: outcomes per axis
    for svg in svgs:
        inline = safe_svg(svg)
        assert inline.startswith("<svg") and "<script" not in inline and "<img" not in inline
    assert any("Keep · connections" in svg for svg in svgs)  # the connection graph was drawn
    # Site names and area keys are drawn labels in the connection graph: SVG text, escaped.
    edges = [{"family": "connections", "site": HOSTILE_FIELD, "a": HOSTILE_IMG, "b": HOSTILE_SCRIPT,
              "a_level": 1, "b_level": 1, "outcome": "spurious"}]
    svg = views.chart_bundle(views.edge_graph_chart(edges))[0]["image/svg+xml"]
    inline = safe_svg(svg)
    assert inline.startswith("<svg") and "<script" not in inline and "<img" not in inline
    assert "&lt;img src=x onerror=alert(1)&gt; · connections" in inline
    assert "&lt;/script&gt;&lt;script&gt;" in inline


# ------------------------------------------------------------------- trend

def _write_member(run: Path, task: str, member: str, backend: str, score: float, started: str) -> None:
    home = run / task / member / backend
    home.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"started": started}))
    (home / "score.json").write_text(json.dumps({"member": f"{task}/{member}", "score": score, "passed": True,
                                                 "metrics": {"relations_f1": score, "score": score},
                                                 "details": {"headline": "relations_f1"}, "items": []}))
    (home / "extraction.json").write_text(json.dumps({"run": {}, "backend": {"model": "x"}}))


def test_trend_needs_two_earlier_runs_and_adds_this_one(tmp_path, monkeypatch, capsys):
    from evalkit.results.history import append_history

    runs = tmp_path / "runs"
    for i, name in enumerate(("r1", "r2", "r3")):
        _write_member(runs / name, "enc", "m", "fake", 0.5 + i / 10, f"2026-11-0{i + 1}T00:00:00+00:00")
    page = Page(monkeypatch, capsys)
    views.trend(runs / "r1", "enc")
    note = page.printed()
    assert note.startswith("No trend yet") and not page.charts()
    append_history(runs / "r1")
    views.trend(runs / "r2", "enc")  # one earlier run: the same note, byte for byte
    assert page.printed() == note and not page.charts()
    append_history(runs / "r2")
    frame, metric, earlier = frames.run_trend(runs / "r3", "enc")
    assert metric == "relations_f1" and earlier == 2
    assert list(frame["run_id"]) == ["r1", "r2", "r3"] and list(frame["value"]) == pytest.approx([0.5, 0.6, 0.7])
    views.trend(runs / "r3", "enc")
    assert "relations_f1" in page.printed() and page.charts()[0] is not None
    append_history(runs / "r3")  # in the history now: counted once, not twice
    frame, _, earlier = frames.run_trend(runs / "r3", "enc")
    assert earlier == 2 and list(frame["run_id"]) == ["r1", "r2", "r3"]


def test_trend_joins_only_runs_over_the_same_members_on_a_24_hour_axis(tmp_path):
    import pandas as pd

    from evalkit.report.views import trend_chart
    from evalkit.results.history import run_means

    def line(run, member, value, time):
        return {"task": "enc", "backend": "fake", "run_id": run, "member": member, "value": value, "time": time}

    lines = pd.DataFrame([line("r1", "a", 0.2, "2026-11-01T13:05:00+00:00"), line("r1", "b", 0.4, "2026-11-01T13:05:00+00:00"),
                          line("r2", "a", 0.6, "2026-11-02T14:00:00+00:00"),  # a subset: not the same quantity
                          line("r3", "a", 0.3, "2026-11-03T15:00:00+00:00"), line("r3", "b", 0.5, "2026-11-03T15:00:00+00:00")])
    frame = run_means(lines)
    assert dict(zip(frame["run_id"], frame["series"])) == {"r1": "fake · N=2", "r2": "fake · N=1", "r3": "fake · N=2"}
    assert list(frame["value"]) == pytest.approx([0.3, 0.6, 0.4])
    same = run_means(lines[lines["run_id"] != "r2"])
    assert set(same["series"]) == {"fake"}  # one member set: the backend's own label
    svg = views.chart_bundle(trend_chart(frame, "relations_f1"))[0]["image/svg+xml"]
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "2026-11-02 00:00" in labels  # 24-hour ISO labels in UTC
    assert not [t for t in labels if t.endswith((" PM", " AM"))]
    assert "fake · N=1" in svg and "fake · N=2" in svg


# ------------------------------------------------------------------- the member page

def test_locate_marks_values_by_outcome_and_lists_hallucinated_as_not_found():
    from evalkit.report.views.member import locate, marked_html

    text = "Account ACC-1 signed 1 October 2025.\nRate  70% for account 10 via <b>Spotify</b>."
    items = [{"field": "account_id", "extracted": "10", "outcome": "hallucinated", "reason": "not in the source"},
             {"field": "signing", "extracted": "acc-1", "outcome": "match"},
             {"field": "start", "extracted": "1 October\n2025", "outcome": "mismatch"},
             {"field": "rate", "extracted": 0.7, "outcome": "match"},
             {"field": "stores", "extracted": ["<b>Spotify</b>", "Tidal"], "outcome": "extra"},
             {"field": "renewal_years", "extracted": 1, "outcome": "match"}]  # a lone digit: never marked
    marks, missing = locate(text, items)
    found = [(text[m.start:m.end], m.outcome) for m in marks]
    assert found == [("ACC-1", "match"), ("1 October 2025", "mismatch"), ("70%", "match"),
                     ("<b>Spotify</b>", "extra")]
    assert "10" not in [t for t, _ in found]  # occurs in the text, but the scorer says it is invented
    assert list(missing["item"]) == ["account_id", "stores"]
    assert list(missing["outcome"]) == ["hallucinated", "extra"]  # Tidal: not in the document as written
    markup = marked_html(text, marks)
    assert '<span class="o-extra" title="stores: extra">&lt;b&gt;Spotify&lt;/b&gt;</span>' in markup
    assert "<b>" not in markup and '<span class="o-match" title="signing: match">ACC-1</span>' in markup


def test_member_page_explains_the_extraction(run_copy):
    from test_render import tags

    from evalkit.report.render import render_notebook

    run = run_copy
    for member in ("hostile", "plain"):
        html = render_notebook(run / TASK_ID / member / "fake" / "score.ipynb").read_text()
        heads = re.findall(r"<h2[^>]*>(.*?)<", html)
        for h in ("Document", "Prompt", "Response", "Record", "Items"):
            assert h in heads, (member, h)
        assert heads.index("Document") < heads.index("Prompt") < heads.index("Response") < heads.index("Record") \
            < heads.index("Items")
        assert '<div class="ek-doc"><pre>' in html and "<summary>user prompt" in html
        assert "parse: clean" in html
        assert not [t for t, _ in tags(html) if t in ("img", "iframe")]
    plain = (run / TASK_ID / "plain" / "fake" / "score.html").read_text()
    assert '<span class="o-match" title="account_id: match">A-1</span>' in plain
    assert '<span class="o-match" title="term_rate: match">70%</span>' in plain
    hostile = (run / TASK_ID / "hostile" / "fake" / "score.html").read_text()
    assert 'title="title: mismatch">&lt;/script&gt;&lt;script&gt;document.title=\'PWNED\'&lt;/script&gt;</span>' in hostile


def test_every_chart_is_built_in_the_views():
    """altair is spelled only in `evalkit.report.views`: a chart elsewhere escapes its fixed colours, row bounds
    and static drawing."""
    root = Path(__file__).resolve().parent.parent / "evalkit"
    outside = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py")) if "views" not in p.parts
               and re.search(r"^\s*(import altair|from altair)|\balt\.Chart\(", p.read_text(encoding="utf-8"), re.M)]
    assert outside == []
