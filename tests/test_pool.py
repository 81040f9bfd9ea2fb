"""The bounded concurrent pool: order, concurrency bound, progress, --max-usd, fatal errors."""

from __future__ import annotations

import asyncio
import random

import pytest

from evalkit.backends import Completion, Request
from evalkit.errors import CassetteMiss
from evalkit.execution.pool import SKIPPED_PREFIX, Job, run_jobs, run_pool


class SlowBackend:
    label = spec = model = "slow"

    def __init__(self, usd: float = 0.0, fail_on: str | None = None):
        self.usd, self.fail_on = usd, fail_on
        self.inflight = self.peak = self.calls = self.closed = 0

    def estimate_usd(self, request: Request) -> float:
        return self.usd

    async def complete(self, request: Request) -> Completion:
        self.calls += 1
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        try:
            await asyncio.sleep(random.uniform(0.001, 0.02))
            if request.member == self.fail_on:
                raise CassetteMiss(f"cassette miss: member {request.member}")
            return Completion(record={"m": request.member}, usd=self.usd)
        finally:
            self.inflight -= 1

    async def aclose(self) -> None:
        self.closed += 1


def jobs(backend, n: int) -> list[Job]:
    return [Job(backend, Request(member=f"t/m{i:02d}", call_type="extract", system="", user=str(i), schema={}))
            for i in range(n)]


def test_results_in_job_order_and_concurrency_bounded():
    b = SlowBackend()
    seen = []
    out = run_jobs(jobs(b, 40), max_concurrency=5,
                   progress=lambda done, total, job, c: seen.append((done, total)))
    assert [c.record["m"] for c in out] == [f"t/m{i:02d}" for i in range(40)]
    assert b.peak == 5 and b.calls == 40
    assert seen == [(i, 40) for i in range(1, 41)]
    assert b.closed == 1  # each distinct backend closed once, inside the loop


def test_max_usd_stops_before_passing_the_limit_and_keeps_results():
    b = SlowBackend(usd=1.0)
    result = run_pool(jobs(b, 10), max_concurrency=1, max_usd=3.5)
    assert b.calls == 3 and result.spent_usd == pytest.approx(3.0) and result.stopped_by_budget
    assert result.skipped == list(range(3, 10))
    assert all(c.record for c in result.completions[:3])
    assert all(c.error.startswith(SKIPPED_PREFIX) and c.calls == 0 for c in result.completions[3:])


def test_max_usd_counts_calls_in_flight():
    b = SlowBackend(usd=1.0)
    result = run_pool(jobs(b, 10), max_concurrency=4, max_usd=2.0)
    assert b.calls == 2 and len(result.skipped) == 8 and b.peak <= 2


def test_free_calls_are_never_skipped():
    result = run_pool(jobs(SlowBackend(usd=0.0), 5), max_usd=0.0)
    assert not result.skipped


def test_fatal_error_stops_new_jobs_and_is_raised():
    b = SlowBackend(fail_on="t/m03")
    with pytest.raises(CassetteMiss, match="t/m03"):
        run_jobs(jobs(b, 50), max_concurrency=2)
    assert b.calls < 10 and b.inflight == 0 and b.closed == 1


def test_summarize_calls():
    from evalkit.results.calls import summarize_calls

    cs = [Completion(record={}, latency_s=i / 10, usd=0.01) for i in range(1, 11)]
    cs.append(Completion(record=None, parse="error", error="HTTP 500", latency_s=1.1))
    cs.append(Completion(record=None, parse="error", error=SKIPPED_PREFIX + " budget"))
    s = summarize_calls(cs)
    # a budget stop is an error (cause budget_stop, `evalkit.status`), counted apart as skipped too
    assert s["errors"] == 2 and s["skipped"] == 1 and s["error_rate"] == pytest.approx(2 / 12)
    assert s["parse"] == {"ok": 10, "malformed": 0, "truncated": 0, "schema_invalid": 0}
    assert s["latency_p50"] == pytest.approx(0.6) and s["latency_p99"] <= 1.1 and s["usd"] == pytest.approx(0.1)


def test_each_thread_keeps_one_event_loop_and_each_run_starts_clean():
    """A sweep runs a pool per member: the thread's loop is kept (closing one costs more than a member's
    extraction), but each run sees the caller's context and leaves nothing running, as `asyncio.run`."""
    import contextvars

    from evalkit.execution.pool import run_async

    var = contextvars.ContextVar("caller", default="unset")
    sleepers: list[asyncio.Task] = []

    async def probe():
        sleepers.append(asyncio.ensure_future(asyncio.sleep(3600)))  # left running
        return asyncio.get_running_loop(), var.get()

    token = var.set("first")
    try:
        loop, seen = run_async(probe())
        assert seen == "first" and sleepers[0].cancelled()
        var.set("second")
        again, seen = run_async(probe())
        assert again is loop and seen == "second" and sleepers[1].cancelled()
    finally:
        var.reset(token)
    b = SlowBackend()
    assert len(run_jobs(jobs(b, 5), max_concurrency=2)) == 5  # a pool after it runs as ever
