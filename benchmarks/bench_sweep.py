"""A notebook sweep: wall time, and how many processes stand between evalkit and a notebook's kernel.

    .venv/bin/python benchmarks/bench_sweep.py [--task deal-memos] [--workers 2] [--repeat 1]
                                               [--before /path/to/another/venv/bin/python]

Runs ``evalkit sweep --task TASK --backend fake --workers N`` (notebooks on, no HTML) into a temporary
folder, with this interpreter (and, with ``--before``, another one: e.g. a checkout from before the
sweep ran its notebooks in the member worker, run from that checkout's folder), and samples the process
tree meanwhile: each kernel's depth below evalkit (1: a child of evalkit) and the process kinds on the
way. Prints the median wall time over ``--repeat`` sweeps; asserts only that each sweep exited 0.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def _kind(proc: psutil.Process) -> str:
    cmd = " ".join(proc.cmdline())
    if "ipykernel" in cmd:
        return "kernel"
    return "multiprocessing" if "multiprocessing" in cmd else proc.name()


def sweep(python: str, task: str, workers: int) -> tuple[float, set[tuple[str, ...]]]:
    """(wall seconds, the process chains from evalkit down to each kernel seen)."""
    chains: set[tuple[str, ...]] = set()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(python).absolute().parent.parent.parent  # <checkout>/.venv/bin/python → <checkout>
        t0 = time.perf_counter()
        proc = subprocess.Popen([python, "-m", "evalkit.cli", "sweep", "--task", task, "--backend", "fake",
                                 "--workers", str(workers), "--out", f"{tmp}/sweep"], cwd=cwd,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        top = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                for p in top.children(recursive=True):
                    if _kind(p) == "kernel" and _kind(p.parent()) != "kernel":  # not a kernel's own fork
                        chain, up = [], p
                        while up.pid != top.pid:
                            up = up.parent()
                            chain.append("evalkit" if up.pid == top.pid else _kind(up))
                        chains.add(tuple(reversed(chain)) + ("kernel",))
            except psutil.Error:  # a process left while we looked
                pass
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        if proc.wait() != 0:
            sys.exit(f"evalkit sweep failed ({proc.returncode}):\n{proc.stderr.read()[-2000:]}")
    return wall, chains


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="deal-memos")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--before", metavar="PYTHON", help="also time the sweep under this interpreter's evalkit")
    args = ap.parse_args()
    pythons = [sys.executable] + ([args.before] if args.before else [])
    for python in pythons:
        walls, chains = [], set()
        for _ in range(args.repeat):
            wall, seen = sweep(python, args.task, args.workers)
            walls.append(wall)
            chains |= seen
        print(f"{python}: sweep of {args.task}, {args.workers} workers: {statistics.median(walls):.1f} s "
              f"(median of {args.repeat})")
        for chain in sorted(chains):
            print(f"  kernel at depth {len(chain) - 1}: {' → '.join(chain)}")


if __name__ == "__main__":
    main()
