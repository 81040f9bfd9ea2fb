"""Blind pairwise judging: two backends' extractions of one member, per axis, in both slot orders.

For every unordered pair of a run's backends, every member both extracted and
every axis (entities, relations, summary), the judge sees the source text and
the two extractions of that axis as slot A and slot B — only the axis content,
reduced to the schema's fields, never a backend name, model, provider or spec.
Each item is judged in both orders; which backend sits in slot A first is
derived from a hash of the member key and the two backend names
(`first_order`), never from a clock or an RNG, so a re-run reproduces it.

Combining the two verdicts (`combine`): the same winner both times is a win
for that backend (or a tie when both verdicts say tie); verdicts that disagree
are a tie and count toward the order-inconsistency rate. Two identical
extractions of an axis are a tie without a judge call (they cannot differ in
quality; calling would only measure the judge's position bias). A member one
backend has no record for (an error, an unreadable answer) is skipped —
never a loss.

Per pair and axis (`aggregate`): wins, losses, ties, win rate (wins / (wins +
losses): ties excluded; null when there are none), order inconsistencies and
their rate (over the items judged by calls: `judged`), members compared, identical,
skipped and errors. `notes` gives the stderr lines: a note for a win rate
outside 45–55 % (where a calibration control — one model recorded twice —
should land), a warning for order inconsistency above 20 %. The data stay pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from evalkit.backends.base import Request

CALL_TYPE = "judge.pairwise"
AXES = ("entities", "relations", "summary")
FIELDS = {"entities": ("name", "type"), "relations": ("head", "relation", "tail")}
VERDICTS = ("A", "B", "tie")
NOTE_BAND = (0.45, 0.55)
INCONSISTENCY_WARN = 0.20
MAX_TOKENS = 512

SYSTEM = ("You are an impartial judge comparing two extractions made from the same source text. Judge only "
          "their content against the source text. The two extractions are shown in an arbitrary order: the "
          "order, the slot letters and the length of an answer say nothing about its quality. Answer with "
          "exactly one JSON object that follows the given schema and nothing else.")

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["verdict", "reason"],
    "properties": {
        "verdict": {"type": "string", "enum": list(VERDICTS),
                    "description": "A or B: the better extraction; tie: neither is better"},
        "reason": {"type": "string", "maxLength": 400, "description": "one or two sentences"},
    },
}

QUESTIONS = {
    "entities": ("Which extraction lists the named entities, dates and numbers of the text better? Prefer the one "
                 "that is more complete (leaves out fewer of the entities the text names), more correct (names "
                 "written as the text gives them, types that fit: PER, ORG, LOC, TIME, NUM, MISC) and has fewer "
                 "invented, duplicated or merged entities."),
    "relations": ("Which extraction states the facts of the text better as (head, relation, tail) triples? Prefer "
                  "the one with more of the relations the text states, correct heads, tails and direction, fitting "
                  "relation labels, and fewer relations the text does not state or denies."),
    "summary": ("Which summary says better what the text is about? Prefer the one that is faithful to the text "
                "(nothing it does not say), covers its main point, and is one or two plain sentences."),
}


# ----------------------------------------------------------------------------- content and slots

def axis_content(record: Any, axis: str) -> Any:
    """What the judge sees of one axis: the schema's fields only (strings), nothing else of the record."""
    rec = record if isinstance(record, dict) else {}
    if axis == "summary":
        value = rec.get("summary")
        return value.strip() if isinstance(value, str) and value.strip() else None
    raw = rec.get(axis)
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict):
            out.append({f: item.get(f) if isinstance(item.get(f), str) else "" for f in FIELDS[axis]})
    return out


def render_content(content: Any, axis: str) -> str:
    if axis == "summary":
        return "(no summary)" if content is None else json.dumps(content, ensure_ascii=False)
    if not content:
        return "(no items)"
    return "\n".join(json.dumps(item, ensure_ascii=False) for item in content)


def first_order(member_key: str, a: str, b: str) -> tuple[str, str]:
    """(slot A, slot B) of the first presentation: from a hash of the member key and the two names
    (in sorted order, so it does not depend on which is given first)."""
    x, y = sorted((a, b))
    digest = hashlib.sha256(f"{member_key}\x00{x}\x00{y}".encode()).digest()
    return (x, y) if digest[0] % 2 == 0 else (y, x)


