"""The noise band: how far a corpus-mean metric moves between repeated baseline sweeps.

``evalkit band`` takes N ≥ 2 sweeps of the same baseline (run live N times, or replayed from N
independently recorded cassettes, or given as existing run folders) — or ONE run or sweep folder of
``--samples K`` (K ≥ 2), whose per-sample corpus means play the part of the sweep means (``sweeps``
then lists one entry per sample, with its ``sample`` index) — and writes
``corpus/band.json`` (``--corpus DIR``: ``DIR/band.json``)::

    {
      "schema_version": 1,
      "floor": 0.02,
      "bootstrap": {"confidence": 0.95, "over": "members", "resamples": 2000, "seed": 20261130},
      "sweeps": [{"backend": "gemma", "spec": "cassette:path=a.jsonl", "run": "../runs/…"}, …],
      "tasks": {
        "<task>": {
          "members": 12,                       # members scored in every sweep (the paired set)
          "metrics": {
            "<metric>": {
              "band": 0.031,                   # max(spread, floor): what `evalkit check` allows
              "spread": 0.031,                 # max − min of the per-sweep corpus means
              "sweep_means": [0.912, 0.881],   # corpus mean in each sweep, in sweep order
              "mean": 0.8965,                  # corpus mean of the per-member means over sweeps
              "ci": [0.84, 0.95],              # bootstrap CI of that mean, resampling members
              "n": 12,                         # members with a value
              "member_sd": 0.041,              # mean over members of each member's SD across sweeps
              "gated": true                    # higher is better: `evalkit check` gates it
            }}}}}

Corpus means are taken over the members scored in *every* sweep, so a member missing from one
sweep cannot masquerade as noise. The bootstrap (`evalkit.scoring.stats.mean_ci`) resamples members with
a fixed seed derived per task and metric, so the same sweeps always give the same file. Numbers are
rounded to 6 places. ``member_sd`` (sample SD, ddof 1, per member, then averaged) is the sampling noise
of one member's figure: what `evalkit plan --band` sizes a comparison from.

Refused (`UsageError`, exit 2, one line naming the inputs), because each would make a band that hides a
regression: the same folder twice; two sweeps whose records are byte-identical for every member (no
noise can be measured between them; likewise two byte-identical samples of one run); sweeps that are not repeats of one baseline (`check_repeats`); a
``predictions:`` sweep (answers from anywhere) unless ``allow_predictions``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit._util.jsonio import canonical_sha, read_json, write_text
from evalkit._util.typed import Bool, Int, Num, Record, RecordError, check_version
from evalkit.backends.spec import redact_stored
from evalkit.corpus.tasks import DEFAULT_CORPUS, HELDOUT, TUNED, group_of
from evalkit.errors import BandError, CorpusError, UsageError
from evalkit.results.runfolder import EXTRACTION, read_extraction, sample_dirs, scan
from evalkit.results.scoreboard import numeric_metrics, write_json
from evalkit.scoring.stats import CONFIDENCE, RESAMPLES, SEED, mean, mean_ci, sub_seed

__all__ = ["FLOOR", "HIGHER_IS_BETTER", "direction", "is_gated", "BAND_NAME", "SCHEMA_VERSION", "BandError",
           "band_path", "collect", "compute_band", "write_band", "render_markdown", "update_readme",
           "README_START", "README_END", "check_repeats", "check_independent", "member_sd",
           "refuse_identical", "collect_samples", "Band", "BandTask", "BandGroup", "BandMetric", "read_band"]

BAND_NAME = "band.json"
SCHEMA_VERSION = 1
README_START = "<!-- band:start -->"
README_END = "<!-- band:end -->"

# The regression rule's constants live with the band it is judged by (`evalkit.board.regress` applies them).
FLOOR = 0.02  # the smallest band: an absolute 2 points on a 0..1 metric
HIGHER_IS_BETTER = ("score", "accuracy", "precision", "recall", "f1", "agrees")


def direction(metric: str) -> str | None:
    """``"higher"`` when a larger value is better (the metric is gated), else None (not gated)."""
    last = metric.lower().replace("-", "_").rsplit("_", 1)[-1]
    return "higher" if last in HIGHER_IS_BETTER else None


def is_gated(metric: str) -> bool:
    return direction(metric) is not None


def band_path(corpus: str | Path | None = None) -> Path:
    return Path(corpus or DEFAULT_CORPUS) / BAND_NAME


def collect(root: str | Path, tasks: Iterable[str] | None = None) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{task: {backend: {member: metrics}}}`` of every score.json under a run or sweep folder."""
    want = set(tasks) if tasks else None
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for s in scan(root):
        if want is not None and s.task not in want:
            continue
        out.setdefault(s.task, {}).setdefault(s.backend, {})[s.member] = numeric_metrics(s.score().metrics)
    return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def _sweep_info(root: Path, label: str, band_dir: Path) -> dict[str, Any]:
    spec = ""
    for s in scan(root):
        if s.backend == label:
            spec = redact_stored(s.extraction().backend.spec or "")
            break
    return {"backend": label, "spec": spec, "run": Path(os.path.relpath(root.resolve(), band_dir.resolve())).as_posix()}


