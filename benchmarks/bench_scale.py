"""Scale: 1,000 synthetic deal memos on the fake backend, through evalkit's paths and through Inspect AI.

    .venv/bin/python benchmarks/bench_scale.py [--members 1000] [--notebook-members 40] [--workers 2]
                                               [--repeat 1] [--seed 14] [--keep DIR] [--skip-inspect]
                                               [--markdown]
    .venv/bin/python benchmarks/bench_scale.py --curve 100,1000,10000 | --clutter 10 | --pages 10000

Builds a corpus of ``--members`` deal memos in a temporary folder (``--keep DIR`` builds it, and
leaves it and the run folders, in DIR): the bundled deal-memos task, each member a memo generated from
a seed (labels, ids, dates in several notations, rates, territories, stores, renewal, special rates
and a paragraph of amounts all vary, so every request differs) with its truth and a manifest carrying
its sha256. Then, each mode as a fresh `evalkit` process, with ``--backend fake`` (it echoes the truth:
every member passes):

- notebooks, cold and warm kernels: ``evalkit run --kernels cold|warm --no-html`` on the first
  ``--notebook-members`` members only (cold kernels cost ~2.5 s a member and the cost is linear in the
  members, so a subset gives the per-member figure). An evalkit without ``--kernels`` runs cold only.
- ``evalkit sweep --no-notebooks`` on every member;
- ``evalkit sweep --no-notebooks --scheduler local:WORKERS`` on every member, when this evalkit has
  ``--scheduler`` (else reported as not available);
- the anchor, Inspect AI on the same memos: one `Task` whose samples are the same system and user
  messages evalkit sends, Inspect's own ``mockllm/model`` answering each with its member's truth JSON
  (a dictionary look-up, like evalkit's fake backend: neither waits), and a scorer that parses the JSON
  and compares every field (sets as sets, numbers within 0.001), in Inspect's default configuration
  (log written). Inspect runs in its own venv, ``.venv-inspect`` at the checkout's top (created with
  ``inspect-ai`` on first use; ``--inspect-python`` uses another; never an evalkit dependency).

``--curve 100,1000,10000``: instead, the sweep's scaling curve: ``evalkit sweep --no-notebooks --backend
fake`` on the first N members of one corpus for each N (and on 1, the start-up), each a fresh process: wall and
CPU per member after start-up, the process tree's peak RSS, the sweep folder's disk use and sweep.json's
size, and the ratios between consecutive points (issue 27's bar: CPU per member at 10,000 within 1.2× of its
value at 1,000).

``--clutter X``: instead, ``sweep --no-notebooks`` of ``--members`` members against a ``predictions:`` folder of
their answers, and against the same folder with X times as many unrelated files: a first sweep and a re-sweep
(every member current), alternating ``--repeat`` times, and the cluttered / plain ratios (the bar: ≤ 1.5×).

``--pages N``: instead, an N-member run's index, task report, diff and scoreboard pages (synthetic score.json
files, benchmarks/bench_diff.py's) made, timed, and opened in headless Chromium (/usr/bin/chromium, as
tests/test_html_chromium.py runs it): each page's open time (its load minus a blank page's: the browser's start)
and whether every section (heading) and chart (drawn marks) is there; exits non-zero if one is not.

Each mode runs once on one member and once on all of its members; "after start-up" divides the
difference by the members added, so imports, a pool's or kernel's start and the run folder's
write-up drop out. CPU-s is the user + system time of the process and its waited-for children
(kernels and workers included). The modes alternate within each ``--repeat`` round and the medians are
printed: ratios come from the same run, since the shared machine is noisy (its load average is printed
beside the figures). Asserts only that every run exited as a run whose members all pass does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK_YAML = ROOT / "corpus" / "deal-memos" / "task.yaml"
INSPECT_VENV = ROOT / ".venv-inspect"  # beside .venv: not under benchmarks/, which tests scan for code
TASK_ID = "deal-memos"

# -- the synthetic corpus --------------------------------------------------------------------------------
LABEL_WORDS = ["Halden", "Copperline", "Marisol", "Birchwood", "Ashgrove", "Tidewater", "Northwind", "Saltmarsh",
               "Greyfield", "Lanternfly", "Oakhollow", "Brightwater", "Ravensworth", "Kilnhouse", "Moorland",
               "Silverbirch", "Emberlane", "Foxglove", "Harrowgate", "Quarry Lane"]
LABEL_KINDS = ["Records", "Music", "Sound", "Audio", "Recordings", "Tapes"]
CONTRACT_KINDS = ["Catalogue Distribution Agreement", "Worldwide Distribution", "Digital Distribution Agreement",
                  "Licence and Distribution Agreement", "Streaming Distribution Deal"]
COUNTRIES = [("United Kingdom", "GB"), ("Ireland", "IE"), ("Germany", "DE"), ("France", "FR"), ("Spain", "ES"),
             ("Italy", "IT"), ("United States", "US"), ("Canada", "CA"), ("Mexico", "MX"), ("Japan", "JP"),
             ("South Korea", "KR"), ("Brazil", "BR"), ("Australia", "AU"), ("Netherlands", "NL")]
STORES = ["Spotify", "Apple Music", "Amazon Music", "YouTube", "Deezer", "Tidal"]
TRANSACTIONS = [("stream", "streams"), ("download", "downloads"), ("sync", "sync licences"),
                ("physical", "physical sales")]
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def _date_text(rng: random.Random, d: date) -> str:
    return rng.choice([f"{d.day} {d:%B %Y}", f"{d:%B} {d.day}, {d.year}", d.isoformat(), f"{d:%d/%m/%Y} (day/month)"])


def synthetic_memo(rng: random.Random, i: int) -> tuple[str, dict]:
    """One deal memo and its truth: every value drawn from ``rng``, so member i is the same for a seed."""
    label = f"{rng.choice(LABEL_WORDS)} {rng.choice(LABEL_KINDS)}"
    start = date(2019, 1, 1) + timedelta(days=rng.randrange(9 * 365))
    contract = f"{label} {rng.choice(CONTRACT_KINDS)} {start.year}"
    ids = f"ACC-{rng.randrange(10_000, 100_000)}", f"SE-{rng.randrange(1000, 10_000)}", f"RC-{rng.randrange(100, 10_000)}"
    rate = rng.randrange(50, 91, 5)
    countries = rng.sample(COUNTRIES, rng.randint(1, 6))
    stores = rng.sample(STORES, rng.randint(1, 5))
    transactions = sorted(rng.sample(TRANSACTIONS, rng.randint(1, 4)), key=TRANSACTIONS.index)
    renewal = rng.choice(["auto", "fixed_period", "none"])
    years = rng.randint(1, 3) if renewal != "none" else None
    conditions = []
    for priority in range(1, rng.randint(0, 3) + 1):
        conditions.append({"priority": priority, "transaction_type": rng.choice([None, *(t for t, _ in transactions)]),
                           "store": rng.choice([None, *stores]), "country": rng.choice([None, *(c for _, c in countries)]),
                           "rate": rng.randrange(40, 96, 5) / 100})
    renewal_text = {"auto": f"renews automatically for successive {NUMBERS[years or 1]}-year periods unless "
                            "either party gives written notice",
                    "fixed_period": f"may be renewed once, for a fixed period of {NUMBERS[years or 1]} years",
                    "none": "does not renew; a new agreement would be negotiated"}[renewal]
    special = "none. The term rate applies everywhere." if not conditions else "; ".join(
        f"priority {c['priority']}: {round(c['rate'] * 100)}% for "
        + ", ".join(x for x in (c["transaction_type"] and f"{c['transaction_type']}s", c["store"],
                                c["country"] and next(n for n, k in countries if k == c["country"])) if x)
        if any((c["transaction_type"], c["store"], c["country"])) else
        f"priority {c['priority']}: {round(c['rate'] * 100)}% on everything" for c in conditions)
    advance, releases, days = rng.randrange(5, 500) * 1000, rng.randrange(20, 900), rng.choice([30, 45, 60, 90])
    text = f"""# Deal memo {i}: {label} distribution

