"""Whole-process concurrency benchmark for evalkit's extraction path.

Starts a local OpenAI-compatible server (tests/servers/openai_fake.py, its own
process) that answers every chat completion after a fixed latency, then runs
evalkit's extraction path — `build_backends` + the `openai:` backend (official
SDK) + `evalkit.execution.pool` — for N single-call members at a given concurrency in a
FRESH Python process, and times that whole process from spawn to exit
(interpreter start, imports, client creation, all calls, shutdown).

    ideal = N × latency / concurrency        (200 × 0.2 / 16 = 2.5 s)
    ratio = ideal / actual whole-process wall time      (target ≥ 0.8)

Usage:  python benchmarks/bench_concurrency.py [--n 200] [--latency 0.2] [--concurrency 16] [--repeat 3]

``--sweep``: the same calls made by ``evalkit sweep --no-notebooks --workers W`` on an N-member corpus
(a fresh ``evalkit`` process each time), against the fake server running in this process, which notes when
each call arrives and is answered. A sweep also spawns workers and scores every member, so its figure is
the *call phase's*: ideal / (last answer − first arrival), beside the same window for the SDK alone
(``--baseline``), and the whole process's wall for reference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from evalkit.backends import BackendSpec, Request
from evalkit.backends.resolve import build_backends
from evalkit.execution.pool import Job, run_pool
url, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t_import = time.perf_counter()
schema = {"type": "object", "properties": {"echo": {"type": "string"}, "chars": {"type": "integer"}}}
requests = [Request(member=f"bench/m{i:03d}", call_type="extract", system="Extract the fields as JSON.",
                    user=f"Document {i}: Acme {i} signed a memo on day {i}.", schema=schema, max_tokens=64)
            for i in range(n)]
(backend,) = build_backends([BackendSpec.parse(f"bench=openai:url={url}/v1,model=bench-model")])
result = run_pool([Job(backend, r) for r in requests], max_concurrency=concurrency)
t_end = time.perf_counter()
errors = [c.error for c in result.completions if c.error or c.record is None]
ordered = all(c.record["chars"] == len(r.user) for c, r in zip(result.completions, requests) if c.record)
print(json.dumps({"import_s": t_import - t0, "pool_s": result.wall_s, "in_process_s": t_end - t0,
                  "errors": len(errors), "first_error": errors[0] if errors else None, "ordered": ordered}))
"""


# The reference the issue quotes ("the official openai SDK alone"): AsyncOpenAI + a semaphore + gather,
# nothing else. Measured in the same conditions, it tells machine load apart from evalkit overhead.
SDK_ALONE = r"""
import asyncio, json, sys, time
t0 = time.perf_counter()
from openai import AsyncOpenAI
url, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
schema = {"type": "object", "properties": {"echo": {"type": "string"}, "chars": {"type": "integer"}}}
async def main():
    client = AsyncOpenAI(base_url=url + "/v1", api_key="sk-no-key-required")
    gate = asyncio.Semaphore(concurrency)
    async def one(i):
        async with gate:
            r = await client.chat.completions.create(
                model="bench-model", max_tokens=64, temperature=0,
                messages=[{"role": "system", "content": "Extract the fields as JSON."},
                          {"role": "user", "content": f"Document {i}: Acme {i} signed a memo on day {i}."}],
                response_format={"type": "json_schema", "json_schema": {"name": "extraction", "schema": schema}})
            return json.loads(r.choices[0].message.content)
    out = await asyncio.gather(*(one(i) for i in range(n)))
    await client.close()
    return out
t1 = time.perf_counter()
out = asyncio.run(main())
print(json.dumps({"import_s": t1 - t0, "pool_s": time.perf_counter() - t1, "errors": 0, "first_error": None,
                  "ordered": len(out) == n}))
"""


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "servers" / "openai_fake.py"), "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("PORT ") or proc.poll() is not None:
        proc.kill()
        raise SystemExit(f"benchmark server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def run_once(url: str, n: int, concurrency: int, code: str = CHILD) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALKIT_")}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, url, str(n), str(concurrency)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"benchmark client failed:\n{out.stderr}")
    return wall, json.loads(out.stdout.strip().splitlines()[-1])


def _window_server(latency: float):
    """The fake OpenAI server in this process, noting each call's arrival and answer (perf_counter)."""
    import asyncio

    sys.path.insert(0, str(ROOT / "tests"))
    from servers.openai_fake import OpenAIFake

    class Timed(OpenAIFake):
        def __init__(self) -> None:
            super().__init__()
            self.spans: list[tuple[float, float]] = []

        async def _handle(self, req, server):
            t0 = time.perf_counter()
            await asyncio.sleep(latency)
            try:
                return await super()._handle(req, server)
            finally:
                with self.lock:
                    self.spans.append((t0, time.perf_counter()))

    return Timed().start()


