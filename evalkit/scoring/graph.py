"""`graph`: strict precision / recall / F1 for a knowledge-graph extraction.

The record is ``{entities: [{name, type}], relations: [{head, relation, tail}],
summary}``. Three axes are scored per member:

entities
    An entity's key is ``(fold(name), TYPE)``: the name through the shared
    fold of `evalkit.scoring.text` (SQuAD normalization — lower case,
    punctuation and the articles a/an/the removed, whitespace collapsed — then
    the last word singularized, so "kobold" ~ "kobolds", "lizard man" ~ "lizard
    men", "the United States" ~ "United States"), and the type trimmed and
    upper-cased. (A name that folds to nothing — "A", "The" — keeps its trimmed
    lower-case text as its key instead.) With ``entity_type_in_key: false`` the key is the folded name
    alone. Token subsets and renames never match ("hobgoblin chief" is not
    "hobgoblin"; "U.S." is not "United States" — that is the judge's job).
relations
    A relation's key is ``(fold(head), fold(relation), fold(tail))``. Relations
    are directed unless their label is listed in ``symmetric_relations`` (folded
    the same way); a symmetric relation's head and tail are put in sorted order,
    so (A, sibling, B) and (B, sibling, A) are one item. Head and tail are
    compared by name only (not by type).
summary
    SQuAD token F1 (`text.token_f1`) between the extracted and the true
    summary; null when the truth has no summary (Re-DocRED members), never 0.
    A missing extracted summary against a true one scores 0.

Entities and relations compare as sets of keys (`sets.match_sets`):
duplicates with the same key count once; every key becomes one row of the
item table, matched (on both sides), missed (truth only) or spurious
(extraction only). Precision, recall and F1 are null when their denominator
is empty (no extracted item, no true item, neither), never 0 or 1.

Headline score: the relations F1 (strict); ``passed`` is ``score >=
threshold`` (task.yaml's `threshold`), None when the score is null.

Judged metrics (``judged_<axis>_precision|recall|f1``) are null unless a judge
has looked at this result: the judge phase (`evalkit.stages.judge`, ``evalkit run
--judge``) writes judgments.json beside extraction.json and the pipeline hands
it over as ``ctx.extra["judgments"]``. They are computed here, purely, from the
strict matches plus the judge-accepted (missed, spurious) pairs — each row used
at most once, and only pairs whose keys the strict pass really left unmatched.

Under ``--ontology`` in strict mode (``ctx.extra["ontology"]``) the result also
carries ``vocabulary_compliance`` (`evalkit.scoring.ontology.compliance`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cached_property
from typing import Any

from pydantic import Field, field_validator, model_validator

from evalkit._util.strict import Strict as _Strict
from evalkit.scoring.base import JUDGED_GRAPH, Metric, ScoreContext, Scorer, ScoreResult
from evalkit.scoring.ontology import Ontology, compliance
from evalkit.scoring.sets import PRF, match_sets
from evalkit.scoring.stats import macro_f1, summed
from evalkit.scoring.text import fold, token_f1

__all__ = [
    "AXES",
    "GraphOptions",
    "GraphTruth",
    "GraphExtraction",
    "SCORER",
    "corpus_metrics",
    "entity_key",
    "relation_key",
    "score",
]

AXES = ("entities", "relations", "summary")
SET_AXES = ("entities", "relations")
JUDGED = tuple(f"judged_{axis}_{m}" for axis in SET_AXES for m in ("precision", "recall", "f1"))


# ----------------------------------------------------------------------------- options


class GraphOptions(_Strict):
    """task.yaml's `scoring:` block for the graph scorer."""

    # Relation labels compared undirected ((A, r, B) == (B, r, A)); every other relation is directed.
    symmetric_relations: list[str] = Field(default_factory=list)
    # Whether the entity type is part of the entity key (name + type), or the name alone.
    entity_type_in_key: bool = True

    @field_validator("symmetric_relations")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        for label in v:
            if not fold(label):
                raise ValueError(f"{label!r} is not a relation label (empty after normalization)")
        return v

    @cached_property  # read for every relation key
    def symmetric(self) -> frozenset[str]:
        return frozenset(fold(label) for label in self.symmetric_relations)


# ----------------------------------------------------------------------------- truth


def _nonblank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be blank")
    return v


