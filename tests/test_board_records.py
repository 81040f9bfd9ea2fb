"""Typed records of the run-folder and board files (`evalkit._util.typed`): summary.json, the scoreboard, sweep.json
(and its sidecar), band.json. Each reads and writes back the same bytes; a wrong value is one error naming the
file and the key; a file without ``schema_version`` is version 1; the pages read a backend's figures from
summary.json, never a second count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_factory import cli, make_corpus, specs

from evalkit._util.jsonio import dumps, read_json, write_json
from evalkit._util.typed import RecordError
from evalkit.board.sweep import MemberResult, SweepFile, _append_members, read_sweep, sweep
from evalkit.compare import sides as compare
from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.results import runfolder
from evalkit.results.band import BandError, read_band, write_band
from evalkit.results.scoreboard import Board, ScoreboardError, read_board, update_scoreboard, write_board
from evalkit.results.summary import Summary, read_summary
from evalkit.stages.runner import Outcome, RunOptions, run

PIPE = '''
import re

def extract(text, task):
    account = re.search(r"ACC-[0-9]+", text).group(0)
    if account == "ACC-001":
        raise RuntimeError("pipeline crashed")
    return {"account_id": account, "rate": 0.9}
'''


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A fake-backend sweep and a two-backend run (one member of the pipeline errors), and a board of the sweep."""
    root = tmp_path_factory.mktemp("records")
    corpus = make_corpus(root, members=3)
    (root / "pipe.py").write_text(PIPE)
    out = root / "sw"
    sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=out, workers=1, notebooks=False))
    board = root / "board.json"
    update_scoreboard(out, board, corpus=corpus)
    mixed = root / "mixed"
    run(RunOptions(corpus=corpus, backends=specs("fake", f"py=python:{root / 'pipe.py'}:extract"), out=mixed,
                   notebooks=False, html=False))
    return root, out, board, mixed


def same_bytes(path: Path, write) -> None:
    """`write(path)` (read → model → write) leaves the file's bytes as they were."""
    before = path.read_bytes()
    write(path)
    assert path.read_bytes() == before


def test_summary_json_of_a_real_run_round_trips_byte_for_byte(swept):
    _, out, _, mixed = swept
    for folder in (out, mixed):
        s = read_summary(folder)
        assert isinstance(s, Summary) and Summary.from_json(s.to_json(), "x") == s
        same_bytes(folder / runfolder.SUMMARY_JSON, lambda p: write_json(p, read_summary(p.parent).to_json()))
    py = read_summary(mixed).tasks["memos"].backend("py")
    assert (py.errors, py.causes, py.calls.calls) == (1, {"pipeline_exception": 1}, 3)  # typed, not a dict chain
    assert read_summary(mixed / "nowhere") is None


def test_board_and_sweep_json_of_a_real_sweep_round_trip_byte_for_byte(swept):
    _, out, board, _ = swept
    b = read_board(board)
    assert isinstance(b, Board) and Board.from_json(b.to_json(), "x") == b
    assert [(t, m, label) for t, m, label, _ in b.entries()] == [("memos", f"m{i}", "fake") for i in range(3)]
    assert b.tasks["memos"]["m0"]["fake"].passed is True
    same_bytes(board, lambda p: write_board(p, read_board(p)))
    s = read_sweep(out)
    assert isinstance(s, SweepFile) and SweepFile.from_json(s.to_json(), "x") == s
    assert s.members["memos/m1"].outcomes[0].backend == "fake"
    same_bytes(out / runfolder.SWEEP_JSON, lambda p: write_json(p, read_sweep(p.parent).to_json()))


def test_the_committed_scoreboard_and_band_round_trip_byte_for_byte(tmp_path):
    for name, read, write in (("scoreboard.json", read_board, write_board), ("band.json", read_band, write_band)):
        copy = tmp_path / name
        copy.write_bytes((DEFAULT_CORPUS / name).read_bytes())
        model = read(copy)
        assert type(model).from_json(model.to_json(), "x") == model
        same_bytes(copy, lambda p, read=read, write=write: write(p, read(p)))


