"""`--scheduler`: the same work as Dask distributed tasks gives the same bytes; one call limit and one budget
hold across the workers; a bad value is a one-line usage error.

One cluster (`scheduler.connect("local:2")`) serves the module: the commands attach to it by its
``tcp://`` address; one test starts its own with ``--scheduler local:2``."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import pytest
from corpus_factory import cli, make_corpus
from servers.fixtures import _clean_env  # noqa: F401 - fixture
from servers.openai_fake import OpenAIFake

from evalkit.errors import WorkerDied
from evalkit.execution.scheduler import Scheduler, connect, parse
from evalkit.execution.workers import run_all
from evalkit.results.runfolder import EXTRACTION, RUN_JSON
from evalkit.status import BUDGET_STOP, ERROR, SCORED

SOURCES = Path("/work/shared/data")


@pytest.fixture(scope="module")
def cluster():
    with connect("local:2") as c:
        yield c


@pytest.fixture
def address(cluster) -> str:
    return cluster.client.scheduler.address


def files(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path; run.json without the times it was written at (the command line
    recorded there is the same: both runs are this process's)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == RUN_JSON:
                run = json.loads(data)
                run.pop("started")
                for b in run["backends"]:
                    b.pop("started")
                data = json.dumps(run, sort_keys=True).encode()
            out[p.relative_to(root).as_posix()] = data
    return out


def assert_same_files(a: Path, b: Path) -> int:
    fa, fb = files(a), files(b)
    assert sorted(fa) == sorted(fb), f"only in one: {sorted(set(fa) ^ set(fb))}"
    differ = [rel for rel in fa if fa[rel] != fb[rel]]
    assert not differ, f"files that differ: {differ}"
    return len(fa)


# --------------------------------------------------------------------------- the same bytes


@pytest.mark.skipif(not SOURCES.is_dir(), reason="needs the shared sources")
def test_a_sweep_on_the_cluster_writes_the_same_bytes_as_the_local_pool(tmp_path, address):
    """Every member of the bundled corpus (--no-notebooks): sweep.json, each member's run.json, extraction.json,
    score.json and summary.json, byte for byte."""
    outs = []
    for name, extra in (("pool", []), ("dask", ["--scheduler", address])):
        out = tmp_path / name / "sweep"
        res = cli("sweep", "--backend", "fake", "--no-notebooks", "--sources", SOURCES, "--out", out, *extra)
        assert res.exit_code == 0, res.output
        outs.append(out)
    assert assert_same_files(*outs) > 150


def test_a_run_with_notebooks_on_a_local_cluster_writes_the_same_bytes(tmp_path):
    """extract.ipynb, score.ipynb, report.ipynb and every HTML page: the same bytes (the index's run block names
    its date and command, as between any two runs); --scheduler local:2 starts and stops a cluster of its own."""
    from evalkit.report.overview import without_run_block

    outs = []
    for name, extra in (("pool", []), ("dask", ["--scheduler", "local:2"])):
        out = tmp_path / name / "run"
        res = cli("run", "--backend", "fake", "--task", "deal-memos", "--only", "hostile-markup",
                  "--only", "clean-single-term", "--out", out, *extra)
        assert res.exit_code == 0, res.output
        outs.append(out)
    a, b = (files(o) for o in outs)
    assert sorted(a) == sorted(b)
    assert sum(rel.endswith(".ipynb") for rel in a) == 5 and sum(rel.endswith(".html") for rel in a) >= 6
    a["index.html"], b["index.html"] = without_run_block(a["index.html"]), without_run_block(b["index.html"])
    differ = [rel for rel in a if a[rel] != b[rel]]
    assert not differ, f"files that differ: {differ}"


# --------------------------------------------------------------------------- run_all on a cluster


def test_run_all_on_a_cluster_keeps_order_dependencies_exceptions_and_dead_workers(cluster):
    done = []
    calls = [(time.sleep, (0.5,)), (abs, (-3,)), (int, ("not a number",)), (os._exit, (3,))]
    results = run_all(calls, after=[set(), {0}, set(), set()], on_done=lambda i, r: done.append(i), scheduler=cluster)
    assert results[0] is None and results[1] == 3
    assert isinstance(results[2], ValueError)  # what the call raised is its result
    assert isinstance(results[3], WorkerDied)  # its worker died twice (once retried elsewhere)
    assert done.index(0) < done.index(1)  # the call after another starts when it has finished
    assert sorted(done) == [0, 1, 2, 3]


def test_calls_go_in_batches_and_a_batch_whose_worker_died_runs_again_call_by_call(cluster):
    from evalkit.execution.scheduler import batch_size

    calls = [(abs, (-i,)) for i in range(40)]
    calls[17] = (os._exit, (3,))
    assert batch_size(len(calls), 2) == 5  # 8 tasks of 5 calls for 2 worker threads
    results = run_all(calls, scheduler=cluster)
    assert isinstance(results[17], WorkerDied)  # the call that kills its worker, and only that one
    assert [r for i, r in enumerate(results) if i != 17] == [i for i in range(40) if i != 17]


# --------------------------------------------------------------------------- the shared limits


class CountingFake(OpenAIFake):
    """The openai fake, answering each call after `hold` s and counting the calls in flight at once."""

    def __init__(self, hold: float):
        super().__init__()
        self.hold, self.now, self.most = hold, 0, 0
        self._count = threading.Lock()

    async def _handle(self, req, server):
        if not req.path.endswith("/chat/completions"):
            return await super()._handle(req, server)
        with self._count:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(self.hold)
            return await super()._handle(req, server)
        finally:
            with self._count:
                self.now -= 1


def live(server) -> str:
    return f"o=openai:url={server.url}/v1,model=gpt-4o-mini,max_retries=0"


def test_max_concurrency_holds_across_the_workers(tmp_path, address):
    corpus = make_corpus(tmp_path, members=4)
    most = {}
    for limit in (1, 8):
        with CountingFake(hold=0.6) as server:
            res = cli("sweep", "--corpus", corpus, "--backend", live(server), "--no-notebooks", "--scheduler", address,
                      "--max-concurrency", limit, "--out", tmp_path / f"c{limit}" / "sweep")
            assert res.exit_code in (0, 1), res.output  # the echo answers fail their verdicts
            assert server.count == 4
            most[limit] = server.most
    assert most == {1: 1, 8: 2}  # two member workers: two calls at once, unless the semaphore allows one


def test_max_usd_holds_across_the_workers(tmp_path, address):
    """A budget that covers one call: one member's call is made, every other one is a budget stop, on whichever
    worker it runs (each member alone would fit in it: only a shared ledger stops them)."""
    from evalkit.backends.openai import OpenAIBackend
    from evalkit.corpus.sources import check_integrity, read_document
    from evalkit.corpus.tasks import load_tasks
    from evalkit.stages.pipeline import render_request
    from evalkit.stages.runner import select_members

    corpus = make_corpus(tmp_path, members=4)
    members = select_members(load_tasks(corpus), None)
    backend = OpenAIBackend("o", url="http://unused/v1", model="gpt-4o-mini")
    estimates = {backend.estimate_usd(render_request(m.task, m, read_document(check_integrity(m, None)), None,
                                                     m.task.spec.settings)) for m in members}
    assert len(estimates) == 1  # the members' requests are the same size
    limit = estimates.pop() + 1e-10  # one call's reservation, and less than any call costs
    out = tmp_path / "budget" / "sweep"
    with CountingFake(hold=0.3) as server:
        res = cli("sweep", "--corpus", corpus, "--backend", live(server), "--no-notebooks", "--scheduler", address,
                  "--max-usd", repr(limit), "--out", out)
        calls = server.count
    assert res.exit_code == 5, res.output  # as a run's budget stop: an error
    extractions = [json.loads(p.read_text()) for p in sorted(out.rglob(EXTRACTION))]
    assert len(extractions) == 4 and calls == 1
    assert sum(e["run"]["usd"] for e in extractions) <= limit
    statuses = sorted((e.get("status", SCORED), e.get("cause")) for e in extractions)
    assert statuses.count((ERROR, BUDGET_STOP)) == 3, statuses
    assert "budget_stop" in res.output


def test_a_sweep_refuses_max_usd_without_a_scheduler(tmp_path):
    corpus = make_corpus(tmp_path, members=1)
    res = cli("sweep", "--corpus", corpus, "--backend", "fake", "--no-notebooks", "--max-usd", "1",
              "--out", tmp_path / "s")
    assert res.exit_code == 2 and "--scheduler local:N" in res.output, res.output


# --------------------------------------------------------------------------- the option


@pytest.mark.parametrize("value", ["local:0", "local:two", "local:", "dask", "tcp://host", "http://host:8786",
                                   "tcp://host:99999", ""])
def test_a_bad_scheduler_is_a_one_line_usage_error(value, tmp_path):
    for command in (["run", "--backend", "fake"], ["sweep", "--backend", "fake", "--no-notebooks"]):
        res = cli(*command, "--scheduler", value, "--out", tmp_path / "never")
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and "--scheduler" in lines[0] and "tcp://HOST:PORT" in lines[0], res.output
        assert "Traceback" not in res.output
        assert not (tmp_path / "never").exists()


def test_parse_accepts_the_three_forms():
    assert parse("local") == Scheduler() and str(parse("local")) == "local"
    assert parse("local:3") == Scheduler(workers=3)
    assert parse("tcp://10.0.0.5:8786") == Scheduler(address="tcp://10.0.0.5:8786")
    assert parse("tcp://head-node.lan:8786").address == "tcp://head-node.lan:8786"


def test_only_live_calls_take_a_lease(tmp_path):
    """A call answered by the provider holds a lease; one replayed from a cassette (recorded or replay-only) none."""
    from contextlib import asynccontextmanager

    from servers.fixtures import req

    from evalkit.backends.cassette import RecordingBackend, ReplayBackend
    from evalkit.backends.openai import OpenAIBackend
    from evalkit.execution.pool import Job, run_pool

    held = []

    @asynccontextmanager
    async def lease():
        held.append(1)
        yield

    cassette = tmp_path / "c.jsonl"
    with OpenAIFake() as server:
        def recording():
            return RecordingBackend(OpenAIBackend("o", url=f"{server.url}/v1", model="gpt-4o-mini", max_retries=0),
                                    cassette)

        run_pool([Job(recording(), req())], lease=lease)
        assert server.count == 1 and len(held) == 1  # recorded: a live call
        run_pool([Job(recording(), req()), Job(ReplayBackend("r", cassette), req())], lease=lease)
        assert server.count == 1 and len(held) == 1  # replayed twice: no call, no lease


def test_a_workers_members_share_one_call_semaphore_made_on_the_first_live_call(monkeypatch):
    """A member with no live call makes no `distributed.Semaphore` (each one keeps a timer on the worker's loop);
    the members of one sweep in a worker process share one."""
    import distributed

    from evalkit.execution import scheduler

    made, taken = [], []

    class Semaphore:
        def __init__(self, **kwargs):
            made.append(kwargs["name"])

        def acquire(self):
            taken.append(1)

        def release(self):
            taken.pop()

    class Worker:
        scheduler = loop = None

    monkeypatch.setattr(distributed, "Semaphore", Semaphore)
    monkeypatch.setattr(distributed, "get_worker", lambda: Worker())
    monkeypatch.setattr(scheduler, "_semaphores", {})
    members = [scheduler.shared_limits("sweep-a", 4, None) for _ in range(50)]
    assert made == []  # 50 members, no live call yet: no semaphore

    async def calls():
        for limits in members[:3] + [scheduler.shared_limits("sweep-b", 4, None)]:
            async with limits.lease():
                assert taken == [1]  # held while the call is in flight
        assert taken == []

    asyncio.run(calls())
    assert made == ["sweep-a-calls", "sweep-b-calls"]  # one a sweep, however many of its members called
