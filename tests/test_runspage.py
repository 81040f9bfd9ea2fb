"""`evalkit runs` and runs/index.html (`evalkit.report.runspage`): every run the history records, newest first, with
relative links to the pages its folder holds; rewritten by each run, sweep and diff that records history."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import HOSTILE_SCRIPT
from corpus_factory import cli, make_corpus, specs
from test_render import inline, policy, sha256_source, tags

from evalkit.report import chrome
from evalkit.report.runspage import SHOWN, group_runs, write_runs_page
from evalkit.results.history import HistoryLine
from evalkit.stages.runner import RunOptions, run

CHROMIUM = Path("/usr/bin/chromium")
PLANTED_KEY = "sk-ant-api03-" + "Q" * 40  # a credential typed on the command line


def _links(page: str) -> dict[str, str]:
    """text → href of every link in the page's table."""
    return {re.sub(r"<[^>]+>", "", text): href
            for href, text in re.findall(r'<a href="([^"]+)">(.*?)</a>', page.split("<tbody>", 1)[1])}


def _rows(page: str) -> list[str]:
    return re.findall(r"<tr><td>(.*?)</td>", page.split("<tbody>", 1)[1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs (the second's command planted with script and a key), then `evalkit diff` of them."""
    root = tmp_path_factory.mktemp("runspage")
    corpus = make_corpus(root, members=3)
    runs = root / "runs"
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
        # named against their order in time: the page must order by when, not by name
        for name, argv in (("b-first", ["run", "--backend", "fake"]),
                           ("a-second", ["run", "--set", f"note={HOSTILE_SCRIPT}", "--api-key", PLANTED_KEY])):
            mp.setattr(sys, "argv", ["evalkit", *argv])
            result = run(RunOptions(corpus=corpus, backends=specs("fake"), out=runs / name, notebooks=False,
                                    html=False, history=True))
            assert result.exit_code == 0
            time.sleep(1.1)  # history times are to the second
    finally:
        mp.undo()
    assert cli("report", runs / "b-first").exit_code == 0  # its index.html
    (runs / "b-first" / "memos" / "compare.html").write_text("<!DOCTYPE html><title>compare</title>")
    res = cli("diff", runs / "b-first", runs / "a-second")  # diff.html in a-second; rewrites the runs page
    assert res.exit_code == 0, res.output
    return runs


def test_the_runs_page_lists_every_run_newest_first_with_links_to_pages_that_exist(runs):
    page = (runs / "index.html").read_text(encoding="utf-8")
    assert _rows(page) == ["a-second", "b-first"]
    assert "2 runs in the history" in page and "3/3" in page and "memos · fake: 1.000 (n 3)" in page
    links = _links(page)
    assert links == {"diff": "a-second/diff.html", "run": "b-first/index.html",
                     "compare memos": "b-first/memos/compare.html"}  # a-second has no index.html: no link
    for href in links.values():
        assert (runs / unquote(href)).is_file()
    first = page.split("<tbody>", 1)[1].split("</tr>")[0]
    assert '<a href="a-second/diff.html">diff</a>' in first  # the diff is the second run's


def test_commands_are_escaped_and_scrubbed(runs):
    page = (runs / "index.html").read_text(encoding="utf-8")
    assert "&lt;/script&gt;&lt;script&gt;document.title=" in page  # as text (shell-quoted, then escaped)
    assert "--api-key [ANTHROPIC_API_KEY redacted]" in page
    assert HOSTILE_SCRIPT not in page and PLANTED_KEY not in page and PLANTED_KEY[:20] not in page
    assert PLANTED_KEY[:20] not in (runs / "index.jsonl").read_text(encoding="utf-8")
    assert "evalkit run --backend fake" in page  # the first run's command, as run.json keeps it
    assert inline(page, "script") == [chrome.script()] and sha256_source(chrome.script()) in policy(page)
    assert not [t for t, _ in tags(page) if t in ("img", "iframe", "object", "embed", "link")]
    assert not re.search(r'(href|src)="(https?:)?//', page)  # nothing loaded from elsewhere


def test_evalkit_runs_prints_the_table_and_rewrites_the_page(runs):
    (runs / "index.html").unlink()
    res = cli("runs", "--runs", runs, "--last", 1)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[1].startswith("a-second ") and "3/3" in lines[1] and "memos · fake 1.000 (n 3)" in lines[1]
    assert lines[2] == "… 1 older run(s) not shown" and lines[3] == f"Runs: {runs / 'index.html'}"
    assert _rows((runs / "index.html").read_text(encoding="utf-8")) == ["a-second", "b-first"]


def test_a_foreign_index_is_never_overwritten(tmp_path):
    (tmp_path / "index.jsonl").write_text(json.dumps({"run_id": "r", "time": "t", "task": "x", "member": "m",
                                                      "backend": "b", "status": "scored", "score": 1.0}) + "\n")
    (tmp_path / "index.html").write_text("a run folder's own page")
    res = cli("runs", "--runs", tmp_path)
    assert res.exit_code == 2 and "not evalkit's runs page" in res.output
    assert (tmp_path / "index.html").read_text() == "a run folder's own page"
    assert cli("runs", "--runs", tmp_path / "nowhere").exit_code == 2  # no history: one line, no traceback


def test_a_run_is_its_latest_outcome_per_member_and_backend_held_out_and_errors_apart():
    def line(run_id, time, member, backend="fake", **kw):
        return HistoryLine.from_json({"run_id": run_id, "time": time, "task": "memos", "member": member,
                                      "backend": backend, "status": "scored", **kw}, "index.jsonl")

    rows = group_runs([
        line("r1", "2026-11-01T10:00:00+00:00", "m0", score=0.2, passed=False),
        line("r1", "2026-11-01T11:00:00+00:00", "m0", score=0.8, passed=True),  # the folder run into again
        line("r1", "2026-11-01T10:00:00+00:00", "m1", score=0.6, passed=True),
        line("r1", "2026-11-01T10:00:00+00:00", "m2", score=0.0, passed=False, heldout=True),
        line("r1", "2026-11-01T10:00:00+00:00", "m3", status="error", cause="provider_error"),
        line("r0", "2026-10-01T10:00:00+00:00", "m0", backend="gpt", score=1.0, passed=True),
    ])
    assert [r.run_id for r in rows] == ["r1", "r0"]
    r1 = rows[0]
    assert (r1.members, r1.passed, r1.errors, r1.when) == (4, 2, 1, "2026-11-01T11:00:00+00:00")
    tuned, held = r1.means[("memos", "fake")]["tuned"], r1.means[("memos", "fake")]["heldout"]
    assert tuned == (pytest.approx(0.7), 2) and held == (0.0, 1)  # the error is in no mean


def test_ten_thousand_lines_render_in_seconds_with_the_rest_counted(tmp_path):
    with open(tmp_path / "index.jsonl", "w", encoding="utf-8") as f:
        for i in range(10_000):
            r = i // 10
            f.write(json.dumps({"run_id": f"run-{r:04d}", "time": f"2026-11-01T00:{r // 60:02d}:{r % 60:02d}+00:00",
                                "task": "memos", "member": f"m{i % 10}", "backend": "fake", "status": "scored",
                                "score": 0.5, "passed": True, "command": "evalkit run"}) + "\n")
    t0 = time.perf_counter()
    out, rows, total = write_runs_page(tmp_path)
    took = time.perf_counter() - t0
    page = out.read_text(encoding="utf-8")
    assert total == 1000 and len(_rows(page)) == SHOWN
    assert f"1000 runs in the history (<code>index.jsonl</code>), newest first; the newest {SHOWN} are listed" in page
    assert took < 10, took  # about 0.5 s on one core


def test_a_sweep_rewrites_the_runs_page(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    res = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 1, "--out", tmp_path / "runs" / "sw",
              "--backend", "fake")
    assert res.exit_code == 0, res.output
    page = (tmp_path / "runs" / "index.html").read_text(encoding="utf-8")
    assert _rows(page) == ["sw"] and "2/2" in page


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed")
def test_the_runs_page_opens_in_chromium_with_no_console_errors(runs, tmp_path):
    from test_html_chromium import _with_script, title

    def load(page: Path) -> tuple[str, str]:
        proc = subprocess.run(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=3000", "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
        return proc.stdout, "\n".join(line for line in proc.stderr.splitlines() if ":CONSOLE" in line)

    page = runs / "index.html"
    dom, console = load(page)
    assert console == "" and title(dom) == "evalkit runs"
    assert "ek-sortable" in dom  # the page's one script ran under its policy
    # control: the harness sees a console error (a script the policy refuses)
    _, refused = load(_with_script(page, tmp_path / "bad.html", "document.title='PWNED'", allow=False))
    assert "Content Security Policy" in refused