def _one_label(data: Mapping[str, Mapping[str, Any]], root: Path, label: str | None) -> str:
    labels = sorted({b for per_task in data.values() for b in per_task})
    if label is not None:
        if label not in labels:
            raise BandError(f"{root}: no scored member for backend {label!r} (backends: {', '.join(labels) or 'none'})")
        return label
    if len(labels) != 1:
        raise BandError(f"{root}: {'no scored members' if not labels else 'several backends: ' + ', '.join(labels)}; "
                        "a band sweep needs exactly one (pick one with --label)")
    return labels[0]


def _profile(root: Path, label: str, tasks: Iterable[str] | None) -> dict[str, Any]:
    """What makes a sweep a repeat of one baseline: the tasks and members it attempted (scored or not), the
    sampling settings its calls were sent (run blocks) and the model that answered."""
    want = set(tasks) if tasks else None
    found = [s for s in scan(root, status=None, unscored=True)
             if s.backend == label and (want is None or s.task in want)]
    return {
        "task set": sorted({s.task for s in found}),
        "member set": sorted({f"{s.task}/{s.member}" for s in found}),
        "settings": sorted({json.dumps(s.record.run.settings or {}, sort_keys=True) for s in found}),
        "model": sorted({str(s.record.backend.model or "") for s in found}),
    }


def _diff(a: list[str], b: list[str]) -> str:
    only_a, only_b = [x for x in a if x not in b], [x for x in b if x not in a]
    def show(xs: list[str]) -> str:
        return ", ".join(xs[:4]) + (f" … ({len(xs)})" if len(xs) > 4 else "")

    return "; ".join(part for part in (f"only in the first: {show(only_a)}" if only_a else "",
                                       f"only in the other: {show(only_b)}" if only_b else "") if part)


def check_repeats(roots: Sequence[Path], labels: Sequence[str], tasks: Iterable[str] | None = None) -> None:
    """Refuse sweeps that are not repeats of one baseline — another task set, member set, settings or model
    (a real sweep beside an empty-predictions one measures no noise): `UsageError` naming what differs."""
    profiles = [_profile(r, lab, tasks) for r, lab in zip(roots, labels)]
    for root, prof in zip(roots[1:], profiles[1:]):
        differ = [f"{what}: {_diff(profiles[0][what], prof[what])}" for what in prof if prof[what] != profiles[0][what]]
        if differ:
            raise UsageError(f"band: {roots[0]} and {root} are not repeats of one baseline — "
                             + " · ".join(differ) + ". A band compares sweeps of the same tasks, members, settings "
                             "and model; measure it from such sweeps")


def _answers(root: Path, label: str, tasks: Iterable[str] | None) -> tuple[dict[str, str], bool]:
    """({task/member: sha256 of its extraction record}, whether any answer came from ``predictions:``)."""
    want = set(tasks) if tasks else None
    shas, predictions = {}, False
    for s in scan(root):
        if s.backend != label or (want is not None and s.task not in want):
            continue
        ext = s.extraction()
        shas[f"{s.task}/{s.member}"] = canonical_sha(ext.record)
        predictions |= (ext.backend.spec or "").startswith("predictions:")
    return shas, predictions


