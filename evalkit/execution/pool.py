"""Run many extraction calls through one bounded concurrent pool.

All members' calls share one event loop and at most ``max_concurrency`` calls
are in flight (not one kernel or process per call). Jobs start in job order;
results come back in job order whatever the completion order.

``max_usd``: before each call the pool estimates its cost (the backend's
``estimate_usd(request)``: an upper bound — prompt characters/4 and max_tokens,
plus the truncation retry at twice max_tokens, at the model's price; 0 for
replayed calls and for a model with no price, which a run lets through only
with ``--allow-unpriced``) and does not start it if the spend so far (actual
cost of finished calls + estimates of calls in flight) plus that estimate would
pass the limit. From then on no further paid call starts; calls estimated at $0
(replays) still run. Everything finished is kept; skipped jobs get a
`Completion` with ``error`` starting ``"skipped:"`` and ``calls=0``, and are
listed in `PoolResult.skipped`. (With concurrency > 1 the actual costs of
finished calls arrive in timing order, so which job is the first skipped can
vary between runs; with ``max_concurrency=1`` it cannot.)

The budget is kept by a `Ledger` (``reserve(estimate) -> bool``, ``settle(estimate, actual)``): this
pool's own (`LocalLedger`) by default; a sweep's members under ``--scheduler`` share one held by the
Dask scheduler (`evalkit.execution.scheduler.SharedLedger`), so the limit holds across workers. ``lease``: an async
context manager each live call (`is_live`: not replayed from a cassette or a batch) holds while in flight —
there, one Dask semaphore for every worker's calls.

A backend raising (a `CassetteMiss`, say) aborts the run:
no new job starts, calls in flight finish (so a recording keeps them), then
the error is raised.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager as AsyncContextManager
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Protocol

from evalkit.backends import Backend, Completion, Request
from evalkit.status import SKIPPED_PREFIX

_loops = threading.local()  # each thread's event loop (`_run_loop`)


@dataclass(frozen=True)
class Job:
    backend: Backend
    request: Request


@dataclass
class PoolResult:
    completions: list[Completion]
    skipped: list[int] = field(default_factory=list)  # indices of jobs not run because of max_usd
    spent_usd: float = 0.0
    wall_s: float = 0.0
    stopped_by_budget: bool = False


Progress = Callable[[int, int, Job, Completion], None]  # (done, total, job, completion)


class Ledger(Protocol):
    """What --max-usd spends against: spent (finished calls' actual cost) + in flight (their estimates)."""

    spent: float  # as last seen: what a skipped call's message reports
    inflight: float

    async def reserve(self, estimate: float) -> bool:
        """Book `estimate` in flight if spent + in flight + estimate stays within the limit; once one is
        refused, every later one is too."""

    async def settle(self, estimate: float, actual: float) -> None:
        """A call has finished: `estimate` no longer in flight, `actual` spent."""


class LocalLedger:
    """One pool's ledger (one event loop: no lock needed)."""

    def __init__(self, max_usd: float):
        self.max_usd, self.spent, self.inflight, self.stopped = max_usd, 0.0, 0.0, False

    async def reserve(self, estimate: float) -> bool:
        if self.stopped or self.spent + self.inflight + estimate > self.max_usd + 1e-12:
            self.stopped = True
            return False
        self.inflight += estimate
        return True

    async def settle(self, estimate: float, actual: float) -> None:
        self.inflight -= estimate
        self.spent += actual


def is_live(job: Job) -> bool:
    """Whether this call will reach a model (a backend's ``live(request)``; not replayed, not a batch's answer)."""
    live = getattr(job.backend, "live", None)
    return bool(live(job.request)) if callable(live) else False


def estimate_usd(job: Job) -> float:
    estimate = getattr(job.backend, "estimate_usd", None)
    if estimate is None:
        return 0.0
    try:
        return float(estimate(job.request))
    except Exception:  # noqa: BLE001 - an estimate must never break a run
        return 0.0


async def run_pool_async(jobs: list[Job], max_concurrency: int = 8,
                         on_done: Callable[[Job, Completion], None] | None = None, *,
                         progress: Progress | None = None, max_usd: float | None = None,
                         close: bool = True, ledger: Ledger | None = None,
                         lease: Callable[[], AsyncContextManager] | None = None) -> PoolResult:
    started = time.perf_counter()
    results: list[Completion | None] = [None] * len(jobs)
    skipped: list[int] = []
    state = {"next": 0, "done": 0, "spent": 0.0, "stopped": False}
    if ledger is None and max_usd is not None:
        ledger = LocalLedger(max_usd)
    fatal: list[BaseException] = []

    def finish(i: int, completion: Completion) -> None:
        results[i] = completion
        state["done"] += 1
        if on_done:
            on_done(jobs[i], completion)
        if progress:
            progress(state["done"], len(jobs), jobs[i], completion)

    async def worker() -> None:
        while not fatal:
            i = state["next"]
            if i >= len(jobs):
                return
            state["next"] = i + 1
            job = jobs[i]
            estimate = estimate_usd(job) if ledger is not None else 0.0
            if estimate > 0 and not await ledger.reserve(estimate):  # type: ignore[union-attr]
                state["stopped"] = True
                skipped.append(i)
                finish(i, Completion(
                    record=None, parse="error", calls=0, model=getattr(job.backend, "model", ""),
                    error=f"{SKIPPED_PREFIX} --max-usd {max_usd:g} reached (spent ${ledger.spent:.4f} so far, "
                          f"${ledger.inflight:.4f} in flight, this call estimated at ${estimate:.4f})"))
                continue
            actual = 0.0
            try:
                async with (lease() if lease is not None and is_live(job) else nullcontext()):
                    completion = await job.backend.complete(job.request)
                actual = completion.usd if not completion.replayed else 0.0
            except Exception as e:  # noqa: BLE001 - a CassetteMiss, or a bug: stop starting jobs, re-raise below
                fatal.append(e)
                return
            finally:
                if estimate > 0:
                    await ledger.settle(estimate, actual)  # type: ignore[union-attr]
            state["spent"] += actual
            finish(i, completion)

    try:
        workers = [asyncio.create_task(worker()) for _ in range(max(1, min(max_concurrency, len(jobs) or 1)))]
        outcome = await asyncio.gather(*workers, return_exceptions=True)
        errors = [o for o in outcome if isinstance(o, BaseException)]
        if fatal:
            raise fatal[0]
        if errors:
            raise errors[0]
    finally:
        if close:
            seen: set[int] = set()
            for job in jobs:
                if id(job.backend) not in seen:
                    seen.add(id(job.backend))
                    await job.backend.aclose()
    return PoolResult(completions=results, skipped=sorted(skipped), spent_usd=state["spent"],  # type: ignore[arg-type]
                      wall_s=time.perf_counter() - started, stopped_by_budget=state["stopped"])


def run_pool(jobs: list[Job], max_concurrency: int = 8, on_done: Callable[[Job, Completion], None] | None = None, *,
             progress: Progress | None = None, max_usd: float | None = None, close: bool = True,
             ledger: Ledger | None = None, lease: Callable[[], AsyncContextManager] | None = None) -> PoolResult:
    """Complete every job (in one event loop); the i-th completion belongs to the i-th job. `ledger` (the budget
    of `max_usd`, default this pool's own) and `lease` (held by each live call): see module docstring."""
    return _run_loop(run_pool_async(jobs, max_concurrency, on_done, progress=progress, max_usd=max_usd, close=close,
                                    ledger=ledger, lease=lease))


def run_async(coro):
    """Run `coro` to completion in a new event loop: the loop every pool of calls runs in."""
    return _run_loop(coro)


def _run_loop(coro):
    """`asyncio.run(coro)`, in this thread's own loop, kept: closing a loop costs more than a sweep member's
    whole extraction. As `asyncio.run`, the coroutine sees a copy of the caller's context, and what it leaves
    running is cancelled at the end."""
    runner = getattr(_loops, "runner", None)
    if runner is None:
        # uvloop (where it installs: not on Windows) halves the event loop's per-call CPU, which is
        # what bounds throughput once many calls are in flight on a small machine.
        try:
            import uvloop  # lazy: uvloop is loaded only where it is used (import cost)
        except ImportError:
            factory = None
        else:
            factory = uvloop.new_event_loop
        runner = _loops.runner = asyncio.Runner(loop_factory=factory)
    try:
        return runner.run(coro, context=contextvars.copy_context())
    finally:
        _cancel_left(runner.get_loop())


def _cancel_left(loop: asyncio.AbstractEventLoop) -> None:
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in left:
        t.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


def run_jobs(jobs: list[Job], max_concurrency: int = 8, on_done: Callable[[Job, Completion], None] | None = None, *,
             progress: Progress | None = None, max_usd: float | None = None, close: bool = True) -> list[Completion]:
    """Complete every job; the i-th result belongs to the i-th job."""
    return run_pool(jobs, max_concurrency, on_done, progress=progress, max_usd=max_usd, close=close).completions


def tqdm_progress(total: int, desc: str = "extract") -> tuple[Progress, Callable[[], None]]:
    """A progress callback drawing a tqdm bar on stderr, and the function that closes it."""
    from tqdm import tqdm  # lazy: tqdm is loaded only where it is used (import cost)

    bar = tqdm(total=total, desc=desc, unit="call", file=sys.stderr, dynamic_ncols=True, leave=False)

    def progress(done: int, _total: int, job: Job, completion: Completion) -> None:
        bar.update(1)
        if completion.error:
            bar.set_postfix_str(f"last error: {job.backend.label} {job.request.member}", refresh=False)

    return progress, bar.close
