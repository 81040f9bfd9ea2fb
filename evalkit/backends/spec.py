"""The backend spec: ``--backend NAME=SPEC``, parsed once (at the command line) into a `BackendSpec`.

SPEC is ``KIND[:key=value,...]``; ``python:MODULE:FUNCTION`` keeps its colons (its one option is
``target``). A bare SPEC is labelled by its kind (``--backend fake`` is ``fake=fake``). Everything
past the command line takes the parsed `BackendSpec`; a SPEC stored in a file (extraction.json's
``backend.spec``, a notebook's ``backend`` parameter) is read back with `BackendSpec.parse` too, so
this module is the one that splits spec strings.

Three forms of one spec, one owner:

* ``str(spec)``: ``NAME=SPEC``, which `BackendSpec.parse` reads back to an equal spec;
  ``spec.spec`` is the SPEC alone (what extraction.json and run.json store beside the label).
* `BackendSpec.redacted`: secrets hidden — a secret-looking option's value (`SECRET_KEYS`) becomes
  ``***``, a URL loses its userinfo, query and fragment. What run artefacts store. The hidden values
  are also given to the scrubber (`redact.remember`) as the spec is made: an error message that echoes
  the URL it called cannot carry them anywhere either.
* `BackendSpec.public`: also no local paths — a file option (`LOCAL_KEYS`, a ``python:`` target)
  or any value with a path separator becomes ``<local>``. What a published scoreboard shows.

NAME, the backend's label, names its folder in a run (``<run>/<task>/<member>/<folder>/``), so it
is a name: letters, digits, ``.``, ``_`` and ``-``, with ``/`` between parts as in model names
(``org/model``). `label_folder` maps it to the folder (``org/model`` → ``org__model``); the label
itself is recorded in extraction.json and score.json, and every reader takes it from there
(`folder_label`).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from evalkit.backends.redact import remember
from evalkit.errors import Escape, EvalkitError, UsageError

__all__ = ["BackendSpec", "SECRET_KEYS", "LOCAL_KEYS", "FILE_KEYS", "redact_stored", "redact_url", "check_label",
           "check_labels", "label_folder", "folder_label", "labels_slug", "DEFAULT_CASSETTE", "default_specs",
           "redacted_command"]

SECRET_KEYS = frozenset({"key", "api_key", "apikey", "token", "secret", "password", "auth", "authorization", "bearer"})
FILE_KEYS = ("path", "dir", "file", "cassette")  # options naming a local file or folder
LOCAL_KEYS = frozenset({*FILE_KEYS, "target", "socket"})  # ... or a local module (python:'s target), a socket
_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
LABEL = re.compile(rf"{_PART}(?:/{_PART})*")
_POSITIONAL = {"python": "target"}  # kinds whose SPEC is KIND:VALUE (colons kept), not KIND:key=value,...


@dataclass(frozen=True)
class BackendSpec:
    """One backend as given: its label, its kind (which `Provider` makes it) and its options, in order."""

    label: str
    kind: str
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_label(self.label)
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))  # frozen all the way down
        _remember_secrets(self.options)

    @classmethod
    def parse(cls, text: str, label: str | None = None) -> BackendSpec:
        """``NAME=SPEC``, or a bare SPEC labelled by its kind, as typed on the command line. With `label`,
        `text` is a bare SPEC (``--judge SPEC``, or the SPEC a file stores beside its label).

        A NAME that is not a label raises `Escape`; an option that is not ``key=value``, `UsageError`."""
        if label is None:
            name, eq, spec = text.partition("=")
            if eq and name and ":" not in name:
                label, text = name, spec
        kind, options = _split(text)
        return cls(kind if label is None else label, kind, options)

    @property
    def spec(self) -> str:
        """The SPEC alone: ``KIND[:key=value,...]`` (``python:MODULE:FUNCTION``)."""
        positional = _POSITIONAL.get(self.kind)
        if positional and list(self.options) == [positional]:
            return f"{self.kind}:{self.options[positional]}"
        return self.kind + (":" + ",".join(f"{k}={v}" for k, v in self.options.items()) if self.options else "")

    def __str__(self) -> str:
        return f"{self.label}={self.spec}"

    def __hash__(self) -> int:
        return hash((self.label, self.kind, tuple(self.options.items())))

    def __reduce__(self) -> tuple[Any, ...]:  # a mappingproxy does not pickle; worker processes get specs
        return BackendSpec, (self.label, self.kind, dict(self.options))

    def redacted(self) -> BackendSpec:
        """This spec with its secrets hidden (see module docstring): what any artefact may store."""
        return replace(self, options=_hidden(self.options, public=False))

    def public(self) -> BackendSpec:
        """`redacted`, and no local paths or modules either: what a published scoreboard may show."""
        return replace(self, options=_hidden(self.options, public=True))

    def files(self) -> dict[str, Path]:
        """The local files and folders this spec names (a cassette, a predictions folder), by option."""
        return {k: Path(v) for k, v in sorted(self.options.items()) if k in FILE_KEYS and v}


def _split(spec: str) -> tuple[str, dict[str, str]]:
    """``openai:url=http://x,model=m`` → ("openai", {"url": ..., "model": ...})."""
    kind, _, rest = spec.partition(":")
    if kind in _POSITIONAL:
        return kind, {_POSITIONAL[kind]: rest}
    options: dict[str, str] = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            raise UsageError(f"backend spec {spec!r}: option {part!r} must be key=value")
        options[key.strip()] = value.strip()
    return kind, options


