"""`evalkit sweep`: every member of every selected task, each in a worker process of its own.

A sweep folder (`evalkit.results.runfolder`)::

    <sweep>/sweep.json                                   parameters; per member: status, outcomes, currency keys
    <sweep>/members/<task>/<member>/                     a complete run folder of that one member:
        run.json, <task>/<member>/<backend>/{extraction.json, score.json, extract.ipynb, score.ipynb, …}

Each member runs through the runner (`evalkit.stages.runner.run`, with the sweep's `RunOptions`) in a worker
process (`evalkit.execution.workers`), N at a time (default: the CPU count); the worker executes the member's
notebooks itself, so its kernels are its own children. The members' paid model calls are made first, in
one worker's async pool (``--max-concurrency`` in flight, however many workers: `_calls_job`), each
answer written to its member's folder, which the member's run then reuses: a member's worker only
scores. A member that fails — refused by the integrity gate, a backend error, a crash, even its worker
process dying — is recorded and the others carry on; the summary lists every failure and the exit code says what kind.

``--no-notebooks`` runs the same pipeline without papermill (integrity gate → backends →
extraction.json → `pipeline.score_home` → score.json, no .ipynb/.html): the same files the
scoreboard, band and check read, in a fraction of the time.

**Current** (skipped on a re-run, unless ``--force``): a member whose previous outcome in this
sweep folder was scored for every backend (an ``error``, `evalkit.status`, is never current: the
next sweep retries it) and whose *currency key* is unchanged for every
backend. The key holds: the request sha256 (prompt, schema, settings and the source text), the
backend label and spec (secrets redacted) plus a fingerprint of any local file or folder the spec
names (a cassette or predictions dir), the truth file's sha256, the task.yaml sha256 (scorer options,
threshold), the run's ``--threshold`` and ``--set`` overrides, the engine (notebooks or not) and the evalkit version. A member
whose source fails its integrity check is never current: it is re-run, and refused, with no model call.

A sweep holds its folder (`runfolder.hold`): a second sweep into it is refused while the first
lives. SIGINT/SIGTERM stop the member workers (and their notebook workers and kernels) at once;
sweep.json keeps every member that finished, so the same command finishes the rest (after a SIGKILL, all but
those of the last `SAVE_EVERY_S` seconds, which it runs again: the others are in sweep.json's sidecar,
`runfolder.SWEEP_LOG`, appended as members finish). A SIGKILLed sweep's workers leave by themselves
within about two seconds, kernels included (`interrupt.watch_parent`), once a call in flight has recorded its
answer; a member run again reuses each paid answer (a live model's) its folder holds for the same request and
backend spec (`_clear`; under ``--force`` only in members sweep.json has no record of), so none is paid twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import os
import shutil
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit._util.interrupt import Interrupted, finishing, signals_blocked
from evalkit._util.jsonio import remove_partials, unsynced
from evalkit._util.paths import member_ref
from evalkit._util.typed import Bool, Int, Num, Record, Str, check_version
from evalkit.backends import BackendSpec, check_labels, labels_slug
from evalkit.backends.cassette import env_cassette
from evalkit.backends.predictions import PROVIDER as PREDICTIONS
from evalkit.backends.predictions import prediction_file
from evalkit.backends.pricing import PriceTable
from evalkit.backends.providers import provider
from evalkit.corpus.sources import check_integrity, read_document, sha256_file
from evalkit.corpus.tasks import load_tasks
from evalkit.errors import (
    EXIT_BACKEND,
    EXIT_CASSETTE,
    EXIT_INTEGRITY,
    EXIT_OK,
    CorpusError,
    Escape,
    EvalkitError,
    UsageError,
    WorkerDied,
)
from evalkit.execution.pool import Job, run_pool
from evalkit.execution.workers import run_all
from evalkit.results import runfolder
from evalkit.results.runfolder import Home
from evalkit.results.scoreboard import truth_sha256
from evalkit.results.summary import write_sweep_summary
from evalkit.scoring.stats import SEED
from evalkit.stages.pipeline import backend_context, extraction_record, render_request, request_sha
from evalkit.stages.runner import Outcome, RunOptions, _reusable, check_scope, record, run, scope
from evalkit.status import ERROR, NOT_COVERED, REFUSED, SCORED

__all__ = ["MemberResult", "SweepResult", "sweep", "currency_keys", "default_sweep_dir", "SweepFile", "SweepMember",
           "SweepOutcome", "read_sweep"]

SCHEMA_VERSION = 1
# Finished members are appended to sweep.json's sidecar (`runfolder.SWEEP_LOG`) at most this often (one sync
# each time, not one a member), and sweep.json is written whole only at the start and the end of a sweep, or
# when it is stopped: rewriting it as members finish was quadratic in the members (12.9 MB at 10,000).
SAVE_EVERY_S = 2.0


# --------------------------------------------------------------------------- currency


def _sha_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fingerprint(path: Path) -> str | None:
    """sha256 of a file; for a folder, of its files' names, sizes and mtimes (cheap, still catches edits)."""
    if path.is_file():
        return sha256_file(path)
    if path.is_dir():
        parts = []
        for p in sorted(path.rglob("*")):
            if p.is_file():
                st = p.stat()
                parts.append(f"{p.relative_to(path).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}")
        return _sha_bytes("\n".join(parts).encode("utf-8"))
    return None


