"""The secret scrubber's cost per replayed record: `completion_from_record` (which scrubs every field of
the answer, `redact.scrub_answer`) over the committed cassette's records, and `redact.secrets` alone.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_redact.py [--rounds 20] [--secrets 2]

The environment is the caller's plus ``--secrets`` planted credentials (so the scrubber has work to do),
and a typical shell's ~60 other variables. Run it with another checkout on PYTHONPATH for the figure
before a change. Prints µs per record (best of 5 repeats, the median would show the machine's load) and
µs per `secrets()` call; asserts only that no planted key survives a scrub.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASSETTE = ROOT / "cassettes" / "gemma-3-270m-q4_k_m.jsonl"


def best_us(fn, n: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--secrets", type=int, default=2)
    args = ap.parse_args()
    for i in range(60):
        os.environ.setdefault(f"BENCH_VAR_{i}", f"/usr/local/share/value-{i}")
    planted = [f"sk-bench-{i}-0123456789abcdefghij" for i in range(args.secrets)]
    for i, key in enumerate(planted):
        os.environ[f"BENCH{i}_API_KEY"] = key

    from evalkit.backends import redact
    from evalkit.backends.cassette import completion_from_record

    records = [json.loads(line) for line in CASSETTE.read_text(encoding="utf-8").splitlines() if line.strip()]
    records[0]["response"]["model"] = planted[0]  # one record carries a key: it must come out scrubbed
    assert planted[0] not in json.dumps(completion_from_record(records[0]).to_json())

    def replay_all() -> None:
        for rec in records:
            completion_from_record(rec)

    per_record = best_us(replay_all, args.rounds) / len(records)
    per_secrets = best_us(redact.secrets, 2000)
    print(f"{len(records)} records, {len(os.environ)} environment variables, {args.secrets} planted secrets")
    print(f"completion_from_record (scrubbed): {per_record:.1f} µs per record")
    print(f"redact.secrets():                  {per_secrets:.1f} µs per call")


if __name__ == "__main__":
    main()
