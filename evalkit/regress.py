"""The regression rule: a new sweep against the standing scoreboard, judged by the noise band.

For every *gated* corpus-mean metric of a task × backend, over the members scored in both
the standing board and the new sweep (paired):

* ``standing - new > band``  → a **regression** (exit 1 unless justified);
* ``new - standing > band``  → an **improvement** (reported);
* otherwise within the noise.

Gated metrics are those where higher is better: names whose last ``_``-separated word is
``score``, ``accuracy``, ``precision``, ``recall``, ``f1`` or ``agrees`` (``gate_agrees`` as a corpus mean is
the agreement rate). Count metrics (``matched``, ``missing``, ``hallucinated``, ``tp``/``fp``/``fn``, …)
and flags such as ``gate_blocking`` are reported in the band but never gated: a count moves with the
corpus, not only with quality.

A member × backend that errored in the new sweep (`evalkit.status`: no score) is not comparable:
it is named in the notes and left out of both means of the pair.

Every regression and improvement carries a one-sided paired sign-flip permutation p-value over
members (exact up to 16 members, else 20 000 seeded random flips): deterministic for the same inputs.
It informs the reader; the band decides.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "FLOOR", "DEFAULT_SEED", "HIGHER_IS_BETTER", "is_gated", "direction", "as_number", "corpus_mean",
    "bootstrap_ci", "sign_flip_p", "Change", "Comparison", "compare", "parse_justify", "sub_seed",
]

FLOOR = 0.02  # the smallest band: an absolute 2 points on a 0..1 metric
DEFAULT_SEED = 20261130
EXACT_MAX_N = 16
MC_FLIPS = 20_000
EPS = 1e-12
HIGHER_IS_BETTER = ("score", "accuracy", "precision", "recall", "f1", "agrees")


def direction(metric: str) -> str | None:
    """``"higher"`` when a larger value is better (the metric is gated), else None (not gated)."""
    last = metric.lower().replace("-", "_").rsplit("_", 1)[-1]
    return "higher" if last in HIGHER_IS_BETTER else None


def is_gated(metric: str) -> bool:
    return direction(metric) is not None


def as_number(value: Any) -> float | None:
    """Numbers and booleans as float; None, NaN and anything else as None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def corpus_mean(values: Iterable[Any]) -> float | None:
    xs = [x for x in (as_number(v) for v in values) if x is not None]
    return math.fsum(xs) / len(xs) if xs else None


def sub_seed(seed: int, *parts: str) -> list[int]:
    """A per-(task, metric) seed: adding a metric never changes another's resamples."""
    return [int(seed), *(zlib.crc32(p.encode("utf-8")) for p in parts)]


def bootstrap_ci(values: Sequence[float], seed: Sequence[int] | int, resamples: int = 2000,
                 confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean over `values` (members), deterministic for a seed."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return None
    if x.size == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def sign_flip_p(differences: Sequence[float], alternative: str = "less", seed: Sequence[int] | int = DEFAULT_SEED) -> float | None:
    """One-sided paired sign-flip permutation p-value for the mean of `differences` (new − standing).

    ``alternative="less"``: evidence that new < standing (a drop); ``"greater"``: new > standing.
    Exact enumeration of all 2^n sign patterns for n ≤ 16, else 20 000 seeded random patterns
    (with the +1 correction). None when there are no pairs.
    """
    d = np.asarray([x for x in differences if x is not None], dtype=float)
    n = d.size
    if n == 0:
        return None
    observed = d.mean()
    if n <= EXACT_MAX_N:
        patterns = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        stats = (patterns * d).mean(axis=1)
        hits = np.sum(stats <= observed + EPS) if alternative == "less" else np.sum(stats >= observed - EPS)
        return float(hits / stats.size)
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 2, size=(MC_FLIPS, n)) * 2 - 1
    stats = (patterns * d).mean(axis=1)
    hits = np.sum(stats <= observed + EPS) if alternative == "less" else np.sum(stats >= observed - EPS)
    return float((hits + 1) / (MC_FLIPS + 1))


@dataclass
class Change:
    task: str
    backend: str
    metric: str
    standing: float
    new: float
    band: float
    members: int  # paired members behind both means
    p_value: float | None
    kind: str  # regression | improvement | within
    band_source: str = "band.json"  # or "floor" when band.json has no entry for the metric
    justification: str | None = None

    @property
    def delta(self) -> float:
        return self.new - self.standing

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"delta": self.delta}

    def line(self) -> str:
        p = "n/a" if self.p_value is None else f"{self.p_value:.4f}"
        return (f"{self.task} [{self.backend}] {self.metric}: standing {self.standing:.4f} → new {self.new:.4f} "
                f"(Δ {self.delta:+.4f}, band {self.band:.4f}{'' if self.band_source == 'band.json' else ' floor'}, "
                f"p={p}, n={self.members})")


