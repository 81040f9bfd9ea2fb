"""`evalkit sweep`: every member of every selected task, one worker process per member job.

A sweep folder::

    <sweep>/sweep.json                                   parameters; per member: status, outcomes, currency keys
    <sweep>/members/<task>/<member>/                     a complete run folder of that one member:
        run.json, <task>/<member>/<backend>/{extraction.json, score.json, extract.ipynb, score.ipynb, …}

Each member runs through the runner (`evalkit.runner.run`, notebooks and all) in its own
worker process, N at a time (default: the CPU count). A member that fails — refused by the
integrity gate, a backend error, a crash, even a worker process dying — is recorded and the
others carry on; the summary lists every failure and the exit code says what kind.

``--no-notebooks`` runs the same pipeline without papermill (`run_direct`: integrity gate →
backends → extraction.json → scorer → score.json, no .ipynb/.html): the same files the
scoreboard, band and check read, in a fraction of the time.

**Current** (skipped on a re-run, unless ``--force``): a member whose previous outcome in this
sweep folder was scored for every backend (an ``error``, `evalkit.status`, is never current: the
next sweep retries it) and whose *currency key* is unchanged for every
backend. The key holds: the request sha256 (prompt, schema, settings and the source text), the
backend label and spec (secrets redacted) plus a fingerprint of any local file or folder the spec
names (a cassette or predictions dir), the truth file's sha256, the task.yaml sha256 (scorer options,
threshold), the run's ``--threshold``, the engine (notebooks or not) and the evalkit version. A member
whose source fails its integrity check is never current: it is re-run, and refused, with no model call.

A sweep holds its folder (`evalkit.interrupt.hold`): a second sweep into it is refused while the first
lives. SIGINT/SIGTERM stop the member workers (and their notebook workers and kernels) at once;
sweep.json keeps every member that finished, so the same command finishes the rest.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .errors import EXIT_BACKEND, EXIT_CASSETTE, EXIT_INTEGRITY, EXIT_OK, CorpusError, Escape, EvalkitError
from .backends import BackendSpec
from .interrupt import Interrupted, hold, spawn_context, stop_pool, worker_signals
from .runner import Outcome, RunOptions, RunResult
from .status import ERROR, REFUSED, SCORED, SKIPPED

__all__ = ["SweepOptions", "MemberResult", "SweepResult", "sweep", "run_direct", "currency_keys", "default_sweep_dir",
           "SWEEP_JSON"]

SWEEP_JSON = "sweep.json"
SCHEMA_VERSION = 1
WORKER_GRACE_S = 0.5  # a stopped member worker's time for its notebook workers to stop their kernels


# --------------------------------------------------------------------------- a run without notebooks


def run_direct(opts: RunOptions) -> RunResult:
    """`runner.run` without papermill: same gate, backends, pool and files (no notebooks, no HTML)."""
    from dataclasses import replace

    from .runner import run

    return run(replace(opts, notebooks=False, html=False))


# --------------------------------------------------------------------------- currency


def _sha_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fingerprint(path: Path) -> str | None:
    """sha256 of a file; for a folder, of its files' names, sizes and mtimes (cheap, still catches edits)."""
    from .sources import sha256_file

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


def _backend_inputs(spec: BackendSpec) -> dict[str, str]:
    return {k: fp for k, path in spec.files().items() if (fp := _fingerprint(path))}


def currency_keys(member: Any, backends: list[BackendSpec], sources: Path | None, threshold: float | None,
                  notebooks: bool) -> dict[str, dict[str, Any]] | None:
    """Per backend label, what that member × backend's outputs depend on (see module docstring);
    None if it cannot be known. The member's own inputs are read and hashed once for all backends."""
    from .pipeline import render_request, request_sha
    from .scoreboard import truth_sha256
    from .sources import check_integrity, read_document, sha256_file

    try:
        paths = check_integrity(member, sources)
        request = render_request(member.task, member, read_document(paths))
    except Escape:
        raise
    except EvalkitError:
        return None
    common = {
        "request_sha256": request_sha(request),
        "truth_sha256": truth_sha256(member, sources),
        "task_sha256": sha256_file(member.task.dir / "task.yaml"),
        "threshold": threshold,
        "notebooks": notebooks,
        "evalkit_version": __version__,
    }
    return {spec.label: {**common, "backend": str(spec.redacted()), "backend_inputs": _backend_inputs(spec)}
            for spec in backends}


