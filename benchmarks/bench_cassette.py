"""Open and replay a 100k-record cassette: the indexed open against parsing every line.

    .venv/bin/python benchmarks/bench_cassette.py [--records 100000] [--replays 2000]
                                                  [--before /path/to/another/venv/bin/python]

Builds a synthetic cassette in a temporary folder (deleted afterwards; never committed): the
committed default cassette's records, each copy with its own user prompt and so its own key, written
by the recorder's own code (`make_record`, `encode_record`), ~6.3 KB a record like a real recording.
Then measures, each in a fresh child process so that no figure warms the next, side by side:

- parse every line: ``json.loads`` of every line into a list and a key → records map (the least
  any parse-everything open costs);
- with ``--before PYTHON``: `Cassette.load` of another interpreter's evalkit (e.g. a checkout from
  before the index) on the same file;
- `Cassette.load` with no sidecar index yet (one pass over the file), then `save_index` (what a
  backend does when it closes);
- `Cassette.load` reusing that sidecar index, then `ReplayBackend.complete` of single records (ms
  each, wall and CPU: on a busy machine a wall outlier is a wait for a core, not work) and one miss
  (its message names the nearest recorded request, which reads every record once).

Seconds are the wall and CPU time of the open alone (imports excluded; on a busy machine wall exceeds
CPU by the waits for a core). Memory, against the file's size: the child's peak resident set
(``ru_maxrss``) after the open minus its resident set just before it, and, in a child of its own,
tracemalloc's peak of Python's allocations during the open.
The file stays in the page cache (warm reads; a cold disk adds its read time to the one pass and to
parse-every-line alike). Prints figures; asserts only that every way read every record (speed is
measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "cassettes" / "gemma-3-270m-q4_k_m.jsonl"


# -- the synthetic cassette ------------------------------------------------------------------------------
def _templates() -> list[dict]:
    lines = (json.loads(line) for line in TEMPLATES.read_text(encoding="utf-8").splitlines() if line.strip())
    return [rec for rec in lines if "key" in rec]  # the records, not a format header


def synthetic_request(templates: list[dict], i: int):
    from evalkit.backends.base import Request

    t = templates[i % len(templates)]
    settings = t["request"]["settings"]
    return Request(member=f"{t['member']}#{i}", call_type=t["call_type"], system=t["request"]["system"],
                   user=f"{t['request']['user']}\n[synthetic copy {i}]", schema=t["request"]["schema"],
                   max_tokens=settings["max_tokens"], temperature=settings["temperature"])


def build(path: Path, n: int) -> None:
    from evalkit.backends.cassette import completion_from_record, encode_record, make_record

    templates = _templates()
    completions = [replace(completion_from_record(t), calls=1, replayed=False) for t in templates]  # as if live
    with open(path, "wb") as f:
        for i in range(n):
            t = templates[i % len(templates)]
            rec = make_record(synthetic_request(templates, i), t["model"], t["provider"],
                              completions[i % len(templates)])
            f.write(encode_record(rec))


# -- one measurement, in a child process -----------------------------------------------------------------
def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def _rss() -> int:
    """The resident set now (Linux); elsewhere the peak so far, which understates a later rise."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return _peak_rss()


def _parse_every_line(path: Path) -> int:
    records, by_key = [], {}
    with open(path, "rb") as f:
        for line in f:
            rec = json.loads(line)
            records.append(rec)
            by_key.setdefault(rec["key"], []).append(rec)
    return len(records)


def child(mode: str, path: Path, n: int, replays: int, traced: bool) -> dict:
    try:
        from evalkit.backends.cassette import Cassette
    except ModuleNotFoundError:  # a --before checkout from before the cassette moved beside the backends
        from evalkit.cassette import Cassette

    def open_it():
        return _parse_every_line(path) if mode == "parse-all" else Cassette.load(path)

    if traced:  # Python's own allocations, in a run of its own (tracing slows everything down)
        tracemalloc.start()
        open_it()
        return {"traced_peak": tracemalloc.get_traced_memory()[1]}
    before = _rss()
    t, cpu = time.perf_counter(), time.process_time()
    cassette = open_it()
    out = {"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu, "peak_rise": _peak_rss() - before,
           "records": cassette if mode == "parse-all" else len(cassette)}
    if mode == "load" and hasattr(cassette, "save_index"):  # an older evalkit has no index to save
        t = time.perf_counter()
        cassette.save_index()  # what a backend does when it closes
        out["save_index_s"] = time.perf_counter() - t
    if mode == "replay":
        out.update(_replays(path, cassette, n, replays))
    return out


