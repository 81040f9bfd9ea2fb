"""What changed between two sets of results of the same members (A, then B): pure, over score.json data.

Two backends of one run (`evalkit compare`) or one task of two runs (`evalkit diff`) are both a pair of
``{member: score.json data}`` maps. From them:

* `metric_deltas`: per metric (``score`` and every numeric metric), B − A over the members scored in both
  (`evalkit.scoring.stats.paired_difference`: mean, bootstrap CI, two-sided sign-flip p, n) and each member's pair;
* `statement`: that as one line, ``B − A = +0.12 [0.05, 0.19], p = 0.003 over 13 members; beyond the band
  0.02``;
* `verdict_flips`: the members whose PASS / FAIL changed;
* `changed_items`: every item whose outcome changed (or that is in one side only), with both values;
  newly hallucinated (or spurious) items first;
* `field_accuracy`: per field, the share of members whose field matched, per side, and B − A paired over
  members (flat-fields tasks).

Held-out members (``heldout: true`` in their manifest: kept back from prompt tuning, to see whether a change
generalises) are compared apart from the tuned ones, never pooled: `compare_sides` gives the tuned figures and,
beside them, the held-out members' own (``heldout``). Within each, every p-value but the headline score's (the
pre-declared primary) is also given Holm-adjusted over the per-metric and per-field rows (``p_adj``): with a
dozen fields one of them is "significant" by chance every few comparisons.

An errored member × backend (`evalkit.status`) is no score: it takes part in no difference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalkit.scoring.stats import SEED, as_number, format_p, holm, paired_difference, sub_seed
from evalkit.status import SCORED, status_of

__all__ = ["metric_deltas", "statement", "verdict_flips", "changed_items", "field_accuracy", "compare_sides",
           "IDENTITY", "NEWLY_WRONG", "TUNED_MEANS", "ADJUSTMENT"]

Side = Mapping[str, Mapping[str, Any]]  # member → score.json data

IDENTITY = ("axis", "family", "field", "key", "path", "id")  # item columns that name an item (those present)
SUCCESS = ("match", "matched")
NEWLY_WRONG = ("hallucinated", "spurious")  # an outcome B invented: listed first
TUNED_MEANS = ("tuned: the members a prompt or setting may be tuned on; held-out: members kept back from tuning "
               "(``heldout: true`` in their manifest), compared apart so a change that only fits the tuned "
               "members shows")
ADJUSTMENT = "Holm (family-wise, over every per-metric and per-field row; the headline score is the primary, unadjusted)"


def _scored(side: Side) -> dict[str, Mapping[str, Any]]:
    return {m: d for m, d in side.items() if status_of(d) == SCORED}


def metric_deltas(a: Side, b: Side, task: str, stream: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Per metric (``score`` first, then the numeric metrics by name): A's and B's means over the paired
    members and `paired_difference` of B − A. Seeds per (task, `stream`, metric), as everywhere."""
    sa, sb = _scored(a), _scored(b)
    both = sorted(sa.keys() & sb.keys())
    names = sorted({k for m in both for d in (sa[m], sb[m]) for k, v in (d.get("metrics") or {}).items()
                    if as_number(v) is not None and k != "score"})
    out = []
    for name in ["score", *names]:
        def value(d: Mapping[str, Any], name: str = name) -> float | None:  # this iteration's name, bound
            return as_number(d.get("score") if name == "score" else (d.get("metrics") or {}).get(name))
        values = [(value(sa[m]), value(sb[m])) for m in both]
        pairs = [(x, y) for x, y in values if x is not None and y is not None]
        d = paired_difference(pairs, sub_seed(SEED, task, *stream, "delta", name))
        per_member = [{"member": m, "a": value(sa[m]), "b": value(sb[m])} for m in both
                      if value(sa[m]) is not None and value(sb[m]) is not None]
        out.append({"metric": name, "a": _mean([x for x, _ in pairs]), "b": _mean([y for _, y in pairs]), **d,
                    "pairs": per_member})
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−")


def statement(d: Mapping[str, Any], a: str = "A", b: str = "B", band: float | None = None, group: str = "") -> str:
    """``B − A = +0.120 [0.050, 0.190], p = 0.003 over 13 members; beyond the band 0.02`` (or why there is
    nothing to say); `group` (``tuned``, ``held-out``) names whose members they are."""
    members = f"{group} member" if group else "member"
    if not d.get("n"):
        return f"{b} − {a}: no {members} scored by both: nothing to compare"
    ci = d.get("ci")
    line = f"{b} − {a} = {_signed(d['mean'])}"
    if ci:
        line += f" [{_signed(ci[0])}, {_signed(ci[1])}]"
    line += f", p {_p_words(d['p'])} over {d['n']} {members}{'s' if d['n'] != 1 else ''}"
    if band is not None:
        line += f"; {'beyond' if abs(d['mean']) > band else 'within'} the band {band:g}"
    return line


def _p_words(p: float | None) -> str:
    shown = format_p(p)
    return shown if shown.startswith("<") else f"= {shown}"


def verdict_flips(a: Side, b: Side) -> list[dict[str, Any]]:
    """Members scored on both sides whose verdict changed: member, before, after, both scores."""
    sa, sb = _scored(a), _scored(b)
    word = {True: "PASS", False: "FAIL", None: "n/a"}
    return [{"member": m, "before": word[sa[m].get("passed")], "after": word[sb[m].get("passed")],
             "score_before": sa[m].get("score"), "score_after": sb[m].get("score")}
            for m in sorted(sa.keys() & sb.keys()) if sa[m].get("passed") != sb[m].get("passed")]


