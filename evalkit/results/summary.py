"""summary.json: a run's figures per task and backend, computed once and read by the index, the CLI
summary and the comparison.

`summarize(results, run_json)` is a pure function of what `runfolder.scan` found (every member ×
backend, scored or errored: ``scan(run, status=None, unscored=True)``) and the run's run.json (its
backends, members, skipped members and held-out members). Per task and backend:

* the counts, all from `evalkit.status.count` (the one counter; the vocabulary is `evalkit.status`'s):
  ``members``: attempted (scored + errors); ``scored``, ``passed``, ``failed``, ``errors`` (with
  ``causes``: cause → count) and ``error_rate`` (errors / attempted); ``parse``: the scored answers' parse
  outcomes (ok / malformed / truncated / schema_invalid: a malformed answer is scored, never an error) and
  ``recovered`` (ok answers that needed a repair: a note); ``skipped``: members the integrity gate left
  out, each with its status (skipped / refused: a kind of skip) and the reason, which names the fix;
  ``not_covered``: members of the run this backend has no result for that were not skipped (a replayed
  cassette holds no recording of them);
* ``headline``: the metric the task's score is (a scorer's ``details.headline``, else ``score``);
  ``score`` and ``metrics``: the mean and 95 % bootstrap CI (`evalkit.scoring.stats.mean_ci`) over the scored
  members that are not held out of every numeric metric, plus the micro F1 (`stats.micro_f1_ci`) of
  every ``<x>_tp`` / ``_fp`` / ``_fn`` triple as ``micro_<x>_f1``; ``heldout``: the same over the
  held-out members (None when there are none);
* ``calls``: `results.calls.call_figures` over the extraction calls (score.json repeats each call's run block):
  calls, latency percentiles, tokens, USD, replayed — what the calls took, never a count of outcomes.
* ``samples`` (only under ``--samples K``, K > 1; `evalkit.results.samples.backend_figures`): K, samples scored of
  attempted, mean per-member SD, item agreement, pass@k and pass^k shares, the corpus mean per sample index
  (``sample_means``). A member's score is then the mean over its scored samples (`samples.headline`), and
  ``calls`` counts every sample's call.

Errors are left out of every mean and interval (`evalkit.status`). Resampling seeds are per (task,
metric) (`stats.sub_seed`), the same for every backend, so two backends' intervals resample alike. Keys
are sorted when written (`_write`, through `jsonio`): the same run gives the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit._util.jsonio import read_json, write_json
from evalkit._util.typed import Int, Num, Record, Str, check_version
from evalkit.backends.base import Completion
from evalkit.results import runfolder
from evalkit.results.calls import call_figures
from evalkit.results.records import RunBlock, RunRecord, ScoreRecord
from evalkit.results.runfolder import Scored
from evalkit.results.samples import backend_figures
from evalkit.scoring.stats import SEED, Seed, as_number, mean, mean_ci, micro_f1, micro_f1_ci, sub_seed
from evalkit.status import NOT_COVERED, OK, REFUSED, SCORED, SKIPPED, count

__all__ = ["summarize", "write_summary", "read_summary", "completion_of", "figure", "backend_line", "Summary",
           "TaskSummary", "BackendEntry", "Figure", "Calls", "Skip", "SCHEMA_VERSION", "task_summary"]

COUNTS = ("tp", "fp", "fn")
# summary.json's format. The file has no ``schema_version`` key (it never had one, and adding it would change
# every summary.json's bytes): a file without one is version 1; a version 2 would write the key.
SCHEMA_VERSION = 1


# ----------------------------------------------------------------------------- the file, typed


class Figure(Record):
    """A mean, its bootstrap CI and how many values it is over (`figure`)."""

    mean: Num | None = None
    ci: list[Num] | None = None
    n: Int = 0


class Skip(Record):
    """A member the integrity gate left out: its status (skipped / refused) and the reason, which names the fix."""

    member: Str
    status: Str | None = None
    reason: Str | None = None


class Calls(Record):
    """What a backend's calls took (`pool.call_figures`): never a count of outcomes."""

    calls: Int = 0
    latency_p50: Num | None = None
    latency_p90: Num | None = None
    latency_p99: Num | None = None
    input_tokens: Int = 0
    output_tokens: Int = 0
    cache_read_tokens: Int = 0
    cache_write_tokens: Int = 0
    batched: Int = 0
    usd: Num = 0.0
    replayed: Int = 0


