"""Start-up: what ``evalkit --help`` costs beyond a bare interpreter (issue 27: ≤ 0.25 s).

    python benchmarks/bench_startup.py [--repeat 7] [--command "--help"]

Times, alternating, ``python -c pass`` and ``python -m evalkit.cli --help`` (each a fresh process, run from
a temporary folder so ``PYTHONPATH`` picks the evalkit measured) and prints the medians and their
difference. ``python -X importtime -m evalkit.cli --help`` names what is slow to import.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 0.25


def timed(argv: list[str], cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, check=True, timeout=60)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--command", default="--help", help="the evalkit arguments timed (default: --help)")
    args = ap.parse_args()
    bare, cli = [], []
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.repeat):
            bare.append(timed([sys.executable, "-c", "pass"], cwd))
            cli.append(timed([sys.executable, "-m", "evalkit.cli", *shlex.split(args.command)], cwd))
    b, c = statistics.median(bare), statistics.median(cli)
    print(f"interpreter: median {b:.3f} s; evalkit {args.command}: median {c:.3f} s (best {min(cli):.3f} s); "
          f"load1={os.getloadavg()[0]:.2f}")
    print(f"evalkit {args.command} beyond the interpreter: {c - b:.3f} s (target ≤ {TARGET_S} s)")


if __name__ == "__main__":
    main()
