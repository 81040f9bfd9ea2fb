"""`--scheduler local[:N]|tcp://HOST:PORT`: work run as Dask distributed tasks instead of the local pool.

Everything evalkit knows about Dask is here: the spec (`parse`), the cluster a run or sweep opens and closes
(`connect`: ``local`` starts a `distributed.LocalCluster` of N worker processes with one thread each, an
address attaches to a running scheduler), `Cluster.run_all` (what `workers.run_all` does with a cluster), and
the limits a sweep's members share across workers (`shared_limits`: one `distributed.Semaphore` for the live
calls in flight, one budget ledger for ``--max-usd``).

The calls are the same functions the local pool runs, with the same results: each is submitted once the calls
its `after` names have finished (those ready at the start in batches); a call that raises gives its exception
as its result; one Dask gives up on after its worker died runs again alone once the rest is done (the local
pool's rule), and dying alone too is `WorkerDied`. Each worker
process runs the pool's initializer once, before its first call, and becomes a worker as `workers` knows it
(`workers.in_worker`: a member's notebooks run in its own process). Files are written by the workers, into
the run folder's path as the client names it: on other machines that path must be the same shared folder.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from evalkit.errors import UsageError, WorkerDied
from evalkit.execution.workers import _start

__all__ = ["Scheduler", "parse", "connect", "Cluster", "shared_limits", "SharedLedger"]

FORMS = "local, local:N (N worker processes) or tcp://HOST:PORT (a running `dask scheduler`)"
_ADDRESS = re.compile(r"^tcp://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>\d{1,5})$")


@dataclass(frozen=True)
class Scheduler:
    """A parsed ``--scheduler``: an address to attach to, or a local cluster of `workers` processes."""

    address: str | None = None
    workers: int | None = None  # local: None is the CPU count

    def __str__(self) -> str:
        return self.address or ("local" if self.workers is None else f"local:{self.workers}")


def parse(spec: str | Scheduler) -> Scheduler:
    """``local``, ``local:N`` or ``tcp://HOST:PORT``; anything else is a `UsageError` (exit 2)."""
    if isinstance(spec, Scheduler):
        return spec
    text = str(spec).strip()
    if text == "local":
        return Scheduler()
    if text.startswith("local:"):
        n = text.removeprefix("local:")
        if n.isdigit() and int(n) >= 1:
            return Scheduler(workers=int(n))
        raise UsageError(f"--scheduler {spec}: N must be a whole number ≥ 1 (give {FORMS})")
    m = _ADDRESS.match(text)
    if m and 0 < int(m["port"]) < 65536:
        return Scheduler(address=text)
    raise UsageError(f"--scheduler {spec}: not a scheduler (give {FORMS})")


# --------------------------------------------------------------------------- the client side


