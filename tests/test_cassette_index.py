"""The cassette index: one pass or the sidecar index to open, a record parsed only when it is served,
and the sidecar trusted only while it describes the file exactly (appends, truncation, edits)."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from corpus_factory import specs

import evalkit.backends.cassette as cassette_mod
from evalkit.backends.base import Completion, Request
from evalkit.backends.cassette import (
    Cassette,
    RecordingBackend,
    ReplayBackend,
    cassette_key,
    encode_record,
    index_path,
    load_records,
    make_record,
)
from evalkit.backends.resolve import plan, resolve_backends
from evalkit.errors import CassetteCorrupt, CassetteError
from evalkit.execution.pool import Job, run_jobs


class Echo:
    """A live backend stand-in: answers every request with its member."""

    label, spec, model, provider = "e", "echo", "echo-1", "echo"

    async def complete(self, request: Request) -> Completion:
        return Completion(record={"member": request.member}, raw=json.dumps({"member": request.member}), model="echo-1")

    async def aclose(self) -> None:
        return None


def reqs(n: int, pad: int = 200, start: int = 0) -> list[Request]:
    return [Request(member=f"t/m{i}", call_type="extract", system="Extract.", user=f"Document {i}\n" + "x" * pad,
                    schema={"type": "object"}) for i in range(start, start + n)]


def record(path: Path, requests: list[Request]) -> RecordingBackend:
    backend = RecordingBackend(Echo(), path)
    run_jobs([Job(backend, r) for r in requests], max_concurrency=1)  # closing saves the index
    return backend


def replay(path: Path, requests: list[Request]) -> list[Completion]:
    backend = ReplayBackend("e", path)
    return run_jobs([Job(backend, r) for r in requests])


def members(completions: list[Completion]) -> list[str]:
    return [c.record["member"] for c in completions]


@pytest.fixture
def indexed(monkeypatch):
    """Index every cassette however small (the default keeps small ones, the committed ones, free of it)."""
    monkeypatch.setattr(cassette_mod, "INDEX_MIN_BYTES", 0)


@pytest.fixture
def scans(monkeypatch) -> list[Path]:
    """Every pass over a cassette's lines (an open that did not reuse a sidecar index)."""
    seen: list[Path] = []
    scan = Cassette._scan

    def spy(self, f, st):
        seen.append(self.path)
        return scan(self, f, st)

    monkeypatch.setattr(Cassette, "_scan", spy)
    return seen


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The key of every record line the cassette module parses in full."""
    seen: list[str] = []
    loads = json.loads

    class CountingJson:
        def __getattr__(self, name):
            return getattr(json, name)

        @staticmethod
        def loads(text, *a, **kw):
            out = loads(text, *a, **kw)
            if isinstance(out, dict) and "key" in out and "response" in out:
                seen.append(out["key"])
            return out

    monkeypatch.setattr(cassette_mod, "json", CountingJson())
    return seen


def test_index_is_saved_on_close_and_reused_while_the_file_is_unchanged(indexed, scans, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(cas, reqs(6))
    assert index_path(cas) == tmp_path / "c.idx" and index_path(cas).is_file()
    assert json.loads(index_path(cas).read_text())["records"] == 6  # plain JSON text, like every artefact
    assert members(replay(cas, reqs(6)[::-1])) == [f"t/m{i}" for i in range(5, -1, -1)]
    assert scans == []  # the recorder kept the index current: nothing re-read the lines
    # the plan and the duplicate-cassette guard see the same counts and files as without an index
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(cas.read_bytes())
    resolved = resolve_backends(specs(f"a=cassette:path={cas}", f"b=cassette:path={copy}"))
    p = plan(resolved, reqs(8), strict_replay=True)  # a miss is a guard only then (issue 12.7)
    assert [b.replay_hits for b in p.backends] == [6, 6] and p.backends[0].cassette_records == 6
    assert {g.kind for g in p.guards} == {"duplicate_cassette", "cassette_miss"}
    assert scans == [copy] and not index_path(copy).exists()  # resolving and planning write nothing


def test_small_cassettes_get_no_sidecar_index(tmp_path):
    cas = tmp_path / "small.jsonl"
    record(cas, reqs(3))
    replay(cas, reqs(3))
    assert cas.stat().st_size < cassette_mod.INDEX_MIN_BYTES and not index_path(cas).exists()


def test_a_record_is_parsed_only_when_it_is_served(indexed, parses, tmp_path):
    cas = tmp_path / "lazy.jsonl"
    record(cas, reqs(5))
    keys = [cassette_key(r, "echo-1") for r in reqs(5)]
    parses.clear()
    index_path(cas).unlink()
    c = Cassette.load(cas)  # one pass: only the last line is parsed in full (a torn line is told apart there)
    assert len(c) == 5 and c.models() == ["echo-1"] and c.key_counts() == Counter(keys)
    assert parses == [keys[4]]
    c.save_index()
    parses.clear()
    c = Cassette.load(cas)  # from the sidecar index: nothing parsed
    assert len(c) == 5 and parses == []
    assert c.take(keys[2])["member"] == "t/m2" and parses == [keys[2]]
    assert c.take(keys[2]) is None and c.available(keys[2]) == 0 and c.recorded_count(keys[2]) == 1
    assert parses == [keys[2]]


def test_lines_off_the_fast_path_still_load(indexed, tmp_path):
    """A record written with other key order, escapes or CRLF is parsed in full at open, and replays."""
    cas = tmp_path / "mixed.jsonl"
    completion = Completion(record={"member": "x"}, raw='{"member": "x"}', model="m")
    a, b, c = reqs(3)
    lines = [json.dumps(make_record(a, 'model "quoted" é', "p", completion), sort_keys=True) + "\n",
             "\n",
             encode_record(make_record(b, 'model "quoted" é', "p", completion)).decode().replace("\n", "\r\n"),
             json.dumps(make_record(c, "plain", "p", completion), ensure_ascii=True) + "\n"]
    cas.write_text("".join(lines), encoding="utf-8")
    for _ in range(2):  # one pass, then the saved index
        cassette = Cassette.load(cas)
        assert len(cassette) == 3 and cassette.models() == ['model "quoted" é', "plain"]
        assert cassette.take(cassette_key(b, 'model "quoted" é'))["member"] == "t/m1"
        cassette.save_index()


def test_append_by_another_process_invalidates_the_index(indexed, scans, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(cas, reqs(3))
    extra = reqs(1, start=3)[0]
    line = encode_record(make_record(extra, "echo-1", "echo", Completion(record={"member": "t/m3"},
                                                                          raw='{"member": "t/m3"}')))
    subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1], 'ab').write(sys.stdin.buffer.read())",
                    str(cas)], input=line, check=True)
    assert members(replay(cas, reqs(4))) == ["t/m0", "t/m1", "t/m2", "t/m3"]
    assert scans == [cas]  # the file grew: the index was rebuilt (and saved by the replay's close)
    assert len(Cassette.load(cas)) == 4 and scans == [cas]


def test_recording_beside_another_writer_never_saves_an_index_that_misses_its_lines(indexed, tmp_path):
    cas = tmp_path / "shared.jsonl"
    record(cas, reqs(2))
    backend = RecordingBackend(Echo(), cas)
    first, theirs, second = reqs(3, start=2)
    run_jobs([Job(backend, first)], close=False)
    with open(cas, "ab") as f:  # another run recording into the same cassette
        f.write(encode_record(make_record(theirs, "echo-1", "echo", Completion(record={"member": "t/m3"},
                                                                                raw='{"member": "t/m3"}'))))
    run_jobs([Job(backend, second)])
    assert json.loads(index_path(cas).read_text())["records"] == 2  # the index of before, not one missing t/m3
    assert members(replay(cas, reqs(5))) == [f"t/m{i}" for i in range(5)]


def test_truncation_is_never_trusted_even_with_size_and_mtime_restored(indexed, scans, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(cas, reqs(4))
    data = cas.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    cas.write_bytes(data[:last])  # the last record cut off
    assert len(Cassette.load(cas)) == 3 and scans == [cas]
    # the same size and mtime as indexed, other bytes: the probes of the file's ends catch it
    st = os.stat(cas)
    Cassette.load(cas).save_index()
    key = cassette_key(reqs(3)[2], "echo-1")
    cas.write_bytes(data[:last].replace(key.encode(), b"f" * 64))
    os.utime(cas, ns=(st.st_atime_ns, st.st_mtime_ns))
    scans.clear()
    c = Cassette.load(cas)
    assert scans == [cas] and c.available(key) == 0 and c.available("f" * 64) == 1


def test_an_edit_changes_what_replays(indexed, scans, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(cas, reqs(3))
    cas.write_bytes(cas.read_bytes().replace(b'\\"t/m1\\"}', b'\\"t/mX\\"}'))  # same length, new content
    assert members(replay(cas, reqs(3))) == ["t/m0", "t/mX", "t/m2"] and scans == [cas]


def test_an_index_that_no_longer_fits_the_file_is_caught_at_replay(indexed, tmp_path):
    """Size, mtime and both ends unchanged but a key edited in the middle: the served line is checked."""
    cas = tmp_path / "c.jsonl"
    requests = reqs(40, pad=4000)
    record(cas, requests)
    data = cas.read_bytes()
    assert len(data) > 2 * cassette_mod._PROBE_BYTES + 10_000
    key = cassette_key(requests[20], "echo-1")
    st = os.stat(cas)
    edited = data.replace(key.encode(), b"0" * 64)
    assert edited != data
    cas.write_bytes(edited)
    os.utime(cas, ns=(st.st_atime_ns, st.st_mtime_ns))
    c = Cassette.load(cas)
    with pytest.raises(CassetteCorrupt, match=rf"c.jsonl:22: .*no longer holds record {key}.*delete .*c.idx"):
        c.take(key)


def test_torn_last_line_with_an_index(indexed, scans, tmp_path, capsys):
    cas = tmp_path / "torn.jsonl"
    record(cas, reqs(3))
    whole = cas.read_bytes()
    cas.write_bytes(whole[:-40])
    for _ in range(2):  # one pass, then the saved index: the same warning, the same records
        c = Cassette.load(cas)
        assert "torn.jsonl: line 4 is torn" in capsys.readouterr().err and len(c) == 2
        c.save_index()
    assert scans == [cas]
    record(cas, reqs(3))  # resuming cuts the fragment, records the missing call, saves the index
    assert "removed the torn last line" in capsys.readouterr().err
    c = Cassette.load(cas)
    assert len(c) == 3 and c.torn is None and scans == [cas] and capsys.readouterr().err == ""
    assert members(replay(cas, reqs(3))) == ["t/m0", "t/m1", "t/m2"]


def test_corrupt_middle_line_is_reported_with_its_number(indexed, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(cas, reqs(4))
    lines = cas.read_bytes().splitlines(keepends=True)[1:]  # the records, after the format header
    bad = tmp_path / "bad.jsonl"
    # its prefix is a record's, its body is not JSON (a damaged disk block, a bad hand edit)
    damaged = lines[2].replace(b'"response": {', b'"response": {{')
    bad.write_bytes(lines[0] + b"\n" + lines[1] + damaged + lines[3])
    c = Cassette.load(bad)  # the open checks only each line's shape
    assert len(c) == 4
    with pytest.raises(CassetteCorrupt, match=r"bad.jsonl:4: corrupt cassette line \(Expecting"):
        c.take(cassette_key(reqs(4)[2], "echo-1"))
    assert c.take(cassette_key(reqs(4)[3], "echo-1"))["member"] == "t/m3"  # the others still replay
    with pytest.raises(CassetteCorrupt, match=r"bad.jsonl:4: "):
        load_records(bad)  # tools read every record, so they see it at once
    with pytest.raises(CassetteError, match=r"bad.jsonl:4: "):
        replay(bad, reqs(4))
    # a line without a record's shape is still refused at open, with its number
    bad.write_bytes(lines[0] + b"\n" + b'{"key": "nope"}\n' + lines[3])
    with pytest.raises(CassetteCorrupt, match=r"bad.jsonl:3: corrupt cassette line: 'key'"):
        Cassette.load(bad)


def test_fifo_of_repeated_keys_survives_the_index(indexed, tmp_path):
    cas = tmp_path / "twice.jsonl"
    twin = reqs(1)[0]
    completions = [Completion(record={"member": f"take {n}"}, raw=json.dumps({"member": f"take {n}"})) for n in (1, 2)]
    cas.write_bytes(b"".join(encode_record(make_record(twin, "echo-1", "echo", c)) for c in completions))
    Cassette.load(cas).save_index()
    c = Cassette.load(cas)
    assert c.key_counts() == Counter({cassette_key(twin, "echo-1"): 2})
    assert members(replay(cas, [twin, twin])) == ["take 1", "take 2"]


@pytest.mark.parametrize("a, b", [("", ""), ("abc", ""), ("Extract the fields.", "Extract all the fields."),
                                  ("héllo wörld\n" * 30, "hello world\n" * 29)])
def test_quick_ratio_is_difflibs(a, b):
    assert cassette_mod._quick_ratio(a, b, Counter(b)) == difflib.SequenceMatcher(None, a, b).quick_ratio()