def check_independent(roots: Sequence[Path], labels: Sequence[str], tasks: Iterable[str] | None = None, *,
                      allow_predictions: bool = False) -> None:
    """Refuse inputs that cannot measure noise (`UsageError`, one line naming them): the same folder twice,
    a ``predictions:`` sweep unless `allow_predictions`, two sweeps with byte-identical answers."""
    resolved = [Path(r).resolve() for r in roots]
    for i, a in enumerate(resolved):
        if a in resolved[:i]:
            raise UsageError(f"band: {roots[i]} is given twice (as {roots[resolved.index(a)]}): a band needs "
                             "independent sweeps, not one sweep compared with itself")
    answers = [_answers(r, lab, tasks) for r, lab in zip(roots, labels)]
    if not allow_predictions:
        for root, (_, predictions) in zip(roots, answers):
            if predictions:
                raise UsageError(f"band: {root} holds predictions: answers (read from files, from anywhere): they "
                                 "measure no model's noise; pass --allow-predictions if they are real samples")
    refuse_identical("sweeps", roots, [a for a, _ in answers])


def refuse_identical(kind: str, names: Sequence[Any], answers: Sequence[Mapping[str, str]], where: str = "") -> None:
    """Refuse two inputs (`kind` "sweeps", or "samples" of one run `where`) whose answers (task/member → record
    sha256) are byte-identical on every member they share: no noise can be measured between them."""
    for i in range(len(answers)):
        for j in range(i + 1, len(answers)):
            a, b = answers[i], answers[j]
            common = set(a) & set(b)
            if common and all(a[k] == b[k] for k in common):
                raise UsageError(f"band: {kind} {names[i]} and {names[j]}{where} hold byte-identical answers: a band "
                                 "needs independent samples (temperature > 0 or independent recordings)")


def collect_samples(root: str | Path, tasks: Iterable[str] | None = None) -> list[dict[str, dict[str, dict[str, Any]]]]:
    """Per sample index of a ``--samples K`` run or sweep, `collect`'s ``{task: {backend: {member: metrics}}}``
    of that sample's scored members: what `compute_band` reads as K sweeps from one folder. [] without samples."""
    want = set(tasks) if tasks else None
    out: list[dict[str, dict[str, dict[str, Any]]]] = []
    for s in scan(root, status=None):
        if (want is not None and s.task not in want) or not s.sampled:
            continue
        for sample in s.samples():
            i = sample.sample or 0
            while len(out) <= i:
                out.append({})
            if sample.is_scored:
                out[i].setdefault(s.task, {}).setdefault(s.backend, {})[s.member] = numeric_metrics(sample.metrics)
    return out


def _sample_answers(root: Path, label: str, tasks: Iterable[str] | None, k: int) -> list[dict[str, str]]:
    """Per sample index, {task/member: sha256 of that sample's extraction record} (`refuse_identical`)."""
    want = set(tasks) if tasks else None
    out: list[dict[str, str]] = [{} for _ in range(k)]
    for s in scan(root, status=None):
        if s.backend != label or (want is not None and s.task not in want):
            continue
        for i, folder in sample_dirs(s.home):
            if i < k and (folder / EXTRACTION).is_file():
                out[i][f"{s.task}/{s.member}"] = canonical_sha(read_extraction(folder).record)
    return out