def test_sweep_sidecar_lines_are_read_as_members(tmp_path):
    out = tmp_path / "sw"
    out.mkdir()
    o = Outcome("memos", "m0", "fake", "scored", score=1, passed=True, metrics={"n": 2, "ok": True})
    _append_members(out, {"memos/m0": MemberResult("memos", "m0", "ran", [o], run_dir="members/memos/m0")})
    got = read_sweep(out).members["memos/m0"]
    assert got.status == "ran" and got.outcomes[0].score == 1 and got.outcomes[0].metrics == {"n": 2, "ok": True}
    line = json.loads((out / runfolder.SWEEP_LOG).read_text())
    assert type(line["member"]["outcomes"][0]["score"]) is int  # 1 stays 1, never 1.0


def test_numbers_and_booleans_keep_their_type():
    board = {"schema_version": 1, "tasks": {"t": {"m": {"b": {"metrics": {"n": 1, "f": 1.0, "ok": True, "x": None},
                                                               "run": {"usd": 0, "latency_s": 1.5}}}}}}
    assert dumps(Board.from_json(board, "b").to_json()) == dumps(board)


@pytest.mark.parametrize("name, data, read, error, where", [
    ("summary.json", {"tasks": {"memos": {"backends": [{"backend": "a", "members": 1, "scored": 1, "passed": 1,
                                                         "failed": 0, "errors": "none"}]}}},
     lambda p: read_summary(p.parent), RecordError, "tasks.memos.backends[0].errors: expected a whole number, got 'none'"),
    ("scoreboard.json", {"schema_version": 1, "tasks": {"t": {"m": {"b": {"passed": "yes"}}}}},
     read_board, ScoreboardError, "tasks.t.m.b.passed: expected true or false, got 'yes'"),
    ("sweep.json", {"schema_version": 1, "members": {"t/m": {"status": "ran", "exit_code": 1.5}}},
     lambda p: read_sweep(p.parent), RecordError, "members.t/m.exit_code: expected a whole number, got 1.5"),
    ("band.json", {"schema_version": 1, "tasks": {"t": {"metrics": {"score": {"band": "wide"}}}}},
     read_band, BandError, "tasks.t.metrics.score.band: expected a number, got 'wide'"),
])
def test_a_wrong_type_is_one_error_naming_the_file_and_the_key_path(tmp_path, name, data, read, error, where):
    path = tmp_path / name
    write_json(path, data)
    with pytest.raises(error) as e:
        read(path)
    assert str(e.value).startswith(str(path)) and where in str(e.value) and "\n" not in str(e.value)
    assert e.value.exit_code == 3


def test_a_wrong_value_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "board.json"
    with pytest.raises(ScoreboardError, match=r"tasks\.t\.m\.b\.metrics\.score: expected"):
        write_board(path, {"tasks": {"t": {"m": {"b": {"metrics": {"score": "high"}}}}}})
    assert not path.exists()


def test_the_cli_reports_a_corrupt_board_in_one_line(tmp_path):
    corpus = tmp_path / "corpus"
    write_json(corpus / "scoreboard.json", {"schema_version": 1, "tasks": {"t": {"m": {"b": {"run": {"usd": "free"}}}}}})
    res = cli("report", "--scoreboard", "--corpus", corpus, "--out", tmp_path / "b.html")
    assert res.exit_code == 3 and "tasks.t.m.b.run.usd: expected a number, got 'free'" in res.output
    assert "Traceback" not in res.output