class TruthEntity(_Strict):
    name: str
    type: str

    @field_validator("name", "type")
    @classmethod
    def _filled(cls, v: str) -> str:
        return _nonblank(v)


class TruthRelation(_Strict):
    head: str
    relation: str
    tail: str

    @field_validator("head", "relation", "tail")
    @classmethod
    def _filled(cls, v: str) -> str:
        return _nonblank(v)


class GraphTruth(_Strict):
    """truth.yaml of a graph task. `summary: null` says the truth has no summary."""

    entities: list[TruthEntity]
    relations: list[TruthRelation]
    summary: str | None
    notes: str | None = None

    @field_validator("summary")
    @classmethod
    def _summary(cls, v: str | None) -> str | None:
        return None if v is None else _nonblank(v)

    @model_validator(mode="after")
    def _relations_name_entities(self) -> GraphTruth:
        names = {e.name for e in self.entities}
        for i, r in enumerate(self.relations):
            for end in ("head", "tail"):
                if getattr(r, end) not in names:
                    raise ValueError(f"relations[{i}].{end}: {getattr(r, end)!r} is not the name of an entity in `entities`")
        return self


def expected_extraction(truth: GraphTruth) -> dict[str, Any]:
    """The record a perfect extraction would be (the truth without its notes)."""
    return {
        "entities": [{"name": e.name, "type": e.type} for e in truth.entities],
        "relations": [{"head": r.head, "relation": r.relation, "tail": r.tail} for r in truth.relations],
        "summary": truth.summary,
    }


# ----------------------------------------------------------------------------- extraction


class _ExtEntity(_Strict):
    name: str
    type: str


class _ExtRelation(_Strict):
    head: str
    relation: str
    tail: str


class GraphExtraction(_Strict):
    """The output record, as the task's JSON schema describes it (for predictions files)."""

    entities: list[_ExtEntity] = Field(default_factory=list)
    relations: list[_ExtRelation] = Field(default_factory=list)
    summary: str | None = None


def _items(record: dict[str, Any], axis: str, fields: tuple[str, ...], notes: list[str]) -> list[dict[str, str]]:
    """The well-formed items of one axis; every malformed one is noted and left out."""
    raw = record.get(axis)
    if raw is None:
        return []
    if not isinstance(raw, list):
        notes.append(f"{axis}: not a list ({type(raw).__name__}); nothing scored on this axis")
        return []
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            notes.append(f"{axis}[{i}]: not an object; ignored")
            continue
        required = fields[:1] if axis == "entities" else fields  # an entity without a type still has a name
        bad = [f for f in required if not isinstance(item.get(f), str) or not item[f].strip()]
        if bad:
            notes.append(f"{axis}[{i}]: {', '.join(bad)} missing or not a non-empty string; ignored")
            continue
        out.append({f: v if isinstance(v := item.get(f), str) else "" for f in fields})
    return out


# ----------------------------------------------------------------------------- keys


def entity_key(entity: dict[str, str], options: GraphOptions) -> tuple[str, str] | str:
    name = fold(entity["name"])
    return (name, str(entity.get("type") or "").strip().upper()) if options.entity_type_in_key else name


def relation_key(relation: dict[str, str], options: GraphOptions) -> tuple[str, str, str]:
    head, label, tail = fold(relation["head"]), fold(relation["relation"]), fold(relation["tail"])
    if label in options.symmetric and tail < head:
        head, tail = tail, head
    return (head, label, tail)


def _annotate(rows: list[dict[str, Any]], axis: str, options: GraphOptions) -> None:
    """Sharpen the reason of a miss whose near-counterpart was extracted (wrong type, reversed)."""
    if axis == "entities" and options.entity_type_in_key:
        spurious = {tuple(r["key"])[0]: r for r in rows if r["outcome"] == "spurious"}
        missed = {tuple(r["key"])[0]: r for r in rows if r["outcome"] == "missed"}
        for name, row in missed.items():
            if name in spurious:
                other = spurious[name]
                row["reason"] += f" (extracted with type {other['key'][1]!r})"
                other["reason"] += f" (the truth types this name {row['key'][1]!r})"
    elif axis == "relations":
        spurious = {tuple(r["key"]): r for r in rows if r["outcome"] == "spurious"}
        for row in rows:
            if row["outcome"] != "missed":
                continue
            head, label, tail = row["key"]
            swapped = spurious.get((tail, label, head))
            if swapped is not None:
                row["reason"] += f" (extracted with head and tail swapped; {row['expected']['relation']!r} is directed)"
                swapped["reason"] += " (the truth has it with head and tail swapped)"


