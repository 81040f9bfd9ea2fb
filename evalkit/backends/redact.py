"""The secret scrubber: the one place that decides what a provider's answer may carry into evalkit.

Everything a provider returns enters evalkit through one of four doors, and `scrub_answer`
stands in each of them:

* `backends.live.LiveBackend._call` — every provider call's `Attempt` (answer text, decoded tool
  input, model id, finish reason, raw HTTP body, error text), before the truncation retry, the
  failure sidecar or the `Completion` see it;
* `backends.pyfunc.PythonBackend.complete` — a pipeline's answer (it may quote a provider; an
  exception it raised may quote a key), and the end of what it printed (`pyfunc.Output.since`);
* `cassette.completion_from_record` — a recorded answer, as it is replayed;
* `backends.batch` — each answer of a provider batch (``--batch``), before `LiveBackend.finish`.

Past those doors nothing scrubs again (cassette, failure sidecar, extraction.json, score.json,
notebooks, HTML, scoreboard, runs/index.jsonl and messages all hold scrubbed values only).

Two rules:

* the value of every credential variable in the environment — the providers' (`SECRET_ENV`, 8
  characters or more) and any other whose name ends in KEY, TOKEN, SECRET or PASSWORD and whose
  value is one word of 16 characters or more (so ``SORT_KEY=timestamp`` never rewrites an answer)
  — becomes ``[NAME redacted]`` wherever it appears;
* outside the answer itself, anything shaped like an ``sk-…`` key keeps its first 9 characters
  only (an error body may echo a key that is not in this environment). The answer — its text and
  record — is the model's real output and is scored, so it is left as it came under this rule.

A secret is found in any form it may be echoed in: as typed, JSON-escaped (``\\u002d``, ``\\/``, also
escaped twice) and URL-escaped (``%2D``, also ``%252D``), and any mix of these.

An error message is cut to one short line only after scrubbing: a key cut in two would pass
the first rule.

The environment is read once per process and again only when it changes (`secrets`: a replayed
record is scrubbed field by field, and reading every variable each time cost more than the replay).
Besides the environment, the credentials a backend spec carries in its URL (its userinfo, a query
token: `remember`, called by `backends.spec`) are secrets too, wherever an error message echoes them.

Past the provider's doors, three more places text enters evalkit from code it does not own, and each
passes it through `scrub`: a task scorer's exception (`pipeline.score_extraction`) and its prints
(`console`, for scoring in this process), and every output of an executed notebook
(`execute.normalize`). The command line an artefact, a lock note or a message quotes is `command`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_ADMIN_KEY")
ANSWER_FIELDS = ("content", "record", "raw")  # the model's own output: only the first rule applies
ERROR_LIMIT = 300  # characters of an error message kept (one line)
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_KEY_SHAPED = re.compile(r"\b(sk-[A-Za-z0-9_*\-]{6})[A-Za-z0-9_*\-]{8,}")
_WS = re.compile(r"\s+")

if TYPE_CHECKING:  # typeshed's protocol of a dataclass instance (no run-time module)
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")  # an answer dataclass


def secrets(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(variable, value) of every credential in the environment (and every `remember`ed one), longest
    value first. ``os.environ`` is read again only when it has changed since the last call."""
    return _found(env).pairs


def remember(name: str, value: str) -> None:
    """Treat `value` as a secret from now on, shown as ``[name redacted]`` (a credential typed into a
    backend URL). A value shorter than 8 characters is not scrubbed out of text: it would rewrite words."""
    global _cache
    if len(value) >= 8 and (name, value) not in _remembered:
        _remembered.add((name, value))
        _cache = None


class _Found:
    """The secrets of one environment, and how to find each in escaped forms."""

    def __init__(self, pairs: list[tuple[str, str]]):
        self.pairs = pairs
        self._escaped: dict[str, re.Pattern[str]] = {}

    def escaped(self, secret: str) -> re.Pattern[str]:
        if secret not in self._escaped:
            self._escaped[secret] = re.compile("".join(_char_forms(c) for c in secret))
        return self._escaped[secret]


_remembered: set[tuple[str, str]] = set()
_cache: tuple[dict[Any, Any], _Found] | None = None  # (the environment it was read from, its secrets)


