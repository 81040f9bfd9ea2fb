"""Kernels for evalkit's notebooks: the warm-kernel papermill engine and the files every kernel uses.

Starting a kernel and importing pandas, altair and evalkit into it costs ~2 s; running one of evalkit's
notebooks costs a few tenths of that. The ``evalkit`` papermill engine (`WarmEngine`, registered through
papermill's ``papermill.engine`` entry point and on import of this module) keeps one long-lived kernel per
process — a notebook worker of `evalkit.execution.execute` — with those modules imported once. Before each notebook
it resets the kernel (`evalkit.execution.kernelreset`: user namespace, execution counter, working directory, warning
registries), so the executed notebook is byte-identical to one run in a fresh kernel; tests/test_kernels.py
compares both on every bundled task.

A kernel that dies during a notebook is replaced and the notebook run again once, from its parameterized
start. A kernel left in an unknown state (a cell timed out, the engine itself failed) is shut down; the
next notebook gets a fresh one. Kernels go when their process exits (or is stopped, `evalkit._util.interrupt`).

``papermill --engine evalkit`` uses the same engine from papermill's command line.
"""

from __future__ import annotations

import atexit
import copy
import glob
import os
import uuid

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines
from papermill.log import logger
from papermill.utils import merge_kwargs, remove_args

from evalkit._util.interrupt import at_stop
from evalkit._util.resources import jupyter_dir

__all__ = ["ENGINE", "WarmEngine", "kernel_files", "remove_kernel_files", "shutdown_all", "WARM_IMPORTS"]

ENGINE = "evalkit"
# What every evalkit notebook imports: paid once per kernel, not once per notebook.
WARM_IMPORTS = ("pandas", "altair", "evalkit.report.views", "evalkit.stages.pipeline", "evalkit.report.frames", "evalkit.results.runfolder",
                "evalkit.backends", "evalkit.compare.sides", "evalkit.execution.kernelreset")


def kernel_files() -> dict[str, str]:
    """Connection file and IPC sockets at a unique path under JUPYTER_RUNTIME_DIR.

    IPC: no TCP port races between concurrent kernels. The explicit paths keep
    the files out of /tmp (jupyter_client's default for the connection file)
    and out of the notebook's folder (its default IPC path is relative to the
    cwd, which two notebooks of one member may share). TCP when the path would
    be too long for a Unix socket.
    """
    runtime = os.environ.get("JUPYTER_RUNTIME_DIR", str(jupyter_dir() / "runtime"))
    stem = os.path.join(runtime, f"k-{uuid.uuid4().hex[:12]}")
    files = {"connection_file": stem + ".json"}
    if len(stem.encode()) <= 96:
        files |= {"transport": "ipc", "ip": stem}
    return files


def remove_kernel_files(files: dict[str, str]) -> None:
    sockets = glob.glob(glob.escape(files["ip"]) + "-*") if "ip" in files else []
    for path in [files["connection_file"], *sockets]:
        try:
            os.unlink(path)
        except OSError:
            pass


