"""Formats under fault: no NaN / Infinity in any JSON evalkit writes, and cassettes that are checked
(strict JSON, typed records by key path, a format header, duplicated copies) and that say why a
request is not covered."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from corpus_factory import cli, make_corpus, specs

from evalkit._util.jsonio import write_json
from evalkit.backends.cassette import (
    FORMAT,
    HEADER_KEY,
    Cassette,
    RecordingBackend,
    concat,
    encode_record,
    load_records,
)
from evalkit.errors import CassetteCorrupt, NonFinite
from evalkit.results.history import append_history
from evalkit.stages.runner import RunOptions, run


def strict(text: str):
    """json.loads as a strict parser reads JSON: NaN / Infinity refused."""
    def refuse(name):
        raise ValueError(f"{name} in JSON")
    return json.loads(text, parse_constant=refuse)


def strict_folder(folder: Path) -> int:
    """Parse every .json / .jsonl file under `folder` strictly; return how many files were read."""
    n = 0
    for p in sorted(folder.rglob("*.json*")):
        if p.suffix == ".json":
            strict(p.read_text())
        elif p.suffix == ".jsonl":
            for line in p.read_text().splitlines():
                if line.strip():
                    strict(line)
        n += 1
    return n


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A 3-member corpus and a cassette of it recorded from a python pipeline that reads each document right
    (in-process, no notebooks)."""
    root = tmp_path_factory.mktemp("formats")
    corpus = make_corpus(root, members=3)
    cas = root / "fake.jsonl"
    record(corpus, cas, root / "runs" / "rec")
    return corpus, cas


PIPE = """
def extract(text, task):
    words = text.split()
    return {"account_id": words[1], "rate": float(words[-1].rstrip("."))}
"""


def record(corpus: Path, cas: Path, out: Path) -> None:
    pipe = corpus.parent / "pipe.py"
    pipe.write_text(PIPE)
    run(RunOptions(corpus=corpus, backends=specs(f"g=python:{pipe}:extract"), record=[f"g={cas}"], out=out,
                   notebooks=False, html=False, report=False, workers=1))


@pytest.fixture
def case(recorded, tmp_path):
    corpus, cas = recorded
    copy = tmp_path / "c.jsonl"
    shutil.copy(cas, copy)
    return corpus, copy


def replay_cli(corpus: Path, cas: Path, out: Path, *extra):
    return cli("run", "--corpus", corpus, "--backend", f"g=cassette:path={cas}", "--no-html", "--out", out, *extra)


def replay_api(corpus: Path, cas: Path, out: Path):
    """A replay run in-process without notebooks (fast): its outcomes."""
    result = run(RunOptions(corpus=corpus, backends=specs(f"g=cassette:path={cas}"), out=out, notebooks=False,
                            html=False, report=False, workers=1))
    return [(o.member, o.status, o.passed) for o in result.outcomes]


ALL_PASS = [(f"m{i}", "scored", True) for i in range(3)]


def rewrite(cas: Path, index: int, change) -> None:
    """Record `index` (0-based, after the header) changed by `change(rec)`, written as evalkit writes a line
    (so its prefix still takes the fast path: only serving it parses the body)."""
    lines = cas.read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[1 + index])
    change(rec)
    lines[1 + index] = encode_record(rec) if not isinstance(rec, bytes) else rec
    cas.write_bytes(b"".join(lines))


def test_new_cassette_starts_with_its_format_header_and_round_trips(recorded, tmp_path):
    corpus, cas = recorded
    first = json.loads(cas.read_text().splitlines()[0])
    assert first[HEADER_KEY] == FORMAT == 1 and set(first) >= {"created", "evalkit"}
    records = load_records(cas)
    assert len(records) == 3 and all(HEADER_KEY not in r for r in records)
    # concatenated twice over with another recording: a header mid-file of the same format is fine
    other = tmp_path / "other.jsonl"
    record(corpus, other, tmp_path / "rec2")
    both = tmp_path / "both.jsonl"
    concat([cas, other], both)
    assert both.read_text().count(HEADER_KEY) == 2 and len(Cassette.load(both, warn=False)) == 6
    assert replay_api(corpus, both, tmp_path / "out") == ALL_PASS


