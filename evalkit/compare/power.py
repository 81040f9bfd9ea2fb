"""Power before a run: how large a paired difference a comparison of two configurations can detect.

`evalkit plan --task T [--band FILE | --pilot RUN]` (docs/scoreboard.md, "Power: `evalkit plan`").

Design: paired — both configurations extract every member; the member's figure is the unit
(`stats.RESAMPLING_UNIT`), so items correlated within a member are accounted for by construction: only the
per-member differences d_i = B_i − A_i enter, and their SD (`sd_diff`) is what everything is sized from.
Test: two-sided at `alpha`. Approximation: the usual normal one with a t-correction for small n,

    MDE = (t_{1−α/2, n−1} + t_{power, n−1}) · sd_diff / √n,

and `members_needed` iterates n on those t quantiles (df = n − 1) from the normal answer until it settles.

Where `sd_diff` comes from (`sd_diff_from_scores`, `sd_diff_from_band`, `with_samples`):

* ``--pilot RUN`` (measured: the SD of the members' scores in RUN; assumed: ρ, the correlation of a member's
  scores under the two configurations, default 0.5): sd_diff = √2 · SD · √(1 − ρ).
* ``--band FILE`` (measured: `member_sd`, each member's SD across repeated sweeps of the baseline — pure
  sampling noise; assumed: the two configurations differ by that noise and the effect only, no member ×
  configuration interaction): sd_diff = √2 · member_sd. A lower bound on the real sd_diff.
* ``--samples K``: the member's figure is the mean of K extractions. With a within-member SD measured from
  the pilot's repeated samples, only that part shrinks: sd_diff_K² = (sd_diff² − 2·sd_w²) + 2·sd_w²/K; without
  one, all of sd_diff is taken as K independent draws: sd_diff / √K (the most K can buy).

Pure functions; `plan` reads the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from evalkit.errors import UsageError
from evalkit.results.band import Band
from evalkit.results.runfolder import scan
from evalkit.scoring.stats import as_number, mean

__all__ = ["ALPHA", "POWER", "RHO", "t_quantile", "mde", "members_needed", "sd", "within_sd", "sd_diff_from_scores",
           "sd_diff_from_band", "with_samples", "Plan", "plan", "pilot_samples"]

ALPHA = 0.05  # two-sided
POWER = 0.8
RHO = 0.5  # assumed correlation of a member's scores under two configurations (pilot without pairs)
MAX_MEMBERS = 1_000_000


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """The p quantile of Student's t with `df` degrees of freedom (numerically: Simpson's rule on the density,
    bisection on the CDF; |error| < 1e-6). df ≥ 200 or none: the normal quantile is close enough."""
    if not 0 < p < 1:
        raise ValueError(f"p = {p}: not a probability")
    if df >= 200:
        return NormalDist().inv_cdf(p)
    if p < 0.5:
        return -t_quantile(1 - p, df)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(x: float) -> float:
        grid = np.linspace(0.0, x, 4001)
        f = np.exp(log_c - (df + 1) / 2 * np.log1p(grid ** 2 / df))
        h = x / 4000
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def _k(n: int, alpha: float, power: float) -> float:
    """t_{1−α/2, n−1} + t_{power, n−1}: the MDE in units of the standard error."""
    return t_quantile(1 - alpha / 2, n - 1) + t_quantile(power, n - 1)


def mde(sd_diff: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true mean paired difference a two-sided test at `alpha` detects with probability `power`
    over `n` members whose differences have SD `sd_diff`."""
    if n < 2:
        raise ValueError("a paired test needs at least 2 members")
    return _k(n, alpha, power) * sd_diff / math.sqrt(n)


def members_needed(sd_diff: float, effect: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """The fewest members for which `mde` ≤ `effect` (n from the normal formula, then iterated on t quantiles
    with df = n − 1 until it stops moving; at least 2)."""
    if effect <= 0:
        raise ValueError("the effect must be > 0")
    if sd_diff == 0:
        return 2
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    n = max(2, math.ceil((z * sd_diff / effect) ** 2))
    for _ in range(100):
        nxt = max(2, math.ceil((_k(n, alpha, power) * sd_diff / effect) ** 2))
        if nxt == n or n > MAX_MEMBERS:
            break
        n = nxt
    while n > 2 and mde(sd_diff, n - 1, alpha, power) <= effect:  # the fewest, not merely enough
        n -= 1
    while mde(sd_diff, n, alpha, power) > effect:
        n += 1
    return n


def sd(values: Iterable[float]) -> float | None:
    """Sample SD (ddof 1); None with fewer than two values."""
    xs = [float(v) for v in values]
    if len(xs) < 2:
        return None
    mu = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - mu) ** 2 for x in xs) / (len(xs) - 1))


def within_sd(samples: Mapping[str, Sequence[float]]) -> float | None:
    """The pooled within-member SD of repeated samples (√ of the mean of the members' variances, members with
    ≥ 2 samples); None when no member has two."""
    variances = [s ** 2 for xs in samples.values() if (s := sd(xs)) is not None]
    return math.sqrt(math.fsum(variances) / len(variances)) if variances else None


def sd_diff_from_scores(score_sd: float, rho: float = RHO) -> float:
    """SD of paired differences from the SD of members' scores under one configuration: √2·SD·√(1 − ρ)."""
    if not -1 <= rho <= 1:
        raise ValueError(f"rho = {rho}: a correlation is in [−1, 1]")
    return math.sqrt(2) * score_sd * math.sqrt(1 - rho)


def sd_diff_from_band(member_sd: float) -> float:
    """SD of paired differences when two configurations differ by sampling noise only: √2 · member_sd."""
    return math.sqrt(2) * member_sd