Identity = tuple[tuple[str, str], ...]  # an item's (column, JSON value) pairs


def _identity(row: Mapping[str, Any]) -> Identity:
    return tuple((c, json.dumps(row.get(c), sort_keys=True, default=str)) for c in IDENTITY if c in row)


def _label(row: Mapping[str, Any]) -> str:
    return " · ".join(f"{row[c]}" if not isinstance(row[c], (list, dict)) else json.dumps(row[c], sort_keys=True)
                      for c in IDENTITY if c in row)


def _items(d: Mapping[str, Any]) -> dict[Identity, Mapping[str, Any]]:
    out: dict[Identity, Mapping[str, Any]] = {}
    for i, row in enumerate(d.get("items") or []):
        key = _identity(row) or (("row", str(i)),)
        while key in out:  # two rows with one identity (a repeated key): keep both, in order
            key = (*key, ("dup", str(i)))
        out[key] = row
    return out


def changed_items(a: Side, b: Side) -> list[dict[str, Any]]:
    """Every item of a member scored on both sides whose outcome changed, or that one side only has:
    member, item (its identity columns), before → after outcomes, both extracted values, the expected
    value and B's reason. Newly hallucinated / spurious first, then by member and item."""
    sa, sb = _scored(a), _scored(b)
    rows = []
    for m in sorted(sa.keys() & sb.keys()):
        ia, ib = _items(sa[m]), _items(sb[m])
        for key in list(ia) + [k for k in ib if k not in ia]:
            ra, rb = ia.get(key), ib.get(key)
            before, after = (ra or {}).get("outcome"), (rb or {}).get("outcome")
            if ra is not None and rb is not None and before == after:
                continue
            row = rb if rb is not None else ia[key]  # a key of `ib` or else of `ia`
            rows.append({"member": m, "item": _label(row), "field": row.get("field", row.get("axis")),
                         "before": before or "—", "after": after or "—",
                         "value_before": (ra or {}).get("extracted"), "value_after": (rb or {}).get("extracted"),
                         "expected": row.get("expected"), "reason": (rb or ra or {}).get("reason"),
                         "newly_wrong": after in NEWLY_WRONG and before not in NEWLY_WRONG})
    return sorted(rows, key=lambda r: (not r["newly_wrong"], r["member"]))


def field_accuracy(a: Side, b: Side, task: str, stream: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Flat-fields tasks: per field (first-seen order), the share of paired members whose field matched on
    each side and `paired_difference` of B − A over those members (1 = match, 0 = not). [] when the items
    have no ``field`` column."""
    sa, sb = _scored(a), _scored(b)
    both = sorted(sa.keys() & sb.keys())

    def matched(d: Mapping[str, Any]) -> dict[str, float]:
        return {str(r["field"]): float(r.get("outcome") in SUCCESS) for r in d.get("items") or [] if "field" in r}

    ma, mb = {m: matched(sa[m]) for m in both}, {m: matched(sb[m]) for m in both}
    fields = list(dict.fromkeys(f for m in both for f in (*ma[m], *mb[m])))
    out = []
    for f in fields:
        pairs = [(ma[m][f], mb[m][f]) for m in both if f in ma[m] and f in mb[m]]
        d = paired_difference(pairs, sub_seed(SEED, task, *stream, "field", f))
        out.append({"field": f, "a": _mean([x for x, _ in pairs]), "b": _mean([y for _, y in pairs]), **d})
    return out


def _adjust(metrics: list[dict[str, Any]], fields: list[dict[str, Any]]) -> None:
    """``p_adj`` on every row: Holm over the per-metric rows after the headline and the per-field rows; the
    headline score (the primary comparison) keeps its raw p."""
    family = [*metrics[1:], *fields]
    for row, p in zip(family, holm([r["p"] for r in family])):
        row["p_adj"] = p
    if metrics:
        metrics[0]["p_adj"] = None


def _sides(task: str, a: Side, b: Side, name_a: str, name_b: str, band: float | None, group: str,
           stream: tuple[str, ...]) -> dict[str, Any]:
    metrics, fields = metric_deltas(a, b, task, stream), field_accuracy(a, b, task, stream)
    _adjust(metrics, fields)
    return {"a": name_a, "b": name_b, "group": group, "metrics": metrics,
            "statement": statement(metrics[0], name_a, name_b, band, group), "flips": verdict_flips(a, b),
            "changes": changed_items(a, b), "fields": fields, "adjustment": ADJUSTMENT}


def compare_sides(task: str, a: Side, b: Side, name_a: str = "A", name_b: str = "B",
                  band: float | None = None, heldout: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """Everything above for one task's A and B: ``metrics`` (score first), the headline ``statement``
    (`band`: the task score's noise band, if measured), ``flips``, ``changes`` and per-field ``fields`` over
    the tuned members; ``heldout``: the same over the held-out members (`heldout`: their ``task/member``
    keys), from their own resampling streams, or None when the task has none."""
    held = {m for m in (*a, *b) if f"{task}/{m}" in heldout}
    if not held:
        return {**_sides(task, a, b, name_a, name_b, band, "", ()), "heldout": None}
    split = [({m: d for m, d in s.items() if m not in held}, {m: d for m, d in s.items() if m in held}) for s in (a, b)]
    (ta, ha), (tb, hb) = split
    return {**_sides(task, ta, tb, name_a, name_b, band, "tuned", ()),
            "heldout": _sides(task, ha, hb, name_a, name_b, None, "held-out", ("heldout",))}
