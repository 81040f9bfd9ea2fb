"""Repeated samples (``--samples K``): K independent extractions of each member × backend, and what they say.

Pure functions over the samples' score.json records (`runfolder.read_sample_scores`: one `ScoreRecord` per
sample, in sample order, each with its ``sample``; a plain mapping is taken as the record it holds):

* `member_figures`: one member × backend's spread — ``k`` samples, ``k_scored`` of them scored, the
  ``mean`` and ``sd`` (sample SD, n − 1) of their scores, ``pass_at_k`` (any scored sample PASS) and
  ``pass_hat_k`` (every scored sample PASS) of the verdict, ``agreement`` (the mean over items of
  `item_agreement`'s share). When K > 1 the member's **headline score is the mean over its scored samples**.
* `item_agreement`: per item, each sample's outcome, the modal outcome and the share of samples agreeing
  with it; `unstable` lists the items whose outcome flips between samples, most unstable first.
* `backend_figures`: the block summary.json gains per task × backend when K > 1, including
  ``sample_means``: the corpus mean of each sample index (what `evalkit band` reads as K runs).

A failure is never a number: an errored sample (no score) is left out of every mean, SD, verdict share and
agreement, and counted (``k_scored`` of ``k``; ``errors``: cause → count).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalkit.results.records import ScoreRecord
from evalkit.scoring.stats import as_number
from evalkit.status import SCORED

__all__ = ["headline", "member_figures", "item_agreement", "scored_tables", "unstable", "backend_figures", "item_id", "ABSENT", "IDENTITY"]

ABSENT = "absent"  # the outcome of an item a sample's table does not have (e.g. an extra only some samples made)
# The item-table columns that name an item (whichever a scorer's rows have); the outcome is ``outcome``.
IDENTITY = ("field", "axis", "family", "key", "path", "name", "item", "row", "column")


# A sample as a reader holds it: its typed score.json, or the same object as plain JSON (tests, old callers).
Sample = ScoreRecord | Mapping[str, Any]


def _records(samples: Sequence[Sample]) -> list[ScoreRecord]:
    return [s if isinstance(s, ScoreRecord) else ScoreRecord.from_json(dict(s)) for s in samples]


def _scored(samples: Sequence[Sample]) -> list[ScoreRecord]:
    return [s for s in _records(samples) if s.status == SCORED and as_number(s.score) is not None]


def sd(xs: Sequence[float]) -> float | None:
    """The sample standard deviation (n − 1); None below two values."""
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def member_figures(samples: Sequence[Sample]) -> dict[str, Any]:
    """One member × backend's samples (see module docstring); `samples` in sample order."""
    samples = _records(samples)
    scored = _scored(samples)
    xs = [float(n) for s in scored if (n := as_number(s.score)) is not None]  # every scored one has a number
    verdicts = [s.passed for s in scored if s.passed is not None]
    errors = Counter(str(s.cause or "") for s in samples if s.status != SCORED)
    items = item_agreement(scored_tables(samples))
    return {
        "k": len(samples), "k_scored": len(scored),
        "scores": [as_number(s.score) if s.status == SCORED else None for s in samples],
        "passed": [s.passed if s.status == SCORED else None for s in samples],
        "mean": sum(xs) / len(xs) if xs else None, "sd": sd(xs),
        "pass_at_k": any(verdicts) if verdicts else None,
        "pass_hat_k": all(verdicts) if verdicts else None,
        "agreement": sum(i["agreement"] for i in items) / len(items) if items else None,
        "unstable": sum(i["agreement"] < 1 for i in items),
        "errors": dict(sorted(errors.items())),
    }


def item_id(row: Mapping[str, Any]) -> str:
    """An item's name across samples: its identity columns' values (`IDENTITY`), as compact JSON."""
    return json.dumps({c: row[c] for c in IDENTITY if c in row and row[c] is not None}, sort_keys=True,
                      separators=(",", ":"), default=str)