def request(member_key: str, axis: str, document: str, slot_a: str, slot_b: str) -> Request:
    """The judge request for one order. `slot_a` / `slot_b` are rendered axis contents (no names)."""
    user = (f"Source text:\n<<<\n{document}\n>>>\n\n"
            f"Two extractions of the {axis} of this text follow.\n\n"
            f"{QUESTIONS[axis]}\n\n"
            f"Extraction A ({axis}):\n<<<\n{slot_a}\n>>>\n\n"
            f"Extraction B ({axis}):\n<<<\n{slot_b}\n>>>\n\n"
            'Answer with one JSON object: {"verdict": "A" | "B" | "tie", "reason": "..."}. '
            "Say tie only when neither extraction is better.")
    return Request(member=member_key, call_type=CALL_TYPE, system=SYSTEM, user=user, schema=SCHEMA,
                   max_tokens=MAX_TOKENS, temperature=0.0)


def parse_verdict(record: Any) -> tuple[str | None, str]:
    """(verdict, reason) from the judge's record; verdict None when it is not A, B or tie."""
    if not isinstance(record, dict):
        return None, ""
    verdict = record.get("verdict")
    if isinstance(verdict, str):
        v = verdict.strip().strip("[]\"' .")
        verdict = {"a": "A", "b": "B", "tie": "tie", "slot a": "A", "slot b": "B"}.get(v.lower())
    else:
        verdict = None
    reason = record.get("reason")
    return verdict, reason if isinstance(reason, str) else ""


def winner(verdict: str | None, slot_a: str, slot_b: str) -> str | None:
    return {"A": slot_a, "B": slot_b, "tie": "tie"}.get(verdict or "")


def combine(first: str | None, second: str | None) -> tuple[str, bool]:
    """(outcome, inconsistent) from the winners of the two orders (a backend name or "tie")."""
    if first == second:
        return first or "tie", False
    return "tie", True


# ----------------------------------------------------------------------------- aggregation

def aggregate(items: Iterable[dict[str, Any]], pairs: Iterable[tuple[str, str]],
              axes: Iterable[str] = AXES) -> list[dict[str, Any]]:
    """One row per pair and axis (pairs in the given order, a before b)."""
    items = list(items)
    rows = []
    for a, b in pairs:
        for axis in axes:
            mine = [i for i in items if i["a"] == a and i["b"] == b and i["axis"] == axis]
            decided = [i for i in mine if i["status"] in ("judged", "identical")]
            judged = [i for i in mine if i["status"] == "judged"]
            wins = sum(i["outcome"] == a for i in decided)
            losses = sum(i["outcome"] == b for i in decided)
            inconsistent = sum(bool(i.get("inconsistent")) for i in judged)
            rows.append({
                "a": a, "b": b, "axis": axis, "wins": wins, "losses": losses,
                "ties": sum(i["outcome"] == "tie" for i in decided),
                "win_rate": wins / (wins + losses) if wins + losses else None,
                "inconsistent": inconsistent,
                "order_inconsistency_rate": inconsistent / len(judged) if judged else None,
                "compared": len(decided), "judged": len(judged), "identical": sum(i["status"] == "identical" for i in mine),
                "skipped": sum(i["status"] == "skipped" for i in mine),
                "errors": sum(i["status"] == "error" for i in mine),
            })
    return rows


def notes(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The stderr lines for a pairwise result (nothing is written into the data)."""
    out = []
    lo, hi = NOTE_BAND
    for r in rows:
        wr = r.get("win_rate")
        if wr is not None and not (lo <= wr <= hi):
            out.append(f"note: pairwise {r['a']} vs {r['b']} ({r['axis']}): win rate {wr:.1%} for {r['a']} "
                       f"({r['wins']} wins, {r['losses']} losses, {r['ties']} ties) is outside {lo:.0%}–{hi:.0%}, "
                       f"where a calibration control (one model recorded twice) should land")
        rate = r.get("order_inconsistency_rate")
        if rate is not None and rate > INCONSISTENCY_WARN:
            out.append(f"warning: pairwise {r['a']} vs {r['b']} ({r['axis']}): the judge's verdict changed with the "
                       f"slot order on {r['inconsistent']} of {r['judged']} "
                       f"items ({rate:.1%} > {INCONSISTENCY_WARN:.0%}): its position bias is large")
    return out