def _stat_of(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


class Fingerprints:
    """A sweep's backend inputs, each fingerprinted once per sweep, not once per member: a file or folder
    by path, memoized; a file's sha256 is also kept across sweeps (sweep.json's ``fingerprints``) and
    reused while its (size, mtime_ns, inode) stay the same, so a 600 MB cassette is hashed once, not on
    every sweep. A ``predictions:`` folder gives each member its own file's size and mtime instead: one
    stat a member, whatever else the folder holds."""

    def __init__(self, known: dict[str, Any] | None = None):
        self.known = known if isinstance(known, dict) else {}
        self.used: dict[str, Any] = {}  # what the next sweep.json keeps: the files this sweep fingerprinted
        self._memo: dict[str, str | None] = {}

    def path(self, path: Path) -> str | None:
        key = os.path.abspath(path)
        if key not in self._memo:
            self._memo[key] = self._file(key, path) if path.is_file() else _fingerprint(path)
        return self._memo[key]

    def _file(self, key: str, path: Path) -> str | None:
        stat, prev = _stat_of(path), self.known.get(key)
        if isinstance(prev, dict) and prev.get("stat") == stat and isinstance(prev.get("sha256"), str):
            sha = prev["sha256"]
        else:
            sha = _fingerprint(path)
        if sha is not None:
            self.used[key] = {"stat": stat, "sha256": sha}
        return sha

    def backend_inputs(self, spec: BackendSpec, member_id: str) -> dict[str, str]:
        out = {}
        for k, path in spec.files().items():
            if spec.kind == PREDICTIONS.kind and path.is_dir():  # the one file this member's answer is read from
                stat = _stat_of(prediction_file(path, member_id))
                fp = "absent" if stat is None else f"{stat[0]}:{stat[1]}"
            else:
                fp = self.path(path)
            if fp:
                out[k] = fp
        return out


def _member_inputs(member: Any, backends: list[BackendSpec], sources: Path | None, threshold: float | None,
                   notebooks: bool, settings: dict[str, Any] | None, prints: Fingerprints, samples: int = 1
                   ) -> tuple[Any, dict[str, dict[str, Any]]] | None:
    """The member's request and its currency keys (see `currency_keys`); None if they cannot be known."""
    try:
        paths = check_integrity(member, sources)
        request = render_request(member.task, member, read_document(paths), None,
                                 member.task.spec.settings.with_overrides(settings))
    except Escape:
        raise
    except EvalkitError:
        return None
    common = {
        "request_sha256": request_sha(request),
        "truth_sha256": truth_sha256(member, sources),
        "task_sha256": sha256_file(member.task.dir / "task.yaml"),
        "threshold": threshold,
        "settings": dict(sorted((settings or {}).items())),  # --set (the request sha covers what is sent, too)
        "notebooks": notebooks,
        "evalkit_version": __version__,
        **({"samples": samples} if samples > 1 else {}),  # --samples K (K = 1: the key as before samples)
    }
    return request, {spec.label: {**common, "backend": str(spec.redacted()),
                                  "backend_inputs": prints.backend_inputs(spec, member.id)}
                     for spec in backends}


def currency_keys(member: Any, backends: list[BackendSpec], sources: Path | None, threshold: float | None,
                  notebooks: bool, settings: dict[str, Any] | None = None,
                  prints: Fingerprints | None = None, samples: int = 1) -> dict[str, dict[str, Any]] | None:
    """Per backend label, what that member × backend's outputs depend on (see module docstring);
    None if it cannot be known. The member's own inputs are read and hashed once for all backends; the
    backends' own inputs once per `prints` (one a sweep)."""
    got = _member_inputs(member, backends, sources, threshold, notebooks, settings, prints or Fingerprints(), samples)
    return None if got is None else got[1]


# --------------------------------------------------------------------------- the sweep


@dataclass
class MemberResult:
    task: str
    member: str
    status: str  # ran | current | failed
    outcomes: list[Outcome] = field(default_factory=list)
    message: str = ""
    run_dir: str = ""  # relative to the sweep folder
    keys: dict[str, Any] | None = None
    exit_code: int = EXIT_OK  # of a failed member: its error's exit code (5 for a crash, 6 for a cassette miss…)

    @property
    def key(self) -> str:
        return f"{self.task}/{self.member}"

    @property
    def failures(self) -> list[str]:
        """One line per problem: a crash, or a refused / errored backend outcome."""
        out = [f"{self.key}: {self.message}"] if self.status == "failed" and self.message else []
        out += [f"{self.key} [{o.backend}]: {o.status}: {o.why}"
                for o in self.outcomes if o.status in (REFUSED, ERROR)]
        return out


@dataclass
class SweepResult:
    """Quacks like `runner.RunResult` (run_dir, outcomes): the scoreboard and history take either."""

    run_dir: Path
    members: list[MemberResult]
    recorded: Any = None  # runner.Recorded: what the sweep wrote to the history and scoreboard
    summary: dict[str, Any] | None = None  # its summary.json (`evalkit.results.summary.write_sweep_summary`)

    @property
    def outcomes(self) -> list[Outcome]:
        return [o for m in self.members for o in m.outcomes]

    @property
    def failures(self) -> list[str]:
        return [line for m in self.members for line in m.failures]

    @property
    def exit_code(self) -> int:
        """0: every member ran or was current (verdicts are results, not failures; skipped and not covered
        members are listed); 4: a member was refused by the integrity gate; 6: a corrupt cassette, a miss
        under --strict-replay, or a cassette that covered no member at all; 5: a member failed otherwise
        (backend, notebook, crash)."""
        statuses = {o.status for o in self.outcomes}
        if REFUSED in statuses:
            return EXIT_INTEGRITY
        codes = {m.exit_code for m in self.members if m.status == "failed"}
        if EXIT_CASSETTE in codes:
            return EXIT_CASSETTE
        if ERROR in statuses or codes:
            return EXIT_BACKEND
        if NOT_COVERED in statuses and SCORED not in statuses:
            return EXIT_CASSETTE
        return EXIT_OK


def default_sweep_dir(labels: list[str]) -> Path:
    """``runs/sweep-<labels>``: a stable name, so a re-run finds what is current."""
    return Path("runs") / f"sweep-{labels_slug(labels)}"


def _outcome(d: dict[str, Any]) -> Outcome:
    return Outcome(**{k: d.get(k, v) for k, v in asdict(Outcome("", "", "", "")).items()})


def _paid(spec: BackendSpec) -> bool:
    """Whether a backend's answers cost a model call that nothing local can make again (a cassette, a predictions
    folder or the fake backend answer again for free, and may have changed since)."""
    try:
        prov = provider(spec.kind)
    except EvalkitError:
        return False
    return prov.live and prov.metered and not spec.files()


def _clear(opts: RunOptions, reuse: bool) -> None:
    """Empty a member's run folder of an earlier run's files, but (with `reuse`) each paid backend's
    extraction.json: the member's run reuses one that answers the same request with the same spec
    (`runner._reusable`), so an answer a stopped sweep received is never paid for twice."""
    out = Path(opts.out)
    if not out.exists():
        return
    keep = {runfolder.sample_dir(runfolder.member_dir(out, opts.tasks[0], opts.only[0], spec.label), i)
            / runfolder.EXTRACTION for spec in opts.backends if reuse and _paid(spec) for i in range(opts.samples)}
    if not any(p.is_file() for p in keep):
        shutil.rmtree(out)
        return
    for p in sorted(out.rglob("*"), key=lambda p: len(p.parts), reverse=True):  # a folder after what it holds
        if p.is_dir() and not p.is_symlink():
            if not any(p.iterdir()):
                p.rmdir()
        elif p not in keep:
            p.unlink()


def _prefetches(opts: RunOptions) -> bool:
    """Whether the sweep makes its members' paid calls in one pool first (`_calls_job`): not on Dask,
    where the members share a call limit and budget across machines instead (`evalkit.execution.scheduler`)."""
    return not opts.scheduler and any(_paid(spec) for spec in opts.backends)


def _calls_job(opts: RunOptions, members: list[RunOptions]) -> dict[str, Any]:
    """Worker: make the `members`' paid calls in one async pool, ``--max-concurrency`` in flight, each answer
    written to its member's folder as the extraction.json its run then reuses (`runner._reusable`). In a
    worker, not the sweep's process, so that a SIGKILLed sweep's calls in flight still record their answers
    (`interrupt.finishing`) and are never paid twice; an orphan starts no new call. Never raises: a member
    with no answer here (a key not set) makes its own call, and fails alone; a failed call is that member's
    error for this sweep (`RunOptions.answered`), retried by the next."""
    # lazy: read per call: tests patch resolve.open_backends
    from evalkit.backends.resolve import check_guards, open_backends, resolve_backends

    try:
        resolved = [r for r in resolve_backends([s for s in opts.backends if _paid(s)]) if r.mode == "live"]
        check_guards(resolved)
        tasks = {t.id: t for t in load_tasks(opts.corpus, sorted({o.tasks[0] for o in members}))}
        asked = []
        for o in members:
            member = tasks[o.tasks[0]].member(o.only[0], check_truth=False)
            try:
                document = read_document(check_integrity(member, opts.sources))
            except EvalkitError:
                continue  # its own run refuses it
            asked.append((o, member, render_request(member.task, member, document, None,
                                                    member.task.spec.settings.with_overrides(opts.settings))))
        backends = open_backends(resolved, backend_context([m for _, m, _ in asked], opts.sources),
                                 PriceTable(path=opts.prices) if opts.prices else None, check=False)
    except Escape:
        raise
    except EvalkitError as e:
        return {"crash": str(e)}
    jobs, homes = [], {}
    wrapped = [_UnlessOrphaned(b) for b in backends]
    for o, member, request in asked:
        for b in wrapped:
            home = Home.of(Path(o.out), member, b.label)
            if not _reusable(home.dir, request, b.spec):
                jobs.append(Job(b, request))
                homes[id(jobs[-1])] = home

    def write(job: Any, completion: Any) -> None:
        home = homes[id(job)]
        runfolder.write_extraction(home.dir, extraction_record(home.member, job.backend.inner, job.request,
                                                               completion))

    # Each answer is written by one writer thread, not in the event loop: a file written there held up every
    # call in flight (at 0.02 s a call, the sweep's call phase was ~1.2× the SDK's alone). A call written or
    # being written is no longer in flight; a write not yet done keeps an orphan waiting as a call does.
    writes: list[Future] = []

    def keep(job: Any, completion: Any) -> None:
        writes.append(writer.submit(contextvars.copy_context().run, write, job, completion))  # unsynced, too
        if id(job.request) in job.backend.sent:
            job.backend.sent.discard(id(job.request))
            _UnlessOrphaned.in_flight -= 1

    with unsynced(), ThreadPoolExecutor(1) as writer, \
            finishing(lambda: _UnlessOrphaned.in_flight > 0 or not all(w.done() for w in writes)):
        try:
            run_pool(jobs, opts.max_concurrency, on_done=keep)
            for w in writes:
                w.result()  # an answer that could not be written (a full disk): the sweep's crash, as before
        except EvalkitError as e:  # what was answered is on disk; the members call the rest themselves
            return {"crash": str(e)}
    return {}


class _UnlessOrphaned:
    """A backend that, once the sweep that started this worker is gone, starts no new call (it waits to be
    stopped): only the calls already sent are waited for (`interrupt.finishing`) and recorded."""

    in_flight = 0

    def __init__(self, inner: Any):
        self.inner, self.parent = inner, os.getppid()
        self.sent: set[int] = set()  # the requests sent and not yet recorded (by id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: Any) -> Any:
        if os.getppid() != self.parent:
            await asyncio.Event().wait()  # never: the worker leaves once the calls in flight are recorded
        self.sent.add(id(request))
        _UnlessOrphaned.in_flight += 1
        return await self.inner.complete(request)


def _member_job(opts: RunOptions, reuse: bool = False) -> dict[str, Any]:
    """Worker: run one member (`opts` selects it) into its own run folder, afresh but for the paid answers
    `_clear` keeps. Never raises. Orphaned (the sweep killed), the worker first lets a call in flight record
    its answer (`interrupt.finishing`)."""
    calling = [False]

    def progress(phase: str, total: int) -> Callable[[], None]:
        left = [total]
        calling[0] = phase == "extracting" and total > 0

        def tick() -> None:
            left[0] -= 1
            calling[0] = calling[0] and left[0] > 0  # an answer is recorded before its tick
        return tick

    try:
        _clear(opts, reuse)  # no stale files from an earlier run of this member
        with unsynced(), finishing(lambda: calling[0]):  # made durable by the sync before the sweep.json recording it
            return {"outcomes": [asdict(o) for o in run(opts, progress).outcomes]}
    except EvalkitError as e:
        return {"crash": str(e), "exit_code": e.exit_code}
    except BaseException as e:  # noqa: BLE001 - a worker reports, it never takes the sweep down
        return {"crash": traceback.format_exception_only(type(e), e)[-1].strip(), "exit_code": EXIT_BACKEND}


def _is_current(prev: dict[str, Any] | None, keys: dict[str, Any] | None, sweep_dir: Path, labels: list[str]) -> bool:
    if not prev or keys is None or prev.get("status") not in ("ran", "current") or prev.get("keys") != keys:
        return False
    outs = prev.get("outcomes") or []
    if sorted(o.get("backend") for o in outs) != sorted(labels) or any(o.get("status") != SCORED for o in outs):
        return False
    run_dir = sweep_dir / prev.get("run_dir", "")
    return all((runfolder.member_dir(run_dir, o["task"], o["member"], o["backend"]) / runfolder.SCORE).is_file()
               for o in outs)


class SweepOutcome(Record):
    """One backend's outcome of a member, as sweep.json keeps it (`runner.Outcome`'s fields)."""

    task: Str
    member: Str
    backend: Str
    status: Str
    score: Num | None = None
    passed: Bool | None = None
    metrics: dict[str, Any] = {}
    notes: list[Str] = []
    message: Str = ""
    cause: Str = ""
    heldout: Bool = False


class SweepMember(Record):
    """One member's record in sweep.json (and in a line of its sidecar, `runfolder.SWEEP_LOG`)."""

    status: Str  # ran | current | failed
    message: Str = ""
    run_dir: Str = ""
    keys: dict[str, Any] | None = None  # the currency keys (`currency_keys`)
    exit_code: Int = 0
    outcomes: list[SweepOutcome] = []


class SweepFile(Record):
    """sweep.json: the sweep's parameters and every member it finished (`_write_sweep_json` writes it)."""

    schema_version: Int = SCHEMA_VERSION
    evalkit_version: Str | None = None
    corpus: Str | None = None
    sources: Str | None = None
    backends: list[dict[str, Any]] = []
    tasks: list[Str] | None = None
    threshold: Num | None = None
    limit: Int | None = None
    sample: Int | None = None
    seed: Int | None = None
    settings: dict[str, Any] = {}
    samples: Int | None = None  # only under --samples K > 1
    notebooks: Bool | None = None
    fingerprints: dict[str, Any] | None = None  # only once a file was fingerprinted (`Fingerprints`)
    members: dict[str, SweepMember] = {}


def read_sweep(sweep_dir: str | Path) -> SweepFile:
    """The one reader of sweep.json, with the members its sidecar adds (`runfolder.read_sweep_json`: an absent or
    torn file is an empty sweep); a value of the wrong type is one `RecordError` naming the file and key."""
    where = Path(sweep_dir) / runfolder.SWEEP_JSON
    data = runfolder.read_sweep_json(sweep_dir)
    check_version(data, SCHEMA_VERSION, where)
    return SweepFile.from_json(data, f"{where} (with {runfolder.SWEEP_LOG})")


def _member_json(r: MemberResult) -> dict[str, Any]:
    return SweepMember(status=r.status, message=r.message, run_dir=r.run_dir, keys=r.keys, exit_code=r.exit_code,
                       outcomes=[SweepOutcome(**asdict(o)) for o in r.outcomes]).to_json()


def _write_sweep_json(sweep_dir: Path, opts: RunOptions, records: dict[str, MemberResult],
                      others: dict[str, Any] | None = None, prints: Fingerprints | None = None) -> None:
    os.sync()  # the members' own files, written unsynced (`_member_job`), are durable before this records them
    members = dict(others or {})
    members.update({k: _member_json(r) for k, r in records.items()})
    _write_sweep_file(sweep_dir, {
        "schema_version": SCHEMA_VERSION,
        "evalkit_version": __version__,
        "corpus": str(opts.corpus),
        "sources": str(opts.sources) if opts.sources else None,
        "backends": [{"label": spec.label, "spec": spec.redacted().spec} for spec in opts.backends],
        "tasks": opts.tasks,
        "threshold": opts.threshold,
        "limit": opts.limit,
        "sample": opts.sample,
        "seed": opts.seed if opts.sample is None or opts.seed is not None else SEED,
        "settings": dict(sorted(opts.settings.items())),
        **({"samples": opts.samples} if opts.samples > 1 else {}),
        "notebooks": opts.notebooks,
        **({"fingerprints": dict(sorted(prints.used.items()))} if prints and prints.used else {}),
        "members": {k: members[k] for k in sorted(members)},
    })


def _write_sweep_file(sweep_dir: Path, data: dict[str, Any]) -> None:
    """The one writer of sweep.json: typed on the way out (a wrong value is refused before it is written)."""
    runfolder.write_sweep_json(sweep_dir, SweepFile.from_json(data, sweep_dir / runfolder.SWEEP_JSON).to_json())


def _append_members(sweep_dir: Path, records: dict[str, MemberResult]) -> None:
    """The members finished since the last save, appended to sweep.json's sidecar (O(members added))."""
    if records:
        os.sync()  # as `_write_sweep_json`: what the lines record is on disk first
        runfolder.append_sweep_members(sweep_dir, {k: _member_json(r) for k, r in records.items()})


def _refuse_run_only(opts: RunOptions) -> None:
    """A sweep runs each member on its own: a recording, a judge or an ontology across members is `evalkit
    run`'s. A budget across members needs one ledger every member's worker shares: the Dask scheduler's."""
    given = [flag for flag, value in (("--record", opts.record), ("--dry-run", opts.dry_run),
                                      ("--judge", opts.judge), ("--reference", opts.reference),
                                      ("--ontology", opts.ontology), ("--batch", opts.batch)) if value]
    if given:
        raise UsageError(f"sweep: {', '.join(given)} apply to `evalkit run` only")
    if opts.max_usd is not None and not opts.scheduler:
        raise UsageError("sweep: --max-usd needs one budget shared by the member workers: add --scheduler local:N "
                         "(or --scheduler tcp://HOST:PORT), or use `evalkit run`")


def sweep(opts: RunOptions, progress: Callable[[MemberResult], Any] | None = None) -> SweepResult:
    """Run every selected member (skipping current ones, unless ``opts.force``) in worker processes; see
    module docstring. ``opts.workers``: members at a time."""
    with ExitStack() as held:  # the sweep folder's lock, once taken
        result = _sweep(opts, progress, held)
    result.recorded = record(result, opts)
    return result


def _sweep(opts: RunOptions, progress: Callable[[MemberResult], Any] | None, held: ExitStack) -> SweepResult:
    """Select (the current members are skipped), hold the folder, run the rest in workers, write sweep.json."""
    _refuse_run_only(opts)
    check_scope(opts)
    env_cassette()  # both cassette variables set: the sweep's usage error (exit 2), not each member's failure
    labels = check_labels(spec.label for spec in opts.backends)
    if not labels:
        raise EvalkitError("sweep: give at least one --backend NAME=SPEC")
    tasks = load_tasks(opts.corpus, opts.tasks)
    sweep_dir = Path(opts.out or default_sweep_dir(labels))
    stored = read_sweep(sweep_dir).to_json()  # typed: a wrong value is one clear error, not a traceback below
    on_disk = stored.get("members") or {}
    prints = Fingerprints(stored.get("fingerprints"))
    _check_only(opts.only, tasks)
    sel = _select(opts, tasks, sweep_dir, {} if opts.force else on_disk, prints, labels, progress)
    # Members outside this selection keep their record in sweep.json (a later full sweep can skip them).
    others = {k: v for k, v in on_disk.items() if k not in sel.selected}
    outs = [runfolder.sweep_member_dir(sweep_dir, t, m) for t, m, _ in sel.todo]
    shared = None
    if opts.scheduler:  # the members on Dask workers share one call limit and one budget (evalkit.execution.scheduler)
        from evalkit.execution.scheduler import shared_name  # optional dependency: dask

        shared = shared_name()
    member_opts = _member_options(opts, sel.todo, outs, shared)
    record = _Recorder(sweep_dir, sel, outs, progress)
    cluster = None
    if opts.scheduler and member_opts:  # reached (or not: exit 2) before anything is written
        from evalkit.execution.scheduler import connect, forget  # optional dependency: dask

        cluster = held.enter_context(connect(opts.scheduler))
        held.callback(forget, cluster, shared)
    held.enter_context(runfolder.hold(sweep_dir))
    save = partial(_write_sweep_json, sweep_dir, opts, sel.records, others, prints)
    save()  # the members' lines are appended to this one
    try:
        _run_members(opts, sel, member_opts, on_disk, record, cluster)
    except KeyboardInterrupt:  # SIGINT/SIGTERM: the member workers are stopped by now
        raise _stopped(sweep_dir, sel, outs, save) from None
    save()
    members = [sel.records[k] for k in sorted(sel.records)]
    summary = write_sweep_summary(sweep_dir, [m.run_dir for m in members if m.run_dir])
    return SweepResult(run_dir=sweep_dir, members=members, summary=summary)


def _check_only(only: list[str] | None, tasks: list[Any]) -> None:
    """Each --only names a member of the selected tasks (``id`` or ``task/id``), or the sweep is refused."""
    if only:
        for o in only:
            member_ref(o)
        known = {n for t in tasks for d in t.member_dirs() for n in (d.name, f"{t.id}/{d.name}")}
        unknown = [o for o in only if o not in known]
        if unknown:
            raise CorpusError(f"no member {', '.join(map(repr, unknown))} in the selected tasks")


@dataclass(frozen=True)
class _Selection:
    """The sweep's members (`_select`): those to run, and those current (skipped)."""

    todo: list[tuple[str, str, dict[str, Any] | None]]  # (task, member, currency keys) of each member to run
    asked: set[str]  # the members whose paid calls the calls job makes (`_calls_job`)
    records: dict[str, MemberResult]  # key → result: the current members; the sweep adds those it runs
    selected: set[str]  # every selected member's key


def _select(opts: RunOptions, tasks: list[Any], sweep_dir: Path, previous: dict[str, Any], prints: Fingerprints,
            labels: list[str], progress: Callable[[MemberResult], Any] | None) -> _Selection:
    """The selected members (--only, then --limit / --sample per task), each current (reported at once) or to run."""
    todo: list[tuple[str, str, dict[str, Any] | None]] = []
    prefetching = _prefetches(opts)
    sel = _Selection(todo, set(), {}, set())
    for task in tasks:
        dirs = [d for d in task.member_dirs()
                if not opts.only or d.name in opts.only or f"{task.id}/{d.name}" in opts.only]
        for mdir in scope(task, dirs, opts.limit, opts.sample, opts.seed):
            key = f"{task.id}/{mdir.name}"
            sel.selected.add(key)
            try:
                member = task.member(mdir.name, check_truth=False)  # its worker validates the truth
                got = _member_inputs(member, opts.backends, opts.sources, opts.threshold, opts.notebooks,
                                     opts.settings, prints, opts.samples)
                keys = got and got[1]
            except Escape:
                raise  # a file outside the corpus or sources folder: refuse the sweep before anything is written
            except EvalkitError:
                keys = None  # the worker reports the problem
            prev = previous.get(key)
            if _is_current(prev, keys, sweep_dir, labels):
                sel.records[key] = MemberResult(task.id, mdir.name, "current",
                                                [_outcome(o) for o in prev["outcomes"]], run_dir=prev["run_dir"],
                                                keys=keys)
                if progress:
                    progress(sel.records[key])
            else:
                todo.append((task.id, mdir.name, keys))
                if prefetching and got:
                    sel.asked.add(key)
    return sel


def _member_options(opts: RunOptions, todo: list[tuple[str, str, Any]], outs: list[Path],
                    shared: str | None) -> list[RunOptions]:
    """Each member's own `RunOptions` (`todo[i]` into its folder `outs[i]`): absolute paths, one worker."""
    return [replace(opts, corpus=Path(opts.corpus).resolve(), sources=Path(opts.sources).resolve()
                    if opts.sources else None, tasks=[t], only=[m], out=out.resolve(), workers=1,
                    force=False, board=None, history=False,  # the sweep records once, at its end
                    limit=None, sample=None, seed=None,  # and it selected already
                    scheduler=None, shared=shared,  # a member's notebooks run in its own worker
                    in_sweep=True)
            for (t, m, _), out in zip(todo, outs)]


class _Recorder:
    """`run_all`'s report of member `i`: its `MemberResult` kept in the selection's records, appended to sweep.json's
    sidecar at most every `SAVE_EVERY_S` seconds (a killed sweep keeps its progress but the last seconds), reported."""

    def __init__(self, sweep_dir: Path, sel: _Selection, outs: list[Path],
                 progress: Callable[[MemberResult], Any] | None):
        self.sweep_dir, self.sel, self.outs, self.progress = sweep_dir, sel, outs, progress
        self.saved, self.unsaved = time.monotonic(), {}

    def __call__(self, i: int, raw: Any) -> None:
        task_id, member_id, keys = self.sel.todo[i]
        rel = self.outs[i].relative_to(self.sweep_dir).as_posix()
        if isinstance(raw, WorkerDied):
            raw = {"crash": str(raw), "exit_code": EXIT_BACKEND}
        elif isinstance(raw, Exception):  # pickling trouble and the like: this member only
            raw = {"crash": f"{type(raw).__name__}: {raw}", "exit_code": EXIT_BACKEND}
        if "crash" in raw:
            res = MemberResult(task_id, member_id, "failed", message=raw["crash"], run_dir=rel, keys=keys,
                               exit_code=raw.get("exit_code", EXIT_BACKEND))
        else:
            res = MemberResult(task_id, member_id, "ran", [_outcome(o) for o in raw["outcomes"]], run_dir=rel, keys=keys)
        self.sel.records[res.key] = self.unsaved[res.key] = res
        if time.monotonic() - self.saved >= SAVE_EVERY_S:
            _append_members(self.sweep_dir, self.unsaved)
            self.unsaved.clear()
            self.saved = time.monotonic()
        if self.progress:
            self.progress(res)


def _run_members(opts: RunOptions, sel: _Selection, member_opts: list[RunOptions], on_disk: dict[str, Any],
                 record: _Recorder, cluster: Any) -> None:
    """The members' paid calls first (`_calls_job`, one worker), then each member in a worker of its own."""
    # Paid answers are reused, but under --force by the members this sweep folder has no record of: those a
    # stopped sweep was running (`_clear`).
    reuse = [not opts.force or f"{t}/{m}" not in on_disk for t, m, _ in sel.todo]
    calls: list[Any] = []
    if sel.asked:  # the paid calls first, all in one worker's pool; the members then reuse their answers
        called = [o for o, (t, m, _) in zip(member_opts, sel.todo) if f"{t}/{m}" in sel.asked]
        for i, (t, m, _) in enumerate(sel.todo):
            if f"{t}/{m}" in sel.asked:
                _clear(member_opts[i], reuse[i])  # what the member's own `_clear` would drop, before the calls
                reuse[i] = True
                member_opts[i].answered = True  # a failed call is not made twice in one sweep
        calls = [(_calls_job, (member_opts[0], called))]
    run_all(calls + [(_member_job, (o, r)) for o, r in zip(member_opts, reuse)], max(1, opts.workers),
            on_done=lambda i, raw: record(i - len(calls), raw) if i >= len(calls) else None,
            after=[set()] * len(calls) + [set(range(len(calls)))] * len(member_opts), scheduler=cluster)


def _stopped(sweep_dir: Path, sel: _Selection, outs: list[Path], save: Callable[[], None]) -> Interrupted:
    """A stopped sweep: sweep.json holds every member finished so far, whole; no partial file is left."""
    remove_partials(sweep_dir, recursive=False)
    with signals_blocked():  # every member finished so far, whole
        save()
    for out in outs:  # the member run folders are this sweep's own
        remove_partials(out)
    finished = sum(r.status != "current" for r in sel.records.values())
    return Interrupted(f"{finished}/{len(sel.todo)} member(s) run, {len(sel.records) - finished} current; "
                       f"kept in {sweep_dir / runfolder.SWEEP_JSON}", sweep_dir)