def item_agreement(tables: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Per item of the scored samples' item `tables` (one per sample): ``item`` (`item_id`; the n-th repeat of
    a name within one table is told apart by ``#n``), ``outcomes`` (one per sample, `ABSENT` where a table
    lacks it), ``modal`` (the commonest outcome; ties go to the first seen) and ``agreement`` (the share of
    samples with the modal outcome). Items in first-seen order; [] with fewer than two tables."""
    if len(tables) < 2:
        return []
    keyed: list[dict[str, str]] = []
    order: dict[str, None] = {}
    for table in tables:
        seen: Counter[str] = Counter()
        mine: dict[str, str] = {}
        for row in table:
            if "outcome" not in row:
                continue
            base = item_id(row)
            name = base if not seen[base] else f"{base}#{seen[base]}"
            seen[base] += 1
            mine[name] = str(row["outcome"])
            order.setdefault(name)
        keyed.append(mine)
    out = []
    for name in order:
        outcomes = [t.get(name, ABSENT) for t in keyed]
        modal, n = Counter(outcomes).most_common(1)[0]
        out.append({"item": name, "outcomes": outcomes, "modal": modal, "agreement": n / len(outcomes)})
    return out


def scored_tables(samples: Sequence[Sample]) -> list[list[Mapping[str, Any]]]:
    """The item tables of the scored samples (an errored sample has none: it is left out)."""
    return [list(s.rows) for s in _scored(samples)]


def unstable(tables_of: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], limit: int | None = None
             ) -> list[dict[str, Any]]:
    """The items whose outcome flips between samples, over several members (`tables_of`: name → its scored
    samples' item tables, `scored_tables`), most unstable first (lowest agreement, then most distinct
    outcomes, then member and item order); at most `limit`."""
    rows = []
    for name, tables in tables_of.items():
        for i, item in enumerate(item_agreement(tables)):
            if item["agreement"] < 1:
                rows.append({"member": name, **item, "distinct": len(set(item["outcomes"])), "_order": i})
    rows.sort(key=lambda r: (r["agreement"], -r["distinct"], r["member"], r["_order"]))
    return [{k: v for k, v in r.items() if k != "_order"} for r in rows[:limit]]


def backend_figures(members: Sequence[Sequence[Sample]]) -> dict[str, Any]:
    """summary.json's ``samples`` block of one task × backend: over its members' samples (each a list in
    sample order). ``k``: the most samples a member has; ``k_scored`` / ``k_total``: scored and attempted
    samples; ``sd``: the mean of the members' SDs; ``agreement``: the mean of their item agreement;
    ``pass_at_k`` / ``pass_hat_k``: the share of members (with a verdict) for which it holds;
    ``sample_means``: per sample index, the mean score over the members that scored it."""
    figures = [member_figures(s) for s in members]
    k = max((f["k"] for f in figures), default=0)

    def share(key: str) -> float | None:
        vs = [f[key] for f in figures if f[key] is not None]
        return sum(vs) / len(vs) if vs else None

    def avg(key: str) -> float | None:
        vs = [f[key] for f in figures if f[key] is not None]
        return sum(vs) / len(vs) if vs else None

    by_index: list[list[float]] = [[] for _ in range(k)]
    for f in figures:
        for i, x in enumerate(f["scores"]):
            if x is not None:
                by_index[i].append(float(x))
    errors: Counter[str] = Counter()
    for f in figures:
        errors.update(f["errors"])
    return {
        "k": k, "k_scored": sum(f["k_scored"] for f in figures), "k_total": sum(f["k"] for f in figures),
        "sd": avg("sd"), "agreement": avg("agreement"), "unstable_items": sum(f["unstable"] for f in figures),
        "pass_at_k": share("pass_at_k"), "pass_hat_k": share("pass_hat_k"),
        "sample_means": [sum(xs) / len(xs) if xs else None for xs in by_index],
        "errors": dict(sorted(errors.items())),
    }


def headline(samples: Sequence[Sample]) -> ScoreRecord:
    """A member × backend's result under --samples K > 1, read as one score.json (its samples' data, in sample
    order): the **headline score is the mean over the scored samples** and the verdict pass^k (every scored
    sample PASS), sample 0's metrics and items (the first scored sample's, if sample 0 errored), with a note
    on the spread first. Every sample errored: the first sample's error."""
    records = _records(samples)
    f = member_figures(records)
    if not f["k_scored"]:
        return records[0]
    first = _scored(samples)[0]
    spread = "" if f["sd"] is None else f", SD {f['sd']:.3f}"
    errored = [f"sample {i if s.sample is None else s.sample} ({s.cause})" for i, s in enumerate(records)
               if s.status != SCORED]
    note = (f"samples: {f['k_scored']} of {f['k']} scored, mean {f['mean']:.3f}{spread}; pass@k "
            f"{_yes(f['pass_at_k'])}, pass^k {_yes(f['pass_hat_k'])}"
            + (f"; errored: {', '.join(errored)}" if errored else ""))
    return ScoreRecord({**first.to_json(), "score": f["mean"], "passed": f["pass_hat_k"],
                        "metrics": mean_metrics([s.metrics for s in _scored(records)]), "notes": [note, *first.notes],
                        "samples": _block(f)})


def _block(f: Mapping[str, Any]) -> dict[str, Any]:
    """What a headline (and a scoreboard entry) records of its samples."""
    return {k: f[k] for k in ("k", "k_scored", "mean", "sd", "pass_at_k", "pass_hat_k", "agreement", "scores")}


def mean_metrics(metrics: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Each metric over several results' `metrics` (the scored samples', say): the mean of a numeric one (over
    the results that have it), the first one's value of any other (a label, a list)."""
    present = [m or {} for m in metrics]
    out: dict[str, Any] = {}
    for m in present:
        for name, v in m.items():
            out.setdefault(name, v)
    for name in out:
        xs = [x for m in present if (x := as_number(m.get(name))) is not None and not isinstance(m.get(name), bool)]
        if xs:
            out[name] = sum(xs) / len(xs)
    return out


def _yes(v: bool | None) -> str:
    return "n/a" if v is None else "PASS" if v else "FAIL"
