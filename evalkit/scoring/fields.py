"""The built-in `fields` scorer: a flat record compared field by field (docs/corpus-format.md).

One item row per scored field with keys `member, field, kind, weight,
expected, extracted, outcome, credit, reason`. `outcome` is one of match,
mismatch, missing, extra, hallucinated; `weight` is the row's *effective*
weight (a hallucinated identifier weighs weight × hallucination_penalty), so
score = Σ credit / Σ weight over the rows. Keys of the extraction that the
spec does not name get no row (they would distort the `extra` count, which
means "stated a value the document does not have"); they are listed in
`details["unscored_fields"]`.

A `table` field gives one row per cell, with `row` and `column` (scoring/tables.py), weighted so the table's
credit is its cell F1 × weight. When the task asks for evidence, a field's row also carries its `evidence`
outcome, and `details["evidence"]` one row per such field (scoring/evidence.py); the record's `evidence` key is
then not an unscored field.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, model_validator

from evalkit._util.strict import Strict
from evalkit.scoring.base import Metric, ScoreContext, Scorer, ScoreResult, ratio
from evalkit.scoring.evidence import KINDS, OUTCOMES, judge
from evalkit.scoring.gate import GateOptions, GateResult, is_missing, run_gate
from evalkit.scoring.normalize import (
    document_keys,
    normalize_id,
    normalize_party,
    number_diff,
    numbers_close,
    parse_date,
    parse_duration,
    parse_number,
    show_decimal,
    unstated,
)
from evalkit.scoring.sets import PRF
from evalkit.scoring.tables import as_rows, score_table
from evalkit.scoring.terms import align, as_terms
from evalkit.scoring.text import normalize

Kind = Literal["id", "text", "exact_text", "enum", "number", "date", "duration", "set", "parties", "conditions", "terms",
               "table"]
CELL_KINDS = ("id", "text", "exact_text", "enum", "number", "date", "duration", "set", "parties")  # a table's columns
CONDITION_TOLERANCE = 0.001  # numbers inside conditions are mostly rates; exact equality is too strict


class FieldsTruth(Strict):
    """truth.yaml of a flat-fields task."""

    record: dict[str, Any]
    expected_missing_fields: list[str] = Field(default_factory=list)
    expected_blocking: bool = False
    notes: str | None = None


class FieldSpec(Strict):
    kind: Kind
    weight: float = Field(1.0, gt=0)
    tolerance: float | None = Field(None, ge=0)
    identifier: bool = False  # a value the source text does not state is HALLUCINATED (normalize.unstated)
    # kind `terms` only: each term's fields, and the fields that pair extracted terms with truth terms
    fields: dict[str, FieldSpec] | None = None
    align_by: list[str] = Field(default_factory=list)
    tie_by: list[str] = Field(default_factory=list)
    # kind `table` only: each column's kind (and tolerance); rows are aligned by assignment (scoring/tables.py)
    columns: dict[str, FieldSpec] | None = None
    # ask the record for a quote bearing this field's value (scoring/evidence.py); None: the task's `evidence`
    evidence: bool | None = None
    derive: Literal["sum"] | None = None  # kind number: evidence may state the addends instead of the value

    @model_validator(mode="after")
    def _table_legal(self) -> FieldSpec:
        if self.kind != "table":
            if self.columns is not None:
                raise ValueError(f"columns are only allowed for kind table, not {self.kind}")
            return self
        if not self.columns:
            raise ValueError("kind table needs `columns`: each column's kind (and tolerance)")
        for name, col in self.columns.items():
            if col.kind not in CELL_KINDS:
                raise ValueError(f"column {name!r}: kind {col.kind} is not a cell kind ({', '.join(CELL_KINDS)})")
            if col.weight != 1.0 or col.identifier or col.evidence is not None:
                raise ValueError(f"column {name!r}: cells weigh alike (the table's weight is its cell F1's); no "
                                 "weight, identifier or evidence on a column")
        if self.evidence:
            raise ValueError("evidence is asked per scalar field, not for a table")
        return self

    @model_validator(mode="after")
    def _evidence_legal(self) -> FieldSpec:
        if self.evidence and self.kind not in KINDS:
            raise ValueError(f"evidence: true is only allowed for kind {', '.join(KINDS)}, not {self.kind}")
        if self.derive is not None and self.kind != "number":
            raise ValueError(f"derive is only allowed for kind number, not {self.kind}")
        return self

    @model_validator(mode="after")
    def _terms_legal(self) -> FieldSpec:
        if self.kind != "terms":
            if self.fields is not None or self.align_by or self.tie_by:
                raise ValueError(f"fields, align_by and tie_by are only allowed for kind terms, not {self.kind}")
            return self
        if not self.fields:
            raise ValueError("kind terms needs `fields`: each term's fields and their kinds")
        if any(f.kind == "terms" for f in self.fields.values()):
            raise ValueError("terms cannot nest terms")
        unknown = sorted({f for f in [*self.align_by, *self.tie_by] if f not in self.fields})
        if unknown:
            raise ValueError(f"align_by / tie_by name fields not in the term's `fields`: {', '.join(unknown)}")
        return self

    @model_validator(mode="after")
    def _legal(self) -> FieldSpec:
        if self.identifier and self.kind not in ("id", "text", "exact_text"):
            raise ValueError(f"identifier: true is only allowed for kind id, text or exact_text, not {self.kind}")
        if self.tolerance is not None and self.kind not in ("number", "conditions"):
            raise ValueError(f"tolerance is only allowed for kind number or conditions, not {self.kind}")
        return self


class FieldsOptions(Strict):
    fields: dict[str, FieldSpec] = Field(min_length=1)
    gate: GateOptions = GateOptions()
    hallucination_penalty: float = Field(2.0, ge=1.0)  # < 1 would make inventing an id cheaper than omitting it
    evidence: bool = False  # ask a quote for every field of a kind a quote can bear (a field's own `evidence` wins)

    def asks_evidence(self, name: str) -> bool:
        spec = self.fields[name]
        return spec.evidence if spec.evidence is not None else (self.evidence and spec.kind in KINDS)

    @model_validator(mode="after")
    def _gate_names_known(self) -> FieldsOptions:
        named = [*self.gate.required, *(f for rule in self.gate.sum_equals for f in rule.fields)]
        unknown = sorted({f for f in named if f not in self.fields})
        if unknown:
            raise ValueError(f"gate names fields not in `fields`: {', '.join(unknown)}")
        return self


# ---------------------------------------------------------------- value display


def _jsonable(v: Any) -> Any:
    """Raw values as JSON: YAML dates become ISO strings, tuples/sets lists."""
    if isinstance(v, (_dt.date, _dt.datetime)):
        return v.isoformat()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((_jsonable(x) for x in v), key=repr)
    if isinstance(v, Decimal):
        return float(v)
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def _show(v: Any, limit: int = 120) -> str:
    s = "null" if v is None else repr(_jsonable(v))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else repr(x)


# ---------------------------------------------------------------- comparators
# Each takes (expected, extracted, spec) — both sides non-empty — and returns
# (equal, reason). The reason is a sentence for people either way.

Compare = Callable[[Any, Any, FieldSpec], "tuple[bool, str]"]


def _cmp_id(e: Any, g: Any, _: FieldSpec) -> tuple[bool, str]:
    if normalize_id(e) == normalize_id(g):
        return True, "equal after trimming and case folding"
    return False, f"values differ: {_show(e)} vs {_show(g)}"


def _cmp_text(e: Any, g: Any, _: FieldSpec) -> tuple[bool, str]:
    ne, ng = normalize(e), normalize(g)
    if ne == ng:
        return True, "equal after normalization"
    return False, f"texts differ after normalization: {ne!r} vs {ng!r}"


def _cmp_exact_text(e: Any, g: Any, _: FieldSpec) -> tuple[bool, str]:
    """Text to be copied exactly (a contract name, markup included): only whitespace runs are collapsed."""
    ne, ng = " ".join(str(e).split()), " ".join(str(g).split())
    if ne == ng:
        return True, "equal after whitespace normalization"
    return False, f"texts differ (compared exactly, whitespace collapsed): {ne!r} vs {ng!r}"


def _parsed(e: Any, g: Any, parse: Callable[[Any], Any], what: str) -> tuple[Any, Any, tuple[bool, str] | None]:
    """Parse both sides; when one fails, fall back to text equality with a reason naming it."""
    pe, pg = parse(e), parse(g)
    if pe is not None and pg is not None:
        return pe, pg, None
    if normalize(e) == normalize(g):
        return pe, pg, (True, f"equal as text (not readable as {what})")
    bad = f"expected value {_show(e)}" if pe is None else _show(g)
    return pe, pg, (False, f"{bad} is not {what}")


def _cmp_number(e: Any, g: Any, spec: FieldSpec, default_tol: float = 0.0) -> tuple[bool, str]:
    pe, pg, fallback = _parsed(e, g, parse_number, "a number")
    if fallback:
        return fallback
    tol = spec.tolerance if spec.tolerance is not None else default_tol
    diff = number_diff(pe, pg)
    if numbers_close(pe, pg, tol):
        return True, "equal" if not diff else f"within tolerance ({show_decimal(diff)} ≤ {_num(tol)})"
    return False, f"numbers differ by {show_decimal(diff)} > {_num(tol)}"


def _cmp_date(e: Any, g: Any, _: FieldSpec) -> tuple[bool, str]:
    pe, pg, fallback = _parsed(e, g, parse_date, "a date")
    if fallback:
        return fallback
    if pe == pg:
        return True, f"same date {pe}"
    return False, f"dates differ: {pe} vs {pg}"


def _cmp_duration(e: Any, g: Any, _: FieldSpec) -> tuple[bool, str]:
    pe, pg, fallback = _parsed(e, g, parse_duration, "a duration")
    if fallback:
        return fallback
    if pe.unit == pg.unit and math.isclose(pe.amount, pg.amount, rel_tol=0, abs_tol=1e-9):
        return True, f"same duration {pe}"
    return False, f"durations differ: {pe} vs {pg}"


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v]


def _cmp_sets(e_set: set[str], g_set: set[str], what: str) -> tuple[bool, str]:
    if e_set == g_set:
        return True, f"same {what}"
    parts = []
    if lacking := sorted(e_set - g_set):
        parts.append(f"missing {lacking}")
    if surplus := sorted(g_set - e_set):
        parts.append(f"unexpected {surplus}")
    return False, f"{what} differ: {', '.join(parts)}"


def _cmp_set(e: Any, g: Any, _: FieldSpec) -> tuple[bool, str]:
    def norm(v: Any) -> set[str]:
        return {n for x in _as_list(v) if x is not None and (n := normalize(x))}

    return _cmp_sets(norm(e), norm(g), "sets")


def _party_set(v: Any) -> set[str]:
    # CUAD writes all parties in one string: `A ("X"); B ("Y")`.
    names = [p for x in _as_list(v) if x is not None for p in str(x).split(";")]
    return {n for p in names if (n := normalize_party(p))}


def _cmp_parties(e: Any, g: Any, _: FieldSpec) -> tuple[bool, str]:
    return _cmp_sets(_party_set(e), _party_set(g), "parties")


# ---- conditions


def _cmp_value(e: Any, g: Any, spec: FieldSpec) -> tuple[bool, str]:
    """One value inside a condition, its kind inferred from the expected value."""
    if is_missing(e) and is_missing(g):
        return True, "both null"
    if is_missing(e) or is_missing(g):
        return False, f"expected {_show(e)}, got {_show(g)}"
    if isinstance(e, bool) or isinstance(g, bool):
        return (e == g), f"expected {_show(e)}, got {_show(g)}"
    if isinstance(e, dict):
        return _cmp_condition(e, g, spec) if isinstance(g, dict) else (False, f"expected an object, got {_show(g)}")
    if isinstance(e, (list, tuple)):
        return _cmp_set(e, g, spec)
    if parse_number(e) is not None:
        return _cmp_number(e, g, spec, CONDITION_TOLERANCE)
    if parse_date(e) is not None:
        return _cmp_date(e, g, spec)
    if parse_duration(e) is not None:
        return _cmp_duration(e, g, spec)
    return _cmp_text(e, g, spec)


def _cmp_condition(e: Any, g: Any, spec: FieldSpec) -> tuple[bool, str]:
    if not isinstance(e, dict) or not isinstance(g, dict):
        return False, f"expected an object, got {_show(g)}"
    for key in [*e, *(k for k in g if k not in e)]:
        ok, why = _cmp_value(e.get(key), g.get(key), spec)
        if not ok:
            return False, f"{key!r}: {why}"
    return True, "equal"


def _priority_key(c: Any) -> tuple[int, float, str]:
    p = c.get("priority")
    n = parse_number(p)
    return (0, n, "") if n is not None else (1, 0.0, normalize(p))


def _has_priority(items: list[Any]) -> bool:
    return all(isinstance(c, dict) and not is_missing(c.get("priority")) for c in items)


def _match_multiset(e: list[Any], g: list[Any], spec: FieldSpec) -> tuple[bool, str]:
    """Every expected condition paired with a distinct equal extracted one (bipartite matching:
    equality within a tolerance is not transitive, so first-fit alone can miss a pairing)."""
    equal = [[_cmp_condition(x, y, spec)[0] for y in g] for x in e]
    owner: dict[int, int] = {}  # extracted index -> expected index

    def assign(i: int, seen: set[int]) -> bool:
        for j in range(len(g)):
            if equal[i][j] and j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(e)):
        if not assign(i, set()):
            # Name the nearest candidate's (most keys equal) first difference, for the reader.
            def agreeing(j: int, x: Any = e[i]) -> int:  # this iteration's expected condition, bound
                y = g[j] if isinstance(g[j], dict) else {}
                return sum(_cmp_value(v, y.get(k), spec)[0] for k, v in (x if isinstance(x, dict) else {}).items())

            nearest = max(range(len(g)), key=agreeing)
            why = _cmp_condition(e[i], g[nearest], spec)[1]
            return False, f"no extracted condition matches expected condition #{i + 1} (nearest differs at {why})"
    return True, "same conditions (in any order)"


def _cmp_conditions(e: Any, g: Any, spec: FieldSpec) -> tuple[bool, str]:
    e, g = _as_list(e), _as_list(g)
    if len(e) != len(g):
        return False, f"expected {len(e)} conditions, got {len(g)}"
    if _has_priority(e) and _has_priority(g):
        es, gs = sorted(e, key=_priority_key), sorted(g, key=_priority_key)
        for i, (x, y) in enumerate(zip(es, gs), 1):
            ok, why = _cmp_condition(x, y, spec)
            if not ok:
                return False, f"condition #{i} by priority (priority {_show(x.get('priority'))}) differs at {why}"
        return True, "same conditions in priority order"
    return _match_multiset(e, g, spec)


COMPARE: dict[str, Compare] = {
    "id": _cmp_id,
    "enum": _cmp_id,
    "text": _cmp_text,
    "exact_text": _cmp_exact_text,
    "number": _cmp_number,
    "date": _cmp_date,
    "duration": _cmp_duration,
    "set": _cmp_set,
    "parties": _cmp_parties,
    "conditions": _cmp_conditions,
}


# ---------------------------------------------------------------- the scorer


def _terms_rows(ctx: ScoreContext, name: str, spec: FieldSpec, exp: Any, got: Any, source: list[str] | None,
                penalty: float) -> list[dict[str, Any]]:
    """Kind `terms`: truth and extracted terms aligned (scoring/terms.py), then one row per field of
    each pair (`terms[1].term_rate`, numbered by the truth term); a truth term nothing aligns with gives
    its fields as missing, an extracted term aligned with nothing its fields as extra (or hallucinated)."""
    subs = spec.fields or {}
    expected, extracted = as_terms(exp), as_terms(got)
    if not expected and not extracted:
        return [_row(ctx, name, spec, exp, got, source, penalty)]  # both empty: one matching row

    def same(f: str, e: Any, g: Any) -> bool:
        if is_missing(e) or is_missing(g):
            return is_missing(e) and is_missing(g)
        return COMPARE[subs[f].kind](e, g, subs[f])[0]

    found = align(expected, extracted, same, spec.align_by, spec.tie_by)
    rows: list[dict[str, Any]] = []
    for i, j in found.pairs:
        e, g = expected[i], extracted[j]
        rows += [_row(ctx, f"{name}[{i + 1}].{f}", sub, e.get(f), g.get(f), source, penalty) for f, sub in subs.items()]
    for i in found.missing:
        for f, sub in subs.items():
            row = _row(ctx, f"{name}[{i + 1}].{f}", sub, expected[i].get(f), None, source, penalty)
            rows.append(row | {"outcome": "missing", "credit": 0.0,
                               "reason": f"truth term {i + 1} has no extracted term aligned with it"})
    for n, j in enumerate(found.extra, 1):
        for f, sub in subs.items():
            row = _row(ctx, f"{name}[extra {n}].{f}", sub, None, extracted[j].get(f), source, penalty)
            if row["outcome"] != "hallucinated":
                row |= {"outcome": "extra", "credit": 0.0,
                        "reason": f"extracted term {j + 1} aligns with no term of the truth"}
            rows.append(row)
    return rows


def _table_rows(ctx: ScoreContext, name: str, spec: FieldSpec, exp: Any, got: Any) -> tuple[list[dict[str, Any]], Any]:
    """Kind `table`: rows aligned by assignment, then one item row per cell (scoring/tables.py), with `row` and
    `column`. The table's credit is its cell F1 × weight: each cell row weighs its share of the F1 denominator
    2·TP + FP + FN (a cell with values on both sides twice, one with a value on one side once), so Σ credit
    over the cells is weight · 2·TP / (2·TP + FP + FN)."""
    columns = spec.columns or {}
    expected, extracted = as_rows(exp), as_rows(got)

    def same(column: str, e: Any, g: Any) -> tuple[bool, str]:
        return COMPARE[columns[column].kind](e, g, columns[column])

    table = score_table(expected, extracted, list(columns), same)
    if not table.cells:  # no cell on either side: one matching row at the table's weight
        row = {"member": ctx.member_id, "field": name, "kind": spec.kind, "weight": spec.weight,
               "expected": _jsonable(exp), "extracted": _jsonable(got)}
        return [row | {"outcome": "match", "credit": spec.weight, "reason": "no cell on either side"}], table
    slots = sum(c.slots for c in table.cells)
    rows = []
    for c in table.cells:
        weight = spec.weight * c.slots / slots
        rows.append({"member": ctx.member_id, "field": f"{name}[{c.row}].{c.column}", "row": c.row, "column": c.column,
                     "kind": columns[c.column].kind, "weight": weight, "expected": _jsonable(c.expected),
                     "extracted": _jsonable(c.extracted), "outcome": c.outcome,
                     "credit": weight if c.outcome == "match" else 0.0, "reason": c.reason})
    return rows, table


def _field_rows(ctx: ScoreContext, name: str, spec: FieldSpec, exp: Any, got: Any, source: list[str] | None,
                penalty: float) -> list[dict[str, Any]]:
    if spec.kind == "terms":
        return _terms_rows(ctx, name, spec, exp, got, source, penalty)
    return [_row(ctx, name, spec, exp, got, source, penalty)]


def declared_pattern(ctx: ScoreContext, name: str) -> str | None:
    """The `pattern` the task's output schema (``ctx.extra["schema"]``) declares for a row's field: `name`
    is ``field`` or, for a term's field, ``field[N].sub`` (the sub-field of the list's items)."""
    node: Any = (ctx.extra or {}).get("schema")
    for i, part in enumerate(name.split(".")):
        if not isinstance(node, dict):
            return None
        if i:  # a term's field: under the list's items
            node = node.get("items")
            if not isinstance(node, dict):
                return None
        node = (node.get("properties") or {}).get(part.split("[")[0])
    pattern = node.get("pattern") if isinstance(node, dict) else None
    return pattern if isinstance(pattern, str) else None


def _row(ctx: ScoreContext, name: str, spec: FieldSpec, exp: Any, got: Any, source: list[str] | None,
         penalty: float) -> dict[str, Any]:
    row = {
        "member": ctx.member_id,
        "field": name,
        "kind": spec.kind,
        "weight": spec.weight,
        "expected": _jsonable(exp),
        "extracted": _jsonable(got),
    }
    # The check needs a source to look in (`source` is its token keys); with no text nothing is flagged.
    why = unstated(source, got, declared_pattern(ctx, name)) if spec.identifier and not is_missing(got) and source \
        else None
    if why is not None:
        w = spec.weight * penalty
        reason = f"{why} (weight {_num(spec.weight)} × penalty {_num(penalty)})"
        return row | {"weight": w, "outcome": "hallucinated", "credit": 0.0, "reason": reason}
    if is_missing(exp) and is_missing(got):
        outcome, reason = "match", "both null"
    elif is_missing(got):
        outcome, reason = "missing", f"expected {_show(exp)}, got null"
    elif is_missing(exp):
        outcome, reason = "extra", f"expected null, got {_show(got)}"
    else:
        ok, reason = COMPARE[spec.kind](exp, got, spec)
        outcome = "match" if ok else "mismatch"
    return row | {"outcome": outcome, "credit": spec.weight if outcome == "match" else 0.0, "reason": reason}


def _note(row: dict[str, Any]) -> str | None:
    f, o, e, g = row["field"], row["outcome"], row["expected"], row["extracted"]
    if o == "match":
        return None
    if o == "hallucinated":
        return f"{f}: HALLUCINATED — {_show(g)} is not stated in the source"
    if o == "mismatch":
        return f"{f}: mismatch — expected {_show(e)}, got {_show(g)} ({row['reason']})"
    return f"{f}: {o} — expected {_show(e)}, got {_show(g)}"


def _describe_gate(blocking: bool, missing: list[str]) -> str:
    return f"{'blocking' if blocking else 'not blocking'} with missing [{', '.join(missing)}]"


# ---------------------------------------------------------------- tables and evidence

EVIDENCE_KEY = "evidence"  # the record's key holding {field: {page, quote}} when the task asks for evidence


def _table_metrics(tables: list[Any]) -> dict[str, float | int | None]:
    """Cell precision/recall/F1 over every table field (counts summed), and their mean structure score; no keys
    for a task without a table field (its members' figures stay what they were)."""
    if not tables:
        return {}
    prf = PRF(*(sum(getattr(t.prf, k) for t in tables) for k in ("tp", "fp", "fn")))
    cells = prf.metrics("table_cell")
    if prf.f1 is None:  # no cell on either side: nothing was got wrong
        cells |= {"table_cell_precision": 1.0, "table_cell_recall": 1.0, "table_cell_f1": 1.0}
    shaped = [t for t in tables if t.pairs or t.missing or t.extra] or tables  # an empty table on both sides: no say
    return cells | {"table_structure": math.fsum(t.structure for t in shaped) / len(shaped)}


def _evidence(ctx: ScoreContext, opts: FieldsOptions, rows: list[dict[str, Any]], record: dict[str, Any]) -> list[dict[str, Any]] | None:
    """One evidence row per field that asks for it and has an extracted value (scoring/evidence.py); its outcome
    is also written on the field's item row (`evidence`). None when the task asks for no evidence."""
    asked = [n for n in opts.fields if opts.asks_evidence(n)]
    if not asked:
        return None
    given = record.get(EVIDENCE_KEY)
    given = given if isinstance(given, dict) else {}
    by_field = {r["field"]: r for r in rows}
    out = []
    for name in asked:
        row, spec = by_field.get(name), opts.fields[name]
        if row is None or is_missing(row["extracted"]):
            continue
        found = judge(spec.kind, row["extracted"], row["outcome"] == "match", given.get(name), ctx.source_text or "",
                      spec.tolerance or 0.0, spec.derive)
        row["evidence"] = found.outcome
        out.append({"field": name, "extracted": row["extracted"], "value": row["outcome"], **found.to_json()})
    return out


def _evidence_metrics(evidence: list[dict[str, Any]] | None) -> dict[str, float | int | None]:
    if evidence is None:
        return {}
    counts = {o: sum(e["outcome"] == o for e in evidence) for o in OUTCOMES}
    return {"evidence_grounded_rate": ratio(counts["grounded"], len(evidence)),
            "evidence_grounded": counts["grounded"],
            "evidence_right_value_wrong_evidence": counts["right_value_wrong_evidence"],
            "evidence_does_not_support": counts["evidence_does_not_support"],
            "evidence_not_found": counts["evidence_not_found"],
            "evidence_missing": counts["no_evidence"]}


def truth_from_record(record: Any, options: Any) -> FieldsTruth:
    """Another backend's record as the truth (``--reference``): its values, and the gate it passes or fails."""
    opts = options if isinstance(options, FieldsOptions) else FieldsOptions.model_validate(options or {})
    if not isinstance(record, dict):
        raise ValueError(f"the record is not an object ({type(record).__name__})")
    gate = run_gate(record, opts.gate)
    return FieldsTruth(record=dict(record), expected_missing_fields=gate.missing_fields, expected_blocking=gate.blocking)


def score(extraction: Any, truth: FieldsTruth, ctx: ScoreContext) -> ScoreResult:
    opts = ctx.options if isinstance(ctx.options, FieldsOptions) else FieldsOptions.model_validate(ctx.options or {})
    record = extraction if isinstance(extraction, dict) else None  # anything else is "produced nothing"
    got_of = record or {}
    source = document_keys(ctx.source_text or "")

    rows: list[dict[str, Any]] = []
    tables = []
    for name, spec in opts.fields.items():
        if spec.kind == "table":
            cells, table = _table_rows(ctx, name, spec, truth.record.get(name), got_of.get(name))
            rows += cells
            tables.append(table)
        else:
            rows += _field_rows(ctx, name, spec, truth.record.get(name), got_of.get(name), source,
                                opts.hallucination_penalty)
    evidence = _evidence(ctx, opts, rows, got_of)
    total_weight = math.fsum(r["weight"] for r in rows)
    headline = ratio(math.fsum(r["credit"] for r in rows), total_weight)
    counts = {o: sum(r["outcome"] == o for r in rows) for o in ("match", "mismatch", "missing", "extra", "hallucinated")}

    gate: GateResult = run_gate(record, opts.gate)
    expected_missing = list(truth.expected_missing_fields)
    gate_agrees = sorted(gate.missing_fields) == sorted(expected_missing) and gate.blocking == truth.expected_blocking

    notes = [n for r in rows if (n := _note(r))]
    if record is None and extraction is not None:
        notes.insert(0, f"extraction is not an object ({type(extraction).__name__}); scored as empty")
    if not gate_agrees:
        got_gate = _describe_gate(gate.blocking, gate.missing_fields)
        why = f" ({'; '.join(gate.reasons)})" if gate.reasons else ""
        notes.append(f"gate: expected {_describe_gate(truth.expected_blocking, expected_missing)}, got {got_gate}{why}")

    # Float sums of weights can land a hair under a threshold they exactly meet.
    passed = None if headline is None else (headline >= ctx.threshold - 1e-12 and gate_agrees)
    return ScoreResult(
        score=headline,
        passed=passed,
        metrics={
            "score": headline,
            "field_accuracy": ratio(counts["match"], len(rows)),
            "matched": counts["match"],
            "mismatched": counts["mismatch"],
            "missing": counts["missing"],
            "extra": counts["extra"],
            "hallucinated": counts["hallucinated"],
            "gate_agrees": gate_agrees,
            "gate_blocking": gate.blocking,
            **_table_metrics(tables),
            **_evidence_metrics(evidence),
        },
        items=rows,
        notes=notes,
        details={
            "gate": gate.to_json(),
            "expected_gate": {"missing_fields": expected_missing, "blocking": truth.expected_blocking},
            "unscored_fields": sorted(k for k in got_of if k not in opts.fields
                                      and not (k == EVIDENCE_KEY and evidence is not None)),
            **({"evidence": evidence} if evidence is not None else {}),
        },
    )


# Every metric `score` returns; the rows behind the counts and the score are written by `_row`.
METRICS = (
    Metric("score", "Σ credit / Σ weight over the spec's fields (a hallucinated identifier weighs weight × "
           "hallucination_penalty)", _row),
    Metric("field_accuracy", "fields whose outcome is match / the spec's fields", _row),
    Metric("matched", "fields equal to the truth under their kind's rule (both null included)", _row),
    Metric("mismatched", "fields with a value on both sides that differ under their kind's rule", _row),
    Metric("missing", "fields the truth fills and the extraction leaves null", _row),
    Metric("extra", "fields the truth leaves null and the extraction fills", _row),
    Metric("hallucinated", "identifier fields whose extracted value is not stated as an identifier: it breaks the "
           "field's schema pattern, is not identifier-shaped (a digit and a letter, or the pattern), or, separators "
           "and case aside, is not a whole token or token run of the source text", _row),
    Metric("gate_agrees", "the gate's missing fields and blocking verdict on the extraction equal the truth's "
           "expected_missing_fields and expected_blocking", score),
    Metric("gate_blocking", "the gate blocks the extraction: a required field missing, or a sum_equals rule broken "
           "or unreadable", run_gate),
    # Only for a task with a `table` field (scoring/tables.py), counts summed over its table fields:
    Metric("table_cell_precision", "table cells (non-null values of an aligned row and a column) equal to the "
           "truth's / the extraction's cells; rows aligned by optimal assignment on equal cells", _table_rows),
    Metric("table_cell_recall", "table cells equal to the truth's / the truth's cells", _table_rows),
    Metric("table_cell_f1", "2·TP / (2·TP + FP + FN) over table cells; a table's credit in the score is its cell "
           "F1 × weight", _table_rows),
    Metric("table_cell_tp", "table cells equal in an aligned row", _table_rows),
    Metric("table_cell_fp", "extracted table cells not equal to the truth's (a mismatch, or a value the truth "
           "leaves null, or a cell of an unaligned extracted row)", _table_rows),
    Metric("table_cell_fn", "truth table cells not extracted equal (a mismatch, a null, or a cell of an unaligned "
           "truth row)", _table_rows),
    Metric("table_structure", "GriTS-Top (Smock et al., 2022) of the span-free grids: 2·min(rows)·|columns both "
           "fill| / (rows·columns filled, truth + extraction), mean over the table fields with a row on either side",
           _table_metrics),
    # Only for a task that asks for evidence (scoring/evidence.py), over fields with an extracted value:
    Metric("evidence_grounded_rate", "fields whose quote is in the document and bears the extracted value / "
           "fields with an extracted value that ask for evidence", _evidence),
    Metric("evidence_grounded", "fields whose quote is in the document and bears the value (verbatim or "
           "normalized under the kind, or derive: sum)", _evidence),
    Metric("evidence_right_value_wrong_evidence", "fields with the right value whose quote is in the document "
           "but does not bear it", _evidence),
    Metric("evidence_does_not_support", "fields with a wrong value whose quote is in the document and does not "
           "bear it", _evidence),
    Metric("evidence_not_found", "fields whose quote is not in the document, whitespace runs and case aside",
           _evidence),
    Metric("evidence_missing", "fields with an extracted value and no quote", _evidence),
)

SCORER = Scorer(
    name="fields",
    score=score,
    truth_model=FieldsTruth,
    options_model=FieldsOptions,
    expected_extraction=lambda t: dict(t.record),
    truth_from_record=truth_from_record,
    metrics=METRICS,
)
