"""The statistics evalkit reports, each defined once: pure, deterministic, numpy only.

* `SEED`, `sub_seed`: the one default seed of every resampling (bootstrap intervals, random sign
  flips), and the per-(task, metric, …) stream derived from it, so adding a metric never moves
  another's figures.
* `as_number`, `mean`: a metric value as a float (None, NaN and anything not a number or a bool are
  missing), and the mean over members of the values that are present (`math.fsum`).
* `f1`, `micro_f1`, `macro_f1`: F1 from counts, 2·TP / (2·TP + FP + FN), None when there is nothing
  on either side (never 0 or 1); micro: from the members' summed tp / fp / fn (`summed`); macro: the
  mean of the members' non-null F1.
* `bootstrap_ci`: the percentile interval of a statistic over members resampled with replacement;
  `mean_ci` (band.json: a corpus mean) and `micro_f1_ci` (`evalkit compare`: micro F1) are its two uses.
* `sign_flip_p`: the one-sided paired sign-flip permutation p-value of `evalkit check` (exact up to
  16 pairs, 20 000 seeded random patterns up to 5 000 pairs, the normal approximation of the same
  permutation distribution beyond: `sign_flip_method` names which).
* `paired_difference`: B − A over the members both have: the mean difference, its bootstrap CI, and the
  two-sided sign-flip p-value (`evalkit compare`, `evalkit diff`).
* `holm`: Holm's step-down adjustment of a family of p-values (compare and diff adjust every per-field and
  per-metric row; the headline score is the pre-declared primary and is not adjusted); `format_p`.

Resampling works in chunks of rows, so memory is O(members), not O(resamples × members); chunks draw the
same stream as one array would, so the figures are the bits they always were.

Everything here is a function of its arguments: the same inputs and seed give the same bits.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "SEED", "RESAMPLES", "CONFIDENCE", "sub_seed", "as_number", "mean", "f1", "summed", "micro_f1", "macro_f1",
    "bootstrap_ci", "mean_ci", "micro_f1_ci", "sign_flip_p", "sign_flip_method", "paired_difference", "holm",
    "format_p", "RESAMPLING_UNIT",
]

SEED = 20261130
RESAMPLES = 2000
CONFIDENCE = 0.95
EXACT_MAX_N = 16  # up to 2^16 sign patterns are enumerated; beyond, MC_FLIPS random ones
MC_FLIPS = 20_000
TIE = 1e-12  # a permuted mean this close to the observed one counts as at least as extreme
NORMAL_MIN_N = 5_000  # from here on the sign-flip distribution is taken as normal (its exact mean and variance)
CHUNK = 1 << 22  # draws per chunk of resamples (32 MB of int64): memory is O(members), not O(resamples × members)
# What every CI and p-value evalkit prints resamples (the pages say so beside them).
RESAMPLING_UNIT = ("members: each member's figure is one unit (a member's items stay together, so items "
                   "correlated within a member are never treated as independent)")

Seed = int | Sequence[int]


def sub_seed(seed: int, *parts: str) -> list[int]:
    """A per-(task, metric, …) seed: adding a metric never changes another's resamples."""
    return [int(seed), *(zlib.crc32(p.encode("utf-8")) for p in parts)]


def as_number(value: Any) -> float | None:
    """Numbers and booleans as float; None, NaN, ±Infinity and anything else as None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and not math.isfinite(value)):
        return float(value)
    return None


def mean(values: Iterable[Any]) -> float | None:
    """The mean of the values that are numbers (`as_number`); None when there is none."""
    xs = [x for x in (as_number(v) for v in values) if x is not None]
    return math.fsum(xs) / len(xs) if xs else None


# ----------------------------------------------------------------------------- F1


def f1(tp: float, fp: float, fn: float) -> float | None:
    """F1 from counts; None when both sides are empty."""
    denom = 2 * tp + fp + fn
    return None if not denom else float(2 * tp / denom)


Count = TypeVar("Count", int, float)


def summed(counts: Iterable[Sequence[Count]]) -> tuple[Count, Count, Count]:
    """The members' (tp, fp, fn) rows summed: the counts a micro figure is computed from."""
    rows = list(counts)
    return sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows)


def micro_f1(counts: Iterable[Sequence[float]]) -> float | None:
    """F1 of the members' summed tp / fp / fn."""
    return f1(*summed(counts))


def macro_f1(f1s: Iterable[float | None]) -> float | None:
    """The mean of the members' F1 where it is defined; None when it is nowhere."""
    xs = [x for x in f1s if x is not None]
    # Summed in order, not with fsum: the macro figures keep the bits they have always been reported with.
    return sum(xs) / len(xs) if xs else None


# ----------------------------------------------------------------------------- bootstrap


