"""Cassettes: record, replay, resume, misses, corruption, guards, dry-run plans, the failure sidecar."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corpus_factory import specs
from servers.fixtures import _clean_env, oai, req  # noqa: F401 - fixtures
from servers.openai_fake import OpenAIFake

from evalkit.backends.cassette import Cassette, ReplayBackend, cassette_key, concat, load_records
from evalkit.backends.failures import Failure, FailureLog, read_failures, sidecar_path
from evalkit.backends.resolve import build_backends, check_guards, open_backends, plan, resolve_backends
from evalkit.errors import CassetteCorrupt, CassetteError, CassetteMiss, UsageError
from evalkit.execution.pool import Job, run_jobs

TESTS = Path(__file__).resolve().parent


def live(server) -> str:
    return f"g=openai:url={server.url}/v1,model=gemma-3-270m,timeout=5,max_retries=1"


def members(n: int, word: str = "Extract") -> list:
    return [req(f"deals/m{i:02d}", user=f"{word} the fields.\nDocument {i}: Acme {i} signed on day {i}.") for i in range(n)]


def record(server, cassette: Path, requests, **kw):
    backends = build_backends(specs(live(server)), [f"g={cassette}"])
    return run_jobs([Job(backends[0], r) for r in requests], **kw)


def replay(cassette: Path, requests, label: str = "g"):
    backends = build_backends(specs(f"{label}=cassette:path={cassette}"))
    return run_jobs([Job(backends[0], r) for r in requests])


def same(a, b) -> bool:
    keys = ("record", "raw", "parse", "model", "input_tokens", "output_tokens", "usd", "finish_reason", "truncated")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def test_record_then_replay_is_identical_and_makes_no_calls(oai, tmp_path):
    cas = tmp_path / "gemma.jsonl"
    oai.script.append({"content": '```json\n{"echo": "fenced", "chars": 1}\n```'})  # a recovered answer replays too
    recorded = record(oai, cas, members(4), max_concurrency=1)
    assert oai.count == 4
    replayed = replay(cas, members(4))
    assert oai.count == 4  # zero calls
    assert all(same(a, b) for a, b in zip(recorded, replayed))
    assert recorded[0].parse == replayed[0].parse == "recovered"
    assert all(c.replayed and c.calls == 0 for c in replayed)
    rec = load_records(cas)[0]
    assert set(rec) == {"key", "call_type", "provider", "model", "member", "timestamp", "request", "response"}
    assert rec["provider"] == "openai" and rec["model"] == "gemma-3-270m" and rec["timestamp"].endswith("Z")
    assert rec["request"]["settings"] == {"max_tokens": 64, "temperature": 0.0}
    assert rec["key"] == cassette_key(members(1)[0], "gemma-3-270m")
    assert not sidecar_path(cas).read_text()  # created eagerly, empty: nothing failed


def test_key_covers_exactly_the_semantic_request():
    base = req()
    k = cassette_key(base, "m")
    import dataclasses

    for change in ({"system": "x"}, {"user": "x"}, {"schema": {"type": "object"}}, {"max_tokens": 65},
                   {"temperature": 0.5}, {"call_type": "judge.reference"}):
        assert cassette_key(dataclasses.replace(base, **change), "m") != k, change
    assert cassette_key(base, "other-model") != k
    assert cassette_key(dataclasses.replace(base, member="another/member"), "m") == k  # not part of the key


def test_replay_and_dry_run_make_zero_calls_and_plan_counts(oai, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(oai, cas, members(3))
    before = oai.count
    resolved = resolve_backends(specs(live(oai)), [f"g={cas}"])
    p = plan(resolved, members(5))
    (b,) = p.backends
    assert (b.mode, b.cassette_records, b.replay_hits, b.calls) == ("record", 3, 3, 2)
    assert p.ok and "2 calls" in p.render() and "characters/4" in p.render()
    p = plan(resolve_backends(specs(live(oai))), members(5))
    assert p.backends[0].calls == 5 and p.backends[0].mode == "live"
    p = plan(resolve_backends(specs(f"r=cassette:path={cas}")), members(5))
    assert p.backends[0].calls == 0 and p.backends[0].replay_hits == 3
    assert p.ok and p.backends[0].not_covered == ["deals/m03", "deals/m04"]  # listed, not a guard (issue 12.7)
    p = plan(resolve_backends(specs(f"r=cassette:path={cas}")), members(5), strict_replay=True)
    assert [g.kind for g in p.guards] == ["cassette_miss"] and "deals/m03" in p.guards[0].message
    assert oai.count == before  # planning called nothing
    assert not (tmp_path / "new.jsonl").exists()
    plan(resolve_backends(specs(live(oai)), [f"g={tmp_path / 'new.jsonl'}"]), members(2))
    assert not (tmp_path / "new.jsonl").exists() and not sidecar_path(tmp_path / "new.jsonl").exists()


def test_plan_bounds_cost_from_chars_max_tokens_truncation_retry_and_retries(oai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rs = members(2)
    chars = [len(r.system) + len(r.user) + len(json.dumps(r.schema, separators=(",", ":"))) for r in rs]
    one_pass = sum(((c + 3) // 4) * 0.15 + 64 * 0.6 for c in chars) / 1e6
    # the call at max_tokens (64) and its truncation retry at 128, each sent 1 + max_retries times
    bound = sum(2 * ((c + 3) // 4) * 0.15 + (64 + 128) * 0.6 for c in chars) / 1e6
    p = plan(resolve_backends(specs("o=openai:model=gpt-4o-mini")), rs)
    (b,) = p.backends
    assert b.priced and b.pass_usd == pytest.approx(one_pass) and b.max_retries == 4
    assert b.est_usd == pytest.approx(5 * bound) and p.est_usd == b.est_usd
    assert f"≤ ${5 * bound:.4f}" in p.render() and "once more at twice that" in p.render()
    p = plan(resolve_backends(specs("o=openai:model=gpt-4o-mini,max_retries=1")), rs)
    assert p.backends[0].est_usd == pytest.approx(2 * bound)
    assert not plan(resolve_backends(specs(live(oai))), rs).backends[0].est_usd


def test_resume_pays_only_for_misses(oai, tmp_path):
    cas = tmp_path / "r.jsonl"
    record(oai, cas, members(3))
    out = record(oai, cas, members(5))
    assert oai.count == 5  # 3 + the 2 missing
    assert [c.replayed for c in out] == [True, True, True, False, False]
    assert len(load_records(cas)) == 5


def test_identical_keys_are_served_fifo_and_concatenation_works(oai, tmp_path):
    a, b, both = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "both.jsonl"
    twin = req("deals/twin")
    oai.script += [{"content": '{"n": 1}'}, {"content": '{"n": 2}'}]
    record(oai, a, [twin, twin], max_concurrency=1)
    record(oai, b, members(2))
    concat([b, a], both)  # order does not matter
    out = replay(both, [twin, members(2)[1], twin, members(2)[0]])
    assert out[0].record == {"n": 1} and out[2].record == {"n": 2}
    assert out[1].record == json.loads(load_records(b)[1]["response"]["content"])
    with pytest.raises(CassetteMiss, match="recorded 2 time"):
        replay(both, [twin, twin, twin])


def test_one_word_edit_is_a_miss_naming_the_member(oai, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(oai, cas, members(3))
    edited = members(3, word="Extract all")
    with pytest.raises(CassetteMiss) as e:
        replay(cas, edited)
    msg = str(e.value)
    assert "member deals/m00" in msg and cassette_key(edited[0], "gemma-3-270m") in msg
    assert "nearest recorded request: member deals/m00" in msg
    assert "'Extract the fields.'" in msg and "'Extract all the fields.'" in msg  # the first differing line
    assert f"--record g={cas}" in msg and "openai:url=<URL>,model=gemma-3-270m" in msg
    assert e.value.exit_code == 6


def test_corrupt_line_and_torn_last_line(oai, tmp_path, capsys):
    cas = tmp_path / "c.jsonl"
    record(oai, cas, members(3), max_concurrency=1)  # one at a time: lines in member order
    lines = cas.read_text().splitlines(keepends=True)[1:]  # the records, after the format header
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + '{"key": "nope"\n' + lines[1])
    with pytest.raises(CassetteCorrupt, match=r"bad.jsonl:2: corrupt"):
        Cassette.load(bad)
    bad.write_text(lines[0] + '{"key": "abc", "model": "m"}\n' + lines[1])  # valid JSON, not a record
    with pytest.raises(CassetteCorrupt, match=r"bad.jsonl:2: .*key"):
        Cassette.load(bad)
    # a crash mid-append: the last line is cut
    torn = tmp_path / "torn.jsonl"
    torn.write_text("".join(lines[:2]) + lines[2][:40])
    capsys.readouterr()
    out = replay(torn, members(2))
    assert all(c.replayed for c in out)
    err = capsys.readouterr().err
    assert "torn.jsonl: line 3 is torn" in err and "2 record(s)" in err
    # resuming a recording on it: the fragment is cut, the missing call made, the file loads cleanly
    n = oai.count
    record(oai, torn, members(3))
    assert oai.count == n + 1 and len(Cassette.load(torn)) == 3
    # a hand-edited file whose last record lacks its newline: the next record goes on a new line
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(lines[:2]).rstrip("\n"))
    record(oai, edited, members(3))
    assert len(Cassette.load(edited)) == 3


def test_env_vars(oai, tmp_path, monkeypatch):
    cas = tmp_path / "env.jsonl"
    monkeypatch.setenv("EVALKIT_RECORD_LLM", str(cas))
    backends = build_backends(specs(live(oai)))
    run_jobs([Job(backends[0], r) for r in members(2)])
    assert len(load_records(cas)) == 2 and sidecar_path(cas).exists()
    monkeypatch.setenv("EVALKIT_REPLAY_LLM", str(cas))
    with pytest.raises(UsageError, match="both set"):
        resolve_backends(specs(live(oai)))
    monkeypatch.delenv("EVALKIT_RECORD_LLM")
    n = oai.count
    (r,) = resolve_backends(specs(live(oai)))
    assert r.mode == "replay" and r.via_env == "EVALKIT_REPLAY_LLM"
    out = run_jobs([Job(b, q) for b in open_backends([r]) for q in members(2)])
    assert oai.count == n and all(c.replayed for c in out)
    # build_backends (the notebook path: pipeline.extract_member) honours the variables as well
    from evalkit.backends import BackendContext

    (b,) = build_backends(specs(f"g=openai:url={oai.url}/v1,model=gemma-3-270m"), ctx=BackendContext())
    assert isinstance(b, ReplayBackend)


def test_guards_abort_before_any_call(oai, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(oai, cas, members(2))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(cas.read_bytes())
    n = oai.count
    for args in ([f"a=cassette:path={cas}", f"b=cassette:path={cas}"],
                 [f"a=cassette:path={cas}", f"b=cassette:path={copy}"]):
        resolved = resolve_backends(specs(*args))
        p = plan(resolved, members(2))
        assert [g.kind for g in p.guards] == ["duplicate_cassette"]
        with pytest.raises(CassetteError, match="resolve to"):
            check_guards(resolved)
    resolved = resolve_backends(specs(f"a=cassette:path={cas}", live(oai)), [f"g={cas}"])
    with pytest.raises(CassetteError, match="same file"):
        open_backends(resolved)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("garbage\n" + cas.read_text())
    resolved = resolve_backends(specs(f"a=cassette:path={bad}"))
    assert [g.kind for g in plan(resolved, members(1)).guards] == ["corrupt_cassette"]
    with pytest.raises(CassetteCorrupt, match="bad.jsonl:1"):
        open_backends(resolved)
    with pytest.raises(CassetteError, match="not found"):
        build_backends(specs(f"a=cassette:path={tmp_path / 'none.jsonl'}"))
    with pytest.raises(UsageError, match="no --backend"):
        resolve_backends(specs(live(oai)), ["x=y.jsonl"])
    assert oai.count == n


def test_sidecar_only_when_recording_and_rotation(oai, tmp_path):
    cas = tmp_path / "c.jsonl"
    record(oai, cas, members(1))
    os.remove(sidecar_path(cas))
    replay(cas, members(1))
    assert not sidecar_path(cas).exists()  # never in replay
    log = FailureLog(tmp_path / "rot.jsonl", rotate_bytes=2000)
    for i in range(5):
        log.write(Failure("malformed", raw_body="y" * 900, member=f"m{i}"))
    assert sidecar_path(tmp_path / "rot.jsonl", 1).exists() and sidecar_path(tmp_path / "rot.jsonl", 2).exists()
    assert [f["member"] for f in read_failures(tmp_path / "rot.jsonl")] == [f"m{i}" for i in range(5)]
    log.write(Failure("malformed", raw_body="z" * 5000, member="big"))  # never shortened, even past the limit
    assert read_failures(tmp_path / "rot.jsonl")[-1]["raw_body"] == "z" * 5000


def test_python_pipeline_backend(tmp_path, monkeypatch):
    mod = tmp_path / "mypipe.py"
    mod.write_text(
        "import asyncio\n"
        "def extract(text, task):\n"
        "    return {'n': len(text), 'task': task['task'], 'has_schema': 'properties' in task['schema']}\n"
        "async def aextract(text, task):\n"
        "    await asyncio.sleep(0)\n"
        "    return {'n': len(text)}\n"
        "def boom(text, task):\n"
        "    raise ValueError('pipeline broke')\n")
    monkeypatch.chdir(tmp_path)
    r = members(1)[0]
    sync, async_, boom = build_backends(specs("s=python:mypipe:extract", f"a=python:{mod}:aextract",
                                              "b=python:mypipe:boom"))
    out = run_jobs([Job(sync, r), Job(async_, r), Job(boom, r)])
    assert out[0].record == {"n": len(r.user), "task": "deals", "has_schema": True} and out[0].parse == "clean"
    assert out[1].record == {"n": len(r.user)}
    assert out[2].record is None and "ValueError: pipeline broke" in out[2].error
    cas = tmp_path / "py.jsonl"
    (rec,) = build_backends(specs("s=python:mypipe:extract"), [f"s={cas}"])
    first = run_jobs([Job(rec, r)])[0]
    again = replay(cas, [r], label="s")[0]
    assert same(first, again)
    with pytest.raises(UsageError, match="cannot import"):
        build_backends(specs("x=python:no_such_module:f"))


KILL_SCRIPT = r"""
import sys
from evalkit.backends import BackendSpec, Request
from evalkit.backends.resolve import build_backends
from evalkit.execution.pool import Job, run_jobs
url, cas = sys.argv[1], sys.argv[2]
(b,) = build_backends([BackendSpec.parse(f"g=openai:url={url}/v1,model=gemma-3-270m")], [f"g={cas}"])
reqs = [Request(member=f"deals/m{i}", call_type="extract", system="s", user=f"doc {i}",
                schema={"type": "object"}, max_tokens=32) for i in range(10)]
out = run_jobs([Job(b, r) for r in reqs], max_concurrency=1)
print(sum(not c.replayed for c in out), "calls")
"""


def test_sigkill_halfway_then_resume_pays_only_for_missing_calls(tmp_path):
    cas = tmp_path / "kill.jsonl"
    script = tmp_path / "rec.py"
    script.write_text(KILL_SCRIPT)
    with OpenAIFake(latency=0.15) as server:
        proc = subprocess.Popen([sys.executable, str(script), server.url, str(cas)], stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if cas.exists() and cas.read_bytes().count(b"\n") >= 6:  # the header and 5 records
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        done = len(Cassette.load(cas))
        assert 5 <= done < 10
        paid_first = server.count
        out = subprocess.run([sys.executable, str(script), server.url, str(cas)], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 0, out.stderr
        assert server.count - paid_first == 10 - done  # only the missing calls
        assert out.stdout.strip() == f"{10 - done} calls"
    records = Cassette.load(cas).records  # loads cleanly
    assert sorted(r["member"] for r in records) == sorted(f"deals/m{i}" for i in range(10))
