"""`evalkit report --scoreboard`: the committed standings, the band, and what changed since the last commit."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from click.testing import CliRunner
from conftest import HOSTILE_IMG, HOSTILE_SCRIPT
from test_render import inline, policy, sha256_source, tags

from evalkit.cli import main
from evalkit.report import chrome
from evalkit.report.boardpage import (
    MEMBERS_CSV,
    board_changes,
    board_csvs,
    previous_board,
    render_board_html,
    standings,
)
from evalkit.results.band import Band
from evalkit.results.scoreboard import Board


def _entry(score: float, passed: bool, run_id: str = "sweep-x", accuracy: float | None = None) -> dict:
    return {"metrics": {"score": score, "field_accuracy": score if accuracy is None else accuracy}, "passed": passed,
            "settings": {"max_tokens": 64},
            "run": {"model": "m", "date": "2026-11-30T10:28:35+00:00", "input_tokens": 10, "output_tokens": 2,
                    "usd": 0.0, "latency_s": 1.5, "replayed": True, "run_id": run_id}}


def _board(entries: dict) -> Board:
    tasks: dict = {}
    for (task, member, backend), e in entries.items():
        tasks.setdefault(task, {}).setdefault(member, {})[backend] = e
    return Board.from_json({"schema_version": 1, "tasks": tasks}, "scoreboard.json")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_board_changes_lists_added_removed_flipped_and_moved():
    before = _board({("t", "a", "x"): _entry(0.5, False), ("t", "b", "x"): _entry(0.9, True),
                     ("t", "c", "x"): _entry(0.2, False), ("t", "d", "x"): _entry(0.3, False)})
    after = _board({("t", "a", "x"): _entry(0.95, True), ("t", "b", "x"): _entry(0.9, True),
                    ("t", "c", "x"): _entry(0.25, False), ("t", "e", "x"): _entry(0.1, False)})
    changes = board_changes(before, after)
    assert {(c["member"], c["change"]) for c in changes.rows} == {
        ("a", "verdict FAIL → PASS"), ("c", "score"), ("d", "removed"), ("e", "added")}
    assert (changes.unchanged, changes.rerun) == (1, 0)


def test_only_entries_whose_figures_moved_are_changes_the_rest_is_one_count():
    """A re-sweep that scored 59 members the same (only their run block is new) and moved one: one row, and
    "59 entries unchanged" — not 60 rows of identical scores."""
    keys = [("t", f"m{i:02d}", "x") for i in range(60)]
    before = _board({k: _entry(0.5, False) for k in keys})
    after = _board({k: _entry(0.5, False, run_id="sweep-y") for k in keys[:59]}
                   | {keys[59]: _entry(0.5, False, run_id="sweep-y", accuracy=0.6)})
    changes = board_changes(before, after)
    assert [(c["member"], c["change"]) for c in changes.rows] == [("m59", "metrics: field_accuracy")]
    assert (changes.unchanged, changes.rerun) == (59, 59)
    html = render_board_html(after, None, changes, "abc1234 (2026-11-30)")
    assert "1 entry changed since abc1234 (2026-11-30); 59 entries unchanged (59 re-run with the same figures)." in html
    what_changed = html.split("<h2>What changed</h2>")[1].split("<h2>")[0]
    assert what_changed.count("<tr>") == 2  # the header and m59
    same = render_board_html(before, None, board_changes(before, before), "abc1234 (2026-11-30)")
    assert "No entry's figures changed since abc1234 (2026-11-30). 60 entries unchanged." in same


def test_standings_per_task_and_backend_held_out_apart():
    board = _board({("memos", "a", "gemma"): _entry(1.0, True), ("memos", "b", "gemma"): _entry(0.5, False),
                    ("memos", "c", "gemma"): _entry(0.25, False), ("memos", "a", "fake"): _entry(1.0, True),
                    ("deeds", "a", "gemma"): _entry(0.75, True)})
    rows = standings(board, heldout={"memos/c"})
    got = [(r["task"], r["backend"], r["members"], r["passed"], r["n"], r["mean"]) for r in rows]
    assert got == [("deeds", "gemma", "tuned", 1, 1, 0.75), ("memos", "fake", "tuned", 1, 1, 1.0),
                   ("memos", "gemma", "tuned", 1, 2, 0.75), ("memos", "gemma", "held-out", 0, 1, 0.25)]
    tuned = rows[2]
    assert tuned["ci"][0] <= 0.75 <= tuned["ci"][1] and tuned["ci"] != [0.75, 0.75]  # a bootstrap over a, b
    html = render_board_html(board, None, None, None, heldout={"memos/c"})
    top = html.split("<h2>Standings</h2>")[1].split("<h2>What changed</h2>")[0]  # the standings come first
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in top.split("<tr>")[2:]]
    assert [c[:5] for c in cells] == [["deeds", "gemma", "tuned", "1/1", "0.750"], ["memos", "fake", "tuned", "1/1", "1"],
                                      ["memos", "gemma", "tuned", "1/2", "0.750"],
                                      ["memos", "gemma", "held-out", "0/1", "0.250"]]


def test_report_scoreboard_renders_standings_band_and_changes_since_the_last_commit(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    board = corpus / "scoreboard.json"
    board.write_text(json.dumps(_board({("memos", "a", "gemma"): _entry(0.5, False)}).to_json()))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "board")
    assert previous_board(board)[0] is None  # never changed: nothing to compare with
    board.write_text(json.dumps(_board({("memos", "a", "gemma"): _entry(0.75, True),
                                        ("memos", HOSTILE_IMG, HOSTILE_SCRIPT): _entry(0.1, False)}).to_json()))
    (corpus / "band.json").write_text(json.dumps({"schema_version": 1, "tasks": {"memos": {"members": 2, "metrics": {
        "field_accuracy": {"band": 0.02, "ci": [0.25, 0.75], "gated": True, "mean": 0.5, "spread": 0.0}}}}}))
    out = tmp_path / "board.html"
    result = CliRunner().invoke(main, ["report", "--scoreboard", "--corpus", str(corpus), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert "2 entries changed since" in html and "0 entries unchanged." in html and "verdict FAIL → PASS" in html and ">added<" in html
    assert "[0.250, 0.750]" in html and ">field_accuracy<" in html  # the band of the gated metric
    assert ">PASS<" in html and "2026-11-30 10:28" in html and "{&quot;max_tokens&quot;: 64}" in html
    assert "&lt;img src=x" in html and "<img" not in html and "&lt;/script&gt;&lt;script&gt;" in html
    assert inline(html, "script") == [chrome.script()] and sha256_source(chrome.script()) in policy(html)
    assert not [t for t, _ in tags(html) if t in ("img", "iframe")]


def test_the_board_page_shows_held_out_figures_apart():
    from evalkit.report.boardpage import render_board_html

    board = _board({("memos", "a", "gemma"): _entry(0.75, True), ("memos", "b", "gemma"): _entry(0.25, False)})
    band = Band.from_json({"schema_version": 1, "tasks": {"memos": {
        "members": 1, "metrics": {"score": {"band": 0.02, "ci": [0.7, 0.8], "gated": True, "mean": 0.75, "n": 1}},
        "heldout": {"members": 1, "metrics": {"score": {"band": 0.02, "ci": [0.2, 0.3], "gated": True, "mean": 0.25,
                                                         "n": 1}}}}}}, "band.json")
    html = render_board_html(board, band, None, None, heldout={"memos/b"})
    rows = [r for r in html.split("<tr>") if ">score<" in r]
    assert any(">tuned<" in r and "[0.700, 0.800]" in r for r in rows)
    assert any(">held-out<" in r and "[0.200, 0.300]" in r for r in rows)
    member_rows = [r for r in html.split("<tr>") if r.startswith(("<td>a<", "<td>b<"))]
    assert [">held out<" in r for r in member_rows] == [False, True]


def test_a_1000_entry_board_page_keeps_every_section_and_cuts_its_tables(tmp_path):
    """10,000 rows took 8 s to open: the member table and the changes show their first `TABLE_ROWS` rows, a line
    under each says how many there are and names the CSV beside the page that holds them all."""
    n, rows = 1000, chrome.TABLE_ROWS
    assert n > rows
    entries = {("memos", f"m{i:04d}", "fake"): _entry(i / n, i % 2 == 0) for i in range(n)}
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    board = corpus / "scoreboard.json"
    board.write_text(json.dumps(_board(dict(list(entries.items())[:1])).to_json()))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "board")
    board.write_text(json.dumps(_board(entries).to_json()))
    out = tmp_path / "page" / "index.html"
    result = CliRunner().invoke(main, ["report", "--scoreboard", "--corpus", str(corpus), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    heads = re.findall(r"<h[12][^>]*>(.*?)</h[12]>", html)
    assert heads == ["evalkit scoreboard", "Standings", "What changed", "memos"]
    assert f"{n} entries: 1 task(s)" in html and f"1/{n}" not in html and f">{n // 2}/{n}<" in html  # standings: all
    changed, members = html.split("<h2>What changed</h2>")[1].split("<h2>memos</h2>")
    assert f"{n - 1} entries changed since" in changed and changed.count("<tr>") == rows + 1  # header + first rows
    assert f'first {rows:,} of {n - 1:,} rows; the full table is in <a href="changes.csv">changes.csv</a>' in changed
    assert members.count("<tr>") == rows + 1 and ">m0499<" in members and ">m0500<" not in members
    assert f'first {rows:,} of {n:,} rows; the full table is in <a href="scoreboard.csv">scoreboard.csv</a>' in members
    full = (out.parent / "scoreboard.csv").read_text().splitlines()
    assert len(full) == n + 1 and full[0].startswith("task,member,held out,backend,verdict,score,")
    assert full[-1].startswith("memos,m0999,,fake,FAIL,0.999,")
    assert len((out.parent / "changes.csv").read_text().splitlines()) == n  # header + 999 added
    assert len(html) < 400_000  # not 1,000 rows twice over


def test_a_small_board_page_is_not_cut():
    board = _board({("memos", "a", "gemma"): _entry(0.75, True), ("memos", "b", "gemma"): _entry(0.25, False)})
    html = render_board_html(board, None, board_changes(_board({}), board), "abc")
    assert "ek-cut" not in html and html.count(">gemma<") == 5  # standings, 2 changes, 2 members: every row


def test_the_full_table_csv_keeps_data_as_text():
    board = _board({("memos", "=HYPERLINK(\"http://x\")", "@fake"): _entry(0.5, False)})
    rows = board_csvs(board, None, None)[MEMBERS_CSV].splitlines()
    assert rows[1].startswith('memos,"\'=HYPERLINK(""http://x"")",,\'@fake,FAIL,0.5,')  # never run as a formula
    assert '"{""max_tokens"": 64}"' in rows[1]  # a structure is its JSON
