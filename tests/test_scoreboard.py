"""The scoreboard file and the run history: format, secrets, and concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from corpus_factory import make_corpus, specs

from evalkit.backends.spec import redact_stored
from evalkit.errors import ScoreboardError
from evalkit.results.history import append_history, history_frame, read_history, trend_frame
from evalkit.results.runfolder import scan
from evalkit.results.scoreboard import dumps, load_board, update_scoreboard, write_json
from evalkit.stages.runner import RunOptions, RunResult, run

WRITERS = 20


@pytest.fixture(scope="module")
def run20(tmp_path_factory):
    """One notebook-free run of a 20-member corpus with the fake backend."""
    root = tmp_path_factory.mktemp("sb")
    corpus = make_corpus(root, members=WRITERS)
    result = run(RunOptions(corpus=corpus, backends=specs("fake"), out=root / "runs" / "r1", notebooks=False))
    assert [o.status for o in result.outcomes] == ["scored"] * WRITERS
    return root, corpus, result


def test_entry_shape_and_stable_pretty_json(run20, tmp_path):
    root, corpus, result = run20
    board = tmp_path / "scoreboard.json"
    written = update_scoreboard(result, board, corpus=corpus)
    assert len(written) == WRITERS
    text = board.read_text()
    assert text == dumps(json.loads(text)) and text.endswith("}\n")  # sorted keys, indent 2, trailing newline
    data = load_board(board)
    assert data["schema_version"] == 1
    entry = data["tasks"]["memos"]["m0"]["fake"]
    assert set(entry) == {"run", "run_folder", "archive", "truth_sha256", "settings", "metrics", "passed"}
    run = entry["run"]
    for key in ("date", "model", "evalkit_version", "input_tokens", "output_tokens", "usd", "backend", "request_sha256"):
        assert key in run, key
    assert run["backend"] == {"label": "fake", "spec": "fake"} and run["model"] == "fake" and run["run_id"] == "r1"
    assert entry["metrics"]["score"] == 1.0 and entry["passed"] is True and entry["settings"] == {}
    assert (board.parent / entry["run_folder"] / "score.json").is_file()
    import hashlib
    assert entry["truth_sha256"] == hashlib.sha256((corpus / "memos" / "m0" / "truth.yaml").read_bytes()).hexdigest()
    # Writing the same run again changes nothing.
    update_scoreboard(result, board, corpus=corpus)
    assert board.read_text() == text


def test_settings_keep_only_non_default_overrides(tmp_path):
    corpus = make_corpus(tmp_path, members=1)
    task_yaml = corpus / "memos" / "task.yaml"
    task_yaml.write_text(task_yaml.read_text() + "settings: {max_tokens: 2048, temperature: 0.0}\n")
    result = run(RunOptions(corpus=corpus, backends=specs("fake"), out=tmp_path / "run", threshold=0.5,
                            notebooks=False))
    update_scoreboard(result, corpus / "scoreboard.json")
    entry = load_board(corpus / "scoreboard.json")["tasks"]["memos"]["m0"]["fake"]
    assert entry["settings"] == {"max_tokens": 2048, "threshold": 0.5}


def test_secrets_never_reach_the_board():
    assert redact_stored("openai:url=http://x,model=m,api_key=sk-123") == "openai:url=http://x,model=m,api_key=***"
    assert redact_stored("anthropic:model=c,token=abc") == "anthropic:model=c,token=***"
    assert redact_stored("fake") == "fake"


def test_corrupt_board_is_a_named_error(tmp_path):
    p = tmp_path / "scoreboard.json"
    p.write_text("{not json")
    with pytest.raises(ScoreboardError, match="not valid JSON"):
        load_board(p)
    write_json(p, {"schema_version": 99, "tasks": {}})
    with pytest.raises(ScoreboardError, match="schema_version"):
        load_board(p)
    assert not list(tmp_path.glob("*.tmp"))


def test_scan_skips_half_written_and_foreign_score_files(run20, tmp_path):
    import shutil

    root, corpus, result = run20
    run = shutil.copytree(result.run_dir, tmp_path / "r1")
    found = scan(run)
    assert len(found) == WRITERS
    (found[0].home / "score.json").write_text('{"member": "memos/m0", "met')  # a writer killed mid-file
    (found[1].home / "score.json").write_text("[1, 2]\n")  # valid JSON, not a score
    assert [s.member for s in scan(run)] == [s.member for s in found[2:]]


def _writer(args) -> None:
    run_dir, outcome, board, corpus, index = args
    result = RunResult(run_dir=Path(run_dir), outcomes=[outcome])
    update_scoreboard(result, board, corpus=corpus)
    append_history(result, index)


def test_twenty_concurrent_writers_lose_no_entry(run20, tmp_path):
    root, corpus, result = run20
    board, index = tmp_path / "scoreboard.json", tmp_path / "index.jsonl"
    jobs = [(str(result.run_dir), o, str(board), str(corpus), str(index)) for o in result.outcomes]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(job,)) for job in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    data = load_board(board)
    assert sorted(data["tasks"]["memos"]) == sorted(f"m{i}" for i in range(WRITERS))
    assert all(set(v) == {"fake"} for v in data["tasks"]["memos"].values())
    lines = read_history(index)
    assert len(lines) == WRITERS and len({line.member for line in lines}) == WRITERS
    assert not list(tmp_path.glob(".scoreboard.json.*"))  # no temp file left behind


def test_history_lines_are_idempotent_and_chartable(run20, tmp_path):
    root, corpus, result = run20
    index = tmp_path / "index.jsonl"
    assert append_history(result, index) == WRITERS
    assert append_history(result, index) == 0  # the same run is not appended twice
    line = read_history(index)[0]
    assert {"run_id", "time", "task", "member", "backend", "metrics", "cost", "score", "passed"} <= set(line.to_json())
    assert line.run_id == "r1" and line.cost == {"calls": 1, "input_tokens": 0, "output_tokens": 0, "usd": 0.0}
    frame = history_frame(index)
    assert set(frame.metric) >= {"score", "field_accuracy"}
    trend = trend_frame(index, "memos", "score")
    assert list(trend.value) == [1.0] and list(trend.members) == [WRITERS]


def test_default_index_lives_beside_the_runs(run20):
    root, corpus, result = run20
    assert scan(result.run_dir)[0].run_id == "r1"
    from evalkit.results.history import index_path

    assert index_path(result.run_dir) == root / "runs" / "index.jsonl"


# --------------------------------------------------------------------------- scale (issue 27)


def _old_member(corpus, task, member, cache):
    """`scoreboard._member` before issue 27, verbatim: the reference `_old_update_scoreboard` runs with."""
    from evalkit.corpus.tasks import find_task
    from evalkit.errors import EvalkitError

    if task not in cache.tasks:
        try:
            cache.tasks[task] = find_task(corpus, task)
        except EvalkitError:
            cache.tasks[task] = None
    t = cache.tasks[task]
    if t is None:
        return None
    try:
        return t.member(member)
    except EvalkitError:
        return None


def _old_update_scoreboard(run_result, board_path, justifications=None, *, corpus=None, sources=None):
    """`update_scoreboard` before issue 27, verbatim (an fsync per archive file, run.json read per entry,
    each member loaded twice): what the new one's bytes must equal."""
    from evalkit.corpus.tasks import sources_dir
    from evalkit.results import scoreboard as sb
    from evalkit.status import SCORED

    board_path = Path(board_path)
    root, keys = sb._selected(run_result)
    corpus = Path(corpus) if corpus is not None else board_path.parent
    src = sources_dir(sources)
    found = [h for s in scan(root, status=None) if keys is None or (s.task, s.member, s.backend) in keys
             if (h := s.as_headline()).status == SCORED]
    cache = sb.Loaded()
    entries = [(s, sb.entry_for(s, board_path.parent, corpus, src, cache)) for s in found]
    for s, entry in entries:
        just = sb._justifications_for(s.task, s.backend, justifications)
        if just:
            entry["justifications"] = just
    with sb.edit_board(board_path) as board:
        for s, entry in entries:
            member = sb._member(corpus, s.task, s.member, cache)
            pointer = member is not None and member.manifest.source.is_pointer
            write_json(board_path.parent / entry["archive"], sb.archived(s.extraction(), pointer))
            board["tasks"].setdefault(s.task, {}).setdefault(s.member, {})[s.backend] = entry
    return [(s.task, s.member, s.backend) for s, _ in entries]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and not p.name.endswith(".lock")}