class Heldout(Record):
    """The held-out members' figures, apart from the tuned ones'."""

    scored: Int = 0
    passed: Int = 0
    score: Figure = Figure()
    metrics: dict[str, Figure] = {}


class BackendEntry(Record):
    """One backend of one task: its counts (`evalkit.status.count`), figures and calls — the one place the
    pages read a backend's error rate and call figures from."""

    backend: Str
    members: Int
    scored: Int
    passed: Int
    failed: Int
    errors: Int
    error_rate: Num | None = None
    causes: dict[str, Int] = {}
    parse: dict[str, Int] = {}
    recovered: Int = 0
    skipped: list[Skip] = []
    not_covered: list[Str] = []
    score: Figure = Figure()
    metrics: dict[str, Figure] = {}
    heldout: Heldout | None = None
    calls: Calls = Calls()
    samples: dict[str, Any] | None = None  # only under --samples K > 1 (`samples.backend_figures`)

    def headline(self, headline: str) -> tuple[str, Figure]:
        """The task's headline metric as this backend has it (``score`` when it has no such metric) and its figure."""
        name = headline if headline in self.metrics else "score"
        return name, self.metrics[name] if name != "score" else self.score

    def heldout_figure(self, name: str) -> Figure | None:
        """The held-out members' figure of `name` (None without held-out members, or without that metric)."""
        if self.heldout is None:
            return None
        return self.heldout.score if name == "score" else self.heldout.metrics.get(name)


class TaskSummary(Record):
    headline: Str = "score"
    members: list[Str] = []
    skipped: list[Skip] = []
    backends: list[BackendEntry] = []

    def backend(self, label: str) -> BackendEntry | None:
        return next((b for b in self.backends if b.backend == label), None)


class RunBackend(Record):
    label: Str | None = None
    spec: Str | None = None
    model: Str | None = None
    cassette_sha256: Str | None = None


class Summary(Record):
    """summary.json: per task and backend, counts, means with CIs, calls (module docstring)."""

    corpus: Str | None = None
    reference: Str | None = None
    evalkit_version: Str | None = None
    backends: list[RunBackend] = []
    tasks: dict[str, TaskSummary] = {}

    def entries(self) -> Iterable[tuple[str, TaskSummary, BackendEntry]]:
        """(task, its summary, one backend's entry) in task order, the run's backend order within a task."""
        for name, task in sorted(self.tasks.items()):
            for entry in task.backends:
                yield name, task, entry

    def labels(self) -> set[str]:
        """Every backend some task has an entry for (a backend whose every member was not covered included)."""
        return {e.backend for _, _, e in self.entries()}


def read_summary(run_dir: str | Path) -> Summary | None:
    """The run folder's summary.json (None when it has none yet); `RecordError` naming the key of a wrong value."""
    path = Path(run_dir) / runfolder.SUMMARY_JSON
    if not path.is_file():
        return None
    data = read_json(path)
    check_version(data, SCHEMA_VERSION, path)
    return Summary.from_json(data, path)


def task_summary(run_dir: str | Path, task: str) -> TaskSummary:
    """One task's block of summary.json as `summarize` makes it from the task's results now: what a task page shows
    (its report notebook runs before the run writes summary.json, so it cannot read the file; it computes the same
    model with the same function, never counts a second way)."""
    run_dir = Path(run_dir)
    data = summarize(runfolder.task_results(run_dir, task), runfolder.read_run_json(run_dir))
    return Summary.from_json(data, run_dir / runfolder.SUMMARY_JSON).tasks.get(task) or TaskSummary()


def _write(run_dir: Path, data: Mapping[str, Any]) -> None:
    """summary.json, typed on the way out: a value of the wrong type is refused before it is written."""
    path = run_dir / runfolder.SUMMARY_JSON
    write_json(path, Summary.from_json(data, path).to_json())


def completion_of(run: RunBlock) -> Completion:
    """A `Completion` from a run block (extraction.json's or score.json's ``run``), for `results.calls.summarize_calls`."""
    names = {f.name for f in dataclasses.fields(Completion)} - {"record", "raw"}
    return Completion(record=None, raw="", **run.to_json(keys=names))


def figure(values: Sequence[float | None], seed: Seed) -> dict[str, Any]:
    """The mean of the present values, its bootstrap CI, and how many there were."""
    xs = [v for v in values if v is not None]
    ci = mean_ci(xs, seed) if xs else None
    return {"mean": mean(xs), "ci": list(ci) if ci else None, "n": len(xs)}


