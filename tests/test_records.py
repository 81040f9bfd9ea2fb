"""The typed records of every file evalkit writes (`evalkit.results.records`): run.json, extraction.json,
score.json, judgments.json, pairwise.json, judge.json, diff.json, .evalkit.batches.json and the lock note. Each
read and written again is the same bytes, a wrong type is refused naming the file and the key, and a file without
a schema version is version 1."""

import json
import os
from types import SimpleNamespace

import pytest
from test_judge import python_judge, run_graph, two_cassettes

import evalkit
from evalkit._util.jsonio import canonical_sha, dumps, read_json
from evalkit.board.scaffold import EXAMPLE_MEMBER, EXAMPLE_TASK, init_project
from evalkit.compare.diff import diff_runs
from evalkit.errors import EXIT_INVALID
from evalkit.results import runfolder
from evalkit.results.records import (
    BatchesRecord,
    DiffRecord,
    ExtractionRecord,
    JudgeRecord,
    JudgmentsRecord,
    LockNote,
    PairwiseRecord,
    RecordError,
    RunRecord,
    ScoreRecord,
)


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    """A run of the fake backend (scored in-process): (run folder, the member × backend's home)."""
    root = tmp_path_factory.mktemp("records")
    init_project(root / "proj")
    result = evalkit.run(root / "proj" / "corpus", ["fake"], out=root / "run", notebooks=False)
    assert result.exit_code == 0
    return result.run_dir, runfolder.member_dir(result.run_dir, EXAMPLE_TASK, EXAMPLE_MEMBER, "fake")


def _copy(fake_run, tmp_path):
    run_dir, home = fake_run
    out = tmp_path / "run"
    (out / home.relative_to(run_dir)).mkdir(parents=True)
    for rel in (runfolder.RUN_JSON, home.relative_to(run_dir) / runfolder.EXTRACTION,
                home.relative_to(run_dir) / runfolder.SCORE):
        (out / rel).write_bytes((run_dir / rel).read_bytes())
    return out, out / home.relative_to(run_dir)


def test_each_record_read_and_written_again_is_the_same_bytes(fake_run, tmp_path):
    run_dir, home = fake_run
    run, extraction, score = (runfolder.read_run_json(run_dir), runfolder.read_extraction(home),
                              runfolder.read_score(home))
    assert (type(run), type(extraction), type(score)) == (RunRecord, ExtractionRecord, ScoreRecord)
    for record, path in ((run, run_dir / runfolder.RUN_JSON), (extraction, home / runfolder.EXTRACTION),
                         (score, home / runfolder.SCORE)):
        assert dumps(record.to_json()).encode() == path.read_bytes(), path.name

    # each through its one writer into a fresh folder: the same bytes, and read back the same record
    again = tmp_path / "again"
    runfolder.write_run_json(again, run)
    runfolder.write_extraction(again, extraction)
    rest = {k: v for k, v in score.to_json().items() if k not in ("member", "backend", "run", "reference")}
    runfolder.write_score(again, score.member, extraction, SimpleNamespace(to_json=lambda: rest))
    for name in (runfolder.RUN_JSON, runfolder.EXTRACTION, runfolder.SCORE):
        src = run_dir / name if name == runfolder.RUN_JSON else home / name
        assert (again / name).read_bytes() == src.read_bytes(), name
    assert runfolder.read_run_json(again) == run
    assert runfolder.read_extraction(again) == extraction and runfolder.read_score(again) == score

    judgments = {"member": score.member, "backend": "fake", "judge": {"spec": "fake", "model": "fake"},
                 "mode": "reference", "extraction_sha256": canonical_sha(extraction.record),
                 "axes": {"entities": {"status": "ok", "accepted": []}}}
    runfolder.write_judgments(again, judgments)
    assert runfolder.read_judgments(again, extraction) == JudgmentsRecord(judgments)
    assert (again / runfolder.JUDGMENTS).read_bytes() == dumps(judgments).encode()


def test_readers_give_typed_fields(fake_run):
    run_dir, home = fake_run
    run, extraction, score = (runfolder.read_run_json(run_dir), runfolder.read_extraction(home),
                              runfolder.read_score(home))
    assert [b.label for b in run.backends] == ["fake"] and run.members == [f"{EXAMPLE_TASK}/{EXAMPLE_MEMBER}"]
    assert run.started_for("fake") == run.backends[0].started and run.heldout == frozenset()
    assert extraction.backend.spec == "fake" and extraction.run.parse == "clean" and extraction.failure is None
    assert score.is_scored and score.passed is True and score.score == 1.0 and score.rows
    assert score.run == extraction.run and score.member == extraction.member


