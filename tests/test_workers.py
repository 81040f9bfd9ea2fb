"""The one process-pool helper (`evalkit.execution.workers.run_all`): order, dependencies, a dying worker, no nested pool."""

from __future__ import annotations

import os
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import evalkit.execution.workers as workers
from evalkit.errors import WorkerDied
from evalkit.execution.workers import run_all


def pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def stamp(seconds: float) -> float:
    time.sleep(seconds)
    return time.monotonic()


def die_if(flag: bool) -> str:
    if flag:
        os._exit(3)  # no exception, no cleanup: the worker process is gone, and its pool with it
    return "ok"


def fail() -> None:
    raise ValueError("this call's own error")


def nested() -> tuple[int, list]:
    """A call that runs calls itself (as a sweep member runs its notebooks): no pool inside a worker."""
    return os.getpid(), run_all([(os.getpid, ()), (pid_after, (0.0,))], 2)


def test_results_in_call_order_and_an_exception_is_that_calls_result():
    results = run_all([(pid_after, (0.3,)), (fail, ()), (pid_after, (0.0,))], 2)
    assert isinstance(results[0], int) and isinstance(results[2], int) and results[0] != os.getpid()
    assert isinstance(results[1], ValueError) and str(results[1]) == "this call's own error"


def test_a_call_starts_only_after_the_calls_it_waits_for():
    finished = run_all([(stamp, (0.6,)), (stamp, (0.0,)), (stamp, (0.0,))], 3, after=[set(), {0}, set()])
    assert finished[1] > finished[0]  # it waited for the slow call, with a worker free all along
    assert finished[2] < finished[0]  # the free one did not


def test_a_dying_worker_fails_only_its_own_call():
    done = []
    results = run_all([(die_if, (False,)), (die_if, (True,)), (die_if, (False,)), (die_if, (False,))], 2,
                      on_done=lambda i, r: done.append(i))
    assert results[0] == results[2] == results[3] == "ok"
    assert isinstance(results[1], WorkerDied) and "worker process died" in str(results[1])
    assert sorted(done) == [0, 1, 2, 3]


def test_inside_a_worker_calls_run_in_that_worker():
    worker, inner = run_all([(nested, ())], 1)[0]
    assert worker != os.getpid() and inner == [worker, worker]


def test_a_pool_that_breaks_between_waits_loses_no_queued_call(monkeypatch):
    # The race seen in CI: call a finished, call b's worker died, and the pool reported itself broken
    # on the next submit (c) before b's future said so. c never started: it runs in a fresh pool, and
    # b, in flight when the pool broke, runs again alone.
    pools = []

    class Pool:
        def __init__(self, max_workers, mp_context, **_):
            self.futures = []
            pools.append(self)

        def submit(self, fn, *args):
            if len(pools) == 1 and len(self.futures) == 2:  # the first pool broke: c is refused
                self.futures[1].set_exception(BrokenProcessPool("a worker died"))
                raise BrokenProcessPool("a worker died")
            fut = Future()
            if len(pools) > 1 or not self.futures:  # a (and everything in a fresh pool) finishes
                fut.set_result(f"ran {args[0]}")
            self.futures.append(fut)
            return fut

        def shutdown(self, wait, cancel_futures):
            pass

    monkeypatch.setattr(workers, "ProcessPoolExecutor", Pool)
    done = []
    results = run_all([(str, (m,)) for m in "abc"], 2, on_done=lambda i, r: done.append(r))
    assert results == ["ran a", "ran b", "ran c"]
    assert done == ["ran a", "ran c", "ran b"] and len(pools) == 3  # b last, in a pool of its own


def test_finding_the_next_call_does_not_cost_every_call(monkeypatch):
    # A sweep of 10,000 members is 10,000 calls: looking for the next one by listing every call each time made
    # the parent's work per member grow with the members (O(n²) in all). In a worker the calls run here, one
    # after another, so the pool's own bookkeeping is all there is to time.
    monkeypatch.setattr(workers, "_in_worker", True)
    n = 20_000
    t = time.perf_counter()
    results = run_all([(abs, (-i,)) for i in range(n)], 2, after=[set()] * n)
    assert results == list(range(n))
    assert time.perf_counter() - t < 5.0  # ~1 s on a loaded 2-core machine; listing every call for each: ~27 s
