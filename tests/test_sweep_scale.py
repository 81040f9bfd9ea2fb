"""A sweep that scales: backend inputs fingerprinted once a sweep, member records appended (not sweep.json
rewritten whole), many calls in flight whatever the worker count (issue 27)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest
from corpus_factory import make_corpus, specs
from servers.fixtures import _clean_env  # noqa: F401 - fixture: no provider keys or cassette variables

from evalkit._util.jsonio import read_json
from evalkit.board import sweep as sweeping
from evalkit.board.sweep import sweep
from evalkit.results import runfolder
from evalkit.stages.runner import RunOptions


def counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def record_cassette(corpus, path, members):
    from evalkit.backends import Completion
    from evalkit.backends.cassette import make_record
    from evalkit.corpus.sources import check_integrity, read_document
    from evalkit.corpus.tasks import load_task
    from evalkit.stages.pipeline import render_request

    task = load_task(corpus / "memos")
    lines = []
    for i in range(members):
        m = task.member(f"m{i}")
        request = render_request(task, m, read_document(check_integrity(m, None)))
        record = {"account_id": f"ACC-{i:03d}", "rate": float(f"0.{i + 5}")}
        lines.append(make_record(request, "tiny", "openai", Completion(record=record, raw=json.dumps(record),
                                                                       model="tiny")))
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_cassette_is_hashed_once_a_sweep_and_not_again_while_its_stat_holds(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path, members=4)
    cassette = tmp_path / "c.jsonl"
    record_cassette(corpus, cassette, 4)
    opts = RunOptions(corpus=corpus, backends=specs(f"tiny=cassette:path={cassette}"), out=tmp_path / "sw",
                      workers=2, notebooks=False)
    hashed = counting(monkeypatch, sweeping, "_fingerprint")
    assert [m.status for m in sweep(opts).members] == ["ran"] * 4
    assert len(hashed) == 1  # once for the sweep, not once a member (4 before)
    hashed.clear()
    assert [m.status for m in sweep(opts).members] == ["current"] * 4
    assert hashed == []  # same size, mtime and inode: the sha256 sweep.json kept
    st = cassette.stat()
    os.utime(cassette, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))  # touched, same bytes
    assert [m.status for m in sweep(opts).members] == ["current"] * 4  # hashed again: same content, still current
    assert len(hashed) == 1
    hashed.clear()
    cassette.write_text(cassette.read_text() + "\n")  # the bytes changed: every member is stale
    assert [m.status for m in sweep(opts).members] == ["ran"] * 4
    assert len(hashed) == 1


def test_a_predictions_folder_costs_one_stat_a_member_whatever_else_it_holds(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path, members=2)
    preds = tmp_path / "p"
    preds.mkdir()
    for i in range(2):
        (preds / f"m{i}.json").write_text(json.dumps({"account_id": f"ACC-{i:03d}", "rate": float(f"0.{i + 5}")}))
    for j in range(50):  # unrelated files: never walked
        (preds / f"other{j}.json").write_text("{}")
    walked = counting(monkeypatch, sweeping, "_fingerprint")
    opts = RunOptions(corpus=corpus, backends=specs(f"p=predictions:dir={preds}"), out=tmp_path / "sw",
                      workers=1, notebooks=False)
    first = sweep(opts)
    assert [m.status for m in first.members] == ["ran", "ran"] and walked == []
    keys = [m.keys["p"]["backend_inputs"]["dir"] for m in first.members]
    assert keys[0] != keys[1]  # each member's own file
    (preds / "m0.json").unlink()
    again = sweep(opts)
    assert [m.status for m in again.members] == ["ran", "current"]  # m0 errs (no file); m1 untouched
    assert again.members[0].keys["p"]["backend_inputs"]["dir"] == "absent"


class Killed(BaseException):
    """The sweep's process dying mid-sweep: nothing after it runs (no final sweep.json)."""


def test_finished_members_are_appended_and_a_killed_sweep_resumes_from_the_sidecar(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path, members=4)
    out = tmp_path / "sw"
    opts = RunOptions(corpus=corpus, backends=specs("fake"), out=out, workers=1, notebooks=False)
    monkeypatch.setattr(sweeping, "SAVE_EVERY_S", 0.0)  # a save after every member
    whole = counting(monkeypatch, runfolder, "write_sweep_json")
    assert [m.status for m in sweep(opts).members] == ["ran"] * 4
    assert len(whole) == 2  # at the start and the end, not once a member: the members were appended
    assert not (out / runfolder.SWEEP_LOG).exists()  # compacted into sweep.json
    assert len(runfolder.read_sweep_json(out)["members"]) == 4

    finished = []

    def die_after_two(member):
        finished.append(member.key)
        if len(finished) == 2:
            raise Killed

    with pytest.raises(Killed):
        sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=tmp_path / "k", workers=1, notebooks=False),
              die_after_two)
    log = (tmp_path / "k" / runfolder.SWEEP_LOG).read_text().splitlines()
    assert [json.loads(line)["key"] for line in log] == finished  # each saved as it finished
    with open(tmp_path / "k" / runfolder.SWEEP_LOG, "a") as f:
        f.write('{"key": "memos/m3", "memb')  # the line being written when the sweep was killed
    assert read_json(tmp_path / "k" / runfolder.SWEEP_JSON)["members"] == {}  # written at the start only
    assert list(runfolder.read_sweep_json(tmp_path / "k")["members"]) == finished
    resumed = sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=tmp_path / "k", workers=1,
                               notebooks=False))
    assert {m.key: m.status for m in resumed.members} == {
        k: "current" if k in finished else "ran" for k in ["memos/m0", "memos/m1", "memos/m2", "memos/m3"]}
    assert not (tmp_path / "k" / runfolder.SWEEP_LOG).exists()