def _window(server) -> float:
    with server.lock:
        spans, server.spans = server.spans, []
    return max(b for _, b in spans) - min(a for a, _ in spans)


def sweep_bench(args) -> None:
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from corpus_factory import make_corpus

    ideal = args.n * args.latency / args.concurrency
    server = _window_server(args.latency)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALKIT_") and not k.startswith("OPENAI_")}
    rows: dict[str, list[tuple[float, float]]] = {"sweep": [], "sdk": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = make_corpus(Path(tmp), members=args.n)
            for i in range(args.repeat):
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "evalkit.cli", "sweep", "--corpus", str(corpus),
                                      "--out", f"{tmp}/sw{i}", "--no-notebooks", "--workers", str(args.workers),
                                      "--max-concurrency", str(args.concurrency), "--backend",
                                      f"bench=openai:url={server.url}/v1,model=bench-model"],
                                     capture_output=True, text=True, env=env, cwd=tmp, timeout=1800)  # PYTHONPATH picks evalkit
                wall = time.perf_counter() - t0
                if out.returncode not in (0,):
                    raise SystemExit(f"sweep failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
                rows["sweep"].append((_window(server), wall))
                print(f"run {i + 1}: sweep   call phase {rows['sweep'][-1][0]:.3f} s  ratio "
                      f"{ideal / rows['sweep'][-1][0]:.3f}  (whole process {wall:.1f} s)", flush=True)
                if args.baseline:
                    wall, _ = run_once(server.url, args.n, args.concurrency, SDK_ALONE)
                    rows["sdk"].append((_window(server), wall))
                    print(f"run {i + 1}: SDK alone call phase {rows['sdk'][-1][0]:.3f} s  ratio "
                          f"{ideal / rows['sdk'][-1][0]:.3f}", flush=True)
    finally:
        server.stop()
    med = statistics.median(w for w, _ in rows["sweep"])
    print(f"N={args.n} latency={args.latency}s concurrency={args.concurrency} workers={args.workers} "
          f"ideal={ideal:.3f}s cpus={os.cpu_count()} load1={os.getloadavg()[0]:.2f}")
    print(f"sweep call phase: median {med:.3f} s → efficiency {ideal / med:.3f} (target ≥ 0.7); whole process "
          f"median {statistics.median(w for _, w in rows['sweep']):.1f} s")
    if rows["sdk"]:
        bm = statistics.median(w for w, _ in rows["sdk"])
        print(f"openai SDK alone call phase: median {bm:.3f} s → efficiency {ideal / bm:.3f}; "
              f"sweep/SDK-alone: {med / bm:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", action="store_true",
                    help="also time the openai SDK alone (no evalkit) in the same conditions, alternating runs")
    ap.add_argument("--sweep", action="store_true", help="time `evalkit sweep`'s call phase instead (see above)")
    ap.add_argument("--workers", type=int, default=2, help="--sweep: the sweep's worker processes")
    args = ap.parse_args()
    if args.sweep:
        sweep_bench(args)
        return
    ideal = args.n * args.latency / args.concurrency
    server, url = start_server(args.latency)
    try:
        walls, base_walls = [], []
        for i in range(args.repeat):
            wall, info = run_once(url, args.n, args.concurrency)
            walls.append(wall)
            print(f"run {i + 1}: evalkit  whole process {wall:.3f} s (imports {info['import_s']:.3f} s, "
                  f"pool {info['pool_s']:.3f} s)  ratio {ideal / wall:.3f}  errors {info['errors']}  "
                  f"order kept {info['ordered']}", flush=True)
            if info["errors"]:
                print(f"  first error: {info['first_error']}")
            if args.baseline:
                wall, info = run_once(url, args.n, args.concurrency, SDK_ALONE)
                base_walls.append(wall)
                print(f"run {i + 1}: SDK alone whole process {wall:.3f} s  ratio {ideal / wall:.3f}", flush=True)
    finally:
        server.terminate()
        server.wait(5)
    best, median = min(walls), statistics.median(walls)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(f"N={args.n} latency={args.latency}s concurrency={args.concurrency} ideal={ideal:.3f}s cpus={os.cpu_count()} "
          f"load1={load:.2f}")
    print(f"whole-process wall: median {median:.3f} s, best {best:.3f} s  →  ratio ideal/actual: "
          f"median {ideal / median:.3f}, best {ideal / best:.3f}  (target ≥ 0.8)")
    if base_walls:
        bm = statistics.median(base_walls)
        print(f"openai SDK alone, same conditions: median {bm:.3f} s → ratio {ideal / bm:.3f}, best "
              f"{ideal / min(base_walls):.3f}; evalkit/SDK-alone wall: {median / bm:.3f}")


if __name__ == "__main__":
    main()