def _compare(axis: str, expected: list[dict[str, str]], extracted: list[dict[str, str]], options: GraphOptions,
             member: str, details: dict[str, Any]) -> tuple[PRF, list[dict[str, Any]]]:
    key = (lambda e: entity_key(e, options)) if axis == "entities" else (lambda r: relation_key(r, options))
    prf, rows = match_sets(expected, extracted, key=key, show=dict)
    _annotate(rows, axis, options)
    details[f"{axis}_duplicates"] = {
        "expected": len(expected) - len({key(x) for x in expected}),
        "extracted": len(extracted) - len({key(x) for x in extracted}),
    }
    return prf, [{"member": member, "axis": axis, **r, "score": None} for r in rows]


# ----------------------------------------------------------------------------- scoring


def score(extraction: dict[str, Any] | None, truth: GraphTruth, ctx: ScoreContext) -> ScoreResult:
    options = ctx.options if isinstance(ctx.options, GraphOptions) else GraphOptions.model_validate(ctx.options or {})
    notes: list[str] = []
    details: dict[str, Any] = {"headline": "relations_f1"}
    if extraction is None:
        notes.append("no extraction: every true item is missed")
        record: dict[str, Any] = {}
    elif not isinstance(extraction, dict):
        notes.append(f"the extraction is not an object ({type(extraction).__name__}): every true item is missed")
        record = {}
    else:
        record = extraction

    exp = expected_extraction(truth)
    metrics: dict[str, float | int | bool | None] = {}
    items: list[dict[str, Any]] = []
    fields = {"entities": ("name", "type"), "relations": ("head", "relation", "tail")}
    for axis in SET_AXES:
        prf, rows = _compare(axis, exp[axis], _items(record, axis, fields[axis], notes), options, ctx.member_id, details)
        metrics.update(prf.metrics(axis))
        items.extend(rows)
    for axis, dups in ((a, details[f"{a}_duplicates"]["extracted"]) for a in SET_AXES):
        if dups:
            notes.append(f"{axis}: {dups} duplicate item(s) in the extraction counted once")

    got = record.get("summary")
    if got is not None and not isinstance(got, str):
        notes.append(f"summary: not a string ({type(got).__name__}); taken as absent")
        got = None
    if truth.summary is None:
        metrics["summary_f1"] = None  # the truth has no summary: nothing to compare, not a zero
    else:
        f1 = token_f1(got or "", truth.summary)
        metrics["summary_f1"] = f1
        present = bool(got and got.strip())
        items.append({
            "member": ctx.member_id, "axis": "summary", "key": None,
            "expected": truth.summary, "extracted": got,
            "outcome": "matched" if present else "missed",
            "reason": f"SQuAD token F1 {f1:.3f}" if present else "in the truth, not extracted (token F1 0)",
            "score": f1,
        })

    for name in JUDGED:
        metrics[name] = None  # no judge has looked at this result; never 0
    judgments = (ctx.extra or {}).get("judgments")
    if judgments is not None:
        _apply_judgments(items, metrics, judgments, notes)
    ontology = (ctx.extra or {}).get("ontology")
    if ontology:
        details["ontology_mode"] = ontology.get("mode")
        if ontology.get("mode") == "strict":
            vocabulary = Ontology.from_json(ontology)
            assert vocabulary is not None  # `ontology` is not empty
            figures = compliance(record, vocabulary)
            metrics["vocabulary_compliance"] = figures["vocabulary_compliance"]
            details["vocabulary"] = {k: v for k, v in figures.items() if k != "vocabulary_compliance"}

    headline = metrics["relations_f1"]
    passed = None if headline is None else headline >= ctx.threshold
    return ScoreResult(score=headline, passed=passed, metrics=metrics, items=items, notes=notes, details=details)


def _canon(key: Any) -> str:
    return json.dumps(key, sort_keys=True, ensure_ascii=False)