def member_sd(per_sweep: Sequence[Mapping[str, Mapping[str, Any]]], members: Sequence[str], metric: str) -> float | None:
    """The mean over `members` of each member's sample SD (ddof 1) of `metric` across the sweeps (members with
    a value in at least two sweeps); None when there is none."""
    sds = []
    for m in members:
        xs = [x for p in per_sweep if (x := mean([p[m].get(metric)])) is not None]
        if len(xs) >= 2:
            mu = sum(xs) / len(xs)
            sds.append((sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5)
    return mean(sds)


def _metrics_block(task: str, per_sweep: list[dict[str, Any]], members: list[str], floor: float, seed: int,
                   resamples: int, confidence: float, group: str = TUNED) -> dict[str, Any]:
    """Band, spread, sweep means and bootstrap CI of every metric over `members` (one group of the task)."""
    block: dict[str, Any] = {}
    metrics = sorted({k for p in per_sweep for m in members for k in p[m]})
    for metric in metrics:
        means = [mean(p[m].get(metric) for m in members) for p in per_sweep]
        known = [x for x in means if x is not None]
        if not known:
            continue
        spread = max(known) - min(known)
        member_means = [x for m in members if (x := mean(p[m].get(metric) for p in per_sweep)) is not None]
        stream = sub_seed(seed, task, metric, *(() if group == TUNED else (group,)))
        ci = mean_ci(member_means, stream, resamples, confidence)
        block[metric] = {
            "band": _r(max(spread, floor)),
            "spread": _r(spread),
            "sweep_means": [_r(x) for x in means],
            "mean": _r(mean(member_means)),
            "ci": None if ci is None else [_r(ci[0]), _r(ci[1])],
            "n": len(member_means),
            "member_sd": _r(member_sd(per_sweep, members, metric)),
            "gated": is_gated(metric),
        }
    return block


def compute_band(sweeps: Sequence[str | Path], *, tasks: Iterable[str] | None = None, label: str | None = None,
                 floor: float = FLOOR, seed: int = SEED, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                 band_dir: str | Path = ".", heldout: Iterable[str] = (), allow_predictions: bool = False
                 ) -> dict[str, Any]:
    """The band.json content for N ≥ 2 sweep folders (see module docstring); `heldout`: the ``task/member``
    keys of held-out members, whose figures are their own block (``heldout``) beside the tuned ones.
    Inputs that cannot measure noise are refused (`check_repeats`, `check_independent`)."""
    roots = [Path(s) for s in sweeps]
    samples = collect_samples(roots[0], tasks) if len(roots) == 1 else []
    if len(sweeps) < 2 and len(samples) < 2:
        raise UsageError(f"a band needs at least 2 sweeps, or one run or sweep of --samples K ≥ 2, got {len(sweeps)} "
                         "sweep(s) without samples")
    data, infos, labels = [], [], []
    if samples:  # one run's K samples: each sample index plays the part of a sweep
        root = roots[0]
        lab = _one_label(collect(root, tasks), root, label)
        check_independent([root], [lab], tasks, allow_predictions=allow_predictions)  # predictions: refused
        refuse_identical("samples", range(len(samples)), _sample_answers(root, lab, tasks, len(samples)), f" of {root}")
        data = [{t: per[lab] for t, per in d.items() if lab in per} for d in samples]
        infos = [{**_sweep_info(root, lab, Path(band_dir)), "sample": i} for i in range(len(samples))]
    for root in roots if not samples else ():
        d = collect(root, tasks)
        lab = _one_label(d, root, label)
        labels.append(lab)
        data.append({t: per[lab] for t, per in d.items() if lab in per})
        infos.append(_sweep_info(root, lab, Path(band_dir)))
    if not samples:
        check_repeats(roots, labels, tasks)
        check_independent(roots, labels, tasks, allow_predictions=allow_predictions)
    heldout = frozenset(heldout)
    out_tasks: dict[str, Any] = {}
    for task in sorted(set().union(*(d.keys() for d in data))):
        per_sweep = [d.get(task, {}) for d in data]
        common = sorted(set.intersection(*(set(p) for p in per_sweep)))
        if not common:
            continue
        tuned = [m for m in common if group_of(f"{task}/{m}", heldout) == TUNED]
        held = [m for m in common if group_of(f"{task}/{m}", heldout) == HELDOUT]
        out_tasks[task] = {"members": len(tuned), "metrics": _metrics_block(task, per_sweep, tuned, floor, seed,
                                                                            resamples, confidence)}
        if held:  # the held-out members' own figures, from their own resampling stream
            out_tasks[task]["heldout"] = {"members": len(held), "metrics": _metrics_block(
                task, per_sweep, held, floor, seed, resamples, confidence, HELDOUT)}
    if not out_tasks:
        raise BandError("the sweeps share no scored member: nothing to measure a band from")
    return {
        "schema_version": SCHEMA_VERSION,
        "floor": floor,
        "bootstrap": {"seed": seed, "resamples": resamples, "confidence": confidence, "over": "members"},
        "sweeps": infos,
        "tasks": out_tasks,
    }


class BandMetric(Record):
    """One metric's band (the module docstring names each key)."""

    band: Num | None = None
    spread: Num | None = None
    sweep_means: list[Num | None] = []
    mean: Num | None = None
    ci: list[Num] | None = None
    n: Int | None = None
    member_sd: Num | None = None
    gated: Bool | None = None


class BandGroup(Record):
    """The members a band was measured over (tuned, or held out) and each metric's band."""

    members: Int | None = None
    metrics: dict[str, BandMetric] = {}


class BandTask(BandGroup):
    heldout: BandGroup | None = None  # the held-out members' own block, when the task has any

    def group(self, group: str) -> BandGroup | None:
        return self if group == TUNED else self.heldout


class Band(Record):
    """band.json (module docstring)."""

    schema_version: Int = SCHEMA_VERSION
    floor: Num | None = None
    bootstrap: dict[str, Any] = {}
    sweeps: list[dict[str, Any]] = []
    tasks: dict[str, BandTask] = {}

    def metric(self, task: str, metric: str, group: str = TUNED) -> BandMetric | None:
        """`metric`'s band for the task's tuned (or held-out) members; None when the file has none."""
        t = self.tasks.get(task)
        block = t.group(group) if t is not None else None
        return block.metrics.get(metric) if block is not None else None


def band_of(data: Any, path: str | Path) -> Band:
    """`data` (band.json's JSON) as a `Band`; `BandError` naming the file and the key of a wrong value."""
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict):
        raise BandError(f"{path}: not a band file of schema_version {SCHEMA_VERSION}")
    try:
        check_version(data, SCHEMA_VERSION, path)
        return Band.from_json(data, path)
    except RecordError as e:
        raise BandError(str(e)) from None