def test_old_version_less_files_are_read_as_version_1_and_a_newer_one_is_refused(tmp_path):
    band = {"tasks": {"t": {"members": 2, "metrics": {"score": {"band": 0.05, "gated": True}}}}}
    write_json(tmp_path / "band.json", band)
    assert read_band(tmp_path / "band.json").metric("t", "score").band == 0.05
    write_json(tmp_path / "board.json", {"tasks": {"t": {"m": {"b": {"passed": False}}}}})
    assert read_board(tmp_path / "board.json").tasks["t"]["m"]["b"].passed is False
    write_board(tmp_path / "board.json", read_board(tmp_path / "board.json"))  # written again: with its version
    assert read_json(tmp_path / "board.json")["schema_version"] == 1
    write_json(tmp_path / "sweep.json", {"members": {"t/m": {"status": "failed", "message": "boom"}}})
    assert read_sweep(tmp_path).members["t/m"].message == "boom"
    write_json(tmp_path / "summary.json", {"tasks": {}})  # summary.json never had a version key
    assert read_summary(tmp_path).tasks == {}
    write_json(tmp_path / "band.json", {**band, "schema_version": 2})
    with pytest.raises(BandError, match="schema_version 2 is not 1"):
        read_band(tmp_path / "band.json")


def test_the_compare_calls_table_reads_summary_json_not_a_second_count(swept):
    """One owner of a backend's error rate: the comparison shows what summary.json says (here edited to
    disagree with the member rows, which a second count would have followed)."""
    _, _, _, mixed = swept
    c = compare.load(mixed, "memos")
    before = {r["backend"]: r for r in compare.calls_figures(c)}
    assert (before["py"]["errors"], before["py"]["error_rate"]) == (1, pytest.approx(1 / 3))
    path = mixed / runfolder.SUMMARY_JSON
    data = read_json(path)
    original = path.read_bytes()
    try:
        data["tasks"]["memos"]["backends"][1].update(errors=3, error_rate=1.0)
        write_json(path, data)
        after = {r["backend"]: r for r in compare.calls_figures(c)}
        assert (after["py"]["errors"], after["py"]["error_rate"]) == (3, 1.0)
    finally:
        path.write_bytes(original)


def test_the_task_page_shows_the_figures_summary_json_holds(swept, capsys):
    """The task report computes its per-backend counts and calls with summary.json's own function
    (`task_summary`), so the page and the file cannot disagree (a backend's error rate 1.0 on one, 0.0 on the
    other was the bug)."""
    from evalkit.report.frames import backend_calls, load_scores
    from evalkit.report.views import report_summary
    from evalkit.results.summary import task_summary

    _, _, _, mixed = swept
    page = task_summary(mixed, "memos")
    assert page == read_summary(mixed).tasks["memos"]
    py = backend_calls(page).set_index("backend").loc["py"]
    assert (py.calls, py.errors, py.error_rate) == (3, 1, pytest.approx(1 / 3))
    members, items = load_scores(mixed, "memos")
    report_summary(members, items, page)
    assert "backend py · 3 member run(s) · 0 PASS · 2 FAIL · 1 ERROR (error rate 33%)" in capsys.readouterr().out


def test_history_lines_round_trip_and_a_wrong_one_names_its_line(swept, tmp_path):
    from evalkit.results.history import append_history, read_history

    _, _, _, mixed = swept
    index = tmp_path / "index.jsonl"
    assert append_history(mixed, index) == 6
    lines = read_history(index)
    error = next(x for x in lines if x.status == "error")
    assert error.backend == "py" and error.cause == "pipeline_exception" and error.score is None
    assert "".join(jsonio_line(x.to_json()) for x in lines) == index.read_text()  # read → write: the same bytes
    with open(index, "a", encoding="utf-8") as f:  # what the reader skips: not a history line, or torn
        f.write('"not a line"\n{"no": "run id"}\n{"run_id": "r", "ta')
    assert read_history(index) == lines
    index.write_text(index.read_text() + '\n{"run_id": "r", "score": "high"}\n')
    with pytest.raises(RecordError, match=rf"{index}:10: score: expected a number, got 'high'"):
        read_history(index)


def jsonio_line(data):
    from evalkit._util.jsonio import line

    return line(data)
