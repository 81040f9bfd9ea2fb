"""How fast SIGINT/SIGTERM stop a run: seconds from the signal to evalkit's exit, and to the last
process of its tree (workers, kernels) gone.

    .venv/bin/python benchmarks/bench_interrupt.py [--repeat 5]

Each scenario holds a run mid-phase with the gate of tests/test_interrupt.py (a `python:` pipeline
waiting during extraction; a task scorer waiting inside a notebook kernel) and signals it there, the
way a terminal's Ctrl-C does (the whole process group) or a process manager's SIGTERM does (evalkit
only). Prints figures; asserts nothing (speed is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import mini_corpus  # noqa: E402
from corpus_factory import make_corpus  # noqa: E402
from test_interrupt import GATED_SCORER, PIPELINE, live, wait_for  # noqa: E402

from evalkit.results.runfolder import EXTRACTION  # noqa: E402


def _gone(tree: list[psutil.Process], deadline: float) -> float | None:
    def alive(p):
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    while time.monotonic() < deadline:
        if not any(alive(p) for p in tree):
            return time.monotonic()
        time.sleep(0.005)
    return None


def once(tmp: Path, scenario: str) -> tuple[float, float | None, int]:
    gate = tmp / "gate"
    if scenario.startswith("run: extraction"):
        path = tmp / "pipe.py"
        path.write_text(PIPELINE)
        corpus = make_corpus(tmp, members=2)
        args = ("run", "--corpus", corpus, "--backend", f"pipe=python:{path}:extract", "--out", tmp / "out")
        ready = (tmp / "out" / "memos" / "m0" / "pipe" / EXTRACTION).is_file
    else:
        corpus = mini_corpus(tmp / "corpus")
        scorer = corpus / "mini" / "scorer.py"
        scorer.write_text(scorer.read_text() + GATED_SCORER)
        command = "sweep" if scenario.startswith("sweep") else "run"
        args = (command, "--corpus", corpus, "--backend", "fake", "--workers", "2", "--out", tmp / "out")
        ready = gate.with_name("scoring").is_file
    sig = signal.SIGTERM if "SIGTERM" in scenario else signal.SIGINT
    with live(gate, *args) as proc:
        wait_for(ready, "the run to reach its phase", proc)
        top = psutil.Process(proc.pid)
        tree = [top, *top.children(recursive=True)]
        t0 = time.monotonic()
        os.killpg(proc.pid, sig) if "group" in scenario else proc.send_signal(sig)
        code = proc.wait(timeout=60)
        exited = time.monotonic()
        gone = _gone(tree, exited + 10)
    return exited - t0, None if gone is None else gone - t0, code


SCENARIOS = [
    "run: extraction, SIGTERM to evalkit",
    "run: extraction, SIGINT to the group",
    "run: notebooks, SIGINT to the group",
    "run: notebooks, SIGTERM to evalkit",
    "sweep: notebooks, SIGINT to the group",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    print(f"{'scenario':40} {'exit code':>9} {'exit s (median/max)':>20} {'all gone s (median/max)':>24}")
    for scenario in SCENARIOS:
        exits, gones, codes = [], [], set()
        for _ in range(a.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                exited, gone, code = once(Path(tmp), scenario)
            exits.append(exited)
            gones.append(gone if gone is not None else float("inf"))
            codes.add(code)
        print(f"{scenario:40} {'/'.join(map(str, sorted(codes))):>9} "
              f"{statistics.median(exits):9.2f} / {max(exits):5.2f}     "
              f"{statistics.median(gones):9.2f} / {max(gones):5.2f}")


if __name__ == "__main__":
    main()
