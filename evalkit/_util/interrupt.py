"""Stopping on SIGINT / SIGTERM: the main process, its worker processes and theirs.

One path for both signals. The CLI (`handle_signals`) makes SIGTERM do what Ctrl-C does: raise
KeyboardInterrupt in the main thread, or cancel the running asyncio extraction pool (asyncio's own
Ctrl-C handling), so whatever phase a run is in unwinds through its ``finally`` blocks. A phase that
owns worker processes stops them at once (`workers.stop_pool`: SIGTERM, then SIGKILL for whatever is left of
their process trees, kernels included). The runner or sweep then removes what killed writers left
(`jsonio.remove_partials`) and raises `Interrupted` saying what finished; the CLI prints that with the
command that resumes and exits 128 + the signal number: 130 for SIGINT, 143 for SIGTERM.

Worker processes (`evalkit.execution.workers`: notebooks, sweep members) start with both signals blocked (`spawn_context`),
so a Ctrl-C, which the terminal sends to the whole process group, cannot strike one half-started.
Their initializer (`worker_signals`) ignores SIGINT (the main process decides) and answers SIGTERM by
stopping its own children, running the cleanups registered with `on_stop` and leaving at once: no
traceback, no half-written file.

A worker also leaves that way when the process that started it dies, even by SIGKILL (`watch_parent`): an
orphan would go on calling a paid model and running kernels nobody reads. It notices at once on Linux
(``PR_SET_PDEATHSIG``), within `PARENT_POLL_S` elsewhere, then lets a call in flight (`finishing`) record
its answer for up to `ORPHAN_GRACE_S` — an answer received is paid for, and the resumed sweep reuses it.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing.util
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.context import SpawnContext, SpawnProcess
from pathlib import Path
from typing import Any

__all__ = ["Interrupted", "received", "handle_signals", "signals_blocked", "spawn_context", "worker_signals",
           "on_stop", "stop_processes", "watch_parent", "finishing"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
POOL_GRACE_S = 1.0  # a stopped worker's time to stop its own children and clean up before SIGKILL
PARENT_POLL_S = 0.2  # how often an orphaned worker looks for its parent where the OS cannot tell it at once
ORPHAN_GRACE_S = 1.5  # an orphaned worker's time to record the answer of a call in flight (then it leaves)
PARENT_GONE = signal.SIGHUP  # the signal Linux sends a worker when its parent dies: only a cue to look
_CAN_MASK = hasattr(signal, "pthread_sigmask")


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal. `done`: what finished; `run_dir`: where it is kept."""

    def __init__(self, done: str = "", run_dir: Path | None = None, signum: int | None = None):
        super().__init__(done)
        self.done, self.run_dir = done, run_dir
        self.signum = signum if signum is not None else received()  # the CLI exits 128 + signum


# --------------------------------------------------------------------------- the main process

_received: list[int] = []


def received() -> int:
    """The signal that stopped this process: SIGTERM if one came, else SIGINT (Python's own Ctrl-C)."""
    return _received[-1] if _received else signal.SIGINT


def handle_signals() -> None:
    """Make SIGTERM stop this process the way Ctrl-C does (call from the main thread)."""

    def on_term(signum: int, frame: Any) -> None:
        _received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):  # Python's (KeyboardInterrupt) or asyncio's (cancel the running pool)
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)


@contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold SIGINT/SIGTERM pending (not lost) in this thread for the block."""
    if not _CAN_MASK:
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _QuietSpawnProcess(SpawnProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with signals_blocked():  # the child inherits the mask; `worker_signals` lifts it
            return SpawnProcess._Popen(process_obj)


class _QuietSpawnContext(SpawnContext):
    Process = _QuietSpawnProcess


def spawn_context() -> SpawnContext:
    """The multiprocessing context for worker processes: spawn, with SIGINT/SIGTERM blocked until
    the worker's initializer (`worker_signals`) has set its handlers."""
    return _QuietSpawnContext()


# --------------------------------------------------------------------------- worker processes

_cleanups: list[Callable[[], None]] = []


def worker_signals(grace: float = 0.0) -> None:
    """A worker process's first act: ignore SIGINT; on SIGTERM stop its children (SIGKILL after
    `grace` s), run the `on_stop` cleanups and exit at once. Then unblock both signals.

    Off the main thread (a Dask worker's task thread: `evalkit.execution.scheduler`) it does nothing: that process's
    signals are its owner's (the Dask worker stops itself and its children), and Python allows none to be set."""
    if threading.current_thread() is not threading.main_thread():
        return

    def leave(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the pool may terminate us again: once is enough
        _leave(128 + signum, grace)

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, leave)
    if _CAN_MASK:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


_leaving = threading.Lock()