def _apply_judgments(items: list[dict[str, Any]], metrics: dict[str, Any], judgments: dict[str, Any],
                     notes: list[str]) -> None:
    """Judged P/R/F1 per axis: strict tp/fp/fn with every judge-accepted (missed, spurious) pair moved to tp.

    Every entity and relation row gets a ``judged`` column: ``matched`` (strict), ``accepted`` (the
    judge paired it) or ``rejected`` (still unmatched); the summary row gets null. An axis the judge
    could not decide (``status: error``) keeps null judged metrics.
    """
    axes = judgments.get("axes") or {}
    for row in items:
        row["judged"] = None if row["axis"] == "summary" else ("matched" if row["outcome"] == "matched" else "rejected")
    for axis in SET_AXES:
        verdicts = axes.get(axis)
        if verdicts is None:
            continue
        if verdicts.get("status") == "error":
            notes.append(f"judge: {axis} not judged ({verdicts.get('error') or 'judge error'}); judged metrics null")
            continue
        rows = [r for r in items if r["axis"] == axis]
        missed = {_canon(r["key"]): r for r in rows if r["outcome"] == "missed"}
        spurious = {_canon(r["key"]): r for r in rows if r["outcome"] == "spurious"}
        accepted = 0
        for pair in verdicts.get("accepted") or []:
            m, s = missed.pop(_canon(pair.get("expected_key")), None), spurious.pop(_canon(pair.get("extracted_key")), None)
            if m is None or s is None:  # stale, repeated or not a strict leftover: never counted
                for key, kept, pool in ((pair.get("expected_key"), m, missed), (pair.get("extracted_key"), s, spurious)):
                    if kept is not None:
                        pool[_canon(key)] = kept
                continue
            accepted += 1
            why = f": {pair['reason']}" if pair.get("reason") else ""
            m["judged"] = s["judged"] = "accepted"
            m["reason"] += f" (judge: the same as extracted {_show(s['extracted'])}{why})"
            s["reason"] += f" (judge: the same as true {_show(m['expected'])}{why})"
        tp, fp, fn = (int(metrics[f"{axis}_{c}"]) for c in ("tp", "fp", "fn"))
        judged = PRF(tp + accepted, fp - accepted, fn - accepted)
        for name, value in judged.metrics(f"judged_{axis}").items():
            metrics[name] = value
        metrics[f"judged_{axis}_accepted"] = accepted


def _show(item: Any) -> str:
    if isinstance(item, dict):
        return repr(" / ".join(str(v) for v in item.values()))
    return repr(item)


def _counts(result: ScoreResult, prefix: str) -> tuple[int, int, int]:
    tp, fp, fn = (int(result.metrics.get(f"{prefix}_{c}") or 0) for c in ("tp", "fp", "fn"))
    return tp, fp, fn


def corpus_metrics(results: Iterable[ScoreResult]) -> dict[str, float | int | None]:
    """Corpus-level figures over members' results.

    Micro: precision / recall / F1 from the summed tp/fp/fn of every member
    (``<axis>_precision`` …). Macro: the mean of the members' non-null F1
    (``<axis>_macro_f1``), with the number of members that had one
    (``<axis>_members``). ``summary_f1`` is the mean over members whose truth
    has a summary (null when none has). Judged micro precision / recall / F1
    (``judged_<axis>_*``) from the members' judged tp/fp/fn — only when every
    member was judged on that axis (else null, never 0), with
    ``judged_<axis>_members`` the number judged.
    """
    results = list(results)
    out: dict[str, float | int | None] = {"members": len(results)}
    for axis in SET_AXES:
        out.update(PRF(*summed(_counts(r, axis) for r in results)).metrics(axis))
        f1s = [r.metrics[f"{axis}_f1"] for r in results if r.metrics.get(f"{axis}_f1") is not None]
        out[f"{axis}_macro_f1"] = macro_f1(f1s)
        out[f"{axis}_members"] = len(f1s)
    summaries = [r.metrics["summary_f1"] for r in results if r.metrics.get("summary_f1") is not None]
    out["summary_f1"] = macro_f1(summaries)
    out["summary_members"] = len(summaries)
    for name in JUDGED:
        out[name] = None
    for axis in SET_AXES:
        judged = [r for r in results if r.metrics.get(f"judged_{axis}_tp") is not None]
        out[f"judged_{axis}_members"] = len(judged)
        if judged and len(judged) == len(results):
            prf = PRF(*summed(_counts(r, f"judged_{axis}") for r in judged))
            out.update({k: v for k, v in prf.metrics(f"judged_{axis}").items() if not k.endswith(("_tp", "_fp", "_fn"))})
    return out


