"""``python:MODULE:FUNCTION`` — a researcher's own extraction pipeline, contained in processes of its own.

The function is called once per member as ``FUNCTION(document_text, task)`` and returns the record
(a dict). It may be a plain function or a coroutine function. ``task`` is a dict: ``task`` (task id),
``member`` (``task/member``), ``call_type``, ``system``, ``user`` (the rendered prompts), ``schema``
(the output JSON Schema), ``max_tokens``, ``temperature``.

MODULE is a dotted module name importable from the current directory or ``sys.path``, or a path to a
``.py`` file (``pipelines/mine.py:extract``).

A pipeline that wants its own cost counted may return an `evalkit.backends.Completion` instead of a
dict (tokens, usd, calls...); a string is parsed like a model's answer (clean / recovered / malformed).

Containment. The function runs in a child process (`evalkit.backends.pyworker`), one call at a time;
a backend keeps as many as it has calls in flight and reuses them (a process costs ~150 ms to start, a
call through a warm one well under a millisecond: docs/pipelines.md). Each child has its own temporary
working directory, an address-space cap (``limits.PIPELINE_MEMORY_BYTES``) and a wall-clock deadline
per call (``limits.PIPELINE_TIMEOUT_S``, ``--pipeline-timeout``). Whatever goes wrong in it — an
exception, ``sys.exit``, ``os._exit``, a segfault, the memory cap, the deadline, an answer that is not
JSON or is over ``limits.ANSWER_BYTES`` — is that member's ``error`` (`evalkit.status`: cause
``pipeline_exception``, ``timeout`` or ``pipeline_result_invalid``), never the run's; the child is
replaced. Its stdout and stderr are never shown: their last characters, scrubbed, end the error message.
What the function returns (or raises) passes the secret scrubber like a provider's answer (`evalkit.backends.redact`).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit import limits
from evalkit._util.interrupt import at_stop
from evalkit.backends.base import BackendContext, Completion, Request
from evalkit.backends.parse import parse_record
from evalkit.backends.providers import Provider
from evalkit.backends.pyworker import HEADER
from evalkit.backends.redact import scrub, scrub_answer, secrets, short
from evalkit.backends.spec import BackendSpec
from evalkit.errors import ChildGone, Oversize, UsageError
from evalkit.status import PIPELINE_EXCEPTION, PIPELINE_RESULT_INVALID, TIMEOUT

ENVELOPE_BYTES = 64 * 1024  # a frame's room beyond the answer itself (its kind, latency, the fields of a Completion)
OUTPUT_KEPT = 16 * 1024  # bytes of a child's stdout/stderr held, newest last
OUTPUT_SHOWN = 160  # characters of it that end an error message
CLOSE_GRACE_S = 0.5  # an idle child's time to leave by itself when its backend closes


class Frames:
    """Length-prefixed frames out of a byte stream, none over `limit` bytes (refused from its header alone)."""

    def __init__(self, limit: int):
        self.limit, self.buf = limit, bytearray()

    def feed(self, data: bytes) -> bytes | None:
        self.buf += data
        if len(self.buf) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.buf)
        if size > self.limit:
            raise Oversize(size)
        if len(self.buf) < HEADER.size + size:
            return None
        frame = bytes(self.buf[HEADER.size:HEADER.size + size])
        del self.buf[:HEADER.size + size]
        return frame


class Output:
    """A child's stdout and stderr, drained by a thread of its own (a full pipe would stall the child), the
    newest `OUTPUT_KEPT` bytes kept."""

    def __init__(self, stream: Any):
        self.buf, self.total, self.lock = bytearray(), 0, threading.Lock()
        self.thread = threading.Thread(target=self._drain, args=(stream,), name="evalkit-pipeline-output", daemon=True)
        self.thread.start()

    def _drain(self, stream: Any) -> None:
        while chunk := stream.read1(65536):
            with self.lock:
                self.buf += chunk
                self.total += len(chunk)
                del self.buf[:-OUTPUT_KEPT]

    def since(self, mark: int) -> str:
        """What was written after `mark` (a `total`), scrubbed, its last `OUTPUT_SHOWN` characters."""
        with self.lock:
            new = self.total - mark
            raw = bytes(self.buf[-new:]) if new > 0 else b""
        cut = new > len(raw)
        text = scrub(raw.decode("utf-8", "replace"), key_shaped=True)
        if cut:  # the kept bytes may start inside a secret, which no rule then matches: drop that much
            text = text[max((len(v) for _, v in secrets()), default=0):]
        return " ".join(text.split())[-OUTPUT_SHOWN:]


class Child:
    """One `pyworker` process: its pipes, its output, its working directory."""

    def __init__(self, target: str, memory: int, answer: int):
        self.dir = tempfile.mkdtemp(prefix="evalkit-pipeline-")
        cmd = [sys.executable, "-m", "evalkit.backends.pyworker", target, os.getcwd(), str(memory), str(answer)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=self.dir, start_new_session=True)  # its own group: killed with its children
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both piped just above
        self.requests, self.answers = self.proc.stdin, self.proc.stdout
        self.output = Output(self.proc.stderr)
        self.frames = Frames(answer + ENVELOPE_BYTES)
        _live.add(self)

    def send(self, message: dict[str, Any]) -> None:
        payload = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
        try:
            self.requests.write(HEADER.pack(len(payload)) + payload)
            self.requests.flush()
        except (BrokenPipeError, ValueError):
            raise ChildGone from None

    async def receive(self) -> dict[str, Any]:
        """The next answer; `ChildGone` at its end, `Oversize` for one over the limit."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bytes] = loop.create_future()
        fd = self.answers.fileno()
        os.set_blocking(fd, False)

        def readable() -> None:
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if done.done():
                return
            try:
                frame = self.frames.feed(data) if data else None
            except Oversize as e:
                done.set_exception(e)
                return
            if frame is not None:
                done.set_result(frame)
            elif not data:
                done.set_exception(ChildGone())

        loop.add_reader(fd, readable)
        try:
            answer: dict[str, Any] = json.loads(await done)
            return answer
        finally:
            loop.remove_reader(fd)

    def receive_now(self, timeout: float) -> dict[str, Any]:
        """`receive`, blocking (for the first child, started outside any event loop)."""
        fd, deadline = self.answers.fileno(), time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            data = os.read(fd, 1 << 20)
            if not data:
                raise ChildGone
            frame = self.frames.feed(data)
            if frame is not None:
                answer: dict[str, Any] = json.loads(frame)
                return answer

    def ended(self, when: str) -> str:
        """How the child ended (it is gone or killed), `when`: ``exited with code 1 during the call``."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            return (f"was killed by {name} {when} (a crash, or its memory cap: "
                    f"{limits.PIPELINE_MEMORY_BYTES.describe()})")
        return f"exited with code {code} {when}"

    def kill(self) -> None:
        """SIGKILL the child and whatever it started; reap it; remove its folder."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.output.thread.join(timeout=1)  # its last words (the pipe closes with the process group)
        self.forget()

    def forget(self) -> None:
        _live.discard(self)
        for stream in (self.requests, self.answers):
            try:
                stream.close()
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