def test_update_writes_the_same_bytes_as_before(run20, tmp_path, monkeypatch):
    """The board and every archive file, byte for byte the old implementation's, on a board that already
    holds another entry, with a justification."""
    from evalkit.results import scoreboard as sb

    root, corpus, result = run20
    standing = {"schema_version": 1, "tasks": {"other": {"x": {"fake": {"metrics": {"score": 0.5}, "passed": False}}}}}
    just = {"memos/fake/score": "accepted in review"}
    old, new = tmp_path / "old" / "scoreboard.json", tmp_path / "new" / "scoreboard.json"  # same depth: same run_folder
    for board in (old, new):
        board.parent.mkdir()
        write_json(board, standing)
    with monkeypatch.context() as m:
        m.setattr(sb, "_member", _old_member)
        assert _old_update_scoreboard(result, old, just, corpus=corpus) == update_scoreboard(result, new, just, corpus=corpus)
    assert len(_files(new.parent)) == WRITERS + 1
    assert _files(new.parent) == _files(old.parent)
    assert load_board(new)["tasks"]["memos"]["m3"]["fake"]["justifications"] == {"score": {"reason": "accepted in review"}}


def test_update_syncs_once_not_per_archive_file(run20, tmp_path, monkeypatch):
    """One fsync (the board's) and one sync (every archive, before the board names them), whatever the
    entries: an fsync per archive file took minutes at 10,000."""
    import os

    root, corpus, result = run20
    calls = {"fsync": 0, "sync": 0}
    real_fsync = os.fsync

    def fsync(fd):
        calls["fsync"] += 1
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "sync", lambda: calls.__setitem__("sync", calls["sync"] + 1))
    assert len(update_scoreboard(result, tmp_path / "scoreboard.json", corpus=corpus)) == WRITERS
    assert calls == {"fsync": 1, "sync": 1}


def test_a_crash_while_writing_archives_leaves_the_old_board(run20, tmp_path, monkeypatch):
    from evalkit.results import scoreboard as sb

    root, corpus, result = run20
    board = tmp_path / "scoreboard.json"
    write_json(board, {"schema_version": 1, "tasks": {}})
    before = board.read_bytes()
    real, written = sb.write_json, []

    def dies_at_the_fifth(path, data):
        if len(written) == 5:
            raise KeyboardInterrupt  # the process stopped mid-update
        written.append(path)
        real(path, data)

    monkeypatch.setattr(sb, "write_json", dies_at_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        update_scoreboard(result, board, corpus=corpus)
    assert board.read_bytes() == before and len(written) == 5
    assert not list(tmp_path.rglob("*.tmp"))