@pytest.mark.parametrize("name, change, key", [
    ("score", lambda d: d | {"passed": "yes"}, "passed"),
    ("score", lambda d: d | {"items": {"a": 1}}, "items"),
    ("extraction", lambda d: d | {"run": {**d["run"], "usd": "free"}}, "run.usd"),
    ("extraction", lambda d: d | {"backend": "fake"}, "backend"),
    ("run", lambda d: d | {"backends": [{"label": 3}]}, "backends[0].label"),
    ("run", lambda d: d | {"heldout": "t/m"}, "heldout"),
])
def test_a_wrong_type_is_refused_naming_the_file_and_the_key(fake_run, tmp_path, name, change, key):
    run_dir, home = _copy(fake_run, tmp_path)
    path = {"score": home / runfolder.SCORE, "extraction": home / runfolder.EXTRACTION,
            "run": run_dir / runfolder.RUN_JSON}[name]
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    read = {"score": lambda: runfolder.read_score(home), "extraction": lambda: runfolder.read_extraction(home),
            "run": lambda: runfolder.read_run_json(run_dir)}[name]
    with pytest.raises(RecordError) as err:
        read()
    message = str(err.value)
    assert message.startswith(f"{path}: key {key!r} must be ") and "\n" not in message, message
    assert err.value.exit_code == EXIT_INVALID


def test_a_file_that_is_not_an_object_is_refused_and_unreadable_judgments_are_none(fake_run, tmp_path):
    run_dir, home = _copy(fake_run, tmp_path)
    (home / runfolder.SCORE).write_text("[1, 2]")
    with pytest.raises(RecordError, match=r"score\.json: the file must be an object, not list"):
        runfolder.read_score(home)
    (home / runfolder.JUDGMENTS).write_text(json.dumps({"extraction_sha256": 7}))
    assert runfolder.read_judgments(home) is None  # verdicts that are not judgments.json are none


def test_a_file_without_a_version_is_version_1_and_an_unknown_version_is_refused(fake_run, tmp_path):
    run_dir, home = _copy(fake_run, tmp_path)
    for path in (run_dir / runfolder.RUN_JSON, home / runfolder.EXTRACTION, home / runfolder.SCORE):
        assert b"schema_version" not in path.read_bytes()  # version 1 is written as it always was
    assert runfolder.read_score(home).schema_version == 1 and runfolder.read_run_json(run_dir).schema_version == 1
    path = home / runfolder.EXTRACTION
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": 1}))
    assert runfolder.read_extraction(home).schema_version == 1
    path.write_text(json.dumps({**data, "schema_version": 2}))
    with pytest.raises(RecordError, match=r"extraction\.json: schema_version 2 is not one this evalkit reads"):
        runfolder.read_extraction(home)


def test_an_old_extraction_without_status_settings_or_version_is_read(tmp_path):
    """An extraction.json from before statuses, settings and sha keys: read, its missing parts None."""
    old = {"member": "t/m", "backend": {"label": "b", "spec": "fake"}, "record": {"a": 1}, "raw": "{\"a\": 1}",
           "run": {"parse": "clean", "usd": 0.0}}
    (tmp_path / runfolder.EXTRACTION).write_text(json.dumps(old))
    ext = runfolder.read_extraction(tmp_path)
    assert ext.schema_version == 1 and ext.failure is None and ext.record == {"a": 1}
    assert ext.run.settings is None and ext.run.calls is None and ext.request_sha256 is None
    assert ext.backend.model is None and ext.to_json() == old


def test_run_json_merge_keeps_earlier_backends_and_is_a_record(tmp_path):
    runfolder.write_run_json(tmp_path, {"started": "t1", "backends": [{"label": "a", "started": "t1"}],
                                        "members": ["t/m0"], "heldout": ["t/m0"]})
    merged = runfolder.write_run_json(tmp_path, {"started": "t2", "backends": [{"label": "a", "started": "t2"},
                                                                                  {"label": "b", "started": "t2"}],
                                                 "members": ["t/m1"]})
    assert merged == runfolder.read_run_json(tmp_path)
    assert [(b.label, b.started) for b in merged.backends] == [("a", "t2"), ("b", "t2")]
    assert merged.heldout == {"t/m0"} and merged.members == ["t/m0", "t/m1"] and merged.started_for("c") == "t2"