def _found(env: Mapping[str, str] | None) -> _Found:
    global _cache
    if env is not None:
        return _Found(_collect(env.items()))
    # os.environ's own dict (bytes on POSIX): comparing it with a copy is one C loop, ~50x cheaper than
    # decoding and matching every variable; any set, changed or removed variable shows.
    raw = getattr(os.environ, "_data", None)
    if raw is None:
        return _Found(_collect(os.environ.items()))
    if _cache is None or _cache[0] != raw:
        _cache = (dict(raw), _Found(_collect(os.environ.items())))
    return _cache[1]


def _collect(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    found = {(name, value) for name, value in items
             if (name in SECRET_ENV and len(value) >= 8)
             or (_SECRET_NAME.search(name) and len(value) >= 16 and not _WS.search(value))}
    return sorted(found | _remembered, key=lambda nv: (-len(nv[1]), nv[0]))


def _char_forms(c: str) -> str:
    """A regex for one character of a secret as typed, JSON-escaped or URL-escaped (any number of times)."""
    hexes = [f"{ord(c):04x}"] if ord(c) > 0x7F else [f"{ord(c):04x}", f"{ord(c):02x}"]
    nocase = ["".join(f"[{h.lower()}{h.upper()}]" if h.isalpha() else h for h in x) for x in hexes]
    forms = [re.escape(c), rf"\\+u{nocase[0]}"]
    if len(nocase) > 1:
        forms.append(rf"%(?:25)*{nocase[1]}")
    if c == "/":
        forms.append(r"\\+/")
    return "(?:" + "|".join(forms) + ")"


_ESCAPE = re.compile(r"\\+u([0-9a-fA-F]{4})|\\+(/)|%(?:25)*([0-9a-fA-F]{2})")


def _unescaped(text: str) -> str:
    """`text` with its JSON and URL escapes decoded (only to test whether a secret hides in it)."""
    return _ESCAPE.sub(lambda m: m[2] or chr(int(m[1] or m[3], 16)), text)


def scrub(value: Any, key_shaped: bool = False, env: Mapping[str, str] | None = None) -> Any:
    """`value` with every secret replaced: a string, or a dict / list walked (keys too); anything else as is."""
    found = _found(env)
    if not found.pairs and not key_shaped:
        return value
    return _walk(value, found, key_shaped)


def _walk(value: Any, found: _Found, key_shaped: bool) -> Any:
    if isinstance(value, str):
        for name, secret in found.pairs:
            if secret in value:
                value = value.replace(secret, f"[{name} redacted]")
        if found.pairs and ("\\" in value or "%" in value):  # an escaped form, maybe
            plain = _unescaped(value)
            for name, secret in found.pairs:
                if secret in plain:
                    value = found.escaped(secret).sub(f"[{name} redacted]", value)
        return _KEY_SHAPED.sub(r"\1…[redacted]", value) if key_shaped and "sk-" in value else value
    if isinstance(value, dict):
        return {_walk(k, found, key_shaped): _walk(v, found, key_shaped) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v, found, key_shaped) for v in value)
    return value


def short(text: str, limit: int = ERROR_LIMIT) -> str:
    """One line of at most `limit` characters (whitespace runs collapsed)."""
    text = _WS.sub(" ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def scrub_answer(answer: T) -> T:
    """A copy of `answer` (an `Attempt` or a `Completion`) as evalkit may keep it: every text field
    scrubbed (`ANSWER_FIELDS` by the first rule, the rest by both), then ``error`` cut to one line."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(answer):
        value = getattr(answer, f.name)
        if isinstance(value, (str, dict, list)) and value:
            clean = scrub(value, key_shaped=f.name not in ANSWER_FIELDS)
            if clean != value:
                changes[f.name] = clean
    error = changes.get("error", getattr(answer, "error", None))
    if error:
        changes["error"] = short(error)
    return dataclasses.replace(answer, **changes) if changes else answer


class _Scrubbed:
    """A text stream whose every write is scrubbed first (the first rule: a scorer may print an answer)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text) if isinstance(text, str) else text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def console() -> None:
    """From now on, scrub what this process prints to stdout and stderr (before a task's own code runs:
    its scorer). Idempotent; never undone, so threads scoring at once cannot restore the wrong stream."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _Scrubbed):
            setattr(sys, name, _Scrubbed(stream))
