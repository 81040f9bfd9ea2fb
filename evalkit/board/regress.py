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

A check that did not see the whole board in scope does not pass: when a standing entry (of the check's
tasks and members, and a backend the new sweep ran; held-out ones included) was not covered by the new
sweep (a cassette with no recording of it, a member not run) or errored, `check` exits 7
(`errors.EXIT_PARTIAL`) with one line — "2 of 13 standing entries covered; 11 not covered, 0 errored: …"
— unless ``--allow-partial``, which gates on what was covered and says so (`Coverage`).

Every regression and improvement carries a one-sided paired sign-flip permutation p-value over
members (`evalkit.scoring.stats.sign_flip_p`: exact up to 16 members, else 20 000 seeded random flips):
deterministic for the same inputs.
It informs the reader; the band decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalkit.board.sweep import sweep
from evalkit.corpus.tasks import HELDOUT, TUNED, group_of, heldout_keys
from evalkit.errors import EXIT_BACKEND, EXIT_FAILED, EXIT_OK, EXIT_PARTIAL, ScoreboardError, UsageError
from evalkit.results.band import (  # the band file records which metrics are gated
    FLOOR,
    HIGHER_IS_BETTER,
    Band,
    band_path,
    collect,
    direction,
    is_gated,
    read_band,
)
from evalkit.results.runfolder import scan
from evalkit.results.scoreboard import board_path, read_board
from evalkit.results.scoreboard import update_scoreboard as update
from evalkit.results.summary import read_summary
from evalkit.scoring.stats import SEED, as_number, mean, sign_flip_p, sub_seed
from evalkit.status import ERROR

__all__ = ["FLOOR", "HIGHER_IS_BETTER", "is_gated", "direction", "Change", "Comparison", "compare", "parse_justify",
           "Coverage", "coverage", "CheckResult", "check"]

EPS = 1e-12  # a difference within float noise of the band is not outside it


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


def band_for(band: Band | None, task: str, metric: str, group: str = TUNED) -> tuple[float, str]:
    """The band of a task's metric for the tuned members, or the held-out ones (their own block when
    band.json has one, else the tuned members')."""
    if band is None:
        return FLOOR, "floor"
    entry = (band.metric(task, metric, HELDOUT) if group == HELDOUT else None) or band.metric(task, metric)
    if entry is not None and entry.band is not None:
        return max(float(entry.band), FLOOR), "band.json"
    return FLOOR, "floor"


def compare(standing: Mapping[str, Mapping[str, Mapping[str, Any]]],
            new: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]],
            band: Band | None, *, seed: int = SEED,
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
    out: dict[str, str] = {}
    for v in values:
        key, eq, reason = v.partition("=")
        key, reason = key.strip(), reason.strip().strip('"').strip("'").strip()
        if not eq or not key or not reason:
            raise UsageError(f"--justify {v!r}: expected METRIC=\"reason\" (or TASK/METRIC=\"reason\") with a reason")
        out[key] = reason
    return out


# --------------------------------------------------------------------------- `evalkit check`


@dataclass(frozen=True)
class Coverage:
    """How much of the standing board in scope (the check's tasks and members, the backends the new sweep
    ran) the new sweep covered: a standing entry is covered (scored), errored, or not covered."""

    entries: int
    covered: int
    errored: int
    heldout: int = 0  # of `entries`, held-out members' (gated apart: `compare`)
    heldout_covered: int = 0

    @property
    def not_covered(self) -> int:
        return self.entries - self.covered - self.errored

    @property
    def partial(self) -> bool:
        return self.covered < self.entries

    def line(self, allowed: bool) -> str:
        held = f" (held-out: {self.heldout_covered} of {self.heldout})" if self.heldout else ""
        head = (f"{self.covered} of {self.entries} standing entries covered{held}; {self.not_covered} not covered, "
                f"{self.errored} errored")
        if allowed:
            return f"{head}: gated on what was covered (--allow-partial)"
        return f"{head}: the gate saw only part of the board; --allow-partial gates on what was covered"


def coverage(standing: Mapping[str, Mapping[str, Mapping[str, Any]]],
             new: Mapping[str, Mapping[str, Mapping[str, Any]]],
             errors: Mapping[str, Mapping[str, Mapping[str, str]]], labels: Iterable[str],
             heldout: Iterable[str] = ()) -> Coverage:
    """`Coverage` of the `standing` entries of the backends in `labels` by `new` (scored) and `errors`."""
    labels, heldout = set(labels), frozenset(heldout)
    keys = [(t, b, m) for t, per_b in standing.items() for b, per in per_b.items() if b in labels for m in per]

    def state(t: str, b: str, m: str) -> str:
        return ("covered" if m in ((new.get(t) or {}).get(b) or {})
                else "errored" if m in ((errors.get(t) or {}).get(b) or {}) else "not")

    states = [(state(t, b, m), f"{t}/{m}" in heldout) for t, b, m in keys]
    return Coverage(len(states), sum(s == "covered" for s, _ in states), sum(s == "errored" for s, _ in states),
                    sum(h for _, h in states), sum(h and s == "covered" for s, h in states))


