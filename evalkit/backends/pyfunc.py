"""``python:MODULE:FUNCTION`` — a researcher's own extraction pipeline.

The function is called once per member as ``FUNCTION(document_text, task)`` and
returns the record (a dict). It may be a plain function (run in a daemon
thread, so many members still overlap and a stopped run does not wait for a
call still working) or a coroutine function. ``task`` is a
dict: ``task`` (task id), ``member`` (``task/member``), ``call_type``,
``system``, ``user`` (the rendered prompts), ``schema`` (the output JSON
Schema), ``max_tokens``, ``temperature``.

MODULE is a dotted module name importable from the current directory or
``sys.path``, or a path to a ``.py`` file (``pipelines/mine.py:extract``).

A pipeline that wants its own cost counted may return an
`evalkit.backends.Completion` instead of a dict (tokens, usd, calls...); a
string is parsed like a model's answer (clean / recovered / malformed). An
exception raised by the function becomes that member's error, not the run's.
What the function returns (or raises) passes the secret scrubber like a
provider's answer (`evalkit.redact`).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import UsageError
from ..jsonio import nonfinite_path
from ..redact import scrub_answer
from .base import BackendContext, Completion, Request
from .parse import parse_record
from .providers import Provider
from .spec import BackendSpec


def load_function(target: str) -> Callable[..., Any]:
    module_name, sep, func_name = target.rpartition(":")
    if not sep or not module_name or not func_name:
        raise UsageError(f"python backend: expected python:MODULE:FUNCTION, got python:{target}")
    try:
        if module_name.endswith(".py") or "/" in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"python backend: {path}: no such file")
            spec = importlib.util.spec_from_file_location(f"evalkit_pipeline_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            cwd = str(Path.cwd())
            if cwd not in sys.path:
                sys.path.insert(0, cwd)
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - any import failure is a configuration error
        raise UsageError(f"python backend: cannot import {module_name}: {type(e).__name__}: {e}") from None
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise UsageError(f"python backend: {module_name} has no function {func_name!r}")
    return fn


async def in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """`asyncio.to_thread`, but in a daemon thread of its own: neither the event loop's shutdown nor the
    interpreter's exit waits for it (a stopped run leaves at once; the abandoned call's result is dropped)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if done.done():  # cancelled meanwhile
            return
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)

    def work() -> None:
        try:
            outcome = (True, fn(*args))
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (False, e)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: the run was stopped
            pass

    threading.Thread(target=work, name=f"evalkit-pipeline-{getattr(fn, '__name__', 'fn')}", daemon=True).start()
    return await done


class PythonBackend:
    provider = "python"

    def __init__(self, label: str, target: str, documents: Callable[[str], str] | None = None,
                 tasks: Callable[[str], dict[str, Any]] | None = None):
        self.label = label
        self.spec = self.model = BackendSpec(label, "python", {"target": target}).spec  # a pipeline's model is its spec
        self.target = target
        self._fn = load_function(target)
        self._documents = documents
        self._tasks = tasks
        self.on_failure = None  # failures of a pipeline are its own; kept for the recording wrapper

    def task_dict(self, request: Request) -> dict[str, Any]:
        base = {"task": request.member.split("/", 1)[0], "member": request.member, "call_type": request.call_type,
                "system": request.system, "user": request.user, "schema": request.schema,
                "max_tokens": request.max_tokens, "temperature": request.temperature}
        if self._tasks is not None:
            base.update(self._tasks(request.member))
        return base

    def estimate_usd(self, request: Request) -> float:
        return 0.0  # unknown: a pipeline's own calls are not visible to evalkit

    async def complete(self, request: Request) -> Completion:
        return scrub_answer(await self._complete(request))

    async def _complete(self, request: Request) -> Completion:
        document = self._documents(request.member) if self._documents is not None else request.user
        task = self.task_dict(request)
        started = time.perf_counter()
        try:
            if inspect.iscoroutinefunction(self._fn):
                result = await self._fn(document, task)
            else:
                result = await in_daemon_thread(self._fn, document, task)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as e:  # noqa: BLE001 - the pipeline's failure is the member's, not the run's
            return Completion(record=None, parse="error", model=self.model, latency_s=time.perf_counter() - started,
                              error=f"{self.spec} raised {type(e).__name__}: {e}")
        latency = time.perf_counter() - started
        if isinstance(result, Completion):
            if not result.latency_s:
                result.latency_s = latency
            result.model = result.model or self.model
            return result
        if isinstance(result, dict) and (at := nonfinite_path(result)) is not None:  # JSON has no NaN
            return Completion(record=None, parse="error", model=self.model, latency_s=latency,
                              error=f"{self.spec} returned NaN or Infinity at {at}; use None for an unknown value")
        if isinstance(result, dict):
            return Completion(record=result, raw=json.dumps(result, ensure_ascii=False, default=str), parse="clean",
                              model=self.model, latency_s=latency)
        if isinstance(result, str):
            record, outcome = parse_record(result)
            return Completion(record=record, raw=result, parse=outcome, model=self.model, latency_s=latency)  # type: ignore[arg-type]
        return Completion(record=None, raw=repr(result), parse="malformed", model=self.model, latency_s=latency,
                          error=f"{self.spec} returned {type(result).__name__}, expected a dict")

    async def aclose(self) -> None:
        return None


def make(spec: BackendSpec, ctx: BackendContext) -> PythonBackend:
    return PythonBackend(spec.label, spec.options.get("target", ""), documents=ctx.documents, tasks=ctx.tasks)


# A pipeline makes its own calls (if any): evalkit can record and replay them, not price them.
PROVIDER = Provider("python", make, usage="python:MODULE:FUNCTION", live=True, metered=False, rerecord="{model}")