def _leave(status: int, grace: float) -> None:
    """Stop this worker's children (SIGKILL after `grace` s), run the `on_stop` cleanups, exit with `status`."""
    import psutil  # lazy: psutil is loaded only where it is used (import cost)

    _leaving.acquire()  # once: a SIGTERM while the parent watch is leaving waits here for the exit
    logging.disable(logging.CRITICAL)  # a notebook thread seeing its kernel go says nothing: we are leaving
    try:
        stop_processes([c.pid for c in psutil.Process().children()], grace)
        for fn in reversed(_cleanups):
            with suppress(Exception):  # leaving anyway: the next cleanup still runs
                fn()
        # What multiprocessing does at a normal exit: release this process's semaphores (its own pools'),
        # so the resource tracker has no "leaked semaphore" warning to print.
        getattr(multiprocessing.util, "_run_finalizers", lambda _: None)(0)
    finally:
        os._exit(status)  # no interpreter teardown: nothing half-done gets to print or write


_busy: list[Callable[[], bool]] = []


@contextmanager
def finishing(busy: Callable[[], bool]) -> Iterator[None]:
    """Inside the block, an orphaned worker (`watch_parent`) waits while `busy()` is true (a paid call in
    flight, whose answer is about to be recorded), `ORPHAN_GRACE_S` at most, before it leaves."""
    _busy.append(busy)
    try:
        yield
    finally:
        _busy.remove(busy)


def watch_parent(parent: int | None = None, grace: float = 0.0, orphan_grace: float = ORPHAN_GRACE_S) -> None:
    """Leave (`_leave`: children stopped, cleanups run) once `parent` (default: the process that started this
    one) is gone, however it died: a daemon thread looks every `PARENT_POLL_S`; on Linux the kernel also sends
    `PARENT_GONE` the moment it dies (``PR_SET_PDEATHSIG``), which only wakes that thread. A worker's call in
    flight (`finishing`) gets `orphan_grace` s to record its answer first."""
    if parent is None:
        known = multiprocessing.parent_process()  # the spawner's pid, even if it died before we got here
        parent = known.pid if known is not None else os.getppid()
    cue = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(PARENT_GONE, lambda signum, frame: cue.set())  # a hangup alone, parent alive, changes nothing
        _death_signal(PARENT_GONE)

    def watch() -> None:
        while os.getppid() == parent:  # re-parented: the parent died
            cue.wait(PARENT_POLL_S)
            cue.clear()
        deadline = time.monotonic() + orphan_grace
        while any(busy() for busy in list(_busy)) and time.monotonic() < deadline:
            time.sleep(0.02)
        _leave(128 + PARENT_GONE, grace)

    threading.Thread(target=watch, name="evalkit-parent-watch", daemon=True).start()


def _death_signal(signum: int) -> None:
    """Linux: have the kernel send `signum` to this process when its parent dies (elsewhere: nothing)."""
    if not sys.platform.startswith("linux"):
        return

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl (another libc): the watch thread's polling still works
        pass


@contextmanager
def on_stop(cleanup: Callable[[], None]) -> Iterator[None]:
    """Run `cleanup` if this worker is stopped (SIGTERM) inside the block."""
    _cleanups.append(cleanup)
    try:
        yield
    finally:
        _cleanups.remove(cleanup)


def at_stop(cleanup: Callable[[], None]) -> None:
    """Run `cleanup` if this worker is stopped (SIGTERM) at any time from now on (what lives as long as the
    worker: its warm kernel, `evalkit.execution.kernels`)."""
    if cleanup not in _cleanups:
        _cleanups.insert(0, cleanup)  # runs last: after the cleanups of whatever is in flight


# --------------------------------------------------------------------------- stopping processes


def stop_processes(pids: Iterable[int], grace: float = POOL_GRACE_S) -> None:
    """SIGTERM these processes (SIGKILL if `grace` is 0); SIGKILL whatever is left of them and their
    descendants after `grace` s. Returns when they are gone (or after another second at most).

    The descendants are collected first: once a parent dies its children are re-parented and lost.
    multiprocessing's resource trackers are left alone: they leave by themselves once their owner is
    gone, and they are what removes the semaphores it leaked."""
    import psutil  # lazy: psutil is loaded only where it is used (import cost)

    tops: list[Any] = []
    family: dict[int, Any] = {}  # psutil.Process by pid (psutil is untyped)
    for pid in pids:
        try:
            top = psutil.Process(pid)
            members = [p for p in [top, *top.children(recursive=True)] if not _is_tracker(p)]
        except psutil.Error:
            continue
        family.update((p.pid, p) for p in members)
        tops += [top] if members and members[0] is top else []
    for p in tops:
        _send(p, kill=grace <= 0)
    _wait_gone(family.values(), grace)
    for p in family.values():
        if _alive(p):
            _send(p, kill=True)
    _wait_gone(family.values(), 1.0)


def _send(p: Any, kill: bool) -> None:
    import psutil  # lazy: psutil is loaded only where it is used (import cost)

    try:
        p.kill() if kill else p.terminate()
    except psutil.Error:
        pass


def _alive(p: Any) -> bool:
    import psutil  # lazy: psutil is loaded only where it is used (import cost)

    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _is_tracker(p: Any) -> bool:
    import psutil  # lazy: psutil is loaded only where it is used (import cost)

    try:
        return any("multiprocessing.resource_tracker" in part for part in p.cmdline())
    except psutil.Error:
        return False


def _wait_gone(procs: Iterable[Any], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.02)