def test_headerless_cassette_still_replays(case, tmp_path):
    corpus, cas = case
    cas.write_text("".join(cas.read_text().splitlines(keepends=True)[1:]))  # as every cassette before the header
    assert "key" in json.loads(cas.read_text().splitlines()[0])
    assert replay_api(corpus, cas, tmp_path / "out") == ALL_PASS


def test_future_format_is_refused_naming_its_version(case, tmp_path):
    corpus, cas = case
    cas.write_text(json.dumps({HEADER_KEY: 7, "created": "2030-01-01T00:00:00Z"}) + "\n"
                   + "".join(cas.read_text().splitlines(keepends=True)[1:]))
    with pytest.raises(CassetteCorrupt, match=r"c.jsonl:1: cassette format 7 is not one this evalkit reads"):
        Cassette.load(cas)
    res = replay_cli(corpus, cas, tmp_path / "out")
    assert res.exit_code == 6 and "format 7" in res.output and "Traceback" not in res.output
    assert not list((tmp_path / "out").rglob("extraction.json"))  # refused before anything was replayed


@pytest.mark.parametrize("where, change", [
    ("usage", lambda r: r["response"]["usage"].update(output_tokens=float("nan"))),
    ("latency", lambda r: r["response"].update(latency_s=float("inf"))),
    ("answer", lambda r: r["response"].update(content='{"account_id": "ACC-001", "rate": NaN}')),
])
def test_nan_in_a_cassette_is_exit_6_naming_file_and_line(case, tmp_path, where, change):
    corpus, cas = case
    lines = cas.read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[2])
    change(rec)
    lines[2] = (json.dumps(rec, ensure_ascii=False) + "\n").encode()  # Python's json writes NaN / Infinity
    cas.write_bytes(b"".join(lines))
    assert b"NaN" in lines[2] or b"Infinity" in lines[2]
    res = replay_cli(corpus, cas, tmp_path / "out")
    assert res.exit_code == 6, res.output
    assert "c.jsonl:3: corrupt cassette line" in res.output and "Traceback" not in res.output
    if where == "answer":
        assert "'response.content'" in res.output
    strict_folder(tmp_path / "out")  # whatever the run wrote before stopping is strict JSON


@pytest.mark.parametrize("change, path", [
    (lambda r: r["response"].update(content=5), "'response.content' must be a string"),
    (lambda r: r["response"].update(usage="x"), "'response.usage' must be an object"),
    (lambda r: r["response"]["usage"].update(input_tokens="812"), "'response.usage.input_tokens'"),
    (lambda r: r.pop("response"), "'response' must be an object, and is missing"),
    (lambda r: r["request"]["settings"].update(temperature="hot"), "'request.settings.temperature'"),
])
def test_wrong_typed_record_body_is_exit_6_naming_line_and_key_path(case, tmp_path, change, path):
    corpus, cas = case
    rewrite(cas, 1, change)
    assert len(Cassette.load(cas)) == 3  # the prefix is a record's: the open indexes it unparsed
    res = replay_cli(corpus, cas, tmp_path / "out")
    assert res.exit_code == 6, res.output
    assert "c.jsonl:3: corrupt cassette line" in res.output and path in res.output, res.output
    assert "Traceback" not in res.output


def test_a_cassette_concatenated_twice_warns_with_both_line_numbers(case, tmp_path, capsys):
    corpus, cas = case
    twice = tmp_path / "twice.jsonl"
    concat([cas, cas], twice)  # header, 3 records, header, the same 3 records
    capsys.readouterr()
    c = Cassette.load(twice)
    err = capsys.readouterr().err
    for a, b in ((2, 6), (3, 7), (4, 8)):
        assert err.count(f"line {b} repeats line {a} byte for byte") == 1, err
    assert len(c.duplicates) == 3
    # recording onto it is refused; equal keys with different records (FIFO repeats) are not duplicates
    with pytest.raises(CassetteCorrupt, match=r"line 6 repeats line 2 .*before recording onto it"):
        RecordingBackend(SimpleNamespace(label="g", spec="python", model="m"), twice)
    repeats = tmp_path / "repeats.jsonl"
    lines = cas.read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[1])
    rec["timestamp"] = "2030-01-01T00:00:00.000Z"  # the same request recorded again later
    repeats.write_bytes(b"".join(lines) + encode_record(rec))
    capsys.readouterr()
    c = Cassette.load(repeats)
    assert c.duplicates == [] and "repeats line" not in capsys.readouterr().err
    assert c.recorded_count(rec["key"]) == 2