def with_samples(sd_diff: float, k: int, within: float | None = None) -> float:
    """sd_diff when each member's figure is the mean of `k` samples: only the within-member part (2·within²)
    shrinks by k; without `within`, all of sd_diff is taken as k independent draws (sd_diff/√k)."""
    if k < 1:
        raise ValueError("k ≥ 1")
    if within is None:
        return sd_diff / math.sqrt(k)
    noise = min(2 * within ** 2, sd_diff ** 2)
    return math.sqrt(sd_diff ** 2 - noise + noise / k)


# --------------------------------------------------------------------------- reading the inputs


def pilot_samples(run: str | Path, task: str, metric: str = "score", label: str | None = None
                  ) -> tuple[str, dict[str, list[float]]]:
    """(backend label, {member: [its values of `metric`]}) from a run or sweep folder: one value per scored
    scored sample of each member: one without --samples; a ``--samples K`` run gives up to K (the within-member
    SD)."""
    # every sample of a --samples K run (an errored one left out): a member may be scored in some samples only
    found = [s for s in scan(run, status=None) if s.task == task and any(x.is_scored for x in s.samples())]
    labels = sorted({s.backend for s in found})
    if label is None:
        if len(labels) != 1:
            raise UsageError(f"plan: {run} holds {'no scored member of ' + task if not labels else 'several backends: ' + ', '.join(labels)}"
                             + ("" if not labels else "; pick one with --label"))
        label = labels[0]
    out: dict[str, list[float]] = {}
    for s in found:
        for sample in s.samples() if s.backend == label else ():
            if sample.is_scored and (x := as_number(sample.metrics.get(metric))) is not None:
                out.setdefault(s.member, []).append(x)
    if len(out) < 2:
        raise UsageError(f"plan: {run} has {len(out)} member(s) of {task} with a {metric!r} [{label}]: a pilot needs ≥ 2")
    return label, out


@dataclass
class Plan:
    task: str
    metric: str
    source: str  # "pilot" | "band"
    n: int  # members of the comparison
    sd_diff: float  # per-member paired-difference SD, for one sample per member
    sd_diff_k: float  # … for `samples` per member
    samples: int
    alpha: float
    power: float
    mde: float
    measured: dict[str, Any] = field(default_factory=dict)
    assumed: dict[str, Any] = field(default_factory=dict)
    effect: float | None = None
    needed: int | None = None

    def lines(self) -> list[str]:
        how = ", ".join(f"{k} {v}" for k, v in self.measured.items())
        assumed = ", ".join(k if v is True else f"{k} {v}" for k, v in self.assumed.items()) or "nothing"
        out = [f"plan: {self.task} / {self.metric} — paired design, members the unit, two-sided α = {self.alpha}, "
               f"power {self.power:.0%}",
               f"  measured ({self.source}): {how}",
               f"  assumed: {assumed}",
               f"  SD of per-member differences: {self.sd_diff:.4f}"
               + (f" (one sample); {self.sd_diff_k:.4f} with {self.samples} samples per member" if self.samples > 1 else ""),
               f"  minimum detectable effect with {self.n} members: {self.mde:.4f}"]
        if self.effect is not None:
            out.append(f"  members needed for an effect of {self.effect}: {self.needed}")
        return out


def plan(task: str, *, band: Band | None = None, pilot: tuple[str, Mapping[str, Sequence[float]]] | None = None,
         metric: str = "score", effect: float | None = None, alpha: float = ALPHA, power: float = POWER,
         samples: int = 1, rho: float = RHO, members: int | None = None) -> Plan:
    """The plan from one source: `band` (band.json content: its `member_sd` of `metric`) or `pilot` (label,
    {member: [values]}). `members`: the comparison's size (default: the pilot's or the band's members)."""
    if (band is None) == (pilot is None):
        raise UsageError("plan: give exactly one of --band FILE or --pilot RUN")
    measured: dict[str, Any] = {}
    assumed: dict[str, Any] = {}
    within = None
    if pilot is not None:
        label, values = pilot
        per_member = [mean(v) for v in values.values()]
        score_sd = sd(per_member)
        if score_sd is None:
            raise UsageError(f"plan: the pilot has fewer than 2 members of {task}")
        within = within_sd(values)
        base = sd_diff_from_scores(score_sd, rho)
        measured.update({"backend": label, "members": len(per_member), f"mean {metric}": round(mean(per_member), 4),
                         f"SD of members' {metric}": round(score_sd, 4)})
        if within is not None:
            measured["within-member SD"] = round(within, 4)
        assumed["ρ (a member's scores under the two configurations)"] = rho
        n_default = len(per_member)
    else:
        m = band.metric(task, metric)
        if m is None or m.member_sd is None:
            raise UsageError(f"plan: the band has no member_sd for {task}/{metric} (re-measure it with `evalkit band`)")
        within = float(m.member_sd)
        base = sd_diff_from_band(within)
        measured.update({"member_sd (SD across sweeps)": round(within, 4), "members": m.n})
        assumed["no member × configuration interaction (sd_diff = √2·member_sd: a lower bound)"] = True
        n_default = int(m.n or band.tasks[task].members or 0)
    if samples > 1 and within is None:
        assumed[f"{samples} samples are independent draws with SD {base:.4f}"] = True
    sd_k = with_samples(base, samples, within if samples > 1 else None)
    n = members or n_default
    if n < 2:
        raise UsageError(f"plan: {n} member(s): a paired comparison needs at least 2")
    return Plan(task=task, metric=metric, source="pilot" if pilot is not None else "band", n=n, sd_diff=base,
                sd_diff_k=sd_k, samples=samples, alpha=alpha, power=power, mde=mde(sd_k, n, alpha, power),
                measured=measured, assumed=assumed, effect=effect,
                needed=None if effect is None else members_needed(sd_k, effect, alpha, power))