**From:** Label Partnerships, Kestrelway Distribution
**Date:** {_date_text(rng, start - timedelta(days=rng.randrange(10, 60)))}

This memo summarises the distribution deal signed with {label}, the rights holder.

## Key terms

- **Contract name:** {contract}
- **Account ID:** {ids[0]}
- **Signing entity ID:** {ids[1]}
- **Run controller ID:** {ids[2]}
- **Term start:** {_date_text(rng, start)}
- **Term rate (paid to {label}):** {rate}%
- **Commission (retained by Kestrelway):** {100 - rate}%
- **Territories:** {", ".join(name for name, _ in countries)}
- **Stores:** {", ".join(stores)}
- **Transaction types:** {" and ".join(words for _, words in transactions)}
- **Renewal:** {renewal_text}
- **Special rates:** {special}

## Notes for Finance

{label} receives an advance of £{advance:,}, recouped from royalties. Around {releases} releases are delivered
before the start date. Payment is due {days} days after the end of each month.
"""
    record = {"account_id": ids[0], "signing_entity_id": ids[1], "run_controller_id": ids[2],
              "contract_name": contract, "lifecycle_term_start": start.isoformat(), "term_rate": rate / 100,
              "commission": (100 - rate) / 100, "countries": [c for _, c in countries], "stores": stores,
              "transaction_types": [t for t, _ in transactions], "renewal_type": renewal, "renewal_years": years,
              "conditions": conditions}
    return text, record


def build_corpus(root: Path, members: int, seed: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.corpus_factory import add_member

    corpus = root / "corpus"
    (corpus / TASK_ID).mkdir(parents=True)
    shutil.copyfile(TASK_YAML, corpus / TASK_ID / "task.yaml")
    rng = random.Random(seed)
    for i in range(members):
        text, record = synthetic_memo(rng, i)
        add_member(corpus / TASK_ID, f"m{i:05d}", text, record)
    return corpus


# -- one timed process -----------------------------------------------------------------------------------
@dataclass
class Mode:
    name: str
    members: int
    command: list[str] | None  # None: not available in this evalkit
    note: str = ""
    ok: tuple[int, ...] = (0,)
    samples: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # members → [(wall, cpu)]

    def median(self, n: int, i: int) -> float:
        return statistics.median(s[i] for s in self.samples[n])

    @property
    def per_member(self) -> tuple[float, float]:
        """(wall s, CPU s) per member after start-up: the N-member run minus the 1-member run."""
        added = max(self.members - 1, 1)
        return tuple((self.median(self.members, i) - self.median(1, i)) / added for i in (0, 1))


def timed(command: list[str], ok: tuple[int, ...], env: dict) -> tuple[float, float]:
    """(wall s, CPU s of the process and its waited-for descendants)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stderr[-3000:]}{proc.stdout[-1000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _help(command: str) -> str:
    return subprocess.run([sys.executable, "-m", "evalkit.cli", command, "--help"], capture_output=True, text=True,
                          cwd=ROOT, env=_env()).stdout


def _env() -> dict:
    # The checkout this script sits in, in every process (kernels and workers too), whatever is installed.
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def evalkit_modes(corpus: Path, runs: Path, args) -> list[Mode]:
    base = [sys.executable, "-m", "evalkit.cli"]
    common = ["--corpus", str(corpus), "--backend", "fake", "--workers", str(args.workers)]
    nb = min(args.notebook_members, args.members)
    kernels = ["cold", "warm"] if "--kernels" in _help("run") else [None]
    modes = []
    for k in kernels:
        flag = ["--kernels", k] if k else []
        modes.append(Mode(f"notebooks, {k or 'cold (no --kernels here)'} kernels", nb,
                          base + ["run", *common, "--no-html", *flag], "evalkit run --no-html", ok=(0, 1)))
    modes.append(Mode("sweep --no-notebooks", args.members, base + ["sweep", *common, "--no-notebooks"]))
    sched = f"local:{args.workers}"
    available = "--scheduler" in _help("sweep")
    modes.append(Mode(f"sweep --no-notebooks --scheduler {sched}", args.members,
                      base + ["sweep", *common, "--no-notebooks", "--scheduler", sched] if available else None,
                      "" if available else "not available in this evalkit"))
    return modes


def inspect_mode(corpus: Path, runs: Path, args) -> Mode:
    python = args.inspect_python or str(INSPECT_VENV / "bin" / "python")
    if not args.inspect_python and not Path(python).exists():
        print(f"creating {INSPECT_VENV} with inspect-ai (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(INSPECT_VENV)], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "inspect-ai"], check=True)
    version = subprocess.run([python, "-c", "import inspect_ai; print(inspect_ai.__version__)"], capture_output=True,
                             text=True).stdout.strip() or "?"
    return Mode(f"Inspect AI {version}, mockllm + JSON field scorer", args.members,
                [python, __file__, "--inspect-child", str(corpus)])


def run_all(modes: list[Mode], runs: Path, repeat: int) -> None:
    """A warm-up round on one member (untimed: the first process pays for cold files and caches), then
    ``repeat`` rounds, each every mode on one member and then on all of its members."""
    env = _env()
    for r in range(-1, repeat):
        for n_of in ((lambda m: 1),) if r < 0 else (lambda m: 1, lambda m: m.members):
            for k, m in enumerate(modes):
                if m.command is None:
                    continue
                n = n_of(m)
                out = runs / f"round{r}-mode{k}-{n}"
                inspect = "--inspect-child" in m.command
                cmd = m.command + (["--members", str(n), "--log-dir", str(out)] if inspect
                                   else ["--limit", str(n), "--out", str(out)])
                print(f"  {'warm-up: ' if r < 0 else ''}{m.name}: {n} member(s) ...", end=" ", flush=True)
                sample = timed(cmd, m.ok, env)
                if not inspect:  # the Inspect child checks its own log
                    _check_members(out, n)
                if r >= 0:
                    m.samples.setdefault(n, []).append(sample)
                print(f"{sample[0]:.1f} s wall", flush=True)


def measured(command: list[str], env: dict, log: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of one process and its waited-for descendants (`os.wait4`)."""
    with open(log, "w") as f:
        t = time.perf_counter()
        proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {proc.returncode}:\n{log.read_text()[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _disk(folder: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in folder.rglob("*"))


def curve(corpus: Path, runs: Path, points: list[int], workers: int) -> None:
    from evalkit.results.runfolder import SWEEP_JSON

    env = _env()
    base = [sys.executable, "-m", "evalkit.cli", "sweep", "--corpus", str(corpus), "--backend", "fake",
            "--workers", str(workers), "--no-notebooks"]
    rows = {}
    runs.mkdir(parents=True, exist_ok=True)
    for n in [1, *points]:
        out = runs / f"curve-{n}"
        print(f"  sweep --no-notebooks: {n:,} member(s) ...", end=" ", flush=True)
        wall, cpu, rss = measured(base + ["--limit", str(n), "--out", str(out)], env, runs / f"curve-{n}.log")
        _check_members(out, n)
        rows[n] = (wall, cpu, rss, _disk(out), (out / SWEEP_JSON).stat().st_size)
        print(f"{wall:.1f} s wall, {cpu:.1f} s CPU, load {os.getloadavg()[0]:.1f}", flush=True)
    w1, c1 = rows[1][:2]
    per = {n: ((rows[n][0] - w1) / (n - 1), (rows[n][1] - c1) / (n - 1)) for n in points if n > 1}
    print(f"\n{'members':>8} {'wall s':>8} {'CPU s':>8} {'wall ms/member':>15} {'CPU ms/member':>14} "
          f"{'peak RSS MB':>12} {'disk MB':>8} {SWEEP_JSON + ' MB':>14}")
    for n in points:
        wall, cpu, rss, disk, sj = rows[n]
        pw, pc = per.get(n, (float("nan"), float("nan")))
        print(f"{n:>8,} {wall:>8.1f} {cpu:>8.1f} {pw * 1000:>15.1f} {pc * 1000:>14.1f} {rss / 1024:>12.1f} "
              f"{disk / 1e6:>8.1f} {sj / 1e6:>14.2f}")
    ordered = [n for n in points if n in per]
    for a, b in zip(ordered, ordered[1:]):
        print(f"{b:,} vs {a:,} members, per member (after start-up): wall {per[b][0] / per[a][0]:.2f}×, "
              f"CPU {per[b][1] / per[a][1]:.2f}× (bar: CPU ≤ 1.2×); per member: peak RSS "
              f"{rows[b][2] / b / (rows[a][2] / a):.2f}×, disk {rows[b][3] / b / (rows[a][3] / a):.2f}×")


def predictions_folders(root: Path, corpus: Path, clutter: int) -> tuple[Path, Path]:
    """Two ``predictions:`` folders answering every member with its truth: ``plain`` holds just those files,
    ``cluttered`` the same and `clutter` times as many unrelated files beside them (and in a subfolder)."""
    import yaml

    plain, cluttered = root / "predictions-plain", root / "predictions-cluttered"
    for d in (plain, cluttered, cluttered / "old"):
        d.mkdir(parents=True)
    members = sorted(d for d in (corpus / TASK_ID).iterdir() if d.is_dir())
    for d in members:
        record = yaml.load((d / "truth.yaml").read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        text = json.dumps(record["record"])
        for folder in (plain, cluttered):
            (folder / f"{d.name}.json").write_text(text)
    for i in range(clutter * len(members)):
        (cluttered / ("old" if i % 2 else ".") / f"unrelated-{i:06d}.txt").write_text(f"not a prediction {i}\n")
    return plain, cluttered


def clutter(corpus: Path, runs: Path, n: int, times: int, workers: int, repeat: int) -> None:
    """``sweep --no-notebooks`` of `n` members against a predictions folder, and against the same folder with
    `times` × as many unrelated files: a first sweep and a re-sweep (every member current: the currency
    keys are all the work), alternating, medians of `repeat` (issue 27's bar: ≤ 1.5× the plain folder)."""
    env = _env()
    plain, cluttered = predictions_folders(runs, corpus, times)
    print(f"  predictions folders: {n:,} files; and {n:,} + {times * n:,} unrelated", flush=True)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(repeat):
        for name, folder in (("plain", plain), ("cluttered", cluttered)):
            out = runs / f"clutter-{r}-{name}"
            cmd = [sys.executable, "-m", "evalkit.cli", "sweep", "--corpus", str(corpus), "--backend",
                   f"p=predictions:dir={folder}", "--workers", str(workers), "--no-notebooks", "--out", str(out)]
            for phase in ("first sweep", "re-sweep"):
                wall, cpu, _ = measured(cmd, env, runs / f"clutter-{r}-{name}.log")
                samples.setdefault((name, phase), []).append((wall, cpu))
                print(f"  {name}, {phase}: {wall:.1f} s wall, {cpu:.1f} s CPU, load {os.getloadavg()[0]:.1f}",
                      flush=True)
                _check_members(out, n, "ran" if phase == "first sweep" else "current")
    def median(name: str, phase: str) -> tuple[float, float]:
        return tuple(statistics.median(s[i] for s in samples[(name, phase)]) for i in (0, 1))

    for phase in ("first sweep", "re-sweep"):
        (pw, pc), (cw, cc) = median("plain", phase), median("cluttered", phase)
        print(f"{phase}: cluttered / plain folder: wall {cw / pw:.2f}×, CPU {cc / pc:.2f}× "
              f"({cc:.1f} s / {pc:.1f} s CPU; bar ≤ 1.5×)")


CHROMIUM = Path("/usr/bin/chromium")  # as tests/test_html_chromium.py runs it
# Per page, the headings it must show (every section) — the task report's and the diff's as
# tests/test_scale_pages.py checks them at 1,000 members.
PAGE_SECTIONS = {
    "index": ("evalkit run", "Results per task and backend", TASK_ID),
    "task report": ("Calls per backend", "Members", "Field accuracy", "Outcomes", "Trend"),
    "diff": ("Configuration", TASK_ID, "Per-field accuracy", "Verdict flips", "Held-out members"),
    "scoreboard": ("evalkit scoreboard", "Standings", "What changed", TASK_ID),
}


def open_in_chromium(page: Path, profile: Path) -> tuple[float, str]:
    """(wall s, the DOM after its scripts ran) of headless Chromium loading `page` from file://."""
    t = time.perf_counter()
    proc = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t
    if proc.returncode != 0 or "<html" not in proc.stdout:
        sys.exit(f"chromium could not open {page} (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def _page_check(kind: str, dom: str) -> list[str]:
    """What the opened page lacks: a section (heading), or a chart (an SVG with drawn marks, no 'chart not drawn')."""
    import re

    heads = {re.sub(r"<[^>]+>|¶", "", h).strip() for h in re.findall(r"<h[1-4][^>]*>(.*?)</h[1-4]>", dom, re.S)}
    missing = [f"section {s!r}" for s in PAGE_SECTIONS[kind] if s not in heads]
    if "chart not drawn" in dom:
        missing.append("a chart (not drawn)")
    for svg in re.findall(r"<svg\b.*?</svg>", dom, re.S):
        if not re.search(r'class="mark-\w+ role-mark[^"]*"[^>]*>\s*<path\b[^>]*\bd="M', svg):
            missing.append("a chart's marks")
    return missing


def pages(root: Path, corpus: Path, n: int) -> None:
    """A ``n``-member run's index, task report, diff and scoreboard pages, made (timed) and opened in headless
    Chromium: the time to load each (minus a blank page's: the browser's start) and whether every section
    and chart is there. The runs are bench_diff.py's synthetic score.json files of the same member ids."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_diff import synthetic_runs

    from evalkit.compare.diff import diff_notebook, diff_runs
    from evalkit.execution.execute import execute, plan_report
    from evalkit.report.boardpage import write_board_report
    from evalkit.report.render import render_index, render_notebook
    from evalkit.results.runfolder import INDEX
    from evalkit.results.scoreboard import board_path, update_scoreboard
    from evalkit.results.summary import write_summary

    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is not installed")
    made: dict[str, tuple[Path, float]] = {}

    def make(kind: str, fn: Callable[[], Path]) -> None:
        print(f"  {kind}: making ...", end=" ", flush=True)
        t = time.perf_counter()
        made[kind] = (fn(), time.perf_counter() - t)
        print(f"{made[kind][1]:.1f} s", flush=True)

    t = time.perf_counter()
    run_a, run_b = synthetic_runs(root / "pages", n)
    print(f"  two synthetic {n:,}-member runs in {time.perf_counter() - t:.1f} s", flush=True)

    def task_report() -> Path:
        job = plan_report(run_a, TASK_ID)
        result, = execute([job], workers=1)
        if not result.ok:
            sys.exit(f"task report: {result.error}")
        return render_notebook(job.output)

    def scoreboard() -> Path:
        update_scoreboard(run_a, board_path(corpus), corpus=corpus)
        return write_board_report(corpus, root / "scoreboard" / INDEX)

    make("task report", task_report)
    make("index", lambda: (write_summary(run_a), render_index(run_a))[1])
    make("diff", lambda: diff_notebook(run_a, run_b, 1, computed=diff_runs(run_a, run_b)))
    make("scoreboard", scoreboard)
    blank = root / "blank.html"
    blank.write_text("<!DOCTYPE html><html><head><title>blank</title></head><body></body></html>")
    open_in_chromium(blank, root / "profile")  # untimed: the first start makes the browser's profile
    start = statistics.median(open_in_chromium(blank, root / "profile")[0] for _ in range(3))
    print(f"\nheadless Chromium, a blank page: {start:.2f} s (the browser's start: 'open s' is a page's "
          f"median wall of 3 minus it); load {os.getloadavg()[0]:.1f}")
    print(f"{'page':12} {'MB':>7} {'made s':>7} {'open s':>7}  every section and chart")
    bad = []
    for kind in PAGE_SECTIONS:
        path, seconds = made[kind]
        opened = [open_in_chromium(path, root / "profile") for _ in range(3)]
        wall, dom = statistics.median(w for w, _ in opened), opened[-1][1]
        missing = _page_check(kind, dom)
        bad += [f"{kind}: {m}" for m in missing]
        print(f"{kind:12} {path.stat().st_size / 1e6:7.2f} {seconds:7.1f} {wall - start:7.2f}  "
              f"{'yes' if not missing else 'NO: ' + ', '.join(missing)}")
    if bad:
        sys.exit("pages missing something: " + "; ".join(bad))


def _check_members(out: Path, n: int, status: str = "ran") -> None:
    """Every member ran (or was current): the sweep's record of its members, or the run's."""
    from evalkit.results.runfolder import read_run_json, read_sweep_json

    swept = read_sweep_json(out).get("members")
    if swept is not None:
        done = sum(m["status"] == status for m in swept.values())
    else:
        done = len(read_run_json(out).members)
    if done != n:
        sys.exit(f"{out}: {done} members {status}, not {n}")


# -- Inspect AI, in its own venv -------------------------------------------------------------------------
def inspect_child(corpus: Path, members: int, log_dir: str) -> None:
    """Inspect's eval of the first ``members`` memos, as evalkit's task prompts them, mockllm echoing the truth."""
    import yaml
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import Score, Target, mean, scorer
    from inspect_ai.solver import TaskState, generate

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    task_dir = corpus / TASK_ID
    task = yaml.load((task_dir / "task.yaml").read_text(), Loader=loader)
    samples, truth_by_prompt = [], {}
    for d in sorted(p for p in task_dir.iterdir() if p.is_dir())[:members]:
        manifest = yaml.load((d / "manifest.yaml").read_text(), Loader=loader)
        record = yaml.load((d / "truth.yaml").read_text(), Loader=loader)["record"]
        user = task["prompt"]["user"].replace("{document}", (d / manifest["source"]["file"]).read_text())
        truth_by_prompt[user] = json.dumps(record, sort_keys=True)
        samples.append(Sample(id=d.name, input=[ChatMessageSystem(content=task["prompt"]["system"]),
                                                 ChatMessageUser(content=user)], target=truth_by_prompt[user]))

    def echo_truth(messages, tools, tool_choice, config) -> ModelOutput:  # like evalkit's fake: a look-up, no wait
        output = ModelOutput.from_content(model="mockllm/model", content=truth_by_prompt[messages[-1].text])
        # Usage given (a rough count, as a fake's): without it mockllm counts tokens with tiktoken, which
        # downloads its encoding on first use and is work evalkit's fake backend does not do.
        output.usage = ModelUsage(input_tokens=len(messages[-1].text) // 4, output_tokens=len(output.completion) // 4)
        return output

    def same(got, want) -> bool:
        if isinstance(want, list):
            return isinstance(got, list) and sorted(map(json.dumps, got)) == sorted(map(json.dumps, want))
        if isinstance(want, float) and isinstance(got, (int, float)):
            return abs(got - want) <= 0.001
        return got == want

    @scorer(metrics=[mean()])
    def fields():
        async def score(state: TaskState, target: Target) -> Score:
            try:
                got = json.loads(state.output.completion)
            except json.JSONDecodeError:
                return Score(value=0.0, explanation="not JSON")
            want = json.loads(target.text)
            return Score(value=sum(same(got.get(k), v) for k, v in want.items()) / len(want))
        return score

    model = get_model("mockllm/model", custom_outputs=echo_truth)
    logs = inspect_eval(Task(dataset=samples, solver=generate(), scorer=fields()), model=model, display="none",
                        log_dir=log_dir)
    log = logs[0]
    score = log.results.scores[0].metrics["mean"].value if log.results else None
    if log.status != "success" or score != 1.0 or len(log.samples or []) != len(samples):
        sys.exit(f"inspect eval: status {log.status}, mean score {score}, {len(log.samples or [])} samples")


# -- the report ------------------------------------------------------------------------------------------
def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _rate(x: float | None) -> str:
    """Members/s: whole members when there are many, two digits when there are few; — when not measurable
    (at a few members the start-up's noise can exceed their cost)."""
    return "—" if x is None else f"{x:,.0f}" if x >= 10 else f"{x:.2f}"


def report(modes: list[Mode], inspect: Mode | None, args, loads: list[str]) -> tuple[str, str]:
    rows = []
    for m in modes + ([inspect] if inspect else []):
        if m.command is None:
            rows.append((m.name, m.members, None, None, None, None, None, m.note))
            continue
        wall, cpu = m.per_member
        rows.append((m.name, m.members, m.median(m.members, 0), m.median(1, 0), wall, 1 / wall if wall > 0 else None,
                     cpu, m.note))
    lines = [f"{'mode':50} {'members':>7} {'wall s':>7} {'1 member':>8} {'s/member':>8} {'after start-up:':>16} "
             f"{'members/s':>9} {'CPU-ms/member':>13}"]
    for name, n, wall, one, per, rate, cpu, note in rows:
        lines.append(f"{name:50} {n:7d} {_fmt(wall, '7.1f')} {_fmt(one, '8.1f')} "
                     f"{_fmt(wall and wall / n, '8.3f')} {_fmt(per, '16.4f')} {_rate(rate):>9} "
                     f"{_fmt(cpu and cpu * 1e3, '13.1f')}" + (f"  ({note})" if note else ""))
    ratios = _ratios(modes, inspect)
    text = "\n".join(lines + [""] + [f"{k}: {v}" for k, v in ratios])
    md = _markdown(rows, ratios, args, loads)
    return text, md


def _x(a: float, b: float, spec: str = ".1f") -> str:
    """a / b as a ratio; — when either is not positive (at a few members the start-up's noise can exceed
    their cost)."""
    return f"{a / b:{spec}}×" if a > 0 and b > 0 else "—"


def _ratios(modes: list[Mode], inspect: Mode | None) -> list[tuple[str, str]]:
    by = {m.name: m for m in modes if m.command is not None}
    out = []
    cold = next((m for n, m in by.items() if n.startswith("notebooks, cold")), None)
    warm = by.get("notebooks, warm kernels")
    if cold and warm:
        out.append(("cold / warm kernels, wall per member after start-up",
                    f"{_x(cold.per_member[0], warm.per_member[0])} (whole runs: "
                    f"{_x(cold.median(cold.members, 0), warm.median(warm.members, 0))})"))
    local = by.get("sweep --no-notebooks")
    sched = next((m for n, m in by.items() if "--scheduler" in n), None)
    if local and sched:
        out.append(("--scheduler / local pool, wall",
                    f"{_x(sched.median(sched.members, 0), local.median(local.members, 0), '.2f')} whole run, "
                    f"{_x(sched.per_member[0], local.per_member[0], '.2f')} after start-up"))
    if local and inspect:
        out.append(("members/s after start-up, evalkit --no-notebooks / Inspect AI",
                    f"{_x(inspect.per_member[0], local.per_member[0], '.2f')} (whole runs: "
                    f"{_x(inspect.median(inspect.members, 0), local.median(local.members, 0), '.2f')})"))
        out.append(("CPU-s per member after start-up, evalkit --no-notebooks / Inspect AI",
                    f"{_x(local.per_member[1], inspect.per_member[1], '.2f')} ({local.per_member[1] * 1e3:.1f} ms / "
                    f"{inspect.per_member[1] * 1e3:.1f} ms)"))
    return out


def _markdown(rows, ratios, args, loads) -> str:
    out = [f"`bench_scale.py --members {args.members} --notebook-members {args.notebook_members}"
           f" --workers {args.workers} --repeat {args.repeat}`, machine = {os.cpu_count()} cores shared with other "
           f"work (load average {' → '.join(loads)}), `--backend fake`, {args.members:,} synthetic deal memos "
           f"(notebook modes on the first {min(args.notebook_members, args.members)}). After start-up = "
           "(N-member run − 1-member run) / (N − 1); CPU-s includes workers and kernels:", "",
           "| mode | members | wall s (1 member) | wall per member after start-up | members/s after start-up "
           "| CPU per member after start-up |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, n, wall, one, per, rate, cpu, note in rows:
        if wall is None:
            out.append(f"| {name} | {n:,} | {note} | | | |")
        else:
            out.append(f"| {name} | {n:,} | {wall:.1f} ({one:.1f}) | {per * 1e3:.1f} ms | {_rate(rate)} | "
                       f"{cpu * 1e3:.1f} ms |")
    out.append("")
    out += [f"- {k}: {v}" for k, v in ratios]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--notebook-members", type=int, default=40, help="members run through the notebook modes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--keep", type=Path, metavar="DIR", help="build the corpus and runs in DIR and keep them")
    ap.add_argument("--skip-inspect", action="store_true")
    ap.add_argument("--inspect-python", metavar="PYTHON", help="an interpreter with inspect-ai (default: "
                    ".venv-inspect, created on first use)")
    ap.add_argument("--markdown", action="store_true", help="also print the block for README.md's benchmarks")
    ap.add_argument("--curve", metavar="N,N,...", help="the sweep's scaling curve at these member counts instead "
                    "(e.g. 100,1000,10000; see above)")
    ap.add_argument("--pages", type=int, metavar="N", help="instead, an N-member run's index, task report, diff and "
                    "scoreboard pages: made, then opened in headless Chromium (see above)")
    ap.add_argument("--clutter", type=int, metavar="X", help="instead, sweeps against a predictions folder and the "
                    "same folder with X times as many unrelated files (see above)")
    ap.add_argument("--inspect-child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--log-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inspect_child:
        inspect_child(args.inspect_child, args.members, args.log_dir)
        return
    if args.curve:
        points = sorted({int(x) for x in args.curve.split(",")})
        args.members = max(points)
    if args.pages:
        args.members = args.pages
    if args.members < 2 or args.notebook_members < 2:
        sys.exit("--members and --notebook-members must be at least 2 (start-up is a 1-member run)")
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        root = args.keep or Path(tmp)
        if args.keep and args.keep.exists() and any(args.keep.iterdir()):
            sys.exit(f"--keep {args.keep}: not empty")
        t = time.perf_counter()
        corpus = build_corpus(root, args.members, args.seed)
        corpus_s = time.perf_counter() - t
        runs = root / "runs"
        loads = [f"{os.getloadavg()[0]:.1f}"]
        print(f"synthetic corpus: {args.members:,} deal memos (seed {args.seed}) built in {corpus_s:.1f} s at {corpus}; "
              f"{os.cpu_count()} cores, load average {loads[0]}")
        if args.curve:
            curve(corpus, runs, points, args.workers)
            return
        if args.pages:
            pages(root, corpus, args.pages)
            return
        if args.clutter:
            clutter(corpus, runs, args.members, args.clutter, args.workers, args.repeat)
            return
        modes = evalkit_modes(corpus, runs, args)
        inspect = None if args.skip_inspect else inspect_mode(corpus, runs, args)
        run_all(modes + ([inspect] if inspect else []), runs, args.repeat)
        loads.append(f"{os.getloadavg()[0]:.1f}")
        text, md = report(modes, inspect, args, loads)
        print(f"\nload average {' → '.join(loads)} on {os.cpu_count()} cores; notebook modes on the first "
              f"{min(args.notebook_members, args.members)} members (cold kernels cost ~2.5 s a member, linear); "
              f"the rest on all {args.members:,}; medians of {args.repeat}")
        print(text)
        if args.markdown:
            print("\n" + md)


if __name__ == "__main__":
    main()
