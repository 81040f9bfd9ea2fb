"""`evalkit run`: integrity gate → backends → one concurrent extraction pool →
judge phase (with --judge: `evalkit.stages.judge`) → extract/score notebooks per member →
report notebook per task → HTML.

`run` keeps what the run holds (its folder's lock, a scheduler) until the end and turns a stop into
`Interrupted`; `_run` calls the stages in order, each a function from the typed results of those before it
to its own (frozen dataclasses; `_Done` alone is updated as they go: what an interrupt reports):

``_plan(opts) → Plan``
    Usage checks, tasks and members selected, backends and judge resolved, the integrity gate, every request
    rendered and priced (`Plan.calls`, what ``--dry-run`` shows). Writes nothing, calls nothing; a dry run
    (or a run the gate left nothing of) ends here. The guards are checked after it.
``_extract(plan, opts) → Extracted``
    Holds and marks the run folder unfinished, opens the backends, makes every call not already answered in
    one pool (``--batch``: provider batches first); the opened backends, the homes (sample 0, samples 1..K-1),
    the not-covered outcomes, what was spent.
``_judge(plan, extracted, opts) → Judged | None``
    With ``--judge``: `judge.judge_phase` (a `judge.JudgeRun`) writes the verdicts the scorers read; its
    run.json entry and messages. Then ``_write_run_json``.
``_score(plan, extracted, opts) → Scored``
    score.json per member × backend (notebooks, or in-process), report.ipynb per task; the scored outcomes.
``_render(run_dir, opts) → summary``
    summary.json, then the HTML pages. ``_finish`` marks the run finished and returns the `RunResult`.
``record(result, opts) → Recorded``
    After `_run`, in `run`: the history (runs/index.jsonl) and the scoreboard, as ``opts`` asks.

Each phase leaves files in the run folder (an extraction.json is written the
moment its call completes), so a failure anywhere keeps what was done before it.
A member × backend whose call, scorer or notebook failed ends with status
``error`` and its cause (`evalkit.status`), never with a score: exit 5.

A run holds its folder (`runfolder.hold`): a second run into it is
refused while the first lives. SIGINT/SIGTERM stop a run within about a second
and raise `Interrupted` saying how far each phase got. A run that did not finish
(stopped, crashed) leaves ``.evalkit.unfinished`` in its folder; the next run
into it resumes: an extraction.json that already answers the same request with
the same backend spec, and did not fail, is reused instead of called again.
Finished runs one after another into one folder add up: run.json lists every
backend and member the folder holds (`runfolder.merge_run_json`), and the task
reports read every score.json there. Where each file lives: `evalkit.results.runfolder`.

Scoring: score.ipynb per member × backend, or with ``notebooks=False``
(``--no-notebooks``) the same function in this process (`pipeline.score_home`):
either way the outcomes are read back from score.json.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit._util.interrupt import Interrupted
from evalkit._util.jsonio import remove_partials
from evalkit._util.paths import member_ref
from evalkit.backends import BackendContext, BackendSpec, Completion, check_labels, labels_slug
from evalkit.backends.resolve import missing_keys
from evalkit.backends.spec import redacted_command as command
from evalkit.corpus.sources import Document, check_input, check_integrity, read_document, sha256_file
from evalkit.corpus.specs import check_overrides
from evalkit.corpus.tasks import DEFAULT_CORPUS, Member, Task, load_member, load_tasks, sources_dir
from evalkit.errors import (
    EXIT_BACKEND,
    EXIT_CASSETTE,
    EXIT_FAILED,
    EXIT_INTEGRITY,
    EXIT_INVALID,
    EXIT_OK,
    CassetteError,
    CorpusError,
    EvalkitError,
    IntegrityError,
    InvalidCorpus,
    LimitExceeded,
    NoTextLayer,
    SourceMissing,
    UnreadableSource,
    UsageError,
)
from evalkit.execution.execute import execute, plan_member, plan_report
from evalkit.execution.pool import Job, run_pool
from evalkit.report import runspage
from evalkit.results import runfolder
from evalkit.results.history import append_history
from evalkit.results.records import ScoreRecord
from evalkit.results.runfolder import Home, hold
from evalkit.results.samples import headline
from evalkit.results.scoreboard import board_path, update_scoreboard
from evalkit.results.summary import write_summary
from evalkit.scoring.ontology import load_ontology
from evalkit.scoring.stats import SEED, sub_seed
from evalkit.stages import judge as judging
from evalkit.stages.pipeline import backend_context, extraction_record, is_current, render_request, score_home
from evalkit.stages.validate import input_problems
from evalkit.status import (
    ERROR,
    INVALID_INPUT,
    NO_TEXT_LAYER,
    NOT_COVERED,
    NOTEBOOK_FAILED,
    REFUSED,
    SCORED,
    SKIPPED,
    Failed,
)


@dataclass
class RunOptions:
    """What `run` and `evalkit.board.sweep.sweep` take (a sweep runs each member with these, one run folder each).

    The fields marked *run only* are refused by a sweep."""

    corpus: Path
    backends: list[BackendSpec]
    sources: Path | None = None
    tasks: list[str] | None = None
    only: list[str] | None = None  # member ids (or task/member)
    out: Path | None = None  # the run (or sweep) folder
    threshold: float | None = None
    workers: int = max(1, os.cpu_count() or 1)  # worker processes: a run's notebooks, a sweep's members
    max_concurrency: int = 8  # backend calls in flight (a sweep: its paid calls, across all members)
    html: bool = True  # render the notebooks' HTML pages and index.html
    notebooks: bool = True  # False: score in-process (no papermill, no HTML) — `--no-notebooks`
    kernels: str = "warm"  # --kernels warm|cold: a notebook worker's one kernel, or one per notebook (evalkit.execution.kernels)
    report: bool = True  # run report.ipynb per task
    force: bool = False  # a sweep re-runs current members too
    record: list[str] = field(default_factory=list)  # run only: NAME=PATH, record that backend's calls to a cassette
    dry_run: bool = False  # run only
    max_usd: float | None = None  # run only
    prices: Path | None = None
    allow_unpriced: bool = False  # --allow-unpriced: a model with no price may run under --max-usd / --dry-run
    judge: BackendSpec | None = None  # run only: --judge SPEC (evalkit.stages.judge), labelled "judge"
    judge_mode: str | None = None  # --judge-mode reference|pairwise|both (default reference)
    judge_cache: Path | None = None  # --judge-cache PATH (default <run folder's parent>/judge-cache.jsonl)
    ontology: Path | None = None  # run only: --ontology PATH (evalkit.scoring.ontology)
    ontology_mode: str | None = None  # --ontology-mode open|strict
    reference: str | None = None  # run only: --reference LABEL, score the other backends against LABEL's records
    board: Path | None = None  # write the scored entries into this scoreboard at the end (--update-scoreboard)
    history: bool = False  # append the outcomes to runs/index.jsonl at the end (the CLI's runs do)
    limit: int | None = None  # --limit N: the first N members of each task, in id order
    sample: int | None = None  # --sample N: N members of each task drawn at random with `seed`
    seed: int | None = None  # --seed S for --sample (default: `stats.SEED`)
    settings: dict[str, Any] = field(default_factory=dict)  # --set KEY=VALUE: overrides of the task's settings
    samples: int = 1  # --samples K: K independent extractions per member × backend (`evalkit.results.samples`)
    strict: bool = False  # run only: --dry-run --strict exits with the first guard's code (default: 0, the plan shown)
    strict_replay: bool = False  # --strict-replay: a replay miss aborts the run (default: `not covered`, the rest scored)
    batch: bool = False  # run only: --batch, provider batch APIs for the uncached calls (evalkit.backends.batch)
    scheduler: str | None = None  # --scheduler local[:N]|tcp://HOST:PORT: Dask runs the work (evalkit.execution.scheduler)
    shared: str | None = None  # set by a sweep under --scheduler: the name of the call limit and budget its members share
    in_sweep: bool = False  # set by a sweep for each member: no lock or resume marker of its own (the sweep's cover
    # it); it reuses the extractions its sweep kept in its folder (`sweep._clear`)
    # A sweep member whose paid calls the sweep's calls job made (`sweep._calls_job`): its answer, failed or not,
    # is this sweep's (a failed call is not made again within the sweep; the next sweep retries it).
    answered: bool = False


def run_options(*, corpus: str | Path | None = None, backends=(), sources: str | Path | None = None, tasks=(),
                only=(), out: str | Path | None = None, workers: int | None = None, update_board: bool = False,
                board: str | Path | None = None, record=(), **given: Any) -> RunOptions:
    """The one way to `RunOptions` from a caller's values, the command line's and `evalkit.run`'s alike (so both
    write the same files): backends parsed, defaults filled in (the bundled corpus, ``$EVALKIT_SOURCES``, every
    core), empty selections as None, the scoreboard to write (`update_board`, default ``<corpus>/scoreboard.json``)
    and the history every run appends to (``runs/index.jsonl``). A live backend without its API key stops here,
    before any member runs (`MissingKey`, exit 2); a dry run shows it among its plan's guards instead."""
    corpus = Path(corpus or DEFAULT_CORPUS)
    specs = [b if isinstance(b, BackendSpec) else BackendSpec.parse(b) for b in backends]
    if not given.get("dry_run"):
        missing_keys(specs)
    if out is not None and (file := next((p for p in (Path(out), *Path(out).parents) if p.is_file()), None)):
        raise UsageError(f"--out {out}: {file} is a file, not a folder: name a run folder (new, or one to add to)")
    opts = RunOptions(corpus=corpus, backends=specs, sources=sources_dir(sources), tasks=list(tasks or ()) or None,
                      only=list(only or ()) or None, out=Path(out) if out is not None else None,
                      board=Path(board or board_path(corpus)) if update_board else None, record=list(record or ()),
                      history=True, **given)
    if workers:
        opts.workers = workers
    return opts


