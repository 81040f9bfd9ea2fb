"""Execute notebooks with papermill in worker processes; normalize what they leave.

Each job runs papermill's Python API in a worker process (`evalkit.execution.workers`; a
sweep's member worker runs its member's notebooks itself) on that worker's warm
kernel (`evalkit.execution.kernels`: started once, reset between notebooks; ``kernels="cold"``
starts a kernel per notebook instead, for the same bytes), cwd = the output
notebook's folder, so relative paths in the parameters resolve against it. One failing notebook never stops the others:
every job gets a `NotebookResult` (ok, or the failing cell's ``ename: evalue``).

After a run the notebook is normalized (see `normalize`) so the same inputs
give byte-identical files: no times, no absolute paths, no random cell ids.
``execution_count`` is kept (nbval skips cells without one).

papermill writes the executed copy as it goes into a temp file beside the
output; the output is replaced only by a whole, normalized notebook, so a
stopped run never leaves half a notebook where a finished one was. Stopping
(SIGINT/SIGTERM, see `evalkit._util.interrupt`) stops the pool at once: workers and
their kernels are killed, not waited for.

Jupyter and IPython state (kernel connection files, profile, config) is kept in
evalkit's per-user cache folder (`evalkit._util.resources.jupyter_dir`), never in
site-packages, the source tree or the user's own Jupyter folders.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit._util.interrupt import on_stop, worker_signals
from evalkit._util.jsonio import partial_path, write_text
from evalkit._util.resources import NOTEBOOKS_DIR  # the templates ship in the package
from evalkit._util.resources import jupyter_dir as _default_jupyter_dir
from evalkit.backends import BackendSpec
from evalkit.backends.redact import scrub
from evalkit.execution.workers import run_all
from evalkit.results import runfolder

__all__ = [
    "NotebookJob", "NotebookResult", "execute", "normalize", "normalize_file", "jupyter_env",
    "plan_member", "plan_report", "NOTEBOOKS_DIR", "KERNEL_NAME", "KERNELS", "WARM", "COLD",
]

KERNEL_NAME = "python3"
WARM, COLD = "warm", "cold"
KERNELS = (WARM, COLD)  # `evalkit run --kernels`: a worker's one long-lived kernel, or one per notebook
INJECTED_ID = "injected-parameters"
# The kernel keeps no input history (no sqlite file shared by concurrent kernels) and logs
# only what is fatal to its own stderr (which is the runner's terminal).
KERNEL_ARGS = ["--HistoryManager.enabled=False", "--IPKernelApp.log_level=CRITICAL"]


@dataclass(frozen=True)
class NotebookJob:
    """Run `notebook` (a template) with `parameters`, writing the executed copy to `output`.

    The kernel's working directory is `cwd` (default ``output.parent``): paths
    in `parameters` must be relative to it. `after` lists the `output`s of jobs
    that must finish (successfully or not) before this one starts.
    """

    notebook: Path
    output: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    cwd: Path | None = None
    after: tuple[Path, ...] = ()

    @property
    def workdir(self) -> Path:
        return Path(self.cwd) if self.cwd is not None else Path(self.output).parent


@dataclass(frozen=True)
class NotebookResult:
    job: NotebookJob
    ok: bool
    error: str | None = None  # "ename: evalue (cell In [n])", or the worker's exception
    ename: str | None = None
    evalue: str | None = None
    seconds: float = 0.0  # wall time of this notebook, kernel start to normalized file


def jupyter_env(jupyter_dir: str | Path | None = None) -> dict[str, str]:
    """The environment variables that keep Jupyter/IPython state under `jupyter_dir`."""
    base = Path(jupyter_dir or _default_jupyter_dir()).resolve()
    return {
        "JUPYTER_DATA_DIR": str(base / "data"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "IPYTHONDIR": str(base / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",  # silences the frozen-modules debugger warning
    }


# --------------------------------------------------------------------------- normalization

_TIMES = ("start_time", "end_time", "duration")


def normalize(nb: Any) -> Any:
    """Remove what changes between two runs of the same inputs (in place; returns `nb`).

    * notebook ``metadata.papermill``: start/end time and duration dropped;
      input/output paths reduced to file names;
    * cell ``metadata.papermill``: times dropped (status/exception kept);
      cell ``metadata.execution`` (nbclient timing) dropped;
    * the injected-parameters cell gets the fixed id ``injected-parameters``;
      papermill's error-banner cells get ``papermill-error-<n>``;
    * ``metadata.kernelspec`` fixed to python3; ``language_info.version``
      reduced to major.minor;
    * adjacent outputs of one stream joined (how a print's text was split into
      messages depends on when the kernel flushed its buffer);
    * every output scrubbed (`redact.scrub`): whatever a cell printed, showed or raised — a task
      scorer's own code runs in these cells — never carries a secret into the notebook or its page.
    """
    pm = nb.metadata.get("papermill")
    if pm is not None:
        for k in _TIMES:
            pm.pop(k, None)
        for k in ("input_path", "output_path"):
            if pm.get(k):
                pm[k] = Path(str(pm[k])).name
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": KERNEL_NAME}
    li = nb.metadata.get("language_info")
    if li and li.get("version"):
        li["version"] = ".".join(str(li["version"]).split(".")[:2])
    errors = 0
    for cell in nb.cells:
        if cell.get("outputs"):
            cell["outputs"] = _scrubbed(_joined_streams(cell["outputs"]))
        md = cell.get("metadata", {})
        md.pop("execution", None)
        cpm = md.get("papermill")
        if cpm is not None:
            for k in _TIMES:
                cpm.pop(k, None)
        tags = md.get("tags") or []
        if "injected-parameters" in tags:
            cell["id"] = INJECTED_ID
        elif "papermill-error-cell-tag" in tags:
            errors += 1
            cell["id"] = f"papermill-error-{errors}"
    return nb


def _joined_streams(outputs: list[Any]) -> list[Any]:
    """Adjacent outputs of one stream (stdout, stderr) as one: the kernel sends a print's text in as many
    messages as its output buffer happened to be flushed, which differs from run to run. Order is kept."""
    joined: list[Any] = []
    for out in outputs:
        last = joined[-1] if joined else None
        if (out.get("output_type") == "stream" and last is not None and last.get("output_type") == "stream"
                and last.get("name") == out.get("name")):
            last["text"] = "".join(last["text"]) + "".join(out["text"])
        else:
            joined.append(out)
    return joined


def _scrubbed(outputs: list[Any]) -> list[Any]:
    """`outputs` with every secret scrubbed; an error's name, value and traceback by both rules."""
    import nbformat  # lazy: nbformat is loaded only where it is used (import cost)

    clean = [scrub(o, key_shaped=o.get("output_type") == "error") for o in outputs]
    return outputs if clean == outputs else [nbformat.from_dict(o) for o in clean]


