"""The typed records of run.json, extraction.json, score.json and judgments.json (`evalkit.results.records`):
each read and written again is the same bytes, a wrong type is refused naming the file and the key, and a file
without a schema version is version 1."""

import json
from types import SimpleNamespace

import pytest

import evalkit
from evalkit._util.jsonio import canonical_sha, dumps
from evalkit.board.scaffold import EXAMPLE_MEMBER, EXAMPLE_TASK, init_project
from evalkit.errors import EXIT_INVALID
from evalkit.results import runfolder
from evalkit.results.records import ExtractionRecord, JudgmentsRecord, RecordError, RunRecord, ScoreRecord


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
               runfolder.read_run_json(run_dir).backends[0]]
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
