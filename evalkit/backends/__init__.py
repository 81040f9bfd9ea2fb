"""Backend specs: ``--backend NAME=SPEC`` → a constructed `Backend`.

SPEC is ``KIND[:key=value,...]``. Each kind registers one factory in
`FACTORIES`; a new provider slots in by adding one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import UsageError
from .base import Backend, Completion, Request

__all__ = ["Backend", "Completion", "Request", "BackendContext", "parse_backend_arg", "parse_spec", "make_backend"]


@dataclass
class BackendContext:
    """What a factory may need from the run (never secrets: those come from the environment)."""

    expected: Callable[[str], dict[str, Any]] | None = None  # member key -> perfect record (for `fake`)
    member_ids: dict[str, str] = field(default_factory=dict)  # member key -> member id
    documents: Callable[[str], str] | None = None  # member key -> document text (for `python:` pipelines)
    tasks: Callable[[str], dict[str, Any]] | None = None  # member key -> task description (for `python:`)


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``openai:url=http://x,model=m`` → ("openai", {"url": ..., "model": ...})."""
    kind, _, rest = spec.partition(":")
    options: dict[str, str] = {}
    if kind == "python":  # python:MODULE:FUNCTION keeps its colon
        return kind, {"target": rest}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            raise UsageError(f"backend spec {spec!r}: option {part!r} must be key=value")
        options[key.strip()] = value.strip()
    return kind, options


def parse_backend_arg(arg: str) -> tuple[str, str]:
    """``NAME=SPEC`` (or a bare SPEC, labelled by its kind) → (label, spec)."""
    name, eq, spec = arg.partition("=")
    if eq and ":" not in name and name:
        return name, spec
    return parse_spec(arg)[0], arg


def _fake(label: str, options: dict[str, str], ctx: BackendContext) -> Backend:
    from .fake import FakeBackend

    if ctx.expected is None:
        raise UsageError("the fake backend needs the corpus truth")
    return FakeBackend(label, ctx.expected)


def _predictions(label: str, options: dict[str, str], ctx: BackendContext) -> Backend:
    from .predictions import PredictionsBackend

    if "dir" not in options:
        raise UsageError("predictions backend: give dir=PATH")
    return PredictionsBackend(label, options["dir"], ctx.member_ids)


def _resolved(kind: str) -> Callable[[str, dict[str, str], BackendContext], Backend]:
    """Live and cassette kinds go through `resolve`, so EVALKIT_RECORD_LLM / EVALKIT_REPLAY_LLM and
    the cassette guards apply to a single backend made here exactly as to a whole run."""

    def factory(label: str, options: dict[str, str], ctx: BackendContext) -> Backend:
        from .resolve import open_backends, resolve_backends

        if kind == "python":
            spec = f"python:{options.get('target', '')}"
        else:
            spec = kind + (":" + ",".join(f"{k}={v}" for k, v in options.items()) if options else "")
        return open_backends(resolve_backends([f"{label}={spec}"]), ctx)[0]

    return factory


FACTORIES: dict[str, Callable[[str, dict[str, str], BackendContext], Backend]] = {
    "fake": _fake,
    "predictions": _predictions,
    "anthropic": _resolved("anthropic"),  # anthropic[:model=M]            (evalkit/backends/anthropic.py)
    "openai": _resolved("openai"),  # openai:url=URL[,model=M,...]      (evalkit/backends/openai.py)
    "python": _resolved("python"),  # python:MODULE:FUNCTION            (evalkit/backends/pyfunc.py)
    "cassette": _resolved("cassette"),  # cassette:path=P[,model=M]     (evalkit/cassette.py, replay only)
}


def make_backend(label: str, spec: str, ctx: BackendContext) -> Backend:
    kind, options = parse_spec(spec)
    factory = FACTORIES.get(kind)
    if factory is None:
        raise UsageError(f"backend {label}={spec}: unknown kind {kind!r} (known: {', '.join(sorted(FACTORIES))})")
    return factory(label, options, ctx)
