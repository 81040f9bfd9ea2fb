"""Backend specs: ``--backend NAME=SPEC`` → a constructed `Backend`.

SPEC is ``KIND[:key=value,...]``. Each kind registers one factory in
`FACTORIES`; a new provider slots in by adding one.

NAME, the backend's label, names its folder in a run (``<run>/<task>/<member>/<folder>/``), so it
is a name: letters, digits, ``.``, ``_`` and ``-``, with ``/`` between parts as in model names
(``org/model``). `label_folder` maps it to the folder (``org/model`` → ``org__model``); the label
itself is recorded in extraction.json and score.json, and every reader takes it from there
(`folder_label`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import Escape, UsageError
from .base import Backend, Completion, Request

__all__ = ["Backend", "Completion", "Request", "BackendContext", "parse_backend_arg", "parse_spec", "make_backend",
           "check_label", "check_labels", "folder_label", "label_folder", "labels_slug"]

_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
LABEL = re.compile(rf"{_PART}(?:/{_PART})*")


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
    """``NAME=SPEC`` (or a bare SPEC, labelled by its kind) → (label, spec); NAME must be a label (`Escape`)."""
    name, eq, spec = arg.partition("=")
    if eq and ":" not in name and name:
        return check_label(name), spec
    return check_label(parse_spec(arg)[0]), arg


def check_label(label: str) -> str:
    """`label` if it is a backend name (see module docstring); else raise `Escape`."""
    if not LABEL.fullmatch(label):
        raise Escape(f"backend name {label!r}: it names a folder of the run, so it must be letters, digits, "
                     "'.', '_' and '-', starting with a letter or digit ('/' may separate such parts, as in "
                     "org/model)")
    return label


def label_folder(label: str) -> str:
    """The run folder name of a backend label: ``org/model`` → ``org__model`` (`check_labels` refuses a clash)."""
    return label.replace("/", "__")


def check_labels(labels: Iterable[str]) -> list[str]:
    """The labels of one run: each a name, unique, and no two sharing a folder (``org/model`` and ``org__model``)."""
    labels, folders = list(labels), {}
    for label in labels:
        check_label(label)
        other = folders.setdefault(label_folder(label), label)
        if other != label or labels.count(label) > 1:
            raise Escape(f"backend names must be unique and have a folder each: {other!r} and {label!r} both "
                         f"write to folder {label_folder(label)!r}; rename one")
    return labels


def folder_label(folder: str | Path, record: Any) -> str:
    """The backend label of a member × backend folder: the one its score.json or extraction.json
    (`record`) holds when that label maps to this folder, else the folder's name."""
    folder = Path(folder).name
    label = (record.get("backend") or {}).get("label") if isinstance(record, dict) else None
    return label if isinstance(label, str) and label_folder(label) == folder else folder


def labels_slug(labels: Iterable[str]) -> str:
    """The labels in a run folder's default name (``<time>-a+org__model``)."""
    return "+".join(label_folder(label) for label in labels)


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