@dataclass
class CheckResult:
    """What `check` found: the comparison, the new sweep (when it ran one), and what it wrote."""

    run_dir: Any
    comparison: Comparison
    board_file: Any
    band_file: Any
    band_missing: bool  # no band file: every band is the floor
    sweep: Any = None  # the new sweep's `SweepResult`, when `check` ran it
    sweep_code: int = 0  # the new sweep's exit code (0 when a folder was read)
    errors: dict = field(default_factory=dict)  # {task: {backend: {member: why}}} errored in the new sweep
    unused: list[str] = field(default_factory=list)  # --justify keys that matched no regression
    written: int | None = None  # scoreboard entries written (None: the board was not written)
    justified: list[Change] = field(default_factory=list)
    coverage: Coverage | None = None  # of the standing entries in scope by the new sweep
    allow_partial: bool = False  # --allow-partial: gate on what was covered

    @property
    def refused_partial(self) -> bool:
        """The gate saw only part of the board in scope, and --allow-partial was not given."""
        return bool(self.coverage and self.coverage.partial and not self.allow_partial)

    @property
    def exit_code(self) -> int:
        """1 for an unjustified regression; else the new sweep's failure code (5 for errored members: an
        outage says more than "partial"); else 7 when a standing entry in scope was not covered (unless
        --allow-partial); else 0."""
        if self.comparison.unjustified:
            return EXIT_FAILED
        if self.sweep_code != EXIT_OK:
            return self.sweep_code
        if self.errors:
            return EXIT_BACKEND
        return EXIT_PARTIAL if self.refused_partial else EXIT_OK


def check(opts: Any, *, run_dir: Any = None, board: Any = None, band_file: Any = None,
          justifications: Mapping[str, str] | None = None, update_scoreboard: bool = False, seed: int = SEED,
          on_sweep: Any = None, allow_partial: bool = False) -> CheckResult:
    """`evalkit check`: compare a new sweep with the standing scoreboard under the band.

    The new sweep is `run_dir` (a run or sweep folder) or, without it, a fresh sweep of ``opts.backends``
    into ``opts.out`` (`on_sweep(result)` is told when it ends). ``opts`` (a `runner.RunOptions`) also names
    the corpus, tasks and members (``opts.only``: ids or TASK/MEMBER). A justified regression, or
    `update_scoreboard` on a pass, writes the new sweep as the standing entries with the justifications.
    A standing entry in scope (the tasks and members, of a backend the new sweep ran) that the new sweep
    did not cover or that errored makes the check partial: it does not pass (exit 7, `CheckResult.coverage`)
    unless `allow_partial`, which gates on what was covered and says so."""

    just = dict(justifications or {})
    tasks, only = opts.tasks, opts.only
    board_file = Path(board or board_path(opts.corpus))
    standing_board = read_board(board_file, must_exist=True)
    band_at = Path(band_file or band_path(opts.corpus))
    band = read_band(band_at, must_exist=band_file is not None)
    result, sweep_code = None, 0
    if run_dir is None:
        result = sweep(replace(opts, force=True, board=None))
        if on_sweep:
            on_sweep(result)
        sweep_code, run_dir = result.exit_code, result.run_dir

    def keep(t: str, m: str) -> bool:
        return not only or m in only or f"{t}/{m}" in only

    new = {t: {b: {m: v for m, v in per.items() if keep(t, m)} for b, per in d.items()}
           for t, d in collect(run_dir, tasks).items()}
    errors: dict = {}  # the new sweep's errored members: no score, not comparable
    for s in scan(run_dir, status=ERROR):
        if (not tasks or s.task in tasks) and keep(s.task, s.member):
            errors.setdefault(s.task, {}).setdefault(s.backend, {})[s.member] = str(s.score().failure)
    standing = {t: {b: {m: e.metrics for m, e in per.items() if keep(t, m)} for b, per in d.items()}
                for t, d in standing_board.by_task(tasks).items()}
    heldout = heldout_keys(opts.corpus, tasks)
    cmp = compare(standing, new, band, seed=seed, justifications=just, errors=errors, heldout=heldout)
    summary = read_summary(run_dir)  # a backend whose every member was not covered has no result folder
    ran = {s.backend for s in scan(run_dir, status=None, unscored=True)} | (summary.labels() if summary else set())
    covered = coverage(standing, new, errors, ran, heldout)
    if not cmp.compared:
        raise ScoreboardError(f"{run_dir}: nothing to compare with {board_file} (no task × backend × member in both)"
                              + "".join(f"\n  note: {n}" for n in cmp.notes))
    used = {k for c in cmp.regressions for k in (c.metric, f"{c.task}/{c.metric}", f"{c.task}/{c.backend}/{c.metric}")
            if k in just}
    out = CheckResult(run_dir, cmp, board_file, band_at, band is None, result, sweep_code, errors, sorted(set(just) - used),
                      coverage=covered, allow_partial=allow_partial)
    out.justified = [c for c in cmp.regressions if c.justification]
    if not cmp.unjustified and not out.refused_partial and (out.justified or update_scoreboard):
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        record = {f"{c.task}/{c.backend}/{c.metric}": {
            "reason": c.justification, "standing": round(c.standing, 6), "new": round(c.new, 6),
            "band": round(c.band, 6), "p_value": None if c.p_value is None else round(c.p_value, 6), "date": stamp,
        } for c in out.justified}
        out.written = len(update(result if result is not None else run_dir, board_file, record, corpus=opts.corpus,
                                 sources=opts.sources))
    return out