def normalize_file(path: str | Path, out: str | Path | None = None) -> None:
    """Normalize an executed notebook file, in place or into `out` (atomic write either way);
    `out` is recorded as papermill's output path."""
    import nbformat  # lazy: nbformat is loaded only where it is used (import cost)

    path = Path(path)
    out = Path(out) if out is not None else path
    nb = nbformat.read(path, as_version=4)
    normalize(nb)
    pm = nb.metadata.get("papermill")
    if pm is not None and pm.get("output_path"):
        pm["output_path"] = out.name
    write_text(out, nbformat.writes(nb) + "\n")


# --------------------------------------------------------------------------- worker

def _init_worker(env: dict[str, str]) -> None:
    worker_signals()  # SIGINT is the main process's to handle; SIGTERM: kill the kernel, clean up, leave
    os.environ.update(env)
    for key in ("JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "IPYTHONDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    import papermill  # noqa: F401  (warm: the import is paid once per worker)


_thread = None


def _off_main_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `fn` in this process's notebook thread and wait for it. Run from the main thread, nbclient takes
    SIGINT and SIGTERM over for the notebook's duration (it shuts the kernel down and carries on, leaving a
    failed notebook); off it, this worker's own handlers (`interrupt.worker_signals`) stay in force. One
    thread for every notebook: a warm kernel's client lives in that thread's event loop."""
    global _thread

    if _thread is None:
        _thread = ThreadPoolExecutor(1, thread_name_prefix="papermill")
    return _thread.submit(fn, *args, **kwargs).result()


def _run_one(notebook: str, output: str, parameters: dict[str, Any], cwd: str, timeout: float | None,
             kernels: str = WARM) -> tuple:
    """Execute one notebook; return (ok, ename, evalue, exec_count, seconds)."""
    import papermill as pm  # lazy: papermill is loaded only where it is used (import cost)

    # lazy: papermill is loaded only where it is used (import cost)
    from papermill.exceptions import PapermillExecutionError
    from traitlets.config import Config  # lazy: traitlets is loaded only where it is used (import cost)

    # lazy: a cycle, papermill's entry point imports execution.kernels back
    from evalkit.execution.kernels import ENGINE, kernel_files, remove_kernel_files

    t0 = time.perf_counter()
    out = Path(output)
    partial = partial_path(out)  # papermill writes here; `out` is replaced by a whole notebook only
    result: tuple = (True, None, None, None)
    if kernels == WARM:  # this process's long-lived kernel (evalkit.execution.kernels)
        files: dict[str, str] = {}
        engine: dict[str, Any] = {"engine_name": ENGINE}
    else:  # a kernel of its own, killed when its outputs are in
        files = kernel_files()
        engine = {"config": Config({"KernelManager": files}), "shutdown_kernel": "immediate"}

    def cleanup() -> None:
        if files:
            remove_kernel_files(files)
        partial.unlink(missing_ok=True)

    with on_stop(cleanup):
        try:
            with warnings.catch_warnings():  # the partial's name does not end in .ipynb, on purpose
                warnings.filterwarnings("ignore", message=r"The specified file .* does not end in one of")
                _off_main_thread(
                    pm.execute_notebook, notebook, str(partial), parameters=parameters, kernel_name=KERNEL_NAME,
                    cwd=cwd, progress_bar=False, log_output=False, request_save_on_cell_execute=False,
                    execution_timeout=timeout, record_timing=False, extra_arguments=KERNEL_ARGS, **engine)
        except PapermillExecutionError as e:  # papermill has written the notebook with its error: kept
            result = (False, e.ename, e.evalue, e.exec_count)
        except Exception as e:  # kernel died, template missing, timeout...
            result = (False, type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "", None)
        try:
            if partial.stat().st_size:
                normalize_file(partial, out)
        except Exception as e:  # papermill left no readable notebook: report it, `out` keeps its last whole one
            if result[0]:
                result = (False, type(e).__name__, f"normalizing {out.name}: {e}", None)
        finally:
            cleanup()
    return (*result, time.perf_counter() - t0)


# --------------------------------------------------------------------------- pool

def _result(job: NotebookJob, raw: tuple | Exception) -> NotebookResult:
    if isinstance(raw, Exception):  # the worker process itself failed (or died: `workers.WorkerDied`)
        text = scrub(str(raw), key_shaped=True)
        return NotebookResult(job, False, f"{type(raw).__name__}: {text}", type(raw).__name__, text)
    ok, ename, evalue, exec_count, seconds = raw
    evalue = scrub(evalue, key_shaped=True)  # a cell's exception (a scorer's own) may quote a key
    if ok:
        return NotebookResult(job, True, seconds=seconds)
    where = f" (cell In [{exec_count}])" if exec_count is not None else ""
    return NotebookResult(job, False, f"{ename}: {evalue}{where}", ename, evalue, seconds)


def execute(jobs: list[NotebookJob], workers: int | None = None,
            on_done: Callable[[NotebookJob, NotebookResult], None] | None = None,
            timeout: float | None = None, jupyter_dir: str | Path | None = None,
            kernels: str = WARM, scheduler: Any = None) -> list[NotebookResult]:
    """Run every job in worker processes (`evalkit.execution.workers`); the i-th result belongs to the i-th job.

    `workers` defaults to the CPU count; `on_done(job, result)` is called in this
    process as each notebook finishes (for a progress display); `timeout` is
    per cell in seconds (None: no limit). Jobs start when the jobs named in
    their `after` have finished; a failed job does not stop the others. `kernels`: ``warm`` (each worker
    keeps one kernel for all its notebooks, `evalkit.execution.kernels`) or ``cold`` (a kernel per notebook); the
    executed notebooks are the same bytes either way.
    """
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {', '.join(KERNELS)}, not {kernels!r}")
    by_output = {Path(j.output).resolve(): i for i, j in enumerate(jobs)}
    after = [{by_output[p] for p in (Path(a).resolve() for a in j.after) if p in by_output} for j in jobs]
    calls = [(_run_one, (str(Path(j.notebook).resolve()), str(Path(j.output).resolve()), dict(j.parameters),
                         str(j.workdir.resolve()), timeout, kernels)) for j in jobs]
    results: list[NotebookResult | None] = [None] * len(jobs)

    def done(i: int, raw: Any) -> None:
        results[i] = _result(jobs[i], raw)
        if on_done:
            on_done(jobs[i], results[i])

    if jobs:
        run_all(calls, workers, after=after, initializer=_init_worker, initargs=(jupyter_env(jupyter_dir),),
                on_done=done, scheduler=scheduler)  # scheduler: an `evalkit.execution.scheduler.Cluster`, or the local pool
    return results  # type: ignore[return-value]


# --------------------------------------------------------------------------- planning a run

def _rel(path: str | Path | None, start: Path) -> str | None:
    if path is None:
        return None
    return os.path.relpath(Path(path).resolve(), start.resolve())


def plan_member(run_dir: str | Path, task: str, member: str, backend: BackendSpec, corpus: str | Path,
                sources: str | Path | None = None, threshold: float | None = None,
                notebooks: str | Path = NOTEBOOKS_DIR, reference: str | None = None) -> list[NotebookJob]:
    """extract.ipynb then score.ipynb for one member and backend (its ``NAME=SPEC`` is the notebooks'
    ``backend`` parameter). With `reference` (``--reference LABEL``), score.ipynb scores against LABEL's
    record, and LABEL's own member gets extract.ipynb only.

    Writes into the member × backend's folder (`runfolder.member_dir`); corpus and
    sources are passed relative to that folder.
    """
    folder = runfolder.member_dir(run_dir, task, member, backend.label)
    folder.mkdir(parents=True, exist_ok=True)
    params = {"task": task, "member": member, "backend": str(backend), "corpus": _rel(corpus, folder),
              "sources": _rel(sources, folder), "out": "."}
    extract = NotebookJob(Path(notebooks) / runfolder.EXTRACT_NB, folder / runfolder.EXTRACT_NB, params)
    if reference is not None and backend.label == reference:
        return [extract]
    score = NotebookJob(Path(notebooks) / runfolder.SCORE_NB, folder / runfolder.SCORE_NB,
                        params | {"threshold": threshold} | ({"reference": reference} if reference else {}),
                        after=(extract.output,))
    return [extract, score]


def plan_report(run_dir: str | Path, task: str, after: list[NotebookJob] = (),
                notebooks: str | Path = NOTEBOOKS_DIR) -> NotebookJob:
    """report.ipynb for a task, to run after `after` (its members' jobs)."""
    folder = runfolder.task_dir(run_dir, task)
    folder.mkdir(parents=True, exist_ok=True)
    return NotebookJob(Path(notebooks) / runfolder.REPORT, folder / runfolder.REPORT,
                       {"run_dir": "..", "task": task}, after=tuple(j.output for j in after))


def _main(argv: list[str]) -> int:  # pragma: no cover - a manual entry point for timing
    import argparse

    ap = argparse.ArgumentParser(description="execute evalkit notebooks for a task (no extraction pool)")
    ap.add_argument("run_dir")
    ap.add_argument("task")
    ap.add_argument("members", nargs="+")
    ap.add_argument("--backend", default="fake")
    ap.add_argument("--corpus", default="corpus")
    ap.add_argument("--sources")
    ap.add_argument("--workers", type=int)
    a = ap.parse_args(argv)
    backend = BackendSpec.parse(a.backend)
    jobs = [j for m in a.members for j in plan_member(a.run_dir, a.task, m, backend, a.corpus, a.sources)]
    jobs.append(plan_report(a.run_dir, a.task, jobs))
    t0 = time.perf_counter()
    res = execute(jobs, a.workers, on_done=lambda _, r: print(f"{'ok ' if r.ok else 'ERR'} {r.seconds:5.2f}s "
                                                          f"{r.job.output} {r.error or ''}"))
    print(f"{len(jobs)} notebooks in {time.perf_counter() - t0:.2f}s")
    return 0 if all(r.ok for r in res) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