@dataclass
class Outcome:
    """One member × backend at the end of a run."""

    task: str
    member: str
    backend: str
    status: str  # scored | skipped | refused | not_covered | error (evalkit.status)
    score: float | None = None
    passed: bool | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    message: str = ""
    cause: str = ""  # of an error: provider_error, timeout, pipeline_exception, ... (evalkit.status)
    heldout: bool = False  # a held-out member (manifest ``heldout: true``): its figures are reported apart

    @property
    def why(self) -> str:
        """The ↳ line of an outcome that has no score: ``cause: message``."""
        return f"{self.cause}: {self.message}" if self.cause else self.message


@dataclass
class RunResult:
    run_dir: Path
    outcomes: list[Outcome]
    plan: Any = None  # the dry-run plan (evalkit.backends.resolve.Plan), when --dry-run
    reused: int = 0  # extractions a resumed run took from the unfinished run before it
    summary: dict[str, Any] | None = None  # summary.json (`evalkit.results.summary`), once the run has scores
    reference: str | None = None  # --reference: the label whose records were the truth (figures are similarities)
    recorded: Recorded | None = None  # what `record` wrote (history, scoreboard) after the run
    strict: bool = False  # --dry-run --strict: a guard that would abort a real run is the exit code
    sample_errors: int = 0  # --samples K > 1: samples that errored (their members are scored from the others)

    @property
    def exit_code(self) -> int:
        if self.plan is not None:  # a dry run shows the plan; only --strict turns its guards into the exit code
            return self.plan.guards[0].error.exit_code if self.strict and not self.plan.ok else EXIT_OK
        statuses = {o.status for o in self.outcomes}
        if REFUSED in statuses:  # a changed source (4) before an input `validate` rejects too (3)
            refused = {o.cause for o in self.outcomes if o.status == REFUSED}
            return EXIT_INTEGRITY if refused - {INVALID_INPUT} else EXIT_INVALID
        if ERROR in statuses or self.sample_errors:  # whatever the verdicts of the others
            return EXIT_BACKEND
        if NOT_COVERED in statuses and SCORED not in statuses:  # a cassette that covers nothing measures nothing
            return EXIT_CASSETTE
        if any(o.status == SCORED and o.passed is False for o in self.outcomes):
            return EXIT_FAILED
        return EXIT_OK