def _replays(path: Path, cassette, n: int, replays: int) -> dict:
    from evalkit.backends.cassette import ReplayBackend, cassette_key, miss_message

    templates = _templates()
    backend = ReplayBackend("g", path, cassette=cassette)
    requests = [synthetic_request(templates, i) for i in random.Random(1).sample(range(n), min(replays, n))]

    async def replay_all() -> list[tuple[float, float]]:
        times = []
        for request in requests:
            t, cpu = time.perf_counter(), time.thread_time()
            completion = await backend.complete(request)
            times.append((time.perf_counter() - t, time.thread_time() - cpu))
            assert completion.replayed
        return times

    wall, cpu = zip(*asyncio.run(replay_all()))
    # A miss: the same request with one word edited. Its message names the nearest recorded request,
    # which reads every record once (only on a miss).
    edited = replace(requests[0], user=requests[0].user.replace("[synthetic", "[edited synthetic"))
    t = time.perf_counter()
    message = miss_message(cassette, "g", edited, cassette_key(edited, backend.model), backend.model)
    miss_s = time.perf_counter() - t
    assert f"nearest recorded request: member {requests[0].member} " in message, message
    return {"replays": len(wall), "miss_s": miss_s,
            **{f"replay_{kind}_ms": [statistics.median(v) * 1e3, _percentile(v, 0.99) * 1e3, max(v) * 1e3]
               for kind, v in (("wall", wall), ("cpu", cpu))}}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(python: str, mode: str, path: Path, n: int, replays: int) -> dict:
    """The open traced, then timed (which may save the index: the traced run must see the file as it was)."""
    out = {}
    for traced in (["--traced"], []):
        proc = subprocess.run([python, __file__, "--child", mode, str(path), "--records", str(n),
                               "--replays", str(replays), *traced], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            sys.exit(f"{mode} under {python} failed:\n{proc.stderr[-3000:]}")
        out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


# -- the report ------------------------------------------------------------------------------------------
PARSE_ALL, SCAN, REUSE = "parse every line", "indexed open, one pass (no index yet)", "indexed open, index reused"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--replays", type=int, default=2000, help="single-record replays timed")
    ap.add_argument("--before", metavar="PYTHON", help="also time Cassette.load under this interpreter's evalkit")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], Path(args.child[1]), args.records, args.replays, args.traced)))
        return
    from evalkit.backends.cassette import index_path

    with tempfile.TemporaryDirectory(prefix="bench-cassette-") as tmp:
        path = Path(tmp) / "big.jsonl"
        t = time.perf_counter()
        build(path, args.records)
        size = path.stat().st_size
        print(f"synthetic cassette: {args.records:,} records, {size / 1e6:.0f} MB, built in "
              f"{time.perf_counter() - t:.1f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        rows = {PARSE_ALL: measure(sys.executable, "parse-all", path, args.records, args.replays)}
        if args.before:
            rows[f"Cassette.load of {args.before}"] = measure(args.before, "load", path, args.records, args.replays)
        index_path(path).unlink(missing_ok=True)
        rows[SCAN] = measure(sys.executable, "load", path, args.records, args.replays)
        rows[REUSE] = measure(sys.executable, "replay", path, args.records, args.replays)
        print(f"{'open':44} {'wall s':>7} {'CPU s':>7} {'peak RSS rise':>13} {'of file':>7} {'traced peak':>11} "
              f"{'of file':>7}")
        for name, r in rows.items():
            assert r["records"] == args.records, (name, r)
            print(f"{name:44} {r['seconds']:7.3f} {r['cpu_s']:7.3f} {r['peak_rise'] / 1e6:10.1f} MB "
                  f"{r['peak_rise'] / size:7.1%} {r['traced_peak'] / 1e6:8.1f} MB {r['traced_peak'] / size:7.1%}")
        base = rows[PARSE_ALL]
        for name in (SCAN, REUSE):
            r = rows[name]
            print(f"{PARSE_ALL} / {name}: {base['seconds'] / r['seconds']:.0f}× the time, "
                  f"{base['peak_rise'] / max(r['peak_rise'], 1):.0f}× the RSS rise, "
                  f"{base['traced_peak'] / r['traced_peak']:.0f}× the traced peak")
        print(f"saving the index after the one pass (a backend's close): {rows[SCAN]['save_index_s']:.3f} s, "
              f"{index_path(path).stat().st_size / 1e6:.1f} MB")
        r = rows[REUSE]
        print(f"replay of one record (ReplayBackend.complete, {r['replays']} random records), median / p99 / max:")
        for kind in ("wall", "cpu"):
            print(f"  {kind:4} " + " / ".join(f"{v:.3f}" for v in r[f"replay_{kind}_ms"]) + " ms")
        print(f"a miss (its message names the nearest of the {args.records:,} recorded requests): {r['miss_s']:.1f} s")


if __name__ == "__main__":
    main()
