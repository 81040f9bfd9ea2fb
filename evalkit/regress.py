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

Held-out members (``heldout: true`` in their manifest) are compared apart from the tuned ones: every
metric is judged twice, over the tuned members and over the held-out members (each against its own
band, `band.json`'s ``heldout`` block, else the tuned one), and a regression in either fails the check.

A member × backend that errored in the new sweep (`evalkit.status`: no score) is not comparable:
it is named in the notes and left out of both means of the pair.

Every regression and improvement carries a one-sided paired sign-flip permutation p-value over
members (`evalkit.stats.sign_flip_p`: exact up to 16 members, else 20 000 seeded random flips):
deterministic for the same inputs.
It informs the reader; the band decides.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from .corpus import HELDOUT, TUNED, group_of
from .stats import SEED, as_number, mean, sign_flip_p, sub_seed

__all__ = ["FLOOR", "HIGHER_IS_BETTER", "is_gated", "direction", "Change", "Comparison", "compare", "parse_justify"]

FLOOR = 0.02  # the smallest band: an absolute 2 points on a 0..1 metric
EPS = 1e-12  # a difference within float noise of the band is not outside it
HIGHER_IS_BETTER = ("score", "accuracy", "precision", "recall", "f1", "agrees")


def direction(metric: str) -> str | None:
    """``"higher"`` when a larger value is better (the metric is gated), else None (not gated)."""
    last = metric.lower().replace("-", "_").rsplit("_", 1)[-1]
    return "higher" if last in HIGHER_IS_BETTER else None


def is_gated(metric: str) -> bool:
    return direction(metric) is not None


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
    group: str = TUNED  # the tuned members' figure, or the held-out members' (`corpus.group_of`)

    @property
    def delta(self) -> float:
        return self.new - self.standing

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"delta": self.delta}

    def line(self) -> str:
        p = "n/a" if self.p_value is None else f"{self.p_value:.4f}"
        group = " (held-out)" if self.group == HELDOUT else ""
        return (f"{self.task}{group} [{self.backend}] {self.metric}: standing {self.standing:.4f} → new {self.new:.4f} "
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


def band_for(band: Mapping[str, Any] | None, task: str, metric: str, group: str = TUNED) -> tuple[float, str]:
    """The band of a task's metric for the tuned members, or the held-out ones (their own block when
    band.json has one, else the tuned members')."""
    block = ((band or {}).get("tasks") or {}).get(task) or {}
    entry = (block.get("heldout") or {}).get("metrics", {}).get(metric) if group == HELDOUT else None
    entry = entry or block.get("metrics", {}).get(metric)
    if entry and entry.get("band") is not None:
        return max(float(entry["band"]), FLOOR), "band.json"
    return FLOOR, "floor"


def compare(standing: Mapping[str, Mapping[str, Mapping[str, Any]]],
            new: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]],
            band: Mapping[str, Any] | None, *, seed: int = SEED,
            justifications: Mapping[str, str] | None = None,
            errors: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
            heldout: Iterable[str] = ()) -> Comparison:
    """Compare `new` with `standing`, both ``{task: {backend: {member: metrics}}}``.

    `justifications` maps ``METRIC``, ``TASK/METRIC`` or ``TASK/BACKEND/METRIC`` to a reason; a
    regression of a matching metric carries it (and no longer fails the check). `errors`:
    ``{task: {backend: {member: why}}}``, the new sweep's errored members: named as not comparable.
    `heldout`: ``task/member`` keys of held-out members, compared apart (module docstring).
    """
    heldout = frozenset(heldout)
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
            for group, metric in ((g, k) for g in (TUNED, HELDOUT) for k in metrics):
                members = [m for m in paired if group_of(f"{task}/{m}", heldout) == group]
                pairs = [(as_number(old[m].get(metric)), as_number(fresh[m].get(metric))) for m in members]
                pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
                if not pairs:
                    continue
                s_mean, n_mean = mean(a for a, _ in pairs), mean(b for _, b in pairs)
                width, source = band_for(band, task, metric, group)
                if s_mean - n_mean > width + EPS:
                    kind, alt = "regression", "less"
                elif n_mean - s_mean > width + EPS:
                    kind, alt = "improvement", "greater"
                else:
                    kind, alt = "within", "less"
                stream = sub_seed(seed, task, label, metric, *(() if group == TUNED else (group,)))
                p = sign_flip_p([b - a for a, b in pairs], alt, stream)
                change = Change(task, label, metric, s_mean, n_mean, width, len(pairs), p, kind, source, group=group)
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