# --------------------------------------------------------------------------- the sweep


@dataclass
class SweepOptions:
    corpus: Path
    backends: list[BackendSpec]
    sources: Path | None = None
    tasks: list[str] | None = None
    only: list[str] | None = None
    out: Path | None = None
    threshold: float | None = None
    workers: int = max(1, os.cpu_count() or 1)
    max_concurrency: int = 8
    html: bool = False
    notebooks: bool = True
    force: bool = False


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

    @property
    def outcomes(self) -> list[Outcome]:
        return [o for m in self.members for o in m.outcomes]

    @property
    def failures(self) -> list[str]:
        return [line for m in self.members for line in m.failures]

    @property
    def exit_code(self) -> int:
        """0: every member ran or was current (verdicts are results, not failures; skipped members
        are listed); 4: a member was refused by the integrity gate; 6: a cassette miss or corrupt
        cassette; 5: a member failed otherwise (backend, notebook, crash)."""
        statuses = {o.status for o in self.outcomes}
        if REFUSED in statuses:
            return EXIT_INTEGRITY
        codes = {m.exit_code for m in self.members if m.status == "failed"}
        if EXIT_CASSETTE in codes:
            return EXIT_CASSETTE
        if ERROR in statuses or codes:
            return EXIT_BACKEND
        return EXIT_OK


def default_sweep_dir(labels: list[str]) -> Path:
    """``runs/sweep-<labels>``: a stable name, so a re-run finds what is current."""
    from .backends import labels_slug

    return Path("runs") / f"sweep-{labels_slug(labels)}"


def _outcome(d: dict[str, Any]) -> Outcome:
    return Outcome(**{k: d.get(k, v) for k, v in asdict(Outcome("", "", "", "")).items()})


