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
from evalkit.render import render_run
from test_render import tags

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
    assert not [t for t, _ in elements if t in ("script", "img", "iframe", "object", "embed")]
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