def _hidden(options: Mapping[str, str], public: bool) -> dict[str, str]:
    out = {}
    for key, value in options.items():
        if key.lower() in SECRET_KEYS:
            value = "***"
        elif public and (key.lower() in LOCAL_KEYS or "/" in value or "\\" in value):
            value = "<local>"
        elif key.lower() == "url" or "://" in value:
            value = redact_url(value)
        out[key] = value
    return out


def _remember_secrets(options: Mapping[str, str]) -> None:
    """Give the scrubber every value `_hidden` hides: a secret option, a URL's userinfo and query values."""
    for key, value in options.items():
        if key.lower() in SECRET_KEYS:
            remember(f"backend {key.lower()}", value)
        elif "@" in value or "?" in value:
            try:
                parts = urlsplit(value)
            except ValueError:
                continue
            for part in (parts.username, parts.password):
                if part:
                    remember("backend URL credential", part)
            for name, token in parse_qsl(parts.query):
                remember(f"backend URL {name}", token)


def redact_url(url: str) -> str:
    """Drop userinfo, query and fragment: nothing credential-shaped survives into a spec."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def redact_stored(spec: str, public: bool = False) -> str:
    """A SPEC as a file stores it (extraction.json's ``backend.spec``), `redacted` (`public`: `public`).
    One that does not parse is kept as it is (redacted) or shown as ``<unparsed>`` (public)."""
    try:
        parsed = BackendSpec.parse(spec, label="stored")
    except EvalkitError:
        return "<unparsed>" if public else spec
    return (parsed.public() if public else parsed.redacted()).spec


# -- labels ------------------------------------------------------------------------------------------------
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
    labels = list(labels)
    folders: dict[str, str] = {}
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


# The default backend replays the committed cassette: one real extraction pass of the bundled
# corpus by Gemma 3 270M (a small base model: real output, mostly wrong) — offline and free.
DEFAULT_CASSETTE = Path(__file__).resolve().parents[2] / "cassettes" / "gemma-3-270m-q4_k_m.jsonl"


def default_specs() -> tuple[BackendSpec, ...]:
    """What `evalkit run` uses without ``--backend``: the committed cassette, else the fake backend."""
    if not DEFAULT_CASSETTE.is_file():
        return (BackendSpec("fake", "fake"),)
    return (BackendSpec("gemma-3-270m", "cassette", {"path": os.path.relpath(DEFAULT_CASSETTE)}),)


def redacted_command(argv: list[str] | None = None) -> str:
    """The command as an artefact, a lock note or a message may quote it: every backend SPEC among the
    arguments redacted (`BackendSpec.redacted`: no option secret, no URL userinfo or query), then every
    secret scrubbed. `argv`: the arguments after ``evalkit`` (default: this process's)."""
    from evalkit.backends.redact import scrub  # lazy: a cycle, backends.redact imports this module (via backends)

    def safe(arg: str) -> str:
        flag, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        try:
            spec = BackendSpec.parse(value)
        except (EvalkitError, ValueError):
            return arg
        hidden = spec.redacted()
        if hidden.spec == spec.spec:
            return arg
        return f"{flag}{eq}" + (f"{spec.label}={hidden.spec}" if value.startswith(f"{spec.label}=") else hidden.spec)

    args = sys.argv[1:] if argv is None else argv
    command: str = scrub(shlex.join(["evalkit", *(safe(a) for a in args)]), key_shaped=True)  # a str stays a str
    return command