def test_records_are_not_dicts(fake_run):
    """No reader walks a record as the file's dict: no ``[key]``, ``get``, ``in`` or ``**``; the typed properties
    (and ``to_json`` for a writer) are the only way in. A record read through `scan` is the typed one too."""
    run_dir, home = fake_run
    found = runfolder.scan(run_dir)
    assert found and all(isinstance(s.record, ScoreRecord) for s in found)
    records = [runfolder.read_run_json(run_dir), runfolder.read_extraction(home), runfolder.read_score(home),
               found[0].record, found[0].score(), found[0].samples()[0], JudgmentsRecord({"axes": {}}),
               runfolder.read_extraction(home).run, runfolder.read_extraction(home).backend,
               runfolder.read_run_json(run_dir).backends[0], PairwiseRecord({"pairs": []}), JudgeRecord(),
               DiffRecord({"tasks": {}}), BatchesRecord({"fake": []}), LockNote({"pid": 1})]
    for record in records:
        with pytest.raises(TypeError):
            record["status"]  # noqa: B018 - the indexing is what is tested
        with pytest.raises(TypeError):
            "status" in record  # noqa: B015
        with pytest.raises(TypeError):
            {**record}  # noqa: B018
        assert not hasattr(record, "get") and not hasattr(record, "keys")
        assert isinstance(record.to_json(), dict)
    score = runfolder.read_score(home)
    assert found[0].record.to_json() == score.to_json() == json.loads((home / runfolder.SCORE).read_text())


def test_to_json_of_some_keys_keeps_absent_keys_absent_and_nulls_null():
    """What a writer copying part of a file (the scoreboard's archive) needs: the keys, as the file holds them."""
    ext = ExtractionRecord({"member": "t/m", "cause": None, "record": {"a": 1}})
    assert ext.to_json(keys=("member", "cause", "message")) == {"member": "t/m", "cause": None}


# -- the task and run files: pairwise.json, judge.json, diff.json, .evalkit.batches.json, the lock note -------------

@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    """A graph run of two cassettes judged by the python fake judge in both modes: pairwise.json and judge.json."""
    root = tmp_path_factory.mktemp("judged")
    run_graph(root / "run", two_cassettes(root), judge=python_judge(root), judge_mode="both")
    return root / "run"


BATCHES = {"fake": [{"id": "batch_1", "keys": ["k1", "k2"]}], "other": []}  # what `backends.batch` keeps per label


def test_pairwise_and_judge_json_of_a_judged_run_read_and_written_again_are_the_same_bytes(judged_run, tmp_path):
    path = judged_run / "encyclopedia" / runfolder.PAIRWISE
    pw = runfolder.read_pairwise(judged_run, "encyclopedia")
    assert isinstance(pw, PairwiseRecord) and pw.task == "encyclopedia" and pw.backends == ["alpha", "beta"]
    assert pw.pairs and pw.items and {(r["a"], r["b"]) for r in pw.pairs} == {("alpha", "beta")}
    assert pw.among(["alpha"]).pairs == [] and pw.among(["alpha", "beta"]) == pw
    for given in (pw, pw.to_json()):  # the record or its mapping: the same bytes
        runfolder.write_pairwise(tmp_path, "encyclopedia", given)
        assert (tmp_path / "encyclopedia" / runfolder.PAIRWISE).read_bytes() == path.read_bytes()

    path = judged_run / runfolder.JUDGE_JSON
    judge = JudgeRecord.from_json(read_json(path), path)
    assert judge.mode == "both" and judge.requests and judge.errors == 0 and judge.judge["spec"].startswith("python:")
    runfolder.write_judge_json(tmp_path, judge)
    assert (tmp_path / runfolder.JUDGE_JSON).read_bytes() == path.read_bytes()


def test_diff_json_batches_and_the_lock_note_read_and_written_again_are_the_same_bytes(fake_run, tmp_path):
    run_dir, _ = fake_run
    first = runfolder.write_diff(tmp_path / "a", diff_runs(run_dir, run_dir))  # what `evalkit diff` writes
    diff = runfolder.read_diff(tmp_path / "a")
    assert isinstance(diff, DiffRecord) and diff == runfolder.read_diff(first)
    assert diff.a == diff.b == str(run_dir) and diff.config == [] and EXAMPLE_TASK in diff.tasks
    assert runfolder.write_diff(tmp_path / "b", diff).read_bytes() == first.read_bytes()

    runfolder.write_batches(tmp_path, BATCHES)
    batches = runfolder.read_batches(tmp_path)
    assert isinstance(batches, BatchesRecord) and batches.by_label == BATCHES
    assert runfolder.read_batches(tmp_path / "none").by_label == {}  # no batches submitted
    runfolder.write_batches(tmp_path / "b", batches)
    assert (tmp_path / "b" / runfolder.BATCHES).read_bytes() == (tmp_path / runfolder.BATCHES).read_bytes()
    assert (tmp_path / runfolder.BATCHES).read_bytes() == dumps(BATCHES).encode()

    with runfolder.hold(tmp_path / "held"):
        path = tmp_path / "held" / runfolder.LOCK_HOLDER
        note = LockNote.from_json(read_json(path), path)
        assert note.pid == os.getpid() and note.host and note.since and note.command
        assert dumps(note.to_json()).encode() == path.read_bytes()


