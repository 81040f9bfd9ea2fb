"""Evidence for an extracted value: is the quote the model gave in the document, and does it bear the value?

A task may ask for evidence (`scoring: {evidence: true}`, or `evidence: true` on a field): the record then
holds ``"evidence": {"<field>": {"page": int | null, "quote": str}}``. For each such field with an extracted
value, one outcome (docs/corpus-format.md, "Evidence"):

- ``grounded``: the quote is in the document and the value is derivable from it under the field's kind
  (its text, normalized as the kind normalizes, occurs in the quote; a number, date or duration the quote
  states equals it; or, with ``derive: sum``, the quote's amounts — its numbers less its percentages — add
  up to it);
- ``right_value_wrong_evidence``: the value is right, the quote is in the document but does not bear it;
- ``evidence_does_not_support``: the quote is in the document, the value is wrong and not derivable from it;
- ``evidence_not_found``: the quote is not in the document, whitespace runs and case aside;
- ``no_evidence``: the record gives no quote for the field, or one over MAX_QUOTE_CHARS (pasting the whole
  document would otherwise "ground" every value).

Grounded is about the value and its quote, not the truth: a wrong value quoted from the document (last
year's rate) is grounded and still a mismatch — evidence is reported beside value accuracy, never in the
score. ``page`` is shown as given, not checked (the scorer sees the document's text, not its pages).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from evalkit.scoring.gate import is_missing
from evalkit.scoring.normalize import (
    document_keys,
    id_key,
    is_token_run,
    numbers_close,
    parse_date,
    parse_duration,
    parse_number,
)
from evalkit.scoring.text import normalize

OUTCOMES = ("grounded", "right_value_wrong_evidence", "evidence_does_not_support", "evidence_not_found",
            "no_evidence")
KINDS = ("id", "enum", "text", "exact_text", "number", "date", "duration")  # scalar kinds a quote can bear
MAX_QUOTE_CHARS = 500  # a longer "quote" (a paragraph, the whole document) points at nothing: it is no evidence
MAX_WINDOW = 5  # longest run of words read as one date or duration ("the 10th day of September, 2015")
_NUMBER = re.compile(r"[$€£]?\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|percent))?")


@dataclass(frozen=True)
class Evidence:
    outcome: str
    reason: str
    page: Any = None
    quote: str | None = None
    span: tuple[int, int] | None = None  # where the quote is in the document (character offsets)

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason, "page": self.page, "quote": self.quote,
                "span": list(self.span) if self.span else None}


# ---------------------------------------------------------------- locating the quote


def _folded(text: str) -> tuple[str, list[int]]:
    """`text` case folded with every whitespace run one space, and for each folded character its offset in
    `text` (so a match in the folded text maps back to the document)."""
    out: list[str] = []
    where: list[int] = []
    space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            space = bool(out)
            continue
        if space:
            out.append(" ")
            where.append(i - 1)
            space = False
        for c in ch.casefold():
            out.append(c)
            where.append(i)
    return "".join(out), where


def locate(document: str, quote: str) -> tuple[int, int] | None:
    """The first place the quote occurs in the document, whitespace runs and case aside, as offsets."""
    q, _ = _folded(quote)
    if not q:
        return None
    doc, where = _folded(document)
    at = doc.find(q)
    if at < 0:
        return None
    return where[at], where[at + len(q) - 1] + 1


# ---------------------------------------------------------------- is the value derivable from the quote?


def _windows(quote: str) -> Iterator[str]:
    """Every run of 1..MAX_WINDOW words of the quote, punctuation at its ends dropped."""
    words = quote.split()
    for i in range(len(words)):
        for n in range(1, MAX_WINDOW + 1):
            if i + n <= len(words):
                yield " ".join(words[i:i + n]).strip(".,;:()[]\"'“”‘’")


def _numbers(quote: str, amounts: bool = False) -> list[float]:
    """The numbers a quote states (`20%` as 0.2); with `amounts`, its percentages left out (a rate is not an
    addend of a total)."""
    found = (m[0].replace(" ", "") for m in _NUMBER.finditer(quote))
    return [n for t in found if not (amounts and t.endswith(("%", "percent"))) and (n := parse_number(t)) is not None]


def _token_run(text: str, value: Any) -> bool:
    """The value's id key (case folded, separators dropped) is a run of whole tokens of the text (a token as
    the invention rule reads it: `INV-2026-014` is one, so `INV-2026` is a fragment)."""
    return is_token_run(document_keys(text), id_key(value))


def bears(kind: str, value: Any, quote: str, tolerance: float = 0.0, derive: str | None = None) -> bool:
    """The value is derivable from the quote under its field's kind (module docstring)."""
    if kind in ("id", "enum"):
        return bool(id_key(value)) and _token_run(quote, value)
    if kind == "text":
        v = normalize(value)
        return bool(v) and f" {v} " in f" {normalize(quote)} "
    if kind == "exact_text":
        return " ".join(str(value).split()) in " ".join(quote.split())
    if kind == "number":
        number, found = parse_number(value), _numbers(quote)
        if number is None:
            return False
        if any(numbers_close(number, n, tolerance) for n in found):
            return True
        addends = _numbers(quote, amounts=True)
        return derive == "sum" and len(addends) > 1 and numbers_close(number, round(sum(addends), 9), tolerance)
    if kind == "date":
        day = parse_date(value)
        return day is not None and any(parse_date(w) == day for w in _windows(quote))
    if kind == "duration":
        span = parse_duration(value)
        return span is not None and any(parse_duration(w) == span for w in _windows(quote))
    return False


# ---------------------------------------------------------------- the outcome


def quote_of(entry: Any) -> tuple[Any, str | None]:
    """(page, quote) of a record's evidence entry: an object with `quote` (and `page`), or a bare string."""
    if isinstance(entry, str):
        return None, entry
    if isinstance(entry, Mapping):
        quote = entry.get("quote")
        return entry.get("page"), quote if isinstance(quote, str) else None
    return None, None


def judge(kind: str, value: Any, value_right: bool, entry: Any, document: str, tolerance: float = 0.0,
          derive: str | None = None) -> Evidence:
    """The evidence outcome of one field whose extracted value is `value` (right or not, by the field's rule)."""
    page, quote = quote_of(entry)
    if quote is None or is_missing(quote):
        return Evidence("no_evidence", "the record gives no quote for this field", page, quote)
    if len(quote) > MAX_QUOTE_CHARS:
        return Evidence("no_evidence", f"the quote is {len(quote)} characters long, over {MAX_QUOTE_CHARS}: a quote "
                        "must point at the value, not hold the document", page, quote[:MAX_QUOTE_CHARS] + "…")
    span = locate(document, quote)
    if span is None:
        return Evidence("evidence_not_found", "the quote is not in the document (whitespace and case aside)",
                        page, quote)
    direct = bears(kind, value, quote, tolerance)
    if direct or bears(kind, value, quote, tolerance, derive):
        how = f"the value is derivable from it as {kind}" if direct else "its numbers add up to the value (derive: sum)"
        wrong = "" if value_right else " (the value itself is wrong: the quote bears a value the truth does not)"
        return Evidence("grounded", f"the quote is in the document and {how}{wrong}", page, quote, span)
    if value_right:
        return Evidence("right_value_wrong_evidence", f"the value is right, but the quote does not bear it as {kind}",
                        page, quote, span)
    return Evidence("evidence_does_not_support", f"the quote is in the document but does not bear the (wrong) value "
                    f"as {kind}", page, quote, span)
