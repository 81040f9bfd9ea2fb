"""`evalkit run`: integrity gate → backends → one concurrent extraction pool →
extract/score notebooks per member → report notebook per task → HTML.

Each phase leaves files in the run folder, so a failure anywhere keeps what
was done before it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .backends import Backend, make_backend
from .corpus import Member, Task, load_tasks
from .errors import (EXIT_BACKEND, EXIT_FAILED, EXIT_INTEGRITY, EXIT_OK, CorpusError, EvalkitError,
                     IntegrityError, SourceMissing)
from .pipeline import (EXTRACTION, SCORE, backend_context, extraction_record, read_json, render_request,
                       write_json)
from .pool import Job, run_jobs
from .sources import check_integrity, read_document

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@dataclass
class RunOptions:
    corpus: Path
    backends: list[tuple[str, str]]  # (label, spec)
    sources: Path | None = None
    tasks: list[str] | None = None
    only: list[str] | None = None  # member ids
    out: Path | None = None
    threshold: float | None = None
    workers: int = max(1, os.cpu_count() or 1)
    max_concurrency: int = 8
    html: bool = True


@dataclass
class Outcome:
    """One member × backend at the end of a run."""

    task: str
    member: str
    backend: str
    status: str  # scored | skipped | refused | error
    score: float | None = None
    passed: bool | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class RunResult:
    run_dir: Path
    outcomes: list[Outcome]

    @property
    def exit_code(self) -> int:
        statuses = {o.status for o in self.outcomes}
        if "refused" in statuses:
            return EXIT_INTEGRITY
        if "error" in statuses:
            return EXIT_BACKEND
        if any(o.status == "scored" and o.passed is False for o in self.outcomes):
            return EXIT_FAILED
        return EXIT_OK


def default_run_id(labels: list[str]) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{'+'.join(labels)}"


def _rel(path: Path | None, start: Path) -> str | None:
    # Notebook parameters are relative to the notebook's folder: bytes must not depend on where the repo is.
    return None if path is None else os.path.relpath(Path(path).resolve(), start.resolve())


def _members(tasks: list[Task], only: list[str] | None) -> list[Member]:
    members = [m for t in tasks for m in t.members()]
    if only:
        found = {m.id for m in members}
        unknown = [o for o in only if o not in found]
        if unknown:
            raise CorpusError(f"no member {', '.join(map(repr, unknown))} in the selected tasks")
        members = [m for m in members if m.id in only]
    return members


def gate_members(members: list[Member], sources: Path | None, outcomes: list[Outcome],
                 labels: list[str]) -> list[tuple[Member, list[Path]]]:
    """The integrity gate: runs before any backend exists. Returns members cleared to run."""
    cleared = []
    for m in members:
        try:
            cleared.append((m, check_integrity(m, sources)))
            if m.manifest.truth is not None:
                m.load_truth(sources)
        except SourceMissing as e:
            outcomes += [Outcome(m.task.id, m.id, b, "skipped", message=str(e)) for b in labels]
        except IntegrityError as e:
            outcomes += [Outcome(m.task.id, m.id, b, "refused", message=str(e)) for b in labels]
    return cleared


def run(opts: RunOptions, progress: Callable[[str, int], Any] | None = None) -> RunResult:
    """Run extraction and scoring for the selected corpus members; see module docstring."""
    from .execute import NotebookJob, execute  # papermill is imported only when notebooks run

    tasks = load_tasks(opts.corpus, opts.tasks)
    members = _members(tasks, opts.only)
    labels = [label for label, _ in opts.backends]
    if len(set(labels)) != len(labels):
        raise EvalkitError(f"backend names must be unique: {', '.join(labels)}")
    run_dir = Path(opts.out or Path("runs") / default_run_id(labels))
    run_dir.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []

    cleared = gate_members(members, opts.sources, outcomes, labels)
    if not cleared:  # nothing passed the gate: construct no backend at all
        return RunResult(run_dir=run_dir, outcomes=outcomes)
    ctx = backend_context([m for m, _ in cleared], opts.sources)
    backends: list[Backend] = [make_backend(label, spec, ctx) for label, spec in opts.backends]

    # One pool for every member's extraction call (not one kernel per call).
    jobs, homes = [], []
    for m, paths in cleared:
        request = render_request(m.task, m, read_document(paths))
        for b in backends:
            jobs.append(Job(b, request))
            homes.append((m, b, run_dir / m.task.id / m.id / b.label))
    tick = progress("extracting", len(jobs)) if progress else None
    completions = run_jobs(jobs, opts.max_concurrency, on_done=(lambda j, c: tick()) if tick else None)
    for (m, b, home), job, completion in zip(homes, jobs, completions):
        write_json(home / EXTRACTION, extraction_record(m, b, job.request, completion))
    _close(backends)

    write_json(run_dir / "run.json", {
        "evalkit_version": __version__,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "backends": [{"label": b.label, "spec": b.spec, "model": b.model} for b in backends],
        "tasks": [t.id for t in tasks],
        "members": [m.key for m, _ in cleared],
        "threshold": opts.threshold,
    })

    # Notebooks: extract + score per member × backend, then one report per task.
    nb_jobs = []
    for m, b, home in homes:
        params = {"task": m.task.id, "member": m.id, "backend": f"{b.label}={b.spec}",
                  "corpus": _rel(opts.corpus, home), "sources": _rel(opts.sources, home), "out": "."}
        nb_jobs.append(NotebookJob(NOTEBOOKS / "extract.ipynb", home / "extract.ipynb", params, home))
        score_params = {k: v for k, v in params.items() if k != "backend"} | {"threshold": opts.threshold}
        nb_jobs.append(NotebookJob(NOTEBOOKS / "score.ipynb", home / "score.ipynb", score_params, home))
    tick = progress("notebooks", len(nb_jobs)) if progress else None
    results = execute(nb_jobs, workers=opts.workers, on_done=(lambda j, r: tick()) if tick else None)
    failed_nb = {job.cwd: r.error for job, r in zip(nb_jobs, results) if not r.ok}

    for m, b, home in homes:
        if home in failed_nb:
            outcomes.append(Outcome(m.task.id, m.id, b.label, "error", message=failed_nb[home]))
            continue
        s = read_json(home / SCORE)
        extraction = read_json(home / EXTRACTION)
        notes = list(s.get("notes", []))
        err = extraction["run"].get("error")
        if err:
            notes.insert(0, f"backend error: {err}")
        outcomes.append(Outcome(m.task.id, m.id, b.label, "scored", score=s.get("score"), passed=s.get("passed"),
                                metrics=s.get("metrics", {}), notes=notes))

    report_jobs = [NotebookJob(NOTEBOOKS / "report.ipynb", run_dir / t.id / "report.ipynb",
                               {"run_dir": "..", "task": t.id}, run_dir / t.id)
                   for t in tasks if (run_dir / t.id).is_dir()]
    for job, r in zip(report_jobs, execute(report_jobs, workers=opts.workers)):
        if not r.ok:
            print(f"evalkit: report notebook {job.output} failed: {r.error}", file=sys.stderr)
    if opts.html:
        from .render import render_run

        render_run(run_dir)
    return RunResult(run_dir=run_dir, outcomes=sorted(outcomes, key=lambda o: (o.task, o.member, o.backend)))


def _close(backends: list[Backend]) -> None:
    import asyncio

    async def close_all() -> None:
        for b in backends:
            await b.aclose()

    asyncio.run(close_all())