def _figures(task: str, scored: Sequence[ScoreRecord]) -> dict[str, Any]:
    """score and every metric (mean, CI, n) over the scored members' score.json records."""
    metrics = [d.metrics for d in scored]
    names = sorted({k for m in metrics for k, v in m.items() if as_number(v) is not None})
    out = {name: figure([as_number(m.get(name)) for m in metrics], sub_seed(SEED, task, name)) for name in names}
    for prefix in sorted({n[: -len("_tp")] for n in names if n.endswith("_tp")}):
        keys = [f"{prefix}_{c}" for c in COUNTS]
        values = [[as_number(m.get(k)) for k in keys] for m in metrics]
        rows = [[x for x in r if x is not None] for r in values if None not in r]
        if rows:
            ci = micro_f1_ci(rows, sub_seed(SEED, task, f"micro_{prefix}_f1"))
            out[f"micro_{prefix}_f1"] = {"mean": micro_f1(rows), "ci": list(ci) if ci else None, "n": len(rows)}
    score = figure([as_number(d.score) for d in scored], sub_seed(SEED, task, "score"))
    return {"scored": len(scored), "passed": sum(d.passed is True for d in scored), "score": score,
            "metrics": out}


def _backend(task: str, label: str, results: list[Scored], members: list[str], skipped: list[dict[str, Any]],
             heldout: set[str], samples_of: Mapping[_Key, list[ScoreRecord]] | None = None) -> dict[str, Any]:
    samples_of = samples_of or {}
    sampled = [samples_of[_key(r)] for r in results if _key(r) in samples_of]

    scored = [r for r in results if r.status == SCORED]
    kept = [r.record for r in scored if f"{task}/{r.member}" not in heldout]
    held = [r.record for r in scored if f"{task}/{r.member}" in heldout]
    main = _figures(task, kept)
    have = {r.member for r in results}
    gone = {s["member"] for s in skipped}
    not_covered = sorted(m for m in members if m not in have and m not in gone)
    # Every count of the entry from the one counter (`evalkit.status.count`): results, not covered, skipped.
    c = count([*(r.record.count_row(r.status) for r in results), *({"status": NOT_COVERED} for _ in not_covered),
               *({"status": s.get("status") or SKIPPED} for s in skipped)])
    return {
        "backend": label,
        "members": c.attempted,
        "scored": c.scored,
        "passed": c.passed,
        "failed": c.failed,
        "errors": c.errors,
        "error_rate": c.error_rate,
        "causes": c.causes,
        "parse": c.parse,
        "recovered": c.recovered,
        "skipped": skipped,
        "not_covered": not_covered,
        "score": main["score"],
        "metrics": main["metrics"],
        "heldout": _figures(task, held) if held else None,
        "calls": call_figures([completion_of(s.run) for r in results
                               for s in samples_of.get(_key(r), [r.record])]),
        **({"samples": backend_figures(sampled)} if sampled else {}),
    }


_Key = tuple[str, str, str]  # task, member, backend label


def _key(r: Scored) -> _Key:
    return r.task, r.member, r.backend


def _sampled(results: list[Scored]) -> tuple[list[Scored], dict[_Key, list[ScoreRecord]]]:
    """--samples K > 1: each sampled result read as its samples' headline (`samples.headline`: the mean over
    its scored samples), and each one's samples; results without samples as they are."""
    samples_of = {_key(r): r.samples() for r in results if getattr(r, "sampled", False)}
    return [r.as_headline() if _key(r) in samples_of else r for r in results], samples_of