def default_run_id(labels: list[str]) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{labels_slug(labels)}"


def check_scope(opts: RunOptions) -> None:
    """--limit, --sample and --seed make sense one way only; --set names known settings with valid values."""
    opts.settings = check_overrides(opts.settings)
    if opts.limit is not None and opts.sample is not None:
        raise UsageError("give --limit N or --sample N, not both")
    if opts.seed is not None and opts.sample is None:
        raise UsageError("--seed S goes with --sample N")
    for flag, n in (("--limit", opts.limit), ("--sample", opts.sample), ("--samples", opts.samples)):
        if n is not None and n < 1:
            raise UsageError(f"{flag} {n}: give at least 1")


def scope(task: Task, dirs: list[Path], limit: int | None = None, sample: int | None = None,
          seed: int | None = None) -> list[Path]:
    """A task's member folders within --limit (the first N, in id order) or --sample (N drawn at random with
    `seed`, a stream of its own per task, listed in id order): what `run` and `sweep` both select."""
    dirs = sorted(dirs, key=lambda d: d.name)
    if limit is not None:
        return dirs[:limit]
    if sample is not None and sample < len(dirs):
        import numpy as np  # lazy: numpy is loaded only where it is used (import cost)

        picked = np.random.default_rng(sub_seed(SEED if seed is None else seed, task.id)).choice(
            len(dirs), size=sample, replace=False)
        return [dirs[i] for i in sorted(picked)]
    return dirs


def select_members(tasks: list[Task], only: list[str] | None, limit: int | None = None, sample: int | None = None,
                   seed: int | None = None) -> list[Member]:
    """Load the selected members (only those: a broken sibling must not stop them): --only, then --limit or
    --sample within each task (`scope`)."""
    only = [member_ref(o) for o in only or ()]
    members = [load_member(t, d) for t in tasks for d in scope(t, _named(t, only), limit, sample, seed)]
    if only and not members:
        raise CorpusError(f"no member {', '.join(map(repr, only))} in the selected tasks")
    return members


def _named(task: Task, only: list[str]) -> list[Path]:
    """The task's member folders `only` names (``id`` or ``task/id``), or all of them: looked up by name, not by
    listing the task (a sweep runs each of a 1,000-member task's members on its own)."""
    if not only:
        return task.member_dirs()
    names = {ref.partition("/")[2] if "/" in ref else ref for ref in only
             if "/" not in ref or ref.partition("/")[0] == task.id}
    return sorted(d for d in (task.dir / n for n in names) if (d / "manifest.yaml").is_file())


def gate_members(members: list[Member], sources: Path | None, outcomes: list[Outcome],
                 labels: list[str], documents: dict[str, Document] | None = None,
                 overrides: dict[str, Any] | None = None) -> list[tuple[Member, list[Path]]]:
    """The integrity gate: runs before any backend exists. Returns members cleared to run, their documents read
    into `documents`. A member whose inputs `validate` rejects (`input_problems`: a document over its bound or
    unreadable, a truth breaking the task's schema) is refused with the same message, and the others go on;
    so is one its input mode cannot send (`sources.check_input`: a text file as a PDF), while a scan in the
    ``text`` mode is skipped (no text layer). `overrides`: ``--set``."""
    cleared = []
    for m in members:
        try:
            paths = check_integrity(m, sources, seed=True)
            if m.manifest.truth is not None:
                m.load_truth(sources)
            if problems := input_problems(m, paths, sources):
                raise InvalidCorpus(problems)
            document = read_document(paths)
            check_input(document, m.task.spec.settings.with_overrides(overrides).input, m.key)
            if documents is not None:
                documents[m.key] = document
            cleared.append((m, paths))
        except (LimitExceeded, UnreadableSource, InvalidCorpus) as e:
            why = "; ".join(e.problems) if isinstance(e, InvalidCorpus) else str(e)
            outcomes += [Outcome(m.task.id, m.id, b, REFUSED, message=why, cause=INVALID_INPUT) for b in labels]
        except NoTextLayer as e:
            outcomes += [Outcome(m.task.id, m.id, b, SKIPPED, message=str(e), cause=NO_TEXT_LAYER) for b in labels]
        except SourceMissing as e:
            outcomes += [Outcome(m.task.id, m.id, b, "skipped", message=str(e)) for b in labels]
        except IntegrityError as e:
            outcomes += [Outcome(m.task.id, m.id, b, "refused", message=str(e)) for b in labels]
    return cleared


def command_line(argv: list[str] | None = None) -> str:
    """The command as run.json keeps it (`spec.redacted_command`): a key typed on the command line never reaches an artefact."""
    return command(argv)