def test_a_changed_setting_is_named_when_nothing_is_covered(case, tmp_path):
    corpus, cas = case
    res = replay_cli(corpus, cas, tmp_path / "out", "--set", "temperature=0.5")
    assert res.exit_code == 6, res.output
    assert res.output.count("temperature: recorded 0.0, requested 0.5") == 3, res.output
    strict_replay = replay_cli(corpus, cas, tmp_path / "strict", "--set", "temperature=0.5", "--strict-replay")
    assert strict_replay.exit_code == 6 and "also differs: temperature: recorded 0.0, requested 0.5" in strict_replay.output
    dry = replay_cli(corpus, cas, tmp_path / "dry", "--set", "temperature=0.5", "--dry-run")
    assert "all: the request changed since recording: temperature: recorded 0.0, requested 0.5" in dry.output, dry.output


def test_every_json_a_run_writes_is_strict_even_when_a_pipeline_returns_nan(recorded, tmp_path):
    corpus, _ = recorded
    pipe = tmp_path / "nanpipe.py"
    pipe.write_text("def extract(text, task):\n"
                    "    acc = text.split()[1]\n"
                    "    return {'account_id': acc, 'rate': float('nan') if acc == 'ACC-001' else 0.5}\n")
    out = tmp_path / "runs" / "r1"
    result = run(RunOptions(corpus=corpus, backends=specs(f"p=python:{pipe}:extract"), out=out, notebooks=False,
                            html=False, report=False, workers=1, history=True))
    statuses = {o.member: o.status for o in result.outcomes}
    assert statuses["m1"] == "error" and statuses["m0"] == "scored"
    assert "rate" in next(o.message for o in result.outcomes if o.member == "m1")
    assert (out / "summary.json").is_file() and (tmp_path / "runs" / "index.jsonl").is_file()
    assert strict_folder(tmp_path / "runs") >= 8


def test_history_of_an_old_run_with_nan_records_null(recorded, tmp_path):
    """A score.json written before NaN was refused: its history line holds null, never NaN."""
    corpus, cas = recorded
    out = tmp_path / "runs" / "old"
    replay_api(corpus, cas, out)
    score = out / "memos" / "m0" / "g" / "score.json"
    data = json.loads(score.read_text())
    data["score"], data["metrics"]["precision"] = float("nan"), float("inf")
    score.write_text(json.dumps(data))  # as Python's json wrote it then
    append_history(out)
    lines = [strict(line) for line in (tmp_path / "runs" / "index.jsonl").read_text().splitlines()]
    m0 = next(line for line in lines if line["member"] == "m0")
    assert m0["score"] is None and m0["metrics"]["precision"] is None


def test_the_one_writer_refuses_nan_naming_file_and_key_path(tmp_path):
    target = tmp_path / "x.json"
    with pytest.raises(NonFinite, match=r"x.json: tasks.a\[1\] is not a finite number"):
        write_json(target, {"tasks": {"a": [1.0, float("inf")]}})
    assert not target.exists() and not list(tmp_path.iterdir())  # nothing written, no temp file left
    write_json(target, {"ok": [1.5, None]})
    assert strict(target.read_text()) == {"ok": [1.5, None]}


@pytest.mark.parametrize("text, outcome", [('{"rate": 1e999}', "malformed"), ('{"rate": -1E400, "x": 1}', "malformed"),
                                           ('prose {"rate": 1e999} then {"rate": 0.5}', "recovered"),
                                           ('{"rate": 1.5e3}', "clean")])
def test_a_number_past_a_double_s_range_is_no_json_the_record_can_hold(text, outcome):
    """Found by recording the local model at temperature 0.8: an answer holding `1e999` parsed as infinity,
    and writing its extraction.json then stopped the whole run (exit 3). It is no JSON number evalkit can keep:
    that object is not the record (malformed, or the next complete object, recovered)."""
    from evalkit._util.jsonio import nonfinite_path
    from evalkit.backends.parse import parse_record

    record, got = parse_record(text)
    assert got == outcome
    assert record is None or nonfinite_path(record) is None