class _WarmKernel:
    """One started kernel with its client, the modules of `WARM_IMPORTS` imported."""

    def __init__(self, kernel_name: str, extra_arguments: list[str], startup_timeout: float):
        from nbclient import NotebookClient  # lazy: nbclient is loaded only where it is used (import cost)
        from nbformat import v4  # lazy: nbformat is loaded only where it is used (import cost)
        from traitlets.config import Config  # lazy: traitlets is loaded only where it is used (import cost)

        self.key = (kernel_name, tuple(extra_arguments))
        self.files = kernel_files()
        # A client of our own starts the kernel; each notebook's client then borrows km and kc.
        self.starter = NotebookClient(v4.new_notebook(), kernel_name=kernel_name, extra_arguments=extra_arguments,
                                      startup_timeout=startup_timeout, config=Config({"KernelManager": self.files}))
        self.starter.km = self.starter.create_kernel_manager()
        try:
            self.starter.start_new_kernel()
            self.starter.start_new_kernel_client()
            self.km, self.kc = self.starter.km, self.starter.kc
            self.call(f"import {', '.join(WARM_IMPORTS)}", timeout=max(startup_timeout, 120))
        except BaseException:
            self.shutdown()
            raise

    def call(self, code: str, timeout: float = 60) -> None:
        """Run `code` silently (no execution count, no history, no output kept); raise if it fails."""
        from nbclient.exceptions import DeadKernelError  # lazy: nbclient is loaded only where it is used (import cost)

        self.starter.timeout = timeout  # a CellTimeoutError past it; a DeadKernelError if the kernel dies
        reply = self.starter.wait_for_reply(self.kc.execute(code, silent=True, store_history=False))
        if reply is None:
            raise DeadKernelError("the kernel did not answer")
        if reply["content"].get("status") != "ok":
            content = reply["content"]
            raise RuntimeError(f"warm kernel: {content.get('ename')}: {content.get('evalue')}")

    def alive(self) -> bool:
        # lazy: jupyter_core is loaded only where it is used (import cost)
        from jupyter_core.utils import ensure_async, run_sync

        async def check() -> bool:
            return bool(await ensure_async(self.km.is_alive()))

        try:
            return run_sync(check)()
        except Exception:  # noqa: BLE001 - a manager that cannot tell is as good as dead
            return False

    def shutdown(self) -> None:
        try:
            kernel = getattr(self.starter.km, "provisioner", None)
            process = getattr(kernel, "process", None)
            if process is not None and process.poll() is None:
                process.kill()  # its outputs are all in: no graceful exit to wait for
                process.wait()
            if self.starter.kc is not None:
                self.starter.kc.stop_channels()
        except Exception:  # noqa: BLE001 - going anyway
            pass
        finally:
            remove_kernel_files(self.files)


_kernels: dict[tuple, _WarmKernel] = {}


def _kernel(kernel_name: str, extra_arguments: list[str], startup_timeout: float) -> _WarmKernel:
    key = (kernel_name, tuple(extra_arguments))
    kernel = _kernels.get(key)
    if kernel is not None and not kernel.alive():
        _discard(kernel)
        kernel = None
    if kernel is None:
        at_stop(shutdown_all)
        kernel = _kernels[key] = _WarmKernel(kernel_name, extra_arguments, startup_timeout)
    return kernel


def _discard(kernel: _WarmKernel) -> None:
    if _kernels.get(kernel.key) is kernel:
        del _kernels[kernel.key]
    kernel.shutdown()


def shutdown_all() -> None:
    """Stop every warm kernel of this process (at exit; from a worker's stop cleanup)."""
    for kernel in list(_kernels.values()):
        _discard(kernel)


atexit.register(shutdown_all)


class WarmEngine(NBClientEngine):
    """papermill's nbclient engine on this process's warm kernel (see module docstring)."""

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None, stderr_file=None,
                                 start_timeout=60, execution_timeout=None, **kwargs):
        from nbclient.exceptions import DeadKernelError  # lazy: nbclient is loaded only where it is used (import cost)

        # As NBClientEngine, less what starts and stops a kernel: the kernel is ours, not the notebook's.
        kwargs = remove_args(["input_path", "timeout", "startup_timeout", "kernel_manager_class", "shutdown_kernel",
                              "config"], **kwargs)
        extra_arguments = list(kwargs.pop("extra_arguments", None) or [])
        final_kwargs = merge_kwargs(kwargs, timeout=execution_timeout, startup_timeout=start_timeout,
                                    kernel_name=kernel_name, log=logger, log_output=log_output,
                                    stdout_file=stdout_file, stderr_file=stderr_file)
        cwd = os.getcwd()  # papermill runs the engine in the notebook's cwd
        pending = copy.deepcopy(nb_man.nb)  # the parameterized notebook, for a retry
        for attempt in (1, 2):
            kernel = _kernel(kernel_name, extra_arguments, start_timeout)
            try:
                kernel.call(f"import evalkit.execution.kernelreset; evalkit.execution.kernelreset.reset({cwd!r})")
                client = PapermillNotebookClient(nb_man, km=kernel.km, **final_kwargs)
                client.kc = kernel.kc
                return client.execute()
            except DeadKernelError:
                _discard(kernel)
                if attempt == 2:
                    raise
                nb_man.nb = copy.deepcopy(pending)  # run it again from the start in a fresh kernel
            except BaseException:  # a timeout, an interrupt: the kernel's state is unknown
                _discard(kernel)
                raise
        raise AssertionError("unreachable: the second attempt returns or raises")


papermill_engines.register(ENGINE, WarmEngine)