@contextmanager
def connect(spec: str | Scheduler) -> Iterator[Cluster]:
    """An open `Cluster` for the block: a LocalCluster started and stopped with it, or an attached scheduler
    (left running). A scheduler that cannot be reached is a `UsageError` naming the address."""
    import dask  # lazy: dask is loaded only where it is used (import cost)

    sched = parse(spec)
    # Dask logs each worker start, stop and lost task: what evalkit says itself, once, in its summary.
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker",
                 "distributed.core", "distributed.comm", "distributed.batched"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with dask.config.set({
        # One worker death retries the call on another worker; a second one is `WorkerDied` (as the local pool).
        "distributed.scheduler.allowed-failures": 1,
        # a worker (1 thread) takes one call at a time: a death takes no queued innocent with it
        "distributed.scheduler.worker-saturation": 1.0,
        "distributed.worker.daemon": False,  # a worker may start processes of its own (its notebooks' kernels)
        "distributed.admin.system-monitor.gil.enabled": False,
        "logging.distributed": "critical",
    }):
        from distributed import Client, LocalCluster  # lazy: distributed is loaded only where it is used (import cost)

        cluster = None
        try:
            if sched.address is None:
                cluster = LocalCluster(n_workers=sched.workers or os.cpu_count() or 1, threads_per_worker=1,
                                       processes=True, dashboard_address=None, silence_logs=logging.CRITICAL,
                                       host="127.0.0.1",
                                       # no dashboard; its bare HTTP endpoint on a free port, not 8787 (warns if taken)
                                       scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
                client = Client(cluster)
            else:
                client = Client(sched.address, timeout="10s")
        except OSError as e:  # nothing listening there, or it did not answer in time
            if cluster is not None:
                cluster.close()
            raise UsageError(f"--scheduler {sched}: cannot reach the scheduler ({e})") from None
        try:
            yield Cluster(client, sched)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


class Cluster:
    """A connection to a Dask cluster: what `workers.run_all` submits its calls to."""

    def __init__(self, client: Any, spec: Scheduler):
        self.client, self.spec = client, spec

    def run_all(self, calls: Sequence[tuple[Callable[..., Any], tuple]], after: Sequence[set[int]] | None,
                initializer: Callable[..., None], initargs: tuple,
                on_done: Callable[[int, Any], None] | None) -> list[Any]:
        """Every call as a Dask task, `after` respected; the i-th result belongs to the i-th call.

        Calls ready at the start go in batches (`batch_size`): a Dask task costs a few ms of scheduling, more
        than a `--no-notebooks` member's own work. A call (or batch) Dask gave up on after its worker died runs
        again call by call, each alone once the rest is done, so only a call that kills its worker on its own
        is `WorkerDied` (the local pool's rule)."""
        from distributed import as_completed  # lazy: distributed is loaded only where it is used (import cost)

        waiting = [set(a) - {i} for i, a in enumerate(after)] if after is not None else [set() for _ in calls]
        dependents: dict[int, list[int]] = {}
        for i, deps in enumerate(waiting):
            for d in deps:
                dependents.setdefault(d, []).append(i)
        results: list[Any] = [None] * len(calls)
        unsent = set(range(len(calls)))
        argv = list(sys.argv)
        futures: dict[Any, list[int]] = {}
        queue = as_completed()

        def submit(batch: list[int]) -> None:
            unsent.difference_update(batch)
            name = getattr(calls[batch[0]][0], "__name__", "call")
            fut = self.client.submit(_tasks, initializer, initargs, argv, [calls[i] for i in batch], pure=False,
                                     key=f"evalkit-{name}-{batch[0]}-{len(batch)}-{uuid.uuid4().hex[:8]}")
            futures[fut] = batch
            queue.add(fut)

        def finish(i: int, result: Any) -> None:
            results[i] = result
            if on_done:
                on_done(i, result)
            for j in dependents.get(i, ()):  # those waiting only for this one start now
                waiting[j].discard(i)
                if not waiting[j] and j in unsent:
                    submit([j])

        suspects: list[int] = []  # on a worker that died: each runs again alone, once the rest is done
        alone: set[int] = set()
        try:
            ready = [i for i in range(len(calls)) if not waiting[i]]
            size = batch_size(len(ready), sum(self.client.nthreads().values()) or 1)
            for k in range(0, len(ready), size):
                submit(ready[k:k + size])
            while futures or unsent or suspects:
                if not futures and suspects:
                    alone.add(suspects[0])
                    submit([suspects.pop(0)])
                elif not futures:  # a dependency cycle: what is left runs in order, as in the local pool
                    for i in sorted(unsent):
                        submit([i])
                fut = next(queue)
                batch = futures.pop(fut)
                try:
                    outcome = fut.result()
                except Exception as e:  # noqa: BLE001 - killed twice, or lost with its worker
                    from distributed.scheduler import KilledWorker

                    if isinstance(e, KilledWorker) and not (len(batch) == 1 and batch[0] in alone):
                        suspects += batch  # it may have shared a worker with the call that killed it
                        continue
                    outcome = [_died(e)] * len(batch)
                for i, result in zip(batch, outcome):
                    finish(i, result)
        except BaseException:  # an interrupt: nothing more starts (a local cluster is stopped by `connect`)
            self.client.cancel(list(futures), force=True)
            raise
        return results


def batch_size(ready: int, threads: int) -> int:
    """Calls per Dask task: about four tasks per worker thread to balance the load, at most 32 calls each."""
    return max(1, min(32, ready // (4 * threads)))


def _died(e: Exception) -> Any:
    from distributed.scheduler import KilledWorker  # lazy: distributed is loaded only where it is used (import cost)

    return WorkerDied() if isinstance(e, KilledWorker) else e


# --------------------------------------------------------------------------- the worker side

_started: set[str] = set()


def _tasks(initializer: Callable[..., None], initargs: tuple, argv: list[str],
           calls: list[tuple[Callable[..., Any], tuple]]) -> list[Any]:
    """A batch of calls in one Dask task, one after another: their results, in order."""
    return [_task(initializer, initargs, argv, fn, args) for fn, args in calls]


def _task(initializer: Callable[..., None], initargs: tuple, argv: list[str], fn: Callable[..., Any],
          args: tuple) -> Any:
    """One call in a Dask worker: the pool's initializer first (once per process), then the call; what it
    raises is its result, as from the local pool."""
    # A worker the local pool spawns has the client's sys.argv (multiprocessing hands it over): what a run's
    # run.json records as its command. A Dask worker gets it here.
    sys.argv[:] = argv
    key = f"{getattr(initializer, '__module__', '')}.{getattr(initializer, '__qualname__', '')}{initargs!r}"
    if key not in _started:
        _start(initializer, initargs)
        _started.add(key)
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - this call's result
        return e


# --------------------------------------------------------------------------- limits shared across workers


@dataclass
class Limits:
    """What a sweep member's pool takes from `shared_limits`: a lease per live call, the shared ledger."""

    lease: Callable[[], Any]  # an async context manager: held while a live call is in flight
    ledger: SharedLedger | None


def shared_name() -> str:
    """A name no other sweep on the same cluster uses: the key of its semaphore, lock and ledger."""
    return f"evalkit-{uuid.uuid4().hex}"


# A sweep's call semaphore in this worker process, by the sweep's name: made on its first live call and shared by
# the sweep's members here. One a member cost a `distributed.Semaphore` each (a lease-refresh timer on the worker's
# loop, never stopped) even when the member made no live call: thousands of them in a 10,000-member sweep.
_semaphores: dict[str, Any] = {}
_semaphores_lock = threading.Lock()


def _semaphore(name: str, max_concurrency: int, worker: Any) -> Any:
    from distributed import Semaphore  # optional dependency: only a --scheduler sweep has it

    with _semaphores_lock:
        if name not in _semaphores:
            _semaphores[name] = Semaphore(max_leases=max_concurrency, name=f"{name}-calls",
                                          scheduler_rpc=worker.scheduler, loop=worker.loop)
        return _semaphores[name]


def shared_limits(name: str, max_concurrency: int, max_usd: float | None) -> Limits:
    """The limits named `name` on this worker's cluster (call it in a Dask task): at most `max_concurrency` live
    calls in flight across all workers, and with `max_usd` one budget for all of them."""
    from distributed import get_worker  # lazy: distributed is loaded only where it is used (import cost)

    worker = get_worker()

    @asynccontextmanager
    async def lease() -> AsyncIterator[None]:
        sem = _semaphore(name, max_concurrency, worker)
        await asyncio.to_thread(sem.acquire)  # the pool's own event loop is not the worker's: wait in a thread
        try:
            yield
        finally:
            await asyncio.to_thread(sem.release)

    return Limits(lease, SharedLedger(name, max_usd, worker) if max_usd is not None else None)


class SharedLedger:
    """`pool.Ledger` held by the scheduler: the spend and the reservations in flight of every worker's calls,
    read and changed under one `distributed.Lock` in one `distributed.Variable`."""

    def __init__(self, name: str, max_usd: float, worker: Any = None):
        # lazy: distributed is loaded only where it is used (import cost)
        from distributed import Lock, Variable, get_client

        self.max_usd = max_usd
        self.spent = self.inflight = 0.0  # as last seen: what a refusal reports
        self._lock = Lock(f"{name}-budget-lock", scheduler_rpc=worker.scheduler if worker else None,
                          loop=worker.loop if worker else None)
        self._state = Variable(f"{name}-budget", client=get_client())

    def _change(self, update: Callable[[dict[str, Any]], bool]) -> bool:
        with self._lock:
            try:
                state = self._state.get(timeout=0)
            except Exception:  # noqa: BLE001 - not set yet: nothing spent (asyncio.TimeoutError in this version)
                state = {"spent": 0.0, "inflight": 0.0, "stopped": False}
            ok = update(state)
            self._state.set(state)
        self.spent, self.inflight = state["spent"], state["inflight"]
        return ok

    def _reserve(self, estimate: float) -> bool:
        def update(state: dict[str, Any]) -> bool:
            if state["stopped"] or state["spent"] + state["inflight"] + estimate > self.max_usd + 1e-12:
                state["stopped"] = True  # from then on no paid call starts, on any worker
                return False
            state["inflight"] += estimate
            return True
        return self._change(update)

    def _settle(self, estimate: float, actual: float) -> None:
        def update(state: dict[str, Any]) -> bool:
            state["inflight"] -= estimate
            state["spent"] += actual
            return True
        self._change(update)

    async def reserve(self, estimate: float) -> bool:
        return await asyncio.to_thread(self._reserve, estimate)

    async def settle(self, estimate: float, actual: float) -> None:
        await asyncio.to_thread(self._settle, estimate, actual)


def forget(cluster: Cluster, name: str) -> None:
    """Remove what the limits named `name` left on the scheduler (a long-lived cluster keeps it otherwise)."""
    from distributed import Variable  # lazy: distributed is loaded only where it is used (import cost)

    try:
        Variable(f"{name}-budget", client=cluster.client).delete()
    except Exception:  # noqa: BLE001 - cleaning up must never fail a sweep
        pass