@dataclass
class Comparison:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unpaired members, missing standing entries, …

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "regression"]

    @property
    def improvements(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "improvement"]

    @property
    def unjustified(self) -> list[Change]:
        return [c for c in self.regressions if not c.justification]

    @property
    def compared(self) -> int:
        return len(self.changes)


def band_for(band: Mapping[str, Any] | None, task: str, metric: str) -> tuple[float, str]:
    entry = (((band or {}).get("tasks") or {}).get(task) or {}).get("metrics", {}).get(metric)
    if entry and entry.get("band") is not None:
        return max(float(entry["band"]), FLOOR), "band.json"
    return FLOOR, "floor"


def compare(standing: Mapping[str, Mapping[str, Mapping[str, Any]]],
            new: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]],
            band: Mapping[str, Any] | None, *, seed: int = DEFAULT_SEED,
            justifications: Mapping[str, str] | None = None,
            errors: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None) -> Comparison:
    """Compare `new` with `standing`, both ``{task: {backend: {member: metrics}}}``.

    `justifications` maps ``METRIC``, ``TASK/METRIC`` or ``TASK/BACKEND/METRIC`` to a reason; a
    regression of a matching metric carries it (and no longer fails the check). `errors`:
    ``{task: {backend: {member: why}}}``, the new sweep's errored members: named as not comparable.
    """
    out = Comparison()
    just = dict(justifications or {})
    errors = errors or {}
    for task in sorted(set(new) | set(errors)):
        for label in sorted(set(new.get(task) or {}) | set(errors.get(task) or {})):
            fresh = (new.get(task) or {}).get(label) or {}
            failed = (errors.get(task) or {}).get(label) or {}
            for m in sorted(failed):
                out.notes.append(f"{task}/{m} [{label}]: ERROR in the new sweep ({failed[m]}): not comparable; "
                                 "left out of the comparison")
            old = (standing.get(task) or {}).get(label) or {}
            if not old:
                out.notes.append(f"{task} [{label}]: no standing entries on the scoreboard; nothing to compare")
                continue
            paired = sorted(set(fresh) & set(old))
            for m in sorted(set(fresh) - set(old)):
                out.notes.append(f"{task}/{m} [{label}]: not on the scoreboard; left out of the comparison")
            for m in sorted(set(old) - set(fresh) - set(failed)):
                out.notes.append(f"{task}/{m} [{label}]: on the scoreboard but not in the new sweep; left out")
            metrics = sorted({k for m in paired for k in (*fresh[m], *old[m]) if is_gated(k)})
            for metric in metrics:
                pairs = [(as_number(old[m].get(metric)), as_number(fresh[m].get(metric))) for m in paired]
                pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
                if not pairs:
                    continue
                s_mean = math.fsum(a for a, _ in pairs) / len(pairs)
                n_mean = math.fsum(b for _, b in pairs) / len(pairs)
                width, source = band_for(band, task, metric)
                if s_mean - n_mean > width + EPS:
                    kind, alt = "regression", "less"
                elif n_mean - s_mean > width + EPS:
                    kind, alt = "improvement", "greater"
                else:
                    kind, alt = "within", "less"
                p = sign_flip_p([b - a for a, b in pairs], alt, sub_seed(seed, task, label, metric))
                change = Change(task, label, metric, s_mean, n_mean, width, len(pairs), p, kind, source)
                if kind == "regression":
                    change.justification = (just.get(f"{task}/{label}/{metric}") or just.get(f"{task}/{metric}")
                                            or just.get(metric))
                out.changes.append(change)
    return out


def parse_justify(values: Iterable[str]) -> dict[str, str]:
    """``METRIC=reason`` (also ``TASK/METRIC``, ``TASK/BACKEND/METRIC``) → {key: reason}; a blank reason is a
    usage error."""
    from .errors import UsageError

    out: dict[str, str] = {}
    for v in values:
        key, eq, reason = v.partition("=")
        key, reason = key.strip(), reason.strip().strip('"').strip("'").strip()
        if not eq or not key or not reason:
            raise UsageError(f"--justify {v!r}: expected METRIC=\"reason\" (or TASK/METRIC=\"reason\") with a reason")
        out[key] = reason
    return out
