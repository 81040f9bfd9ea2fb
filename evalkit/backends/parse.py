"""Turning a model's text into a record: ``clean``, ``recovered`` or ``malformed``.

``clean``: the whole text (surrounding whitespace aside) is one JSON object.
``recovered``: a JSON object was found after repair — a Markdown code fence
around it, prose before it, prose after it (or several of these).
``malformed``: no JSON object could be found.

Repair never invents content: it only cuts the text down to one complete JSON
object that was already there. An object nested deeper than NESTING_DEPTH (`evalkit.limits`)
is no record: ``malformed``, so nothing downstream walks it. ``NaN`` and ``Infinity`` are not
JSON (Python's parser takes them, strict ones do not), nor is a number past a double's range (``1e999``,
which Python would read as infinity): a text whose object holds one is not that object.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from evalkit import limits
from evalkit._util.jsonio import nesting_depth
from evalkit.backends.base import ParseOutcome

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(literal: str) -> float:
    """A JSON number as a float; one past a double's range (``1e999``) is no number JSON can carry on."""
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"{literal} overflows a double")
    return value


_decoder = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = _decoder.decode(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _first_object(text: str) -> dict[str, Any] | None:
    """The first complete JSON object embedded in `text` (prose around it ignored).

    An object left open until the end of the text (a cut-off answer) ends the
    search: a complete object nested inside it is not the answer.
    """
    end_of_text = len(text.rstrip())
    start = text.find("{")
    while start != -1:
        try:
            value, _end = _decoder.raw_decode(text, start)
        except json.JSONDecodeError as e:
            if e.pos >= end_of_text or e.msg.startswith("Unterminated string"):  # cut off: the rest is inside it
                return None
            value = None
        except RecursionError:  # nested past any bound: every object inside it is too (and trying each is quadratic)
            return None
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def parse_record(text: str | None) -> tuple[dict[str, Any] | None, ParseOutcome]:
    """``text`` → (record or None, "clean" | "recovered" | "malformed")."""
    record, outcome = _parse_record(text)
    bound = limits.NESTING_DEPTH.int_value()
    if record is not None and nesting_depth(record, bound) > bound:
        return None, "malformed"
    return record, outcome


def _parse_record(text: str | None) -> tuple[dict[str, Any] | None, ParseOutcome]:
    if not text or not text.strip():
        return None, "malformed"
    record = _as_object(text.strip())
    if record is not None:
        return record, "clean"
    for m in _FENCE.finditer(text):
        record = _as_object(m.group(1).strip()) or _first_object(m.group(1))
        if record is not None:
            return record, "recovered"
    record = _first_object(text)
    if record is not None:
        return record, "recovered"
    return None, "malformed"