_live: weakref.WeakSet[Child] = weakref.WeakSet()


def close_children(children: list[Child], grace: float = CLOSE_GRACE_S) -> None:
    """End idle children: their requests pipe closed, they leave by themselves; SIGKILL for any still there."""
    for child in children:
        try:
            child.requests.close()
        except OSError:
            pass
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        child.kill()


def _close_all() -> None:
    close_children(list(_live), grace=0.0)


def _register_stop() -> None:
    atexit.register(_close_all)
    at_stop(_close_all)  # a stopped sweep worker: its children are killed; their folders go too


_register_stop()


class PythonBackend:
    provider = "python"

    def __init__(self, label: str, target: str, documents: Callable[[str], str] | None = None,
                 tasks: Callable[[str], dict[str, Any]] | None = None):
        self.label = label
        self.spec = self.model = BackendSpec(label, "python", {"target": target}).spec  # a pipeline's model is its spec
        self.target = _absolute(target)
        self._documents = documents
        self._tasks = tasks
        self._idle: list[Child] = [self._first_child()]
        self.on_failure = None  # failures of a pipeline are its own; kept for the recording wrapper

    def _start(self) -> Child:
        return Child(self.target, limits.PIPELINE_MEMORY_BYTES.int_value(), limits.ANSWER_BYTES.int_value())

    def _first_child(self) -> Child:
        """A child that has imported the module: a module that cannot be imported is a usage error, before any call."""
        child = self._start()
        timeout = limits.PIPELINE_TIMEOUT_S.value()
        try:
            ready = child.receive_now(timeout)
        except TimeoutError:
            child.kill()
            raise UsageError(f"python backend: importing {self.spec} took over {timeout:g} s "
                             f"({limits.PIPELINE_TIMEOUT_S.describe()})") from None
        except (ChildGone, Oversize):
            how = child.ended("while importing it")
            tail = child.output.since(0)
            child.kill()
            raise UsageError(short(_line(f"python backend: importing {self.spec}: the process {how}", tail))) from None
        if not ready.get("ready"):
            child.kill()
            message = scrub(str(ready.get("message")), key_shaped=True)
            prefix = "" if ready.get("cause") == "usage" else f"python backend: importing {self.spec} "
            raise UsageError(short(prefix + message))
        return child

    def task_dict(self, request: Request) -> dict[str, Any]:
        base = {"task": request.member.split("/", 1)[0], "member": request.member, "call_type": request.call_type,
                "system": request.system, "user": request.user, "schema": request.schema,
                "max_tokens": request.max_tokens, "temperature": request.temperature}
        if self._tasks is not None:
            base.update(self._tasks(request.member))
        if request.sample:  # --samples K: which sample this call is (absent for sample 0, as without samples)
            base["sample"] = request.sample
        return base

    def estimate_usd(self, request: Request) -> float:
        return 0.0  # unknown: a pipeline's own calls are not visible to evalkit

    async def complete(self, request: Request) -> Completion:
        return scrub_answer(await self._complete(request))

    async def _child(self) -> Child:
        """An idle child that has imported the module (a new one when none is idle)."""
        while self._idle:
            child = self._idle.pop()
            if child.proc.poll() is None:
                return child
            child.kill()
        child = self._start()
        try:
            ready = await child.receive()
        except (ChildGone, Oversize):
            how = child.ended("while importing its module")
            child.kill()
            raise _Failed(f"could not start: the pipeline's process {how}") from None
        except BaseException:
            child.kill()
            raise
        if not ready.get("ready"):
            child.kill()
            raise _Failed(f"could not import its module again: {ready.get('message')}")
        return child

    async def _complete(self, request: Request) -> Completion:
        document = self._documents(request.member) if self._documents is not None else request.user
        message = {"document": document, "task": self.task_dict(request)}
        who = f"{self.spec} on {request.member}"
        timeout = limits.PIPELINE_TIMEOUT_S.value()
        started = time.perf_counter()
        child: Child | None = None
        mark = 0
        try:
            async with asyncio.timeout(timeout):
                child = await self._child()
                mark = child.output.total
                child.send(message)
                answer = await child.receive()
        except TimeoutError:
            tail = _kill(child, mark)
            return _error(f"{TIMEOUT}: {who} did not answer within {timeout:g} s (the {limits.PIPELINE_TIMEOUT_S.name} "
                          f"limit; raise it with --pipeline-timeout or {limits.PIPELINE_TIMEOUT_S.env})", tail,
                          self.model, started)
        except ChildGone:
            how = child.ended("during the call") if child is not None else "is gone"
            return _error(f"{who}: the pipeline's process {how}", _kill(child, mark), self.model, started)
        except Oversize as e:
            return _error(f"{PIPELINE_RESULT_INVALID}: {who} returned an answer of over {e.size} bytes, over the "
                          f"{limits.ANSWER_BYTES.describe()}", _kill(child, mark), self.model, started)
        except _Failed as e:
            return _error(f"{who} {e}", "", self.model, started)
        except BaseException:  # cancelled (Ctrl-C, SIGTERM): the call is abandoned with its process
            _kill(child, mark)
            raise
        if "cause" in answer:
            tail = child.output.since(mark)
            self._idle.append(child)
            cause = answer["cause"]
            prefix = f"{cause}: " if cause == PIPELINE_RESULT_INVALID else ""
            return _error(f"{prefix}{who} {answer.get('message')}", tail, self.model, started)
        self._idle.append(child)
        return self._completion(answer, who)

    def _completion(self, answer: dict[str, Any], who: str) -> Completion:
        kind, value, latency = answer["kind"], answer["value"], float(answer.get("latency_s") or 0.0)
        if kind == "completion":
            fields = {f.name for f in dataclasses.fields(Completion)}
            result = Completion(**{k: v for k, v in value.items() if k in fields})
            if not result.latency_s:
                result.latency_s = latency
            result.model = result.model or self.model
            return result
        if kind == "dict":
            return Completion(record=value, raw=json.dumps(value, ensure_ascii=False), parse="clean", model=self.model,
                              latency_s=latency)
        if kind == "str":
            record, outcome = parse_record(value)
            return Completion(record=record, raw=value, parse=outcome, model=self.model, latency_s=latency)
        type_name = str(value).split(":", 1)[0]
        return Completion(record=None, raw=str(value), parse="malformed", model=self.model, latency_s=latency,
                          error=f"{who} returned {type_name}, expected a dict")

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        close_children(idle)


