"""Generic pieces for scoring nested (tree-shaped) extractions.

Shared by any scorer whose records are groups of keyed nodes — sites of
levels of areas, sections of clauses, … — with cross-links between nodes:

* `norm_key` — one normalized form for printed keys ("Jail Area",
  "jail-area" and "JAIL AREA" are one key; single letters such as "A" survive).
* `align_one_to_one` — groups align by maximal shared keys, a normalized
  name breaking ties (greedy, deterministic).
* `align_many_to_one` — each truth group goes to the extracted group it
  shares most keys with; several truth groups may land on one extracted group.
* `edge` / `pair_prf` — undirected pairs compared as sets inside an asserted
  universe (pairs outside it are dropped from both sides).
* `aggregate_rows` — metrics computed from an item table, so every figure is
  an aggregate of the rows behind it (and a per-group view is the same call
  on a filtered table).
* `mean_metrics` — a corpus mean of per-member metric dicts, null-safe.

Nothing here knows a domain's vocabulary; the task scorer supplies it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from evalkit.scoring.base import ratio
from evalkit.scoring.sets import PRF, match_sets
from evalkit.scoring.text import _PUNCT as _KEY_PUNCT
from evalkit.scoring.text import normalize

__all__ = [
    "norm_key", "align_one_to_one", "align_many_to_one", "edge", "edge_label", "pair_prf",
    "SET", "ACCURACY", "COUNT", "aggregate_rows", "mean_metrics", "display",
]

def norm_key(key: object) -> str:
    """A printed key's normalized form: case folded, punctuation and dashes as spaces.

    Unlike `normalize`, articles are kept: a key may be the single letter "A".
    """
    return " ".join(str(key).casefold().translate(_KEY_PUNCT).split())


def align_one_to_one(
    truth_keys: Sequence[set[Hashable]],
    extracted_keys: Sequence[set[Hashable]],
    truth_names: Sequence[object] = (),
    extracted_names: Sequence[object] = (),
) -> dict[int, tuple[int, int]]:
    """Align truth groups to extracted groups one-to-one by maximal shared keys.

    Greedy and deterministic: repeatedly take the unaligned pair with the most
    shared keys; ties go to a pair whose normalized names are equal, then to
    the earlier truth group, then to the earlier extracted group. A pair that
    shares no key aligns only when the normalized names are equal.
    Returns ``{truth index: (extracted index, shared key count)}``.
    """
    tn = [normalize(n) for n in truth_names] or [""] * len(truth_keys)
    en = [normalize(n) for n in extracted_names] or [""] * len(extracted_keys)
    candidates = []
    for i, tk in enumerate(truth_keys):
        for j, ek in enumerate(extracted_keys):
            shared = len(tk & ek)
            same_name = bool(tn[i]) and tn[i] == en[j]
            if shared or same_name:
                candidates.append((-shared, not same_name, i, j, shared))
    candidates.sort()
    out: dict[int, tuple[int, int]] = {}
    taken: set[int] = set()
    for _, _, i, j, shared in candidates:
        if i in out or j in taken:
            continue
        out[i] = (j, shared)
        taken.add(j)
    return out


def align_many_to_one(
    truth_keys: Sequence[set[Hashable]],
    extracted_keys: Sequence[set[Hashable]],
    truth_ids: Sequence[object] = (),
    extracted_ids: Sequence[object] = (),
) -> dict[int, tuple[int, int]]:
    """Each truth group goes to the extracted group sharing most of its keys.

    Many-to-one from the truth side: two truth groups may map to one extracted
    group (printed tiers grouped into one coarser extracted level). Ties go to
    the extracted group with the same id, then to the earlier one; a truth
    group sharing no key stays unaligned. Returns ``{truth index: (extracted
    index, shared key count)}``.
    """
    out: dict[int, tuple[int, int]] = {}
    for i, tk in enumerate(truth_keys):
        best = None
        for j, ek in enumerate(extracted_keys):
            shared = len(tk & ek)
            if not shared:
                continue
            same_id = bool(truth_ids) and bool(extracted_ids) and truth_ids[i] == extracted_ids[j]
            rank = (-shared, not same_id, j)
            if best is None or rank < best[0]:
                best = (rank, j, shared)
        if best is not None:
            out[i] = (best[1], best[2])
    return out


def edge(a: Hashable, b: Hashable) -> tuple[Hashable, ...]:
    """An undirected pair as a sorted tuple (JSON-friendly, hashable)."""
    return tuple(sorted((a, b), key=str))


def edge_label(pair: Iterable[object], sep: str = " – ") -> str:
    return sep.join(str(p) for p in pair)


def pair_prf(
    truth_pairs: Iterable[tuple[Hashable, Hashable]],
    extracted_pairs: Iterable[tuple[Hashable, Hashable]],
    in_universe: Callable[[tuple[Hashable, ...]], bool] | None = None,
) -> tuple[PRF, list[dict[str, Any]]]:
    """Undirected pairs compared as sets; pairs outside `in_universe` leave both sides."""
    return match_sets(
        [edge(*p) for p in truth_pairs], [edge(*p) for p in extracted_pairs],
        key=lambda p: p, show=edge_label, universe=in_universe,
    )


# How a (family, metric) aggregates its rows.
SET = "set"  # outcomes matched / missed / spurious → recall, precision, f1 and tp/fn/fp
ACCURACY = "accuracy"  # matched over matched + mismatch + missed
COUNT = "count"  # the number of rows (a tally, e.g. non-SRD names)

_COUNTED = {"matched", "missed", "spurious", "mismatch"}


def aggregate_rows(
    rows: Iterable[Mapping[str, Any]],
    kinds: Mapping[tuple[str, str], str],
    names: Mapping[tuple[str, str], str] | None = None,
) -> dict[str, float | int | None]:
    """Metrics of an item table with `family`, `metric` and `outcome` columns.

    `kinds` maps each (family, metric) to SET, ACCURACY or COUNT; `names`
    optionally renames the metric prefix (default ``family_metric``). Rows
    whose outcome is none of matched / missed / spurious / mismatch (e.g.
    ``ignored``) count toward nothing. Every figure is computed from counts;
    an empty denominator gives None.
    """
    tally: dict[tuple[str, str], dict[str, int]] = {k: dict.fromkeys(_COUNTED | {"rows"}, 0) for k in kinds}
    for r in rows:
        k = (r.get("family"), r.get("metric"))
        if k not in tally:
            continue
        t = tally[k]
        if kinds[k] == COUNT:
            t["rows"] += 1
        elif r.get("outcome") in _COUNTED:
            t[r["outcome"]] += 1
    out: dict[str, float | int | None] = {}
    for k, kind in kinds.items():
        t = tally[k]
        prefix = (names or {}).get(k) or f"{k[0]}_{k[1]}"
        if kind == SET:
            out.update(PRF(tp=t["matched"], fp=t["spurious"], fn=t["missed"]).metrics(prefix))
        elif kind == ACCURACY:
            den = t["matched"] + t["mismatch"] + t["missed"]
            out[f"{prefix}_accuracy"] = ratio(t["matched"], den)
            out[f"{prefix}_matched"] = t["matched"]
            out[f"{prefix}_denominator"] = den
        elif kind == COUNT:
            out[prefix] = t["rows"]
        else:
            raise ValueError(f"unknown aggregation kind {kind!r} for {k}")
    return out


def mean_metrics(per_member: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """The corpus mean of each numeric metric over the members where it is non-null."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    order: list[str] = []
    for metrics in per_member:
        for name, value in metrics.items():
            if name not in counts:
                counts[name], sums[name] = 0, 0.0
                order.append(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                counts[name] += 1
                sums[name] += value
    return {name: (sums[name] / counts[name] if counts[name] else None) for name in order}


def display(value: float | None, digits: int = 4) -> float | None:
    """Round for display only (figures are always computed from counts)."""
    return None if value is None else round(value, digits)