def _minimal(tmp_path):
    """Each new file, hand-made and minimal: (its record, the path it is at, its reader)."""
    files = {"pairwise": (tmp_path / "t" / runfolder.PAIRWISE, {"task": "t", "pairs": [], "items": []},
                          lambda: runfolder.read_pairwise(tmp_path, "t")),
             "judge": (tmp_path / runfolder.JUDGE_JSON, {"mode": "reference", "usd": 0.5},
                       lambda: JudgeRecord.from_json(read_json(tmp_path / runfolder.JUDGE_JSON),
                                                     tmp_path / runfolder.JUDGE_JSON)),
             "diff": (tmp_path / runfolder.DIFF_JSON, {"a": "x", "b": "y", "config": [], "tasks": {}},
                      lambda: runfolder.read_diff(tmp_path)),
             "batches": (tmp_path / runfolder.BATCHES, BATCHES, lambda: runfolder.read_batches(tmp_path)),
             "lock": (tmp_path / runfolder.LOCK_HOLDER, {"pid": 1, "host": "h", "command": "evalkit run", "since": "t"},
                      lambda: LockNote.from_json(read_json(tmp_path / runfolder.LOCK_HOLDER),
                                                 tmp_path / runfolder.LOCK_HOLDER))}
    (tmp_path / "t").mkdir()
    return files


@pytest.mark.parametrize("name, change, key", [
    ("pairwise", lambda d: d | {"pairs": {"a": 1}}, "pairs"),
    ("judge", lambda d: d | {"usd": "free"}, "usd"),
    ("diff", lambda d: d | {"tasks": []}, "tasks"),
    ("batches", lambda d: d | {"fake": "batch_1"}, "fake"),
    ("lock", lambda d: d | {"pid": "1"}, "pid"),
])
def test_a_new_file_of_a_wrong_type_is_refused_naming_the_file_and_the_key(tmp_path, name, change, key):
    path, data, read = _minimal(tmp_path)[name]
    path.write_text(json.dumps(change(data)))
    cls = {"pairwise": PairwiseRecord, "judge": JudgeRecord, "diff": DiffRecord, "batches": BatchesRecord,
           "lock": LockNote}[name]
    with pytest.raises(RecordError) as err:
        cls.from_json(read_json(path), path)
    assert str(err.value).startswith(f"{path}: key {key!r} must be ") and err.value.exit_code == EXIT_INVALID
    if name == "pairwise":
        assert read() is None  # as judgments.json: verdicts that are not pairwise.json are none
        return
    with pytest.raises(RecordError, match=f"key {key!r} must be "):
        read()
    if name in ("judge", "diff", "batches"):  # the writer refuses it too: nothing unchecked is written
        write = {"judge": runfolder.write_judge_json, "diff": runfolder.write_diff,
                 "batches": runfolder.write_batches}[name]
        with pytest.raises(RecordError, match=f"key {key!r} must be "):
            write(tmp_path / "out", change(data))


@pytest.mark.parametrize("name", ["pairwise", "judge", "diff", "batches", "lock"])
def test_a_new_file_without_a_version_is_version_1_and_an_unknown_version_is_refused(tmp_path, name):
    path, data, read = _minimal(tmp_path)[name]
    path.write_text(json.dumps(data))
    record = read()
    assert record.schema_version == 1 and record.to_json() == data
    path.write_text(json.dumps({**data, "schema_version": 1}))
    assert read().schema_version == 1
    path.write_text(json.dumps({**data, "schema_version": 2}))
    if name == "pairwise":
        assert read() is None
        with pytest.raises(RecordError, match="schema_version 2 is not one this evalkit reads"):
            PairwiseRecord.from_json(read_json(path), path)
    else:
        with pytest.raises(RecordError, match=f"{path.name}: schema_version 2 is not one this evalkit reads"):
            read()