class _Failed(Exception):
    """A failure of the pipeline's process outside a call (a new child that could not import its module)."""


def _kill(child: Child | None, mark: int) -> str:
    """Kill `child` (if any) and return the scrubbed tail of what it wrote after `mark`."""
    if child is None:
        return ""
    child.kill()
    return child.output.since(mark)


def _line(message: str, tail: str) -> str:
    return f"{message}; its output ended: {tail}" if tail else message


def _error(message: str, tail: str, model: str, started: float) -> Completion:
    return Completion(record=None, parse="error", model=model, latency_s=time.perf_counter() - started,
                      error=_line(message, tail))


def _absolute(target: str) -> str:
    """A ``.py`` path made absolute: the child runs in a folder of its own."""
    module, sep, func = target.rpartition(":")
    if sep and (module.endswith(".py") or "/" in module):
        return f"{Path(module).absolute()}:{func}"
    return target


def make(spec: BackendSpec, ctx: BackendContext) -> PythonBackend:
    return PythonBackend(spec.label, spec.options.get("target", ""), documents=ctx.documents, tasks=ctx.tasks)


# A pipeline makes its own calls (if any): evalkit can record and replay them, not price them.
PROVIDER = Provider("python", make, usage="python:MODULE:FUNCTION", live=True, metered=False, rerecord="{model}",
                    failure=PIPELINE_EXCEPTION)
