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


FACTORIES: dict[str, Callable[[str, dict[str, str], BackendContext], Backend]] = {
    "fake": _fake,
    "predictions": _predictions,
}


def make_backend(label: str, spec: str, ctx: BackendContext) -> Backend:
    kind, options = parse_spec(spec)
    factory = FACTORIES.get(kind)
    if factory is None:
        raise UsageError(f"backend {label}={spec}: unknown kind {kind!r} (known: {', '.join(sorted(FACTORIES))})")
    return factory(label, options, ctx)
