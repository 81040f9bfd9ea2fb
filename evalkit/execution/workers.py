"""Worker processes: the one pool helper, for a run's notebooks and a sweep's members alike.

`run_all(calls, workers)` runs each call ``(function, args)`` in a worker process, at most `workers`
at a time; a call starts once the calls its `after` names have finished. Results come back in call
order, each the function's return value or the exception it raised (as ``asyncio.gather(...,
return_exceptions=True)`` gives them): one failing call never stops the others.

Workers are spawned with SIGINT/SIGTERM blocked until their initializer has set their handlers
(`interrupt.spawn_context`); the initializer must call `interrupt.worker_signals`. A worker that dies
(killed, out of memory, a crash in native code) breaks the whole pool, and which call in flight
caused it is not known: calls not yet started go on in a fresh pool, then each call that was in
flight (running, or queued to the pool: one per worker waits there, so no worker waits on this process)
runs again alone; one that breaks its pool of one too gets `WorkerDied`. So a dying worker fails only its
own call.

Inside a worker, `run_all` runs its calls itself, one after another: a pool there would only put
one more process between the worker and what it starts (a sweep member's notebook kernels).

An interrupt (SIGINT/SIGTERM, `evalkit._util.interrupt`) stops the pool at once (`stop_pool`): queued calls
cancelled, workers and everything they started killed, not waited for. A worker whose parent dies without
stopping it (SIGKILL, a crash) leaves by itself, its kernels with it (`interrupt.watch_parent`).

With a `scheduler` (an open `evalkit.execution.scheduler.Cluster`: ``--scheduler``) the same calls run as Dask tasks
instead, with the same results, order and `on_done` (see `evalkit.execution.scheduler`); the local pool is the default.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from evalkit._util.interrupt import (
    POOL_GRACE_S,
    signals_blocked,
    spawn_context,
    stop_processes,
    watch_parent,
    worker_signals,
)
from evalkit.errors import WorkerDied

__all__ = ["WorkerDied", "run_all", "stop_pool", "in_worker"]

Call = tuple[Callable[..., Any], tuple]
_PENDING = object()
_in_worker = False


def in_worker() -> bool:
    """Whether this process is a worker `run_all` started."""
    return _in_worker


def _start(initializer: Callable[..., None], initargs: tuple) -> None:
    global _in_worker
    _in_worker = True
    initializer(*initargs)
    watch_parent()  # an orphan leaves: no paid call, no kernel goes on for a parent that is gone


def stop_pool(pool: ProcessPoolExecutor, grace: float = POOL_GRACE_S) -> None:
    """Stop a pool now: queued calls cancelled, workers and what they started stopped (SIGTERM, then
    SIGKILL after `grace` s). A second signal meanwhile waits until this is done (then raised as usual)."""
    with signals_blocked():
        workers = list((getattr(pool, "_processes", None) or {}).keys())  # no public accessor before 3.14
        pool.shutdown(wait=False, cancel_futures=True)
        stop_processes(workers, grace)


def run_all(calls: Sequence[Call], workers: int | None = None, *, after: Sequence[set[int]] | None = None,
            initializer: Callable[..., None] = worker_signals, initargs: tuple = (),
            on_done: Callable[[int, Any], None] | None = None, scheduler: Any = None) -> list[Any]:
    """Run every call; the i-th result belongs to the i-th call (see module docstring).

    `workers` defaults to the CPU count; `after[i]`: indices of the calls that must finish (successfully or
    not) before call i starts; `initializer(*initargs)` runs first in each worker; `on_done(i, result)` is
    called in this process as each call finishes. `scheduler`: an `evalkit.execution.scheduler.Cluster` to run them on
    (`workers` is then the cluster's)."""
    if scheduler is not None and not _in_worker and calls:
        return scheduler.run_all(calls, after, initializer, initargs, on_done)
    return _Pool(calls, after, initializer, initargs, on_done).run(workers or os.cpu_count() or 1)


class _Pool:
    def __init__(self, calls: Sequence[Call], after: Sequence[set[int]] | None, initializer: Callable[..., None],
                 initargs: tuple, on_done: Callable[[int, Any], None] | None):
        self.calls, self.initializer, self.initargs, self.on_done = calls, initializer, initargs, on_done
        self.after = [set(a) - {i} for i, a in enumerate(after)] if after is not None else [set() for _ in calls]
        self.results: list[Any] = [_PENDING] * len(calls)
        # The calls not finished, in call order: what `_next` looks through, so that finding the next call costs
        # the calls before it that cannot start (those running, mostly), not every call (10,000 in a sweep).
        self.pending: dict[int, None] = dict.fromkeys(range(len(calls)))
        self.suspects: list[int] = []  # in flight when a worker died: each runs again alone

    def run(self, workers: int) -> list[Any]:
        while self._left():
            if self._next(set()) is not None:
                self._round(workers)
            elif self.suspects:
                i = self.suspects.pop(0)
                if self._round(1, only=i):  # it broke a pool of its own: it is the one
                    self._finish(i, WorkerDied())
            else:  # a dependency cycle: what is left runs in order
                self.after = [set() for _ in self.calls]
        return self.results

    def _left(self) -> int:
        return len(self.pending)

    def _next(self, running: set[int], only: int | None = None) -> int | None:
        """The first call ready to start: not finished, not running, not a suspect, its `after` finished."""
        for i in self.pending if only is None else [only]:
            if self.results[i] is _PENDING and i not in running and (i == only or i not in self.suspects) and \
                    all(self.results[d] is not _PENDING for d in self.after[i]):
                return i
        return None

    def _finish(self, i: int, result: Any) -> None:
        self.results[i] = result
        self.pending.pop(i, None)
        if self.on_done:
            self.on_done(i, result)

    def _round(self, size: int, only: int | None = None) -> list[int]:
        """Run ready calls (or just `only`) until none is left or a worker dies; return the calls in
        flight when one died."""
        if _in_worker:
            return self._here(only)
        pool = ProcessPoolExecutor(max_workers=min(size, self._left()), mp_context=spawn_context(),
                                   initializer=_start, initargs=(self.initializer, self.initargs))
        running: dict[Any, int] = {}
        depth = size if only is not None else 2 * size  # one call queued per worker (module docstring)
        try:
            while True:
                while len(running) < depth and (i := self._next(set(running.values()), only)) is not None:
                    try:
                        running[pool.submit(self.calls[i][0], *self.calls[i][1])] = i
                    except BrokenProcessPool:  # a worker died since the last wait: this call never started
                        if not running:  # and nothing else is in flight to blame
                            return self._died([i], only)
                        break
                if not running:
                    return []
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                died = []
                for fut in sorted(finished, key=running.__getitem__):
                    i = running.pop(fut)
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        died.append(i)
                        continue
                    except Exception as e:  # noqa: BLE001 - the call raised (or its arguments did not pickle)
                        result = e
                    self._finish(i, result)
                if died:
                    return self._died(died + sorted(running.values()), only)
        except BaseException:  # an interrupt: stop the workers now, not when their calls end
            stop_pool(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _died(self, in_flight: list[int], only: int | None) -> list[int]:
        self.suspects += [i for i in in_flight if i != only]
        return in_flight

    def _here(self, only: int | None) -> list[int]:
        """In a worker: the ready calls one after another, in this process."""
        self.initializer(*self.initargs)
        while (i := self._next(set(), only)) is not None:
            fn, args = self.calls[i]
            try:
                result = fn(*args)
            except Exception as e:  # noqa: BLE001 - as from a worker: this call's result
                result = e
            self._finish(i, result)
        return []
