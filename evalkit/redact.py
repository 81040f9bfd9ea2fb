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

An error message is cut to one short line only after scrubbing: a key cut in two would pass
the first rule.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Mapping, TypeVar

SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_ADMIN_KEY")
ANSWER_FIELDS = ("content", "record", "raw")  # the model's own output: only the first rule applies
ERROR_LIMIT = 300  # characters of an error message kept (one line)
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_KEY_SHAPED = re.compile(r"\b(sk-[A-Za-z0-9_*\-]{6})[A-Za-z0-9_*\-]{8,}")
_WS = re.compile(r"\s+")
T = TypeVar("T")


def secrets(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(variable, value) of every credential in the environment, longest value first."""
    env = os.environ if env is None else env
    found = {(name, value) for name, value in env.items()
             if (name in SECRET_ENV and len(value) >= 8)
             or (_SECRET_NAME.search(name) and len(value) >= 16 and not _WS.search(value))}
    return sorted(found, key=lambda nv: (-len(nv[1]), nv[0]))


def scrub(value: Any, key_shaped: bool = False, env: Mapping[str, str] | None = None) -> Any:
    """`value` with every secret replaced: a string, or a dict / list walked (keys too); anything else as is."""
    found = secrets(env)
    if not found and not key_shaped:
        return value
    return _walk(value, found, key_shaped)


def _walk(value: Any, found: list[tuple[str, str]], key_shaped: bool) -> Any:
    if isinstance(value, str):
        for name, secret in found:
            if secret in value:
                value = value.replace(secret, f"[{name} redacted]")
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
    for f in dataclasses.fields(answer):  # type: ignore[arg-type]
        value = getattr(answer, f.name)
        if isinstance(value, (str, dict, list)) and value:
            clean = scrub(value, key_shaped=f.name not in ANSWER_FIELDS)
            if clean != value:
                changes[f.name] = clean
    error = changes.get("error", getattr(answer, "error", None))
    if error:
        changes["error"] = short(error)
    return dataclasses.replace(answer, **changes) if changes else answer  # type: ignore[type-var]
