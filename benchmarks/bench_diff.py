"""`evalkit diff` at scale: two synthetic runs of ``--members`` deal memos, diffed; wall time and peak RSS.

    .venv/bin/python benchmarks/bench_diff.py [--members 10000] [--keep DIR] [--no-html]

No extraction is run for the members: one real run of the bundled deal-memos task on the fake backend
(13 members, `runner.run` without notebooks) gives the template score.json / extraction.json files, and
`synthetic_runs` copies them to ``--members`` members per run through the run folder's writers. Run B differs
from run A in planted, seeded ways (an item mismatched, missing or hallucinated in every few members, a
verdict flipped, a few members errored), so the diff has flips, changed items and every section; every
tenth member is held out. Then ``evalkit diff A B`` runs as a fresh process (with its diff.ipynb and HTML
page; ``--no-html``: the terminal text only) and its wall time and peak RSS (of the largest of it and its
waited-for children: the kernel) are printed. tests/test_scale_pages.py builds its 1,000-member runs with
`synthetic_runs`.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = "deal-memos"


def template(root: Path) -> Path:
    """A real fake-backend run of the bundled deal-memos task (no notebooks, no HTML): the files copied."""
    from evalkit.backends import BackendSpec
    from evalkit.corpus.tasks import DEFAULT_CORPUS
    from evalkit.stages.runner import RunOptions, run

    out = root / "template"
    if not (out / TASK).is_dir():
        run(RunOptions(corpus=DEFAULT_CORPUS, backends=[BackendSpec.parse("fake")], tasks=[TASK], out=out,
                       notebooks=False, html=False))
    return out


def _planted(score: dict, i: int, side: str) -> dict:
    """Member i's score.json on `side` ("A" or "B"): B changes an item in every 7th member (hallucinated in
    every 21st), misses one in every 11th, and errors every 97th; A misses one in every 13th."""
    from evalkit.status import PROVIDER_ERROR, Failed

    if side == "B" and i % 97 == 5:
        return {**Failed(PROVIDER_ERROR, "synthetic: the provider answered 529").to_json(),
                "member": score["member"], "backend": score["backend"], "run": score["run"]}
    d = copy.deepcopy(score)
    items = d["items"]
    planted = []
    if side == "B" and i % 7 == 0:
        planted.append((i % len(items), "hallucinated" if i % 21 == 0 else "mismatch", f"planted-{i}"))
    if side == "B" and i % 11 == 0:
        planted.append(((i + 3) % len(items), "missing", None))
    if side == "A" and i % 13 == 0:
        planted.append(((i + 5) % len(items), "missing", None))
    total = sum(float(r.get("weight") or 1.0) for r in items) or 1.0
    for k, outcome, value in planted:
        row = items[k]
        if row.get("outcome") != "match":
            continue
        row.update(outcome=outcome, extracted=value, credit=0.0, reason=f"synthetic: planted {outcome}")
        d["score"] = round(float(d["score"]) - float(row.get("weight") or 1.0) / total, 6)
        d["metrics"]["matched"] -= 1
        d["metrics"][outcome if outcome != "mismatch" else "mismatched"] += 1
        d["metrics"]["score"] = d["score"]
    if planted:
        d["passed"] = d["score"] >= 0.9
    return d


def synthetic_runs(root: Path, members: int, tpl: Path | None = None) -> tuple[Path, Path]:
    """Runs ``root/A`` and ``root/B`` of `members` deal-memos members each (``m00000`` …), made from the
    template run's files through `evalkit.results.runfolder`'s writers; the same files for the same `members`."""
    from evalkit._util.jsonio import unsynced
    from evalkit.results import runfolder

    tpl = tpl or template(root)
    homes = [h for h in sorted((tpl / TASK).iterdir()) if (h / "fake" / runfolder.SCORE).is_file()]
    # the template's files as JSON, to write again under other member names (`_write_runs`)
    scores = [runfolder.read_score(h / "fake").to_json() for h in homes]
    extractions = [runfolder.read_extraction(h / "fake").to_json() for h in homes]
    run_json = runfolder.read_run_json(tpl).to_json()
    names = [f"m{i:05d}" for i in range(members)]
    with unsynced():  # synthetic files: no fsync each (minutes at 10,000 members)
        _write_runs(root, names, scores, extractions, run_json)
    os.sync()
    return root / "A", root / "B"


def _write_runs(root: Path, names: list[str], scores: list[dict], extractions: list[dict], run_json: dict) -> None:
    from evalkit._util.jsonio import write_json
    from evalkit.results import runfolder

    for side in ("A", "B"):
        run_dir = root / side
        for i, name in enumerate(names):
            home = runfolder.member_dir(run_dir, TASK, name, "fake")
            home.mkdir(parents=True, exist_ok=True)
            k = i % len(scores)
            ex = {**extractions[k], "member": name,
                  "request_sha256": f"{i:08x}{'b' if side == 'B' and i % 2 else 'a'}"}
            runfolder.write_extraction(home, ex)
            sc = _planted({**scores[k], "member": name,
                           "items": [{**r, "member": name} for r in scores[k]["items"]]}, i, side)
            write_json(home / runfolder.SCORE, sc)
        runfolder.write_run_json(run_dir, {**run_json, "members": [f"{TASK}/{n}" for n in names],
                                           "heldout": [f"{TASK}/{n}" for n in names[::10]]})


def _peak_children_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=10_000)
    ap.add_argument("--keep", help="build the runs in (and leave them in) this folder")
    ap.add_argument("--no-html", action="store_true", help="the terminal text only: no diff notebook, no HTML")
    args = ap.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-diff-"))
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if not (root / "B" / TASK).is_dir():
        synthetic_runs(root, args.members)
    print(f"runs of {args.members} members in {root} ({time.perf_counter() - t0:.1f} s to build)")
    command = [sys.executable, "-m", "evalkit.cli", "diff", str(root / "A"), str(root / "B")]
    if args.no_html:
        command.append("--no-html")
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    print(f"evalkit diff{' --no-html' if args.no_html else ''}: exit {done.returncode}, "
          f"{wall:.1f} s wall, {_peak_children_mb():.0f} MB peak RSS (the largest process)")
    if done.returncode not in (0,):
        print(done.stderr[-2000:], file=sys.stderr)
    lines = done.stdout.splitlines()
    print(f"({len(lines)} lines of output; first: {lines[0] if lines else ''!r})")


if __name__ == "__main__":
    main()