def _member_job(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker: run one member into its own run folder. Never raises."""
    try:
        opts = RunOptions(
            corpus=Path(payload["corpus"]), backends=payload["backends"],
            sources=Path(payload["sources"]) if payload["sources"] else None, tasks=[payload["task"]],
            only=[payload["member"]], out=Path(payload["out"]), threshold=payload["threshold"], workers=1,
            max_concurrency=payload["max_concurrency"], html=payload["html"],
        )
        if payload["notebooks"]:
            from .runner import run

            result = run(opts)
        else:
            result = run_direct(opts)
        return {"outcomes": [asdict(o) for o in result.outcomes]}
    except EvalkitError as e:
        return {"crash": str(e), "exit_code": e.exit_code}
    except BaseException as e:  # noqa: BLE001 - a worker reports, it never takes the sweep down
        return {"crash": traceback.format_exception_only(type(e), e)[-1].strip(), "exit_code": EXIT_BACKEND}


def _load_previous(sweep_dir: Path) -> dict[str, Any]:
    from .pipeline import read_json

    path = sweep_dir / SWEEP_JSON
    if not path.is_file():
        return {}
    try:
        return read_json(path).get("members") or {}
    except EvalkitError:
        return {}


def _is_current(prev: dict[str, Any] | None, keys: dict[str, Any] | None, sweep_dir: Path, labels: list[str]) -> bool:
    from .pipeline import SCORE, home_dir

    if not prev or keys is None or prev.get("status") not in ("ran", "current") or prev.get("keys") != keys:
        return False
    outs = prev.get("outcomes") or []
    if sorted(o.get("backend") for o in outs) != sorted(labels) or any(o.get("status") != SCORED for o in outs):
        return False
    run_dir = sweep_dir / prev.get("run_dir", "")
    return all((home_dir(run_dir, o["task"], o["member"], o["backend"]) / SCORE).is_file() for o in outs)


def _write_sweep_json(sweep_dir: Path, opts: SweepOptions, records: dict[str, MemberResult],
                      others: dict[str, Any] | None = None) -> None:
    from .pipeline import write_json

    members = dict(others or {})
    members.update({k: {"status": r.status, "message": r.message, "run_dir": r.run_dir, "keys": r.keys,
                        "exit_code": r.exit_code, "outcomes": [asdict(o) for o in r.outcomes]}
                    for k, r in records.items()})
    write_json(sweep_dir / SWEEP_JSON, {
        "schema_version": SCHEMA_VERSION,
        "evalkit_version": __version__,
        "corpus": str(opts.corpus),
        "sources": str(opts.sources) if opts.sources else None,
        "backends": [{"label": spec.label, "spec": spec.redacted().spec} for spec in opts.backends],
        "tasks": opts.tasks,
        "threshold": opts.threshold,
        "notebooks": opts.notebooks,
        "members": {k: members[k] for k in sorted(members)},
    })


def sweep(opts: SweepOptions, progress: Callable[[MemberResult], Any] | None = None) -> SweepResult:
    """Run every selected member (skipping current ones) in worker processes; see module docstring."""
    with ExitStack() as held:  # the sweep folder's lock, once taken
        return _sweep(opts, progress, held)


def _sweep(opts: SweepOptions, progress: Callable[[MemberResult], Any] | None, held: ExitStack) -> SweepResult:
    from .backends import check_labels
    from .corpus import load_tasks
    from .paths import member_ref

    labels = check_labels(spec.label for spec in opts.backends)
    if not labels:
        raise EvalkitError("sweep: give at least one --backend NAME=SPEC")
    tasks = load_tasks(opts.corpus, opts.tasks)
    sweep_dir = Path(opts.out or default_sweep_dir(labels))
    on_disk = _load_previous(sweep_dir)
    previous = {} if opts.force else on_disk

    if opts.only:
        for o in opts.only:
            member_ref(o)
        known = {n for t in tasks for d in t.member_dirs() for n in (d.name, f"{t.id}/{d.name}")}
        unknown = [o for o in opts.only if o not in known]
        if unknown:
            raise CorpusError(f"no member {', '.join(map(repr, unknown))} in the selected tasks")
    todo: list[tuple[str, str, dict[str, Any] | None]] = []
    records: dict[str, MemberResult] = {}
    selected: set[str] = set()
    for task in tasks:
        for mdir in task.member_dirs():
            key = f"{task.id}/{mdir.name}"
            if opts.only and mdir.name not in opts.only and key not in opts.only:
                continue
            selected.add(key)
            try:
                member = task.member(mdir.name)
                keys = currency_keys(member, opts.backends, opts.sources, opts.threshold, opts.notebooks)
            except Escape:
                raise  # a file outside the corpus or sources folder: refuse the sweep before anything is written
            except EvalkitError:
                keys = None  # the worker reports the problem
            prev = previous.get(key)
            if _is_current(prev, keys, sweep_dir, labels):
                records[key] = MemberResult(task.id, mdir.name, "current", [_outcome(o) for o in prev["outcomes"]],
                                            run_dir=prev["run_dir"], keys=keys)
                if progress:
                    progress(records[key])
            else:
                todo.append((task.id, mdir.name, keys))

    def payload(task_id: str, member_id: str) -> dict[str, Any]:
        out = sweep_dir / "members" / task_id / member_id
        if out.exists():
            shutil.rmtree(out)  # no stale files from an earlier run of this member
        return {"corpus": str(Path(opts.corpus).resolve()), "sources": str(Path(opts.sources).resolve()) if opts.sources else None,
                "backends": list(opts.backends), "task": task_id, "member": member_id,
                "out": str(out.resolve()), "threshold": opts.threshold, "max_concurrency": opts.max_concurrency,
                "html": opts.html, "notebooks": opts.notebooks}

    # Members outside this selection keep their record in sweep.json (a later full sweep can skip them).
    others = {k: v for k, v in on_disk.items() if k not in selected}

    def record(task_id: str, member_id: str, keys: dict[str, Any] | None, raw: dict[str, Any]) -> None:
        rel = f"members/{task_id}/{member_id}"
        if "crash" in raw:
            res = MemberResult(task_id, member_id, "failed", message=raw["crash"], run_dir=rel, keys=keys,
                               exit_code=raw.get("exit_code", EXIT_BACKEND))
        else:
            res = MemberResult(task_id, member_id, "ran", [_outcome(o) for o in raw["outcomes"]], run_dir=rel, keys=keys)
        records[f"{task_id}/{member_id}"] = res
        _write_sweep_json(sweep_dir, opts, records, others)  # after every member: an interrupted sweep keeps its progress
        if progress:
            progress(res)

    held.enter_context(hold(sweep_dir))
    try:
        suspects = _run_pool(todo, payload, record, max(1, opts.workers))
        # A worker process that died took its pool down: run each member that was in flight alone, to know which.
        for job in suspects:
            for t, m, k in _run_pool([job], payload, record, 1):
                record(t, m, k, {"crash": "the worker process died (killed, out of memory, or a crash in native code)",
                                 "exit_code": EXIT_BACKEND})
    except KeyboardInterrupt:  # SIGINT/SIGTERM: the member workers are stopped by now
        from .jsonio import remove_partials

        remove_partials(sweep_dir, recursive=False)
        for task_id, member_id, _ in todo:  # the member run folders are this sweep's own
            remove_partials(sweep_dir / "members" / task_id / member_id)
        finished = sum(r.status != "current" for r in records.values())
        raise Interrupted(f"{finished}/{len(todo)} member(s) run, {len(records) - finished} current; "
                          f"kept in {sweep_dir / SWEEP_JSON}", sweep_dir) from None
    _write_sweep_json(sweep_dir, opts, records, others)
    members = [records[k] for k in sorted(records)]
    return SweepResult(run_dir=sweep_dir, members=members)


def _run_pool(todo, payload, record, workers: int) -> list:
    """Run `todo` in spawn-context worker processes, at most `workers` at a time.

    Returns the jobs that were running when a worker process died (the pool dies with it, so
    which of them crashed is not known); jobs not yet started go on in a fresh pool.
    """
    queue, suspects = list(todo), []
    ctx = spawn_context()  # no fork of a process that may hold threads or an event loop
    while queue:
        pool = ProcessPoolExecutor(max_workers=min(workers, len(queue)), mp_context=ctx,
                                   initializer=worker_signals, initargs=(WORKER_GRACE_S,))
        running: dict = {}
        try:
            while queue or running:
                while queue and len(running) < workers:  # submit only what can start: a break loses no queue
                    t, m, k = queue[0]
                    try:
                        fut = pool.submit(_member_job, payload(t, m))
                    except BrokenProcessPool:  # a worker died since the last wait: this job never started
                        break
                    running[fut] = queue.pop(0)
                if not running:  # the pool broke with nothing of ours in it: go on in a fresh one
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                broken = False
                for fut in done:
                    job = running.pop(fut)
                    try:
                        raw = fut.result()
                    except BrokenProcessPool:
                        suspects.append(job)
                        broken = True
                        continue
                    except Exception as e:  # pickling trouble and the like: this member only
                        raw = {"crash": f"{type(e).__name__}: {e}", "exit_code": EXIT_BACKEND}
                    record(*job, raw)
                if broken:
                    suspects.extend(running.values())  # died with the pool
                    running.clear()
                    break
        except BaseException:  # an interrupt: stop the members in flight now, not when they end
            stop_pool(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return suspects


def print_sweep_summary(result: SweepResult, echo: Callable[[str], Any] = print) -> None:
    multi = len({o.backend for o in result.outcomes}) > 1
    for m in result.members:
        if m.status == "failed":
            echo(f"  {m.key} … FAILED")
            echo(f"      ↳ {m.message}")
            continue
        for o in m.outcomes:
            name = f"  {m.key}" + (f" [{o.backend}]" if multi else "")
            tag = " (current, skipped)" if m.status == "current" else ""
            if o.status == SCORED:
                score = "   n/a" if o.score is None else f"{100 * o.score:5.1f}%"
                verdict = {True: " PASS", False: " FAIL", None: ""}[o.passed]
                echo(f"{name} … {score}{verdict}{tag}")
            else:
                echo(f"{name} … {o.status.upper()}")
                echo(f"      ↳ {o.why}")
    ran = sum(m.status == "ran" for m in result.members)
    current = sum(m.status == "current" for m in result.members)
    count = {s: sum(o.status == s for o in result.outcomes) for s in (SCORED, ERROR, SKIPPED)}
    echo(f"Sweep: {len(result.members)} member(s): {ran} run, {current} current (skipped), "
         f"{count[SCORED]} scored, {count[ERROR]} error(s), {count[SKIPPED]} skipped (source missing), "
         f"{len(result.failures)} failure(s)")
    if result.failures:
        echo("Failures:")
        for line in result.failures:
            echo(f"  {line}")
    echo(f"Sweep folder: {result.run_dir}")
