"""HTML pages: reproducible, self-contained, and hostile text stays text."""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import IPython.display
import pandas as pd
from conftest import HOSTILE_FIELD, HOSTILE_IMG, HOSTILE_SCRIPT, TASK_ID

from evalkit.report import chrome, views
from evalkit.report.frames import field_accuracy, load_scores, mean_field_accuracy
from evalkit.report.render import clean_output_html, render_index, render_notebook, render_run, safe_svg


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: dict[str, list[str]] = {"script": [], "style": []}
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in self.text:
            self._in = tag
            self.text[tag].append("")

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in:
            self.text[self._in][-1] += data


def tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    p = _Tags()
    p.feed(html)
    return p.tags


def inline(html: str, tag: str) -> list[str]:
    """The text of every inline <script> or <style> of a page."""
    p = _Tags()
    p.feed(html)
    return p.text[tag]


def policy(html: str) -> str:
    """The page's Content-Security-Policy (its meta tag must come before the title and any content)."""
    found = [(i, a) for i, (t, a) in enumerate(tags(html))
             if t == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy"]
    assert len(found) == 1
    first_title = next(i for i, (t, _) in enumerate(tags(html)) if t in ("title", "body"))
    assert found[0][0] < first_title
    return found[0][1]["content"] or ""


def sha256_source(text: str) -> str:
    import base64
    import hashlib

    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _pages(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*.html"))}


def test_render_run_is_byte_identical(run_copy):
    written = render_run(run_copy)
    assert written[-1] == run_copy / "index.html"
    assert len(written) == 6  # 2 members × 2 notebooks, the report, the index
    first = _pages(run_copy)
    for p in written:
        p.unlink()
    render_run(run_copy)
    assert _pages(run_copy) == first
    # Nor do the pages depend on the run folder's name or place.
    elsewhere = run_copy.parent / "elsewhere" / "another-name"
    shutil.copytree(run_copy, elsewhere)
    render_run(elsewhere)
    assert _pages(elsewhere) == first


def test_pages_rendered_in_worker_processes_are_the_same_bytes(run_copy, monkeypatch):
    from evalkit.report import render

    serial = render_run(run_copy)
    first = _pages(run_copy)
    for p in serial:
        p.unlink()
    monkeypatch.setattr(render, "PARALLEL_FROM", 2)
    monkeypatch.setattr(render, "CHUNKS_PER_WORKER", 1)
    here = []  # a page rendered in this process (the workers import the real function)
    monkeypatch.setattr(render, "render_notebook", lambda *a, **k: here.append(a))
    assert render_run(run_copy, workers=2) == serial  # same pages, same order, the index last
    assert here == [] and _pages(run_copy) == first


def test_a_whole_run_reads_each_task_once_not_once_per_page(run_copy, monkeypatch):
    # The navigation bar of every member page lists the task's members: read per page, a run of N members
    # read N score.json files N times over.
    from evalkit.results import runfolder

    reads = []
    real = runfolder.task_results
    monkeypatch.setattr(runfolder, "task_results", lambda run_dir, task: reads.append(task) or real(run_dir, task))
    single = render_notebook(run_copy / TASK_ID / "hostile" / "fake" / "score.ipynb").read_bytes()
    assert reads == [TASK_ID]
    reads.clear()
    pages = render_run(run_copy)
    assert len(pages) > 4 and reads == [TASK_ID, TASK_ID]  # once for all its pages, once for the index
    assert (run_copy / TASK_ID / "hostile" / "fake" / "score.html").read_bytes() == single  # the same page


def test_pages_load_nothing_from_outside_and_run_only_the_bundled_script(run_copy):
    render_run(run_copy)
    for name, data in _pages(run_copy).items():
        html = data.decode("utf-8")
        csp = policy(html)
        assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp, name
        scripts = inline(html, "script")
        assert scripts == [chrome.script()], name  # one script: evalkit's own, byte for byte
        for text in scripts + inline(html, "style"):
            assert sha256_source(text) in csp, name  # every inline script and style is allowed by its hash
        assert csp.count("'sha256-") == len(scripts) + len(inline(html, "style")), name  # and nothing else
        for tag, attrs in tags(html):
            assert not (tag == "script" and "src" in attrs), name
            assert "style" not in attrs, (name, tag)  # the policy would block it: none are written
            for key in ("src", "href"):
                value = (attrs.get(key) or "").strip().lower()
                assert not value.startswith(("http://", "https://", "//")), (name, tag, value)
            assert not any(k.startswith("on") for k in attrs), (name, tag, attrs)
        assert "url(http" not in html and "@import" not in html, name


def _links(page: Path) -> list[Path]:
    from urllib.parse import unquote

    hrefs = [a["href"] for t, a in tags(page.read_text(encoding="utf-8")) if t == "a" and a.get("href")]
    return [(page.parent / unquote(h.split("#")[0])).resolve() for h in hrefs if not h.startswith("#")]


def test_every_page_links_back_to_the_index_and_between_members(run_copy):
    render_run(run_copy)
    index = (run_copy / "index.html").resolve()
    task = run_copy / TASK_ID
    for name in _pages(run_copy):
        links = _links(run_copy / name)
        assert all(p.is_file() for p in links), (name, [p for p in links if not p.is_file()])  # no dead link
        if name != "index.html":
            assert index in links, name
    report = _links(task / "report.html")
    for m in ("hostile", "plain"):  # member names link to their pages; score ↔ extraction; previous ↔ next
        assert (task / m / "fake" / "score.html").resolve() in report
        assert (task / m / "fake" / "extract.html").resolve() in _links(task / m / "fake" / "score.html")
        assert (task / m / "fake" / "score.html").resolve() in _links(task / m / "fake" / "extract.html")
        assert (task / "report.html").resolve() in _links(task / m / "fake" / "score.html")
    assert (task / "plain" / "fake" / "score.html").resolve() in _links(task / "hostile" / "fake" / "score.html")
    assert (task / "hostile" / "fake" / "score.html").resolve() in _links(task / "plain" / "fake" / "score.html")
    crumbs = (task / "plain" / "fake" / "score.html").read_text(encoding="utf-8")
    assert '<span aria-current="page">fake</span>' in crumbs and "<span>plain</span>" in crumbs


def test_hostile_strings_are_escaped_everywhere(run_copy):
    render_run(run_copy)
    member = run_copy / TASK_ID / "hostile" / "fake"
    for page in (member / "score.html", member / "extract.html", run_copy / TASK_ID / "report.html"):
        html = page.read_text(encoding="utf-8")
        assert "&lt;script&gt;" in html or "&lt;/script&gt;" in html, page.name
        assert "<script>document.title" not in html and "</script><script>" not in html, page.name
        assert "<img src=x" not in html and '<img src="x"' not in html, page.name
        assert not any(t == "img" for t, _ in tags(html)), page.name
    score = (member / "score.html").read_text(encoding="utf-8")
    # The mismatch table shows every payload as text; the chart holds its field names as SVG text.
    assert "&lt;img src=x onerror=\"document.title='PWNED'\"&gt;" in score
    assert "&lt;/script&gt;&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in score
    assert 'class="mark-rect' in score and "<svg" in score


def test_index_lists_members_with_escaped_names_and_verdicts(run_copy):
    task = run_copy / TASK_ID
    shutil.copytree(task / "hostile", task / HOSTILE_FIELD)  # a member folder named like a tag
    render_notebook(task / HOSTILE_FIELD / "fake" / "score.ipynb")
    html = render_index(run_copy).read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img" not in html
    assert 'href="mini/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E/fake/score.html"' in html
    assert 'href="mini/plain/fake/score.html"' in html and 'href="mini/plain/fake/extract.html"' in html
    assert 'href="mini/report.html"' in html
    assert "1.000" in html and ">PASS<" in html and "0.400" in html and ">FAIL<" in html
    assert html == render_index(run_copy).read_text(encoding="utf-8")


def test_safe_svg_inlines_drawings_and_refuses_anything_active():
    drawing = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><g class="mark-rect">' \
              '<path d="M0,0h1"/><text>&lt;/text&gt;&lt;script&gt;x&lt;/script&gt;</text></g></svg>'
    out = safe_svg(drawing)
    assert out.startswith("<svg") and 'class="mark-rect"' in out and "<script" not in out
    assert "&lt;script&gt;" in out
    for hostile in (
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
        '<svg xmlns="http://www.w3.org/2000/svg"><foreignObject><p>x</p></foreignObject></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<use xlink:href="https://example.org/x.svg#a"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><rect fill="url(https://example.org/x)"/></svg>',
        "<svg><unclosed>",
    ):
        out = safe_svg(hostile)
        assert out.startswith('<img src="data:image/svg+xml;base64,'), hostile


def test_clean_output_html_keeps_tables_and_escapes_script():
    out = clean_output_html(f'<table border="0"><tr style="text-align: right;"><td>1</td></tr></table>'
                            f'{HOSTILE_SCRIPT}{HOSTILE_IMG}')
    assert "<table" in out and "<td>1</td>" in out and "style" not in out
    assert "<script" not in out and "<img" not in out and "&lt;script&gt;" in out


def test_views_escape_tables_and_draw_static_charts(monkeypatch):
    df = pd.DataFrame([{"field": HOSTILE_FIELD, "outcome": "mismatch", "weight": 2, "expected": {"a": [1]},
                        "extracted": HOSTILE_SCRIPT, "reason": "x" * 500}])
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, **kw: shown.append((data, kw)))  # no kernel here
    views.table(df)
    views.chart(views.field_outcome_chart(df))
    html = shown[0][0]["text/html"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img" not in html and "<script" not in html
    assert '{"a": [1]}' in html.replace("&quot;", '"') and "x" * 500 not in html
    data, meta = shown[1][0], shown[1][1]["metadata"]
    assert set(data) == {"image/svg+xml", "image/png", "text/plain"}
    assert 'class="mark-rect' in data["image/svg+xml"] and "<img" not in data["image/svg+xml"]
    assert meta["image/png"]["width"] > 0
    assert views.chart_bundle(views.field_outcome_chart(df))[0] == data  # deterministic
    assert views.field_outcome_chart(pd.DataFrame([{"node": 1}])) is None  # no outcome column: no chart
    graph = pd.DataFrame([{"axis": "entities", "key": ["a", "PER"], "outcome": "matched"},
                          {"axis": "relations", "key": ["a", "r", "b"], "outcome": "spurious"}])
    svg = views.chart_bundle(views.field_outcome_chart(graph))[0]["image/svg+xml"]
    assert 'class="mark-rect' in svg and "relations" in svg and "spurious" in svg


def test_load_scores_frames(executed_run):
    _, run_dir, _ = executed_run
    members, items = load_scores(run_dir, TASK_ID)
    assert list(members["member"]) == ["hostile", "plain"]
    assert list(members["verdict"]) == ["FAIL", "PASS"]
    assert {"member", "backend", "label", "field", "outcome", "reason"} <= set(items.columns)
    acc = field_accuracy(items)
    assert list(acc.columns) == ["hostile", "plain"]
    assert acc.loc["account_id", "plain"] == 1.0 and acc.loc["title", "hostile"] == 0.0
    assert 0 < mean_field_accuracy(items) < 1
    assert load_scores(run_dir, "no-such-task")[0].empty


def test_bundle_holds_every_page_with_links_between_sections(run_copy, tmp_path):
    import re

    from evalkit.report.bundle import bundle_run

    render_run(run_copy)
    out = bundle_run(run_copy, tmp_path / "report.html")
    html = out.read_text(encoding="utf-8")
    pages = _pages(run_copy)
    sections = re.findall(r'<section class="ek-page" id="(p\d+)" data-page="([^"]*)"', html)
    assert [unquote_path(p) for _, p in sections] == ["index.html"] + sorted(p for p in pages if p != "index.html")
    csp = policy(html)
    assert inline(html, "script") == [chrome.script()] and sha256_source(chrome.script()) in csp
    assert all(sha256_source(s) in csp for s in inline(html, "style")) and "unsafe-inline" not in csp
    ids = re.findall(r'\bid="([^"]*)"', html)
    assert len(ids) == len(set(ids))  # pages' ids are prefixed: none collide
    hrefs = [a["href"] for t, a in tags(html) if t == "a" and a.get("href")]
    assert hrefs and all(h.startswith("#") and h[1:] in ids for h in hrefs)  # every link stays in the file
    score = {unquote_path(p): i for i, p in sections}[f"{TASK_ID}/plain/fake/score.html"]
    assert f'href="#{score}"' in html  # e.g. the report's member link
    assert "&lt;/script&gt;&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in html
    for tag, attrs in tags(html):
        for key in ("src", "href"):
            assert not (attrs.get(key) or "").startswith(("http:", "https:", "//")), (tag, attrs)
    assert bundle_run(run_copy, tmp_path / "again.html").read_bytes() == out.read_bytes()


def unquote_path(p: str) -> str:
    from urllib.parse import unquote

    return unquote(p)