def _truth_answer(body):
    import re

    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    account, rate = re.search(r"Account (ACC-\d+) pays a rate of (0\.\d+)", user).groups()
    return {"account_id": account, "rate": float(rate)}


def _counting_server(latency):
    import asyncio

    from servers.openai_fake import OpenAIFake

    class Counting(OpenAIFake):
        """Counts the calls in flight at once: each waits `latency` while counted."""

        def __init__(self):
            super().__init__(answer=_truth_answer)
            self.inflight = self.peak = 0
            self.arrivals = []  # time.monotonic() of each call's arrival

        async def _handle(self, req, server):
            if not req.path.endswith("/chat/completions"):
                return await super()._handle(req, server)
            with self.lock:
                self.arrivals.append(time.monotonic())
                self.inflight += 1
                self.peak = max(self.peak, self.inflight)
            try:
                await asyncio.sleep(latency)
            finally:
                with self.lock:
                    self.inflight -= 1
                    self.seen_prefixes.clear()  # no prompt cache: which call came first must not matter
            return await super()._handle(req, server)

    return Counting().start()


def _timeless(data):
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k != "latency_s"}  # the one figure no two calls share
    return [_timeless(v) for v in data] if isinstance(data, list) else data


def _results(out):
    """Every member's score.json and extraction record, by path."""
    got = {}
    for p in sorted(out.rglob("score.json")):
        got[p.relative_to(out).as_posix()] = _timeless(read_json(p))
    for p in sorted(out.rglob("extraction.json")):
        data = read_json(p)
        got[p.relative_to(out).as_posix()] = (data.get("record"), data.get("status"), data.get("request_sha256"))
    return got


def test_a_sweep_keeps_max_concurrency_calls_in_flight_with_one_worker_and_the_same_results(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path, members=6)
    server = _counting_server(0.3)
    try:
        spec = f"live=openai:url={server.url}/v1,model=gpt-4o-mini,timeout=30,max_retries=0"
        opts = RunOptions(corpus=corpus, backends=specs(spec), out=tmp_path / "sw", workers=1,
                          max_concurrency=4, notebooks=False)
        res = sweep(opts)
        assert [m.status for m in res.members] == ["ran"] * 6
        assert [o.score for o in res.outcomes] == [1.0] * 6
        assert server.peak >= 4  # min(--max-concurrency, members), with one worker (it was at most 2)
        assert len(server.completions()) == 6  # each paid once: the members reused what the sweep's pool wrote
        assert [m.status for m in sweep(opts).members] == ["current"] * 6

        monkeypatch.setattr(sweeping, "_prefetches", lambda opts: False)  # each member calls in its worker
        alone = sweep(RunOptions(corpus=corpus, backends=specs(spec), out=tmp_path / "old", workers=1,
                                 max_concurrency=4, notebooks=False))
        assert [m.status for m in alone.members] == ["ran"] * 6
        assert _results(tmp_path / "sw") == _results(tmp_path / "old")  # the same files either way
    finally:
        server.stop()


def test_the_sweeps_calls_go_on_while_their_answers_are_written(tmp_path, monkeypatch):
    # The calls job writes each answer to its member's folder; written in the event loop, a slow disk held up
    # every call in flight (a write of 0.25 s between each call and the next). One writer thread writes them now.
    corpus = make_corpus(tmp_path, members=8)
    server = _counting_server(0.2)
    real, written = runfolder.write_extraction, []

    def slow_write(home, extraction):
        time.sleep(0.25)
        real(home, extraction)
        written.append(home)

    monkeypatch.setattr(runfolder, "write_extraction", slow_write)
    try:
        spec = f"live=openai:url={server.url}/v1,model=gpt-4o-mini,timeout=30,max_retries=0"
        opts = RunOptions(corpus=corpus, backends=specs(spec), out=tmp_path / "sw", workers=1, max_concurrency=2,
                          notebooks=False)
        members = [replace(opts, tasks=["memos"], only=[f"m{i}"], out=tmp_path / "sw" / f"m{i}") for i in range(8)]
        assert sweeping._calls_job(opts, members) == {}
        assert len(server.completions()) == 8 and len(written) == 8  # every answer on disk when the job returns
        assert all(runfolder.read_extraction(h).record for h in written)
        span = max(server.arrivals) - min(server.arrivals)
        assert span < 1.2, span  # 2 at a time, 0.2 s each: the 7th and 8th arrive ~0.6 s in (~1.8 s in the loop)
    finally:
        server.stop()
