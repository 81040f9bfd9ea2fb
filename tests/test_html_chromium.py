"""The rendered pages in a real browser: charts draw, injected script does not run.

Headless Chromium loads each page from file://, lets it run for a virtual
5 s, and dumps the resulting DOM. A control page with the raw payload proves
the harness would see script that ran.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import HOSTILE_IMG, HOSTILE_SCRIPT, TASK_ID
from test_render import inline, tags

from evalkit.report import chrome
from evalkit.report.render import render_run

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed")


def dump_dom(page: Path, profile: Path) -> str:
    proc = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<html" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def title(dom: str) -> str:
    m = re.search(r"<title>(.*?)</title>", dom, re.S)
    return m.group(1) if m else ""


@pytest.fixture(scope="module")
def rendered(executed_run, tmp_path_factory):
    import shutil

    copy = tmp_path_factory.mktemp("chromium") / "run"
    shutil.copytree(executed_run[1], copy)
    render_run(copy)
    return copy


def test_control_page_shows_the_harness_catches_script(tmp_path):
    page = tmp_path / "control.html"
    page.write_text(f"<!DOCTYPE html><html><head><title>clean</title></head><body>{HOSTILE_IMG}</body></html>")
    assert title(dump_dom(page, tmp_path / "profile")) == "PWNED"


@pytest.mark.parametrize("page", [f"{TASK_ID}/hostile/fake/score.html", f"{TASK_ID}/report.html"])
def test_charts_draw_and_payloads_stay_text(rendered, tmp_path, page):
    dom = dump_dom(rendered / page, tmp_path / "profile")
    # (b) nothing injected ran or was added
    assert title(dom) != "PWNED" and "PWNED" not in title(dom)
    elements = tags(dom)
    assert not [t for t, _ in elements if t in ("img", "iframe", "object", "embed")]
    assert inline(dom, "script") == [chrome.script()]  # the one script is evalkit's own
    assert not [(t, a) for t, a in elements if any(k.startswith("on") for k in a)]
    assert "&lt;/script&gt;&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in dom
    if page.endswith("score.html"):
        assert "&lt;img src=x onerror=\"document.title='PWNED'\"&gt;" in dom
    # (a) the charts are inline SVG with drawn marks
    svgs = re.findall(r"<svg\b.*?</svg>", dom, re.S)
    assert svgs, "no inline SVG chart in the page"
    for svg in svgs:
        # vega draws each data mark as a <path> inside its "mark-<type> role-mark" group
        groups = re.findall(r'<g\b[^>]*class="mark-\w+ role-mark[^"]*"[^>]*>(.*?)</g>', svg, re.S)
        drawn = sum(len(re.findall(r"<path\b[^>]*\bd=\"M", g)) for g in groups)
        assert drawn > 0, "a chart drew no marks"
    assert HOSTILE_SCRIPT not in dom


def _with_script(page: Path, out: Path, js: str, allow: bool) -> Path:
    """A copy of `page` with `js` added at the end of its body, its hash added to the page's policy or not."""
    from test_render import sha256_source

    html = page.read_text(encoding="utf-8")
    if allow:
        html = html.replace("script-src ", f"script-src {sha256_source(js)} ", 1)
    out.write_text(html.replace("</body>", f"<script>{js}</script></body>"), encoding="utf-8")
    return out


def _first_column(dom: str, table: int = 0) -> list[str]:
    body = re.findall(r"<tbody>(.*?)</tbody>", dom, re.S)[table]
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<tr\b[^>]*>\s*<td[^>]*>(.*?)</td>", body, re.S)]


def test_the_policy_blocks_script_that_escaped_escaping(rendered, tmp_path):
    # If hostile text ever reached a page as markup, the page's policy still would not run it.
    page = _with_script(rendered / TASK_ID / "hostile" / "fake" / "score.html", tmp_path / "p.html",
                        "document.title='PWNED'", allow=False)
    assert title(dump_dom(page, tmp_path / "profile")) != "PWNED"
    allowed = _with_script(rendered / TASK_ID / "hostile" / "fake" / "score.html", tmp_path / "q.html",
                           "document.title='PWNED'", allow=True)  # control: the harness sees script that runs
    assert title(dump_dom(allowed, tmp_path / "profile")) == "PWNED"


def test_sorting_and_filtering_a_table_in_chromium(rendered, tmp_path):
    report = rendered / TASK_ID / "report.html"
    before = dump_dom(report, tmp_path / "profile")
    table = next(i for i, b in enumerate(re.findall(r"<tbody>(.*?)</tbody>", before, re.S)) if "hostile" in b)
    assert _first_column(before, table) == ["hostile", "plain"]
    assert 'class="ek-filter"' in before  # the bundled script ran under the page's policy
    # Click the "score" header twice (ascending, then descending): the rows change order.
    click = (f"var t = document.querySelectorAll('table')[{table}];"
             "var h = Array.prototype.filter.call(t.tHead.rows[0].cells, function (c) {"
             " return c.textContent.trim() === 'score'; })[0]; h.click(); h.click();")
    dom = dump_dom(_with_script(report, tmp_path / "sorted.html", click, allow=True), tmp_path / "profile")
    assert _first_column(dom, table) == ["plain", "hostile"]
    assert 'aria-sort="descending"' in dom
    # "failures only" hides the passing member.
    failures = (f"var t = document.querySelectorAll('table')[{table}]; var box = t.previousSibling.querySelector("
                "'input[type=checkbox]'); box.click();")
    dom = dump_dom(_with_script(report, tmp_path / "failures.html", failures, allow=True), tmp_path / "profile")
    rows = re.findall(r"<tr\b([^>]*)>\s*<td[^>]*>(?:<a[^>]*>)?(hostile|plain)<", re.findall(r"<tbody>(.*?)</tbody>", dom, re.S)[table])
    assert [(name, "hidden" in attrs) for attrs, name in rows] == [("hostile", False), ("plain", True)]
    assert "1 of 2 rows" in dom


def test_the_bundle_runs_its_script_and_no_payload(rendered, tmp_path):
    from evalkit.report.bundle import bundle_run

    out = bundle_run(rendered, tmp_path / "bundle.html")
    dom = dump_dom(out, tmp_path / "profile")
    assert title(dom) != "PWNED" and 'class="ek-filter"' in dom
    assert inline(dom, "script") == [chrome.script()]
