"""Precision / recall / F1 over item sets, with the item table behind them.

Items are compared by a key (a normalized form); each comparison becomes a
row: matched, missed (in truth only) or spurious (extracted only). Shared by
every scorer that counts matches (entities, relations, connections, doors).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from evalkit.scoring import stats
from evalkit.scoring.base import ratio


@dataclass(frozen=True)
class PRF:
    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float | None:
        return ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        return ratio(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float | None:
        return stats.f1(self.tp, self.fp, self.fn)

    def metrics(self, prefix: str) -> dict[str, float | int | None]:
        return {f"{prefix}_precision": self.precision, f"{prefix}_recall": self.recall, f"{prefix}_f1": self.f1,
                f"{prefix}_tp": self.tp, f"{prefix}_fp": self.fp, f"{prefix}_fn": self.fn}


K = TypeVar("K", bound=Hashable)  # an item's key


def match_sets(
    expected: Iterable[Any],
    extracted: Iterable[Any],
    key: Callable[[Any], K],
    show: Callable[[Any], Any] = lambda x: x,
    universe: Callable[[K], bool] | None = None,
) -> tuple[PRF, list[dict[str, Any]]]:
    """Compare two collections as sets of keys.

    Duplicates (items with the same key) count once. When `universe` is given,
    keys outside it are dropped from both sides (the truth asserts nothing
    there), so they are neither misses nor false positives.
    """
    exp: dict[K, Any] = {}
    for item in expected:
        exp.setdefault(key(item), item)
    ext: dict[K, Any] = {}
    for item in extracted:
        ext.setdefault(key(item), item)
    if universe is not None:
        exp = {k: v for k, v in exp.items() if universe(k)}
        ext = {k: v for k, v in ext.items() if universe(k)}
    rows = []
    for k in sorted(exp.keys() | ext.keys(), key=repr):
        if k in exp and k in ext:
            outcome, reason = "matched", "same normalized form"
        elif k in exp:
            outcome, reason = "missed", "in the truth, not extracted"
        else:
            outcome, reason = "spurious", "extracted, not in the truth"
        rows.append({"key": k if isinstance(k, (str, int, float)) else list(k) if isinstance(k, tuple) else repr(k),
                     "expected": show(exp[k]) if k in exp else None,
                     "extracted": show(ext[k]) if k in ext else None,
                     "outcome": outcome, "reason": reason})
    tp = sum(r["outcome"] == "matched" for r in rows)
    return PRF(tp=tp, fp=sum(r["outcome"] == "spurious" for r in rows), fn=sum(r["outcome"] == "missed" for r in rows)), rows