def write_band(path: str | Path, band: Mapping[str, Any] | Band) -> Path:
    """The one writer of band.json, typed on the way out."""
    path = Path(path)
    data = band.to_json() if isinstance(band, Band) else band
    write_json(path, band_of(data, path).to_json())
    return path


def read_band(path: str | Path, *, must_exist: bool = False) -> Band | None:
    """The one reader of band.json (None when absent, unless `must_exist`)."""
    path = Path(path)
    if not path.is_file():
        if must_exist:
            raise BandError(f"{path}: no band file (measure one with `evalkit band`)")
        return None
    try:
        data = read_json(path)
    except CorpusError as e:
        raise BandError(str(e)) from None
    return band_of(data, path)


def _f(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def render_markdown(band: Mapping[str, Any], *, gated_only: bool = True) -> str:
    """The band as a Markdown table (gated metrics only unless told), for the README."""
    sweeps = band.get("sweeps") or []
    labels = sorted({s.get("backend", "?") for s in sweeps})
    boot = band.get("bootstrap") or {}
    conf = int(round(100 * float(boot.get("confidence", 0.95))))
    lines = [
        f"Noise band from {len(sweeps)} sweeps of `{'`, `'.join(labels)}` (floor {band.get('floor', FLOOR)}; "
        f"{conf}% bootstrap CI over members, seed {boot.get('seed')}). A drop larger than the band fails "
        "`evalkit check`; count metrics are not gated.",
        "",
        f"| task | metric | band | observed spread | sweep means | mean ({conf}% CI) | members |",
        "| --- | --- | ---: | ---: | --- | --- | ---: |",
    ]
    for task in sorted(band.get("tasks", {})):
        tuned = band["tasks"][task]
        for name, block in ((f"`{task}`", tuned), (f"`{task}` (held-out)", tuned.get("heldout") or {})):
            for metric in sorted(block.get("metrics", {})):
                m = block["metrics"][metric]
                if gated_only and not m.get("gated"):
                    continue
                ci = m.get("ci")
                ci_s = f"{_f(m.get('mean'))} ({_f(ci[0])}–{_f(ci[1])})" if ci else _f(m.get("mean"))
                means = " / ".join(_f(x) for x in m.get("sweep_means", []))
                lines.append(f"| {name} | `{metric}` | {_f(m.get('band'))} | {_f(m.get('spread'))} | {means} | {ci_s} "
                             f"| {m.get('n', block.get('members'))} |")
    return "\n".join(lines) + "\n"


def update_readme(readme: str | Path, markdown: str) -> Path:
    """Replace what sits between ``<!-- band:start -->`` and ``<!-- band:end -->`` in `readme`."""
    readme = Path(readme)
    if not readme.is_file():
        raise BandError(f"{readme}: file not found")
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_START) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise BandError(f"{readme}: no {README_START} … {README_END} block to rewrite; add the two markers "
                        "where the band table should go")
    new = pattern.sub(lambda _: f"{README_START}\n{markdown.rstrip()}\n{README_END}", text, count=1)
    if new != text:
        write_text(readme, new)
    return readme
