"""The validation gate: would a downstream system accept this record, or block it?

The truth states what the gate *should* say about a document (which required
fields it truly lacks, whether it should block); the `fields` scorer runs the
gate on the extraction and checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import Field

from evalkit._util.strict import Strict
from evalkit.scoring.normalize import exact, parse_number, show_decimal


class SumRule(Strict):
    """`fields` must add up to `total` within `tolerance` (e.g. rate shares summing to 1)."""

    fields: list[str] = Field(min_length=1)
    total: float
    tolerance: float = Field(0.0, ge=0.0)


class GateOptions(Strict):
    required: list[str] = Field(default_factory=list)  # missing (null/empty) => listed and blocking
    sum_equals: list[SumRule] = Field(default_factory=list)  # each failing rule => blocking


@dataclass(frozen=True)
class GateResult:
    missing_fields: list[str]  # in the order of `required`
    blocking: bool
    reasons: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"missing_fields": list(self.missing_fields), "blocking": self.blocking, "reasons": list(self.reasons)}


def is_missing(value: object) -> bool:
    """Null, blank text and empty collections all count as "not stated"."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return not value
    return False


def _fmt(x: float) -> str:
    return repr(float(x))


def run_gate(record: dict[str, Any] | None, gate: GateOptions) -> GateResult:
    rec = record if isinstance(record, dict) else {}
    missing = list(dict.fromkeys(f for f in gate.required if is_missing(rec.get(f))))
    reasons = [f"{f} is missing" for f in missing]
    for rule in gate.sum_equals:
        values = [rec.get(f) for f in rule.fields]
        if any(is_missing(v) for v in values):
            continue  # a missing field already blocks through `required`; no sum to check
        numbers = [parse_number(v) for v in values]
        bad = [f"{f} is not a number ({v!r})" for f, v, n in zip(rule.fields, values, numbers) if n is None]
        if bad:
            reasons.extend(bad)
            continue
        # decimal: 0.7 + 0.3 is exactly 1.0 (and no n is None: `bad` is empty)
        total = sum((exact(n) for n in numbers if n is not None), Decimal(0))
        if abs(total - exact(rule.total)) > exact(rule.tolerance):
            tol = f" ± {_fmt(rule.tolerance)}" if rule.tolerance else ""
            reasons.append(f"{' + '.join(rule.fields)} = {show_decimal(total)}, expected {_fmt(rule.total)}{tol}")
    return GateResult(missing_fields=missing, blocking=bool(reasons), reasons=reasons)