# Every metric `score` returns. Set figures over the axis's item rows: precision = matched / (matched +
# spurious), recall = matched / (matched + missed), F1 = 2·tp / (2·tp + fp + fn); null when empty, never 0 or 1.
METRICS = (
    Metric("entities_precision", "extracted entities whose key (folded name, TYPE; the name alone with "
           "entity_type_in_key: false) is a true entity's / all extracted (distinct keys)", _compare),
    Metric("entities_recall", "true entities whose key (folded name, TYPE) is extracted / all true (distinct keys)",
           _compare),
    Metric("entities_f1", "F1 of entity keys", _compare),
    Metric("entities_tp", "entity keys on both sides", _compare),
    Metric("entities_fp", "entity keys extracted only (spurious)", _compare),
    Metric("entities_fn", "entity keys in the truth only (missed)", _compare),
    Metric("relations_precision", "extracted relations whose key (folded head, relation, tail; symmetric labels "
           "unordered) is true / all extracted", _compare),
    Metric("relations_recall", "true relations whose key (folded head, relation, tail) is extracted / all true",
           _compare),
    Metric("relations_f1", "F1 of relation keys: the member's score", _compare),
    Metric("relations_tp", "relation keys on both sides", _compare),
    Metric("relations_fp", "relation keys extracted only (spurious)", _compare),
    Metric("relations_fn", "relation keys in the truth only (missed)", _compare),
    Metric("summary_f1", "SQuAD token F1 of the extracted summary against the true one; null when the truth has "
           "none", token_f1),
    Metric("judged_entities_precision", "entities precision with the judge-accepted (missed, spurious) pairs "
           "counted as matches; null unless judged", _apply_judgments),
    Metric("judged_entities_recall", "entities recall with the judge-accepted pairs counted as matches; null "
           "unless judged", _apply_judgments),
    Metric("judged_entities_f1", "entities F1 with the judge-accepted pairs counted as matches; null unless judged",
           _apply_judgments),
    Metric("judged_entities_tp", "entities_tp + judge-accepted entity pairs (only when judged)", _apply_judgments),
    Metric("judged_entities_fp", "entities_fp − judge-accepted entity pairs (only when judged)", _apply_judgments),
    Metric("judged_entities_fn", "entities_fn − judge-accepted entity pairs (only when judged)", _apply_judgments),
    Metric("judged_entities_accepted", "(missed, spurious) entity pairs the judge accepted as the same (only when "
           "judged)", _apply_judgments),
    Metric("judged_relations_precision", "relations precision with the judge-accepted (missed, spurious) pairs "
           "counted as matches; null unless judged", _apply_judgments),
    Metric("judged_relations_recall", "relations recall with the judge-accepted pairs counted as matches; null "
           "unless judged", _apply_judgments),
    Metric("judged_relations_f1", "relations F1 with the judge-accepted pairs counted as matches; null unless "
           "judged", _apply_judgments),
    Metric("judged_relations_tp", "relations_tp + judge-accepted relation pairs (only when judged)",
           _apply_judgments),
    Metric("judged_relations_fp", "relations_fp − judge-accepted relation pairs (only when judged)",
           _apply_judgments),
    Metric("judged_relations_fn", "relations_fn − judge-accepted relation pairs (only when judged)",
           _apply_judgments),
    Metric("judged_relations_accepted", "(missed, spurious) relation pairs the judge accepted as the same (only "
           "when judged)", _apply_judgments),
    Metric("vocabulary_compliance", "emitted entity types and relation labels inside the ontology / all emitted "
           "(only under --ontology-mode strict)", compliance),
)

SCORER = Scorer(
    name="graph",
    score=score,
    truth_model=GraphTruth,
    options_model=GraphOptions,
    extraction_model=GraphExtraction,
    expected_extraction=expected_extraction,
    truth_from_record=lambda record, options: GraphTruth.model_validate(record),
    metrics=METRICS,
    judged=JUDGED_GRAPH,
)