@lru_cache(maxsize=1)  # read from package metadata: ~9 ms, once per process (a sweep runs many members in each)
def _versions() -> dict[str, str]:
    out = {"evalkit": __version__, "python": platform.python_version()}
    for pkg in ("papermill", "nbconvert", "pandas", "altair", "vl-convert-python", "anthropic", "openai"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


Progress = Callable[[str, int], Callable[[], Any]]  # progress(phase, total) → tick()
OnOutcome = Callable[["Outcome", int, int], Any]  # on_outcome(outcome, scored so far, total): as each is scored


@dataclass
class _Done:
    """How far a run got, phase by phase: what an interrupt reports."""

    run_dir: Path | None = None
    folders: list[Path] = field(default_factory=list)  # where the run writes (not below: other runs may live there)
    reused: int = 0
    phases: dict[str, list[int]] = field(default_factory=dict)  # phase → [finished, total]

    def track(self, progress: Progress | None) -> Progress:
        """`progress`, counting every tick here too."""
        def start(what: str, total: int) -> Callable[[], Any]:
            self.phases[what] = [0, total]
            tick = progress(what, total) if progress else None

            def step() -> Any:
                self.phases[what][0] += 1
                return tick() if tick else None
            return step
        return start

    def summary(self) -> str:
        parts = [f"{what} {n}/{total}" for what, (n, total) in self.phases.items()]
        if self.reused:
            parts.append(f"{self.reused} extraction(s) reused from the unfinished run")
        return f"{', '.join(parts) or 'nothing'} done; kept in {self.run_dir}"


@dataclass
class Recorded:
    """What a finished run or sweep wrote beyond its folder (`RunOptions.history`, `RunOptions.board`)."""

    history_error: str | None = None  # runs/index.jsonl could not be appended (the run stands)
    board: Path | None = None
    entries: int = 0  # scoreboard entries written
    board_error: EvalkitError | None = None  # the scoreboard could not be written (the run stands; the CLI exits with it)


def record(result: Any, opts: RunOptions) -> Recorded:
    """Append a run's (or sweep's) outcomes to the history and write its scored entries to the scoreboard,
    as ``opts.history`` and ``opts.board`` ask. A history that cannot be written never fails the run."""
    rec = Recorded()
    if opts.history:
        try:
            append_history(result)
            runspage.refresh(result)  # runs/index.html: every run the history records, newest first
        except EvalkitError as e:
            rec.history_error = str(e)
    if opts.board is not None:
        rec.board = Path(opts.board)
        try:
            rec.entries = len(update_scoreboard(result, rec.board, corpus=opts.corpus, sources=opts.sources))
        except EvalkitError as e:
            rec.board_error = e
    return rec


def check_reference(reference: str | None, labels: list[str], board: Path | None) -> None:
    """``--reference LABEL`` names one of the run's backends, beside at least one other, and never writes a
    scoreboard: a similarity to another model is not an accuracy."""
    if reference is None:
        return
    if reference not in labels:
        raise UsageError(f"--reference {reference}: not one of this run's backends ({', '.join(labels)})")
    if len(labels) < 2:
        raise UsageError(f"--reference {reference}: give at least one other --backend to compare with it")
    if board is not None:
        raise UsageError("--reference scores a similarity to another backend, not an accuracy: it never writes "
                         "the scoreboard (drop --update-scoreboard)")


def run(opts: RunOptions, progress: Progress | None = None, on_outcome: OnOutcome | None = None) -> RunResult:
    """Run extraction and scoring for the selected corpus members; see module docstring. Then `record` what
    ``opts`` asks (history, scoreboard); a dry run only plans. `on_outcome(outcome, n, total)` is called as
    soon as each member × backend is scored (n of total)."""
    done = _Done()
    with ExitStack() as held:  # the run folder's lock, once taken
        try:
            result = _run(opts, done.track(progress), held, done, on_outcome)
        except KeyboardInterrupt:  # SIGINT, or SIGTERM (evalkit._util.interrupt): pools are stopped by now
            if done.run_dir is None:
                raise Interrupted("nothing was written") from None
            for folder in {done.run_dir, *done.folders}:
                remove_partials(folder, recursive=False)
            raise Interrupted(done.summary(), done.run_dir) from None
    if result.plan is None:
        result.recorded = record(result, opts)
    return result


def _run(opts: RunOptions, progress: Progress, held: ExitStack, done: _Done,
         on_outcome: OnOutcome | None = None) -> RunResult:
    """The stages in order (see the module docstring); `done` learns how far they got (what an interrupt reports)."""
    from evalkit.backends.resolve import check_guards  # start-up cost: the provider modules (~55 ms)

    plan = _plan(opts)
    if opts.dry_run:
        return RunResult(run_dir=plan.run_dir, outcomes=sorted(plan.gated, key=_order), plan=plan.calls,
                         strict=opts.strict)
    if not plan.cleared:  # nothing passed the gate: construct no backend at all
        return RunResult(run_dir=plan.run_dir, outcomes=sorted(plan.gated, key=_order))
    # corrupt / shared cassettes, replay misses, missing keys (the judge's too): before any call
    check_guards(plan.resolved + ([plan.judge] if plan.judge else []), plan.calls)
    extracted = _extract(plan, opts, progress, held, done)
    judged = _judge(plan, extracted, opts, progress)
    _write_run_json(plan, extracted, judged, opts)
    scored = _score(plan, extracted, opts, progress, on_outcome)
    summary = _render(plan.run_dir, opts)
    return _finish(plan, extracted, judged, scored, summary, opts, done.reused)


# ----------------------------------------------------------------------------- stage 1: plan

@dataclass(frozen=True)
class Plan:
    """What a run will do, decided before anything is written or called (`_plan`)."""

    tasks: list[Task]
    labels: list[str]  # the backends' labels, in --backend order
    run_dir: Path
    ontology: Any  # the `scoring.ontology.Ontology` of --ontology; None: freeform
    resolved: list[Any]  # a `backends.resolve.Resolved` per backend: guards collected, nothing opened
    judge: Any  # the judge's `Resolved`; None without --judge, or when its key is not set (`judge_skipped`)
    judge_mode: str
    judge_skipped: str | None  # why the judge is skipped (a note, not an abort)
    gated: list[Outcome]  # per backend, each member the integrity gate refused or skipped
    documents: dict[str, Document]  # member key → its document, for each cleared member
    cleared: list[tuple[Member, list[Path]]]  # the members the gate let through, with their source files
    sampled: list[list[Any]]  # sampled[i]: sample i's `Request` per cleared member ([0]: as without --samples)
    prices: Any  # the `backends.pricing.PriceTable` of --prices; None: the bundled prices
    calls: Any  # the `backends.resolve.Plan` of every request: what --dry-run shows, and the guards
    uncovered: set[tuple[str, str, int]]  # (label, member key, sample) a replayed cassette has no recording of
    why_uncovered: dict[tuple[str, str, int], str]  # … and why, where the cassette says


def _check_usage(opts: RunOptions) -> tuple[Any, str, list[Task], list[Member], list[str]]:
    """The options that make no sense together, before anything else: (ontology, judge mode, tasks, the selected
    members, the backends' labels)."""

    ontology = load_ontology(opts.ontology, opts.ontology_mode)  # usage errors before anything else
    judge_mode = judging.check_mode(opts.judge_mode, opts.judge)
    if opts.judge is None and opts.judge_cache is not None:
        raise UsageError("--judge-cache needs --judge SPEC")
    check_scope(opts)
    tasks = load_tasks(opts.corpus, opts.tasks)
    members = select_members(tasks, opts.only, opts.limit, opts.sample, opts.seed)
    labels = check_labels(spec.label for spec in opts.backends)
    if opts.judge and judge_mode != "reference" and len(labels) < 2:
        raise UsageError(f"--judge-mode {judge_mode}: pairwise judging needs at least two --backend")
    check_reference(opts.reference, labels, opts.board)
    truthless = sorted(t.id for t in tasks if not t.spec.truth)
    if truthless and opts.reference is None:
        raise UsageError(f"task(s) {', '.join(truthless)} have no truth (truth: false): score them against another "
                         "backend with --reference LABEL")
    return ontology, judge_mode, tasks, members, labels


def _plan(opts: RunOptions) -> Plan:
    """Stage 1: check the options, resolve the backends and the judge, gate the members, render and price every
    request. Reads the corpus, sources, cassettes and environment; writes nothing, calls nothing."""
    from evalkit.backends.pricing import PriceTable  # start-up cost: ~15 ms

    # start-up cost: the provider modules (~55 ms)
    from evalkit.backends.resolve import check_inputs, plan, resolve_backends

    ontology, judge_mode, tasks, members, labels = _check_usage(opts)
    # Resolving reads cassettes and the environment only: no call, no file written.
    resolved = resolve_backends(opts.backends, opts.record)
    run_dir = Path(opts.out or Path("runs") / default_run_id(labels))
    judge_resolved = (judging.resolve_judge(judging.JudgeConfig(opts.judge, judge_mode, opts.judge_cache), run_dir,
                                            resolved) if opts.judge else None)
    judge_skipped = judging.missing_key(judge_resolved)
    if judge_skipped:  # as the source harness: strict figures still count, judged ones stay null
        print(f"evalkit: note: {judge_skipped}", file=sys.stderr)
        judge_resolved = None
    gated: list[Outcome] = []
    documents: dict[str, Document] = {}
    cleared = gate_members(members, opts.sources, gated, labels, documents, opts.settings)
    requests = [render_request(m.task, m, documents[m.key], ontology, m.task.spec.settings.with_overrides(opts.settings))
                for m, _ in cleared]
    check_inputs(resolved, requests, judge_resolved)  # a backend that cannot take the input mode: before any call
    warn_identical_samples(opts.samples, requests)
    sampled = [[replace(r, sample=i) for r in requests] for i in range(opts.samples)]  # [0] is `requests`
    prices = PriceTable(path=opts.prices) if opts.prices else None
    budgeted = (opts.dry_run or opts.max_usd is not None) and not opts.allow_unpriced
    calls = plan(resolved, [r for reqs in sampled for r in reqs], prices, require_prices=budgeted,
                 judge=judge_resolved, strict_replay=opts.strict_replay, batch=opts.batch)
    # (label, member key, sample) a replayed cassette has no recording of: each sample's own plan says which
    uncovered, why_uncovered = set(), {}
    for i, reqs in enumerate(sampled):
        mine = calls if opts.samples == 1 else plan(resolved, reqs, prices, strict_replay=opts.strict_replay)
        uncovered |= {(b.label, key, i) for b in mine.backends for key in b.not_covered}
        why_uncovered |= {(b.label, key, i): why for b in mine.backends for key, why in b.not_covered_why.items()}
    return Plan(tasks, labels, run_dir, ontology, resolved, judge_resolved, judge_mode, judge_skipped, gated,
                documents, cleared, sampled, prices, calls, uncovered, why_uncovered)


# ----------------------------------------------------------------------------- stage 2: extract

@dataclass(frozen=True)
class Extracted:
    """What the extract stage leaves: every extraction.json is on disk (`_extract`)."""

    backends: list[Any]  # the opened backends, one per `Plan.resolved`
    ctx: Any  # the `backends.BackendContext` they were opened with (a python: judge reads its documents)
    homes: list[Home]  # sample 0 of each member × backend extracted or reused (as without --samples)
    extra: list[Home]  # samples 1..K-1 under --samples K
    not_covered: list[Outcome]  # member × backends a replayed cassette has no recording of
    spent_usd: float  # what the extraction calls cost (the judge gets what is left of --max-usd)
    cluster: Any  # the open `execution.scheduler.Cluster` of --scheduler (the notebooks run there), or None


def _extract(plan: Plan, opts: RunOptions, progress: Progress, held: ExitStack, done: _Done) -> Extracted:
    """Stage 2: hold the run folder (marked unfinished: a run into it after a stop resumes), open the backends,
    make every call not already answered in one pool, each extraction.json written as its call completes."""
    from evalkit.backends.resolve import open_backends  # start-up cost: the provider modules (~55 ms)

    cluster = None
    if opts.scheduler and opts.notebooks:  # the notebooks as Dask tasks: the scheduler reached before any call
        from evalkit.execution.scheduler import connect  # optional dependency: dask

        cluster = held.enter_context(connect(opts.scheduler))
    run_dir = plan.run_dir
    resuming = opts.in_sweep  # a sweep member reuses the paid answers its sweep kept (`sweep._clear`)
    if not opts.in_sweep:  # a sweep holds its members' folders
        held.enter_context(hold(run_dir))
        resuming = runfolder.is_unfinished(run_dir)
        runfolder.mark_unfinished(run_dir, datetime.now(UTC).isoformat(timespec="seconds"))
    done.run_dir = run_dir
    ctx = backend_context([m for m, _ in plan.cleared], opts.sources, plan.documents)
    backends = open_backends(plan.resolved, ctx, plan.prices, check=False)
    jobs, home_of, homes, extra, not_covered = _jobs(plan, backends, resuming, opts.answered, done)
    done.folders = [run_dir / t.id for t in plan.tasks] + [h.dir for h in homes + extra]
    for h in homes:  # verdicts of an earlier run in this folder never carry over; nor do samples beyond K
        runfolder.clear_judgments(h.dir)
        runfolder.clear_samples(h.dir, opts.samples)
    for t in plan.tasks:
        runfolder.clear_pairwise(run_dir, t.id)

    def keep(job: Any, completion: Any) -> None:  # write each extraction as soon as it exists
        home = home_of[id(job)]
        runfolder.write_extraction(home.dir, extraction_record(home.member, job.backend, job.request, completion,
                                                               plan.ontology))

    if opts.batch and jobs:  # the uncached calls as provider batches; the pool then serves (and counts) their answers
        jobs, home_of = _batched(jobs, home_of, run_dir, opts.max_usd)
    tick = progress("extracting", len(jobs)) if progress else None
    limits = None
    if opts.shared:  # a sweep's member on a Dask worker: one call limit and one budget across the sweep
        from evalkit.execution.scheduler import shared_limits  # optional dependency: dask

        limits = shared_limits(opts.shared, opts.max_concurrency, opts.max_usd)
    try:
        pool = run_pool(jobs, opts.max_concurrency, on_done=keep, progress=(lambda *a: tick()) if tick else None,
                        max_usd=opts.max_usd, ledger=limits and limits.ledger, lease=limits and limits.lease)
    except CassetteError as e:
        # A miss stops the run at once; every extraction finished so far is already on disk.
        raise type(e)(f"{e}\n(extractions finished before the miss are kept in {run_dir})") from None
    return Extracted(backends, ctx, homes, extra, not_covered, pool.spent_usd, cluster)


def _jobs(plan: Plan, backends: list[Any], resuming: bool, answered: bool,
          done: _Done) -> tuple[list[Any], dict[int, Home], list[Home], list[Home], list[Outcome]]:
    """The calls to make: (jobs, each job's home by id, the homes of sample 0, of samples 1..K-1, the member ×
    backends not covered). A resumed run reuses an answer on disk (`done.reused` counts them); a sample a replayed
    cassette has no recording of gets an extraction.json saying so (`not_covered_sample`)."""

    jobs, home_of, homes, extra, not_covered = [], {}, [], [], []
    for (m, _), *requests_of in zip(plan.cleared, *plan.sampled):
        for b, r in zip(backends, plan.resolved):
            if (b.label, m.key, 0) in plan.uncovered:  # the cassette has no recording of it: not scored, not an error
                why = plan.why_uncovered.get((b.label, m.key, 0))
                not_covered.append(Outcome(m.task.id, m.id, b.label, NOT_COVERED, cause=NOT_COVERED,
                                           message=f"no recording of this request in {r.cassette}"
                                           + (f": {why}" if why else "")))
                continue
            for i, request in enumerate(requests_of):
                home = Home.of(plan.run_dir, m, b.label, i)
                if i and (b.label, m.key, i) in plan.uncovered:  # this sample unrecorded: an error of that sample only
                    runfolder.clear_score(home.dir)
                    runfolder.write_extraction(home.dir, not_covered_sample(m, b, request, r.cassette))
                    extra.append(home)
                    continue
                (extra if i else homes).append(home)
                if resuming and _reusable(home.dir, request, b.spec, failed_too=answered):
                    done.reused += 1
                else:
                    jobs.append(Job(b, request))
                    home_of[id(jobs[-1])] = home
    return jobs, home_of, homes, extra, not_covered


def _batched(jobs: list[Any], home_of: dict[int, Home], run_dir: Path,
             max_usd: float | None) -> tuple[list[Any], dict[int, Home]]:
    """--batch: the jobs' uncached calls sent as provider batches first (their state kept in the run folder); the
    jobs returned are served from their answers."""
    from evalkit.backends.batch import prefill  # start-up cost (~80 ms): only --batch sends batches
    from evalkit.execution.pool import run_async  # beside prefill: only --batch

    wrapped = run_async(prefill([(j.backend, j.request) for j in jobs], runfolder.read_batches(run_dir).by_label,
                                lambda state: runfolder.write_batches(run_dir, state), max_usd))
    batched = [Job(wrapped.get(id(j.backend), j.backend), j.request) for j in jobs]
    return batched, {id(new): home_of[id(old)] for old, new in zip(jobs, batched)}


# ----------------------------------------------------------------------------- between: judge, run.json

@dataclass(frozen=True)
class Judged:
    """What the judge phase (`evalkit.stages.judge`) leaves beside its files."""

    info: dict[str, Any]  # run.json's "judge": spec, model, mode, cache and the call counts
    messages: list[str]  # its notes and warnings, printed at the end of the run


def _judge(plan: Plan, extracted: Extracted, opts: RunOptions, progress: Progress) -> Judged | None:
    """With --judge (and its key): the judge over the extractions, between extract and score (its verdicts are
    what the scorers read). None without a judge."""
    if plan.judge is None:
        return None
    from evalkit.backends.resolve import open_backends  # start-up cost: the provider modules (~55 ms)

    # A python: judge gets the document and the rendered judge prompts (not the task's extraction prompts).
    judge_backend = open_backends([plan.judge], BackendContext(documents=extracted.ctx.documents), plan.prices,
                                  check=False)[0]
    left = None if opts.max_usd is None else max(0.0, opts.max_usd - extracted.spent_usd)
    phase = judging.judge_phase(judging.JudgeRun(
        run_dir=plan.run_dir, homes=extracted.homes, documents=plan.documents, backend=judge_backend,
        mode=plan.judge_mode, labels=plan.labels, sources=opts.sources, threshold=opts.threshold,
        max_concurrency=opts.max_concurrency, max_usd=left, progress=progress, cache=plan.judge.cassette,
        reference=opts.reference))
    return Judged({"spec": judge_backend.spec, "model": judge_backend.model, "mode": plan.judge_mode,
                   "cache": str(plan.judge.cassette) if plan.judge.cassette else None,
                   "requests": phase.requests, "calls": phase.calls, "replayed": phase.replayed}, phase.messages)


def _write_run_json(plan: Plan, extracted: Extracted, judged: Judged | None, opts: RunOptions) -> None:
    """run.json: the parameters, versions and command; each backend (and its cassette's sha256); the members run
    and those left out (gated, not covered), the ontology, the judge, --reference."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    cleared, outcomes, uncovered = plan.cleared, plan.gated + extracted.not_covered, plan.uncovered
    runfolder.write_run_json(plan.run_dir, {
        "evalkit_version": __version__,
        "versions": _versions(),
        "started": started,
        "parameters": {"tasks": [t.id for t in plan.tasks], "only": opts.only, "threshold": opts.threshold,
                       "max_concurrency": opts.max_concurrency, "max_usd": opts.max_usd,
                       "limit": opts.limit, "sample": opts.sample,
                       "seed": opts.seed if opts.sample is None or opts.seed is not None else SEED,
                       "settings": dict(sorted(opts.settings.items())),
                       **({"samples": opts.samples} if opts.samples > 1 else {}),
                       "corpus": str(opts.corpus), "sources": str(opts.sources) if opts.sources else None},
        "backends": [{"label": b.label, "spec": b.spec, "model": b.model, "started": started,
                      **({"cassette": str(r.cassette), "cassette_sha256": sha256_file(r.cassette)}
                         if r.cassette and Path(r.cassette).is_file() else {})}
                     for b, r in zip(extracted.backends, plan.resolved)],
        "members": [m.key for m, _ in cleared],
        "command": command_line(),
        "skipped": [{"member": f"{o.task}/{o.member}", "status": o.status,
                     "reason": o.message.removeprefix(f"{o.task}/{o.member}: ").removeprefix(f"{o.status}: ")}
                    for o in {f"{o.task}/{o.member}": o for o in outcomes}.values()],
        **({"heldout": [m.key for m, _ in cleared if m.manifest.heldout]}
           if any(m.manifest.heldout for m, _ in cleared) else {}),
        **({"not_covered": sorted(f"{key} [{label}]" + (f" sample {i}" if i else "") for label, key, i in uncovered)}
           if uncovered else {}),
        "ontology_mode": plan.ontology.mode if plan.ontology else "freeform",
        **({"ontology": plan.ontology.to_json()} if plan.ontology else {}),
        **({"judge": judged.info} if judged else {}),
        **({"reference": opts.reference} if opts.reference else {}),
        **({"judge": {"spec": opts.judge.redacted().spec, "skipped": plan.judge_skipped}}
           if plan.judge_skipped else {}),
    })


# ----------------------------------------------------------------------------- stage 3: score

@dataclass(frozen=True)
class Scored:
    """What the score stage leaves: a score.json per member × backend (`_score`)."""

    outcomes: list[Outcome]  # one per member × backend scored (not --reference's own), in the order they settled


def _score(plan: Plan, extracted: Extracted, opts: RunOptions, progress: Progress,
           on_outcome: OnOutcome | None) -> Scored:
    """Stage 3: score.json per member × backend, by its notebooks (then report.ipynb per task) or in this process;
    `on_outcome` hears of each as it settles."""
    # --reference: the reference's own records are the truth, not scored (an earlier score of them is cleared)
    to_score = [h for h in extracted.homes if h.label != opts.reference]
    for h in extracted.homes:
        if h.label == opts.reference:
            runfolder.clear_score(h.dir)
    scored: list[Outcome] = []
    for h in extracted.extra:  # samples 1..K-1: scored here, before the notebooks (the member page and report read them)
        if h.label != opts.reference:
            score_home(h.member, h.dir, opts.sources, opts.threshold, plan.documents[h.member.key], opts.reference)

    def settled(h: Home) -> None:  # a member × backend has its score.json: say so at once
        scored.append(_outcome(h, runfolder.read_score(h.dir), opts.samples))
        if on_outcome:
            on_outcome(scored[-1], len(scored), len(to_score))

    if opts.notebooks:
        _score_in_notebooks(extracted.homes, plan.tasks, plan.run_dir, opts, progress, settled, extracted.cluster)
    else:  # what score.ipynb does, in this process
        for h in to_score:
            score_home(h.member, h.dir, opts.sources, opts.threshold, plan.documents[h.member.key], opts.reference)
            settled(h)
    return Scored(scored)


# ----------------------------------------------------------------------------- stage 4: render; then finish

def _render(run_dir: Path, opts: RunOptions) -> dict[str, Any]:
    """Stage 4: summary.json (before the pages: the index reads it), then the HTML pages and index.html (with
    notebooks and --html). Returns the summary."""
    summary = write_summary(run_dir)
    if opts.notebooks and opts.html:
        from evalkit.report.render import render_run  # start-up cost: the page renderers, only with --html

        render_run(run_dir)
    return summary


def _finish(plan: Plan, extracted: Extracted, judged: Judged | None, scored: Scored, summary: dict[str, Any],
            opts: RunOptions, reused: int) -> RunResult:
    """The judge's notes printed, the run marked finished (its batches' state dropped); the `RunResult`. Two
    backends replaying one recording are refused here: the run is kept, its figures are not two measurements."""
    from evalkit.backends.resolve import duplicate_recordings  # start-up cost: the provider modules (~55 ms)

    outcomes = plan.gated + extracted.not_covered + scored.outcomes
    if judged is not None:
        judging.print_messages(judged.messages)
    runfolder.clear_batches(plan.run_dir)
    if not opts.in_sweep:
        runfolder.mark_finished(plan.run_dir)
    twins = duplicate_recordings(plan.resolved)
    if twins:  # the run is kept (and finished); its recordings are not two measurements
        raise CassetteError(f"{twins} (the run is kept in {plan.run_dir})")
    sample_errors = sum(runfolder.read_score(h.dir).failure is not None
                        for h in extracted.homes + extracted.extra if opts.samples > 1 and h.label != opts.reference)
    return RunResult(run_dir=plan.run_dir, outcomes=sorted(outcomes, key=_order), reused=reused,
                     reference=opts.reference, summary=summary, sample_errors=sample_errors)


def _reusable(home: Path, request: Any, spec: str, failed_too: bool = False) -> bool:
    """An extraction.json already on disk that answers this request with this backend and did not fail
    (`failed_too`: or did, when this sweep's calls job made that call)."""
    try:
        extraction = runfolder.read_extraction(home) if (home / runfolder.EXTRACTION).is_file() else None
    except CorpusError:
        return False
    return (extraction is not None and is_current(extraction, request, spec)
            and (failed_too or extraction.failure is None))


def warn_identical_samples(k: int, requests: list[Any]) -> None:
    """K > 1 samples at temperature 0 will likely be K copies of one answer: say so (once), and go on."""
    if k > 1 and any(r.temperature == 0 for r in requests):
        print(f"evalkit: warning: --samples {k} at temperature 0: the samples will likely be identical "
              "(give --set temperature=T, T > 0, for independent samples)", file=sys.stderr)


def not_covered_sample(member: Member, backend: Any, request: Any, cassette: Any) -> dict[str, Any]:
    """extraction.json of a sample the replayed cassette has no recording of: an error of that sample (its
    member × backend is scored from the others), never a number."""
    completion = Completion(record=None, parse="error", calls=0, model=getattr(backend, "model", ""),
                            error=f"{NOT_COVERED}: no recording of sample {request.sample} of this request in {cassette}")
    data = extraction_record(member, backend, request, completion)
    return {**data, "status": ERROR, "cause": NOT_COVERED, "message": completion.error}


def _order(o: Outcome) -> tuple:
    return (o.task, o.member, o.backend)


def _outcome(home: Home, score: ScoreRecord, samples: int = 1) -> Outcome:
    """The outcome score.json records; under --samples K > 1, its samples' (`samples.headline`)."""
    m = home.member
    if samples > 1:
        score = headline(runfolder.read_sample_scores(home.dir, score))
    failed = score.failure
    if failed is not None:
        return Outcome(m.task.id, m.id, home.label, ERROR, message=failed.message, cause=failed.cause,
                       heldout=m.manifest.heldout)
    notes = list(score.notes)
    if score.run.error:  # an answer that came with an error (malformed): scored, noted
        notes.insert(0, f"backend error: {score.run.error}")
    return Outcome(m.task.id, m.id, home.label, SCORED, score=score.score, passed=score.passed,
                   metrics=score.metrics, notes=notes, heldout=m.manifest.heldout)


def _score_in_notebooks(homes: list[Home], tasks: list[Task], run_dir: Path, opts: RunOptions, progress,
                        settled: Callable[[Home], Any] = lambda h: None, cluster: Any = None) -> None:
    """extract.ipynb + score.ipynb per member × backend (score.ipynb writes score.json: `pipeline.score_home`),
    then report.ipynb per task: one pool of worker processes. A member × backend whose notebook failed
    gets a score.json that says so: the index, scoreboard and history read the same status. `settled(home)`
    is called as soon as a member × backend's score.json is final (its score notebook has finished). `cluster`:
    an open `evalkit.execution.scheduler.Cluster` to run them on instead of the local pool."""
    jobs, per_home, per_task = [], {}, {}
    for h in homes:
        # the backend as its extraction.json records it (secrets redacted): what the notebooks get
        spec = BackendSpec.parse(str(runfolder.read_extraction(h.dir).backend.spec), label=h.label)
        pair = plan_member(run_dir, h.member.task.id, h.member.id, spec, opts.corpus, opts.sources, opts.threshold,
                           reference=opts.reference)
        per_home[h.dir] = pair
        per_task.setdefault(h.member.task.id, []).extend(pair)
        jobs += pair
    if opts.report:
        jobs += [plan_report(run_dir, t.id, after=per_task[t.id]) for t in tasks if t.id in per_task]
    tick = progress("notebooks", len(jobs)) if progress else None
    by_output: dict[Path, Any] = {}
    last_of = {pair[-1].output: h for h in homes for pair in [per_home[h.dir]]}  # its score notebook
    done: set[Path] = set()

    def finish(h: Home) -> None:
        done.add(h.dir)
        if h.label == opts.reference:
            return  # the truth of the others: extracted, never scored
        failed = [by_output[j.output] for j in per_home[h.dir] if j.output in by_output and not by_output[j.output].ok]
        if failed or not (h.dir / runfolder.SCORE).exists():
            why = failed[0].error if failed else f"{runfolder.SCORE} was not written"
            runfolder.write_score(h.dir, h.member.key, runfolder.read_extraction(h.dir), Failed(NOTEBOOK_FAILED, why))
        settled(h)

    def on_done(j, r) -> None:
        by_output[j.output] = r
        if tick:
            tick()
        if j.output in last_of:
            finish(last_of[j.output])

    results = execute(jobs, workers=opts.workers, on_done=on_done, kernels=opts.kernels, scheduler=cluster)
    by_output.update({j.output: r for j, r in zip(jobs, results)})
    for h in homes:
        if h.dir not in done:
            finish(h)
    for j, r in zip(jobs, results):
        if j.output.name == runfolder.REPORT and not r.ok:
            print(f"evalkit: report notebook {j.output} failed: {r.error}", file=sys.stderr)