def bootstrap_ci(sample: Any, statistic: Callable[[np.ndarray], np.ndarray], seed: Seed = SEED,
                 resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Percentile interval of `statistic` over the rows of `sample` (members) resampled with replacement.

    `statistic` maps the resamples, an array of shape (resamples, members, …), to one figure per
    resample; a resample whose figure is NaN (undefined) is left out. None without members or figures.
    """
    x = np.asarray(sample, dtype=float)
    if len(x) == 0:
        return None
    rng = np.random.default_rng(seed)
    rows = max(1, CHUNK // len(x))
    figures = np.concatenate([statistic(x[rng.integers(0, len(x), size=(min(rows, resamples - i), len(x)))])
                              for i in range(0, resamples, rows)])
    figures = figures[~np.isnan(figures)]
    if not figures.size:
        return None
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(figures, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _resampled_means(resamples: np.ndarray) -> np.ndarray:
    means: np.ndarray = resamples.mean(axis=1)
    return means


def _resampled_micro_f1(resamples: np.ndarray) -> np.ndarray:
    sums = resamples.sum(axis=1)  # (resamples, 3): tp, fp, fn
    denom = 2 * sums[:, 0] + sums[:, 1] + sums[:, 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * sums[:, 0] / np.where(denom > 0, denom, 1), np.nan)


def mean_ci(values: Iterable[float | None], seed: Seed = SEED, resamples: int = RESAMPLES,
            confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Bootstrap CI of the mean of `values` (one per member; None left out). A constant sample's
    interval is that constant: no resample can move it."""
    x = [v for v in values if v is not None]
    if x and all(v == x[0] for v in x):
        return float(x[0]), float(x[0])
    return bootstrap_ci(x, _resampled_means, seed, resamples, confidence)


def micro_f1_ci(counts: Any, seed: Seed = SEED, resamples: int = RESAMPLES,
                confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Bootstrap CI of micro F1: members' (tp, fp, fn) rows resampled, F1 recomputed from each sum."""
    return bootstrap_ci(np.asarray(counts, dtype=float).reshape(-1, 3), _resampled_micro_f1, seed, resamples,
                        confidence)


# ----------------------------------------------------------------------------- paired test


def sign_flip_method(n: int) -> str:
    """How `sign_flip_p` computes its p-value for `n` pairs (stated beside the figures)."""
    if n <= EXACT_MAX_N:
        return f"exact (all 2^{n} sign patterns)"
    if n < NORMAL_MIN_N:
        return f"Monte Carlo ({MC_FLIPS:,} seeded sign patterns)"
    return "normal approximation of the sign-flip distribution (n ≥ 5,000)"


def sign_flip_p(differences: Iterable[float | None], alternative: str = "less", seed: Seed = SEED) -> float | None:
    """One-sided paired sign-flip permutation p-value for the mean of `differences` (new − standing).

    ``alternative="less"``: evidence that new < standing (a drop); ``"greater"``: new > standing.
    Exact enumeration of all 2^n sign patterns for n ≤ 16; 20 000 seeded random patterns (with the +1
    correction, drawn in chunks) below 5 000 pairs; beyond, the normal approximation of the same
    distribution (mean 0, variance Σd²/n²). None when there are no pairs.
    """
    tails = _sign_flip_tails(differences, seed)
    return None if tails is None else tails[0] if alternative == "less" else tails[1]


def _sign_flip_tails(differences: Iterable[float | None], seed: Seed = SEED) -> tuple[float, float] | None:
    """Both one-sided `sign_flip_p` values, ("less", "greater"), from one pass over the same sign patterns
    (a two-sided p needs both: drawing the seeded patterns twice was half of `paired_difference`'s time)."""
    d = np.asarray([x for x in differences if x is not None], dtype=float)
    n = d.size
    if n == 0:
        return None
    observed = d.mean()
    if n >= NORMAL_MIN_N:
        sd = math.sqrt(float(np.dot(d, d))) / n
        if sd == 0:
            return 1.0, 1.0
        below = 0.5 * math.erfc(-((observed + TIE) / sd) / math.sqrt(2))  # P(Z <= z), z of "less"
        above = 1.0 - 0.5 * math.erfc(-((observed - TIE) / sd) / math.sqrt(2))
        return float(below), float(above)
    if n <= EXACT_MAX_N:
        stats = ((((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2 - 1) * d).mean(axis=1)
    else:
        rng, rows = np.random.default_rng(seed), max(1, CHUNK // n)
        stats = np.concatenate([((rng.integers(0, 2, size=(min(rows, MC_FLIPS - i), n)) * 2 - 1) * d).mean(axis=1)
                                for i in range(0, MC_FLIPS, rows)])
    less, greater = np.sum(stats <= observed + TIE), np.sum(stats >= observed - TIE)
    if n <= EXACT_MAX_N:
        return float(less / stats.size), float(greater / stats.size)
    return float((less + 1) / (MC_FLIPS + 1)), float((greater + 1) / (MC_FLIPS + 1))


def paired_difference(pairs: Iterable[tuple[Any, Any]], seed: Seed = SEED) -> dict[str, Any]:
    """B − A over the (a, b) pairs where both are numbers: ``mean`` difference, its bootstrap ``ci``
    (`mean_ci` of the per-member differences), the two-sided sign-flip ``p`` (twice the smaller one-sided
    p, at most 1) and ``n`` pairs. Mean, CI and p are None without pairs."""
    d = [b - a for a, b in ((as_number(x), as_number(y)) for x, y in pairs) if a is not None and b is not None]
    if not d:
        return {"mean": None, "ci": None, "p": None, "n": 0}
    ci = mean_ci(d, seed)
    tails = _sign_flip_tails(d, seed)
    assert tails is not None  # None only without differences
    p = min(1.0, 2 * min(tails))
    return {"mean": math.fsum(d) / len(d), "ci": list(ci) if ci else None, "p": p, "n": len(d)}


# ----------------------------------------------------------------------------- multiplicity


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (family-wise error) of `ps`, in their order; None stays None and is not
    counted in the family. Adjusted p_(i) = max over j ≤ i of min(1, (m − j + 1)·p_(j)), sorted ascending."""
    present = sorted((p, i) for i, p in enumerate(ps) if p is not None)
    out: list[float | None] = [None] * len(ps)
    m, running = len(present), 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def format_p(p: float | None) -> str:
    """A p-value as printed: three decimals, ``< 0.001`` below that (never ``0.000``), ``—`` when None."""
    if p is None:
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"
