"""Wall time of `evalkit run` on the bundled corpus, and its per-member overhead
against executing an empty notebook with papermill.

    .venv/bin/python benchmarks/bench_run.py [--backend fake] [--repeat 3]

Prints figures; asserts nothing (speed is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import papermill

from evalkit.results.runfolder import read_run_json

ROOT = Path(__file__).resolve().parent.parent


def empty_notebook_seconds(repeat: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        src = Path(tmp) / "empty.ipynb"
        nbformat.write(nb, src)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            papermill.execute_notebook(str(src), str(Path(tmp) / "out.ipynb"), parameters={"x": 2},
                                       progress_bar=False, kernel_name="python3")
            times.append(time.perf_counter() - t)
        return statistics.median(times)


def run_seconds(backend: str, repeat: int) -> tuple[float, int]:
    times, members = [], 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--backend", backend, "--out", tmp],
                                  capture_output=True, text=True, cwd=ROOT)
            times.append(time.perf_counter() - t)
            if proc.returncode not in (0, 1):
                sys.exit(f"evalkit run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
            members = len(read_run_json(tmp).members)
    return statistics.median(times), members


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="fake")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    empty = empty_notebook_seconds(args.repeat)
    total, members = run_seconds(args.backend, args.repeat)
    per_member = total / max(members, 1)
    print(f"cores: {os.cpu_count()}  sources: {os.environ.get('EVALKIT_SOURCES', '(unset)')}")
    print(f"empty papermill notebook (Python API, median of {args.repeat}): {empty:.2f} s")
    print(f"evalkit run --backend {args.backend}: {total:.2f} s wall for {members} members "
          f"(median of {args.repeat}; 2 notebooks per member + 1 report per task + HTML)")
    print(f"per member: {per_member:.2f} s wall = {per_member / empty:.2f} × an empty notebook")


if __name__ == "__main__":
    main()