def summarize(results: Iterable[Scored], run_json: RunRecord | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """summary.json for `results` (`runfolder.Scored`, every status) and the run's run.json (a `RunRecord`, or
    a sweep's members' run.json merged)."""
    run = run_json if isinstance(run_json, RunRecord) else RunRecord.from_json(dict(run_json or {}), runfolder.RUN_JSON)
    reference = run.reference  # --reference: its records are the truth of the others, never scored
    results, samples_of = _sampled([r for r in results if r.backend != reference])
    order = [b.label for b in run.backends if b.label != reference]
    heldout = set(run.heldout)
    members_of: dict[str, list[str]] = {}
    for key in run.members:
        task, _, member = str(key).partition("/")
        members_of.setdefault(task, []).append(member)
    skipped_of: dict[str, list[dict[str, Any]]] = {}
    for s in run.skipped:
        task, _, member = str(s.get("member")).partition("/")
        if s.get("status") in (SKIPPED, REFUSED):  # a not-covered member is per backend: not a skip of the task
            skipped_of.setdefault(task, []).append({"member": member, "status": s.get("status"),
                                                    "reason": s.get("reason")})
    tasks: dict[str, Any] = {}
    for task in sorted({r.task for r in results} | set(skipped_of)):
        mine = [r for r in results if r.task == task]
        labels = {r.backend for r in mine}
        backends = [b for b in order if b in labels] + sorted(labels - set(order))
        if not backends:  # every member skipped: each backend of the run skipped them
            backends = [b for b in order if b]
        members = sorted({*members_of.get(task, []), *(r.member for r in mine)})
        headline = next((str(r.score().details["headline"]) for r in mine
                         if r.status == SCORED and r.score().details.get("headline")), "score")
        skipped = sorted(skipped_of.get(task, []), key=lambda s: s["member"])
        tasks[task] = {
            "headline": headline,
            "members": members,
            "skipped": skipped,
            "backends": [_backend(task, b, [r for r in mine if r.backend == b], members, skipped, heldout,
                                  samples_of) for b in backends],
        }
    # The run's time and command stay in run.json: the same results give the same summary.json bytes.
    return {
        "corpus": run.corpus,
        "reference": reference,
        "evalkit_version": run.evalkit_version,
        "backends": [{k: getattr(b, k) for k in ("label", "spec", "model", "cassette_sha256")
                      if getattr(b, k) is not None} for b in run.backends],
        "tasks": tasks,
    }


def write_summary(run_dir: str | Path) -> dict[str, Any]:
    """Summarize the run folder (`runfolder.scan`, every status) and write its summary.json; returns it."""
    run_dir = Path(run_dir)
    data = summarize(runfolder.scan(run_dir, status=None, unscored=True), runfolder.read_run_json(run_dir))
    _write(run_dir, data)
    return data


def write_sweep_summary(sweep_dir: str | Path, run_dirs: Iterable[str | Path]) -> dict[str, Any]:
    """summary.json of a sweep: `summarize` over its members' run folders (`run_dirs`, relative to
    `sweep_dir`: this sweep's selection, current members included) as one run; written beside sweep.json."""
    sweep_dir = Path(sweep_dir)
    order = {sweep_dir / rel: i for i, rel in enumerate(run_dirs)}
    # One scan of the whole folder, not one per member; the results in the members' order.
    results = sorted((s for s in runfolder.scan(sweep_dir, status=None, unscored=True) if s.run_dir in order),
                     key=lambda s: order[s.run_dir])
    merged: dict[str, Any] = {"backends": [], "members": [], "skipped": [], "heldout": []}
    labels: set[str | None] = set()
    for run_dir in order:
        if not (run_dir / runfolder.RUN_JSON).is_file():
            continue  # a member that crashed before its run began: the sweep lists it as failed
        run_json = runfolder.read_run_json(run_dir)
        merged.setdefault("parameters", run_json.parameters)
        merged.setdefault("evalkit_version", run_json.evalkit_version)
        for b in run_json.backends:
            if b.label not in labels:
                labels.add(b.label)
                merged["backends"].append(b.to_json())
        merged["members"] += run_json.members
        merged["skipped"] += run_json.skipped
        merged["heldout"] += sorted(run_json.heldout)
    data = summarize(results, merged)
    _write(sweep_dir, data)
    return data


# ----------------------------------------------------------------------------- one line per backend


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def backend_line(entry: BackendEntry, headline: str) -> str:
    """One backend of one task in a line (never pooled with another backend): passed/N, errors, the
    headline's mean with its CI, skipped and not covered."""
    line = f"{entry.backend}: {entry.passed}/{entry.members} passed"
    if entry.errors:
        line += f" · {entry.errors} error{'s' if entry.errors > 1 else ''}"
    for outcome, n in entry.parse.items():  # scored answers with a fault: counted, not errors
        if outcome != OK and n:
            line += f" · {n} {outcome.replace('_', ' ')}"
    name, fig = entry.headline(headline)
    if fig.mean is not None:
        line += f" · mean {name} {_pct(fig.mean)}"
        if fig.ci:
            line += f" [{_pct(fig.ci[0])}, {_pct(fig.ci[1])}]"
        line += f" over {fig.n} scored"
    if entry.heldout:  # reported apart, never in the mean above
        hf = entry.heldout_figure(name) or entry.heldout.score
        line += f" · held out {entry.heldout.scored}: mean {_pct(hf.mean)}"
    if entry.skipped:
        line += f" · {len(entry.skipped)} skipped"
    if entry.not_covered:
        line += f" · {len(entry.not_covered)} not covered"
    return line
