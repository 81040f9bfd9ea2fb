"""Click commands for the scoreboard workflow: ``sweep``, ``band``, ``check``, ``rescore``, ``publish``.

Registered by `evalkit.cli` (``for c in COMMANDS: main.add_command(c)``). Errors are raised as
`EvalkitError`s and printed by the CLI group as one line with their exit code; see
docs/scoreboard.md for the flags and exit codes.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from .errors import EXIT_BACKEND, EXIT_FAILED, EXIT_OK, EvalkitError, UsageError

__all__ = ["COMMANDS", "BACKEND", "JUDGE", "sweep_cmd", "band_cmd", "check_cmd", "rescore_cmd", "publish_cmd",
           "report_byom"]


class _Spec(click.ParamType):
    """``--backend NAME=SPEC`` (with `label`: a bare SPEC, as ``--judge``), parsed here, once, into a `BackendSpec`.
    A NAME that is not a label is an `Escape` (exit 3), raised through to the CLI group like any `EvalkitError`."""

    name = "spec"

    def __init__(self, label: str | None = None):
        self.label = label

    def convert(self, value, param, ctx):
        from .backends import BackendSpec

        return value if isinstance(value, BackendSpec) else BackendSpec.parse(value, self.label)


BACKEND = _Spec()  # the type of every --backend option (run, compare, sweep, band, check)
JUDGE = _Spec("judge")  # --judge SPEC

_CORPUS = click.option("--corpus", type=click.Path(path_type=Path), default=None,
                       help="Corpus folder (default: the bundled corpus/). Its scoreboard.json and band.json live in it.")
_SOURCES = click.option("--sources", type=click.Path(path_type=Path), default=None,
                        help="Folder holding pointer members' sources (default: $EVALKIT_SOURCES).")
_TASKS = click.option("--task", "tasks", multiple=True, help="Task id (repeatable; default: every task).")
_BOARD = click.option("--board", type=click.Path(path_type=Path, dir_okay=False), default=None,
                      help="Scoreboard file (default: <corpus>/scoreboard.json).")


# `evalkit run` and `evalkit sweep`: which members of each task, and the task settings overridden
SCOPE_OPTIONS = [
    click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N members of each task (id order)."),
    click.option("--sample", type=click.IntRange(1), default=None,
                 help="N members of each task drawn at random (seeded: --seed; recorded with the run)."),
    click.option("--seed", "sample_seed", type=int, default=None, help="The seed of --sample (default: fixed)."),
    click.option("--set", "set_", multiple=True, metavar="KEY=VALUE",
                 help="Override a task setting (max_tokens, temperature; repeatable): recorded in every run block."),
]


def scope_options(limit, sample, sample_seed, set_) -> dict:
    """The `RunOptions` fields of `SCOPE_OPTIONS`."""
    from .models import parse_settings

    return {"limit": limit, "sample": sample, "seed": sample_seed, "settings": parse_settings(set_)}


def _sweep_options(f):
    opts = [
        _CORPUS, _SOURCES, _TASKS,
        click.option("--only", multiple=True, help="Only this member (id or TASK/MEMBER; repeatable)."),
        click.option("--threshold", type=click.FloatRange(0, 1), default=None, help="Override the pass threshold."),
        click.option("--workers", type=click.IntRange(1), default=None,
                     help="Member worker processes (default: cores)."),
        click.option("--max-concurrency", type=click.IntRange(1), default=8, help="Concurrent backend calls per member."),
        click.option("--notebooks/--no-notebooks", default=True,
                     help="Run the extract/score notebooks (default), or only extraction + scoring (fast, no .ipynb)."),
        click.option("--html/--no-html", default=False, help="Render each member's HTML (default: no)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _scope_options(f):
    for opt in reversed(SCOPE_OPTIONS):
        f = opt(f)
    return f


def _corpus(corpus: Path | None) -> Path:
    from .corpus import DEFAULT_CORPUS

    return Path(corpus or DEFAULT_CORPUS)


def _sweep_opts(corpus, sources, tasks, only, threshold, workers, max_concurrency, notebooks, html, backends, out,
                force=False, **scope):
    from .corpus import sources_dir
    from .runner import RunOptions

    opts = RunOptions(corpus=_corpus(corpus), backends=backends, sources=sources_dir(sources),
                      tasks=list(tasks) or None, only=list(only) or None, out=out, threshold=threshold,
                      max_concurrency=max_concurrency, html=html, notebooks=notebooks, force=force,
                      **(scope_options(**scope) if scope else {}))
    if workers:
        opts.workers = workers
    return opts


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")


def record_history(result) -> None:
    """Append to runs/index.jsonl (every scored run, for trend charts); never fail a run over it."""
    from .history import append_history

    try:
        append_history(result)
    except EvalkitError as e:
        click.echo(f"evalkit: history not updated: {e}", err=True)


# --------------------------------------------------------------------------- sweep


@click.command("sweep")
@click.option("--backend", "backends", multiple=True, type=BACKEND, metavar="NAME=SPEC",
              help="Backend (repeatable): fake, predictions:dir=D, cassette:path=P, … (default: fake).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Sweep folder (default: runs/sweep-<backends>; re-running it skips current members).")
@click.option("--force", is_flag=True, help="Re-run every member, current or not.")
@click.option("--update-scoreboard", is_flag=True, help="Write the scored members into the scoreboard.")
@click.option("--strict-replay", is_flag=True,
              help="A replay miss fails that member (exit 6); default: it is `not covered`, the rest scored.")
@_BOARD
@_sweep_options
@_scope_options
def sweep_cmd(backends, out, force, strict_replay, update_scoreboard, board, corpus, sources, tasks, only, threshold, workers,
              max_concurrency, notebooks, html, limit, sample, sample_seed, set_):
    """Run every member of every selected task in worker processes; skip members whose outputs are current.

    Exit 0 when every member ran (or was current), 4 if any was refused by the integrity gate,
    5 if any errored or failed otherwise (backend error, notebook or worker crash; 6 for a cassette
    problem). Verdicts (PASS/FAIL) are results, not failures; an errored member is never written
    to the scoreboard and is retried by the next sweep.
    """
    from .backends import BackendSpec
    from .scoreboard import board_path, update_scoreboard as update
    from .sweep import print_sweep_summary, sweep

    opts = _sweep_opts(corpus, sources, tasks, only, threshold, workers, max_concurrency, notebooks, html,
                       list(backends) or [BackendSpec("fake", "fake")], out, force,
                       limit=limit, sample=sample, sample_seed=sample_seed, set_=set_)
    opts.strict_replay = strict_replay
    result = sweep(opts)
    print_sweep_summary(result, click.echo)
    record_history(result)
    if update_scoreboard:
        path = board or board_path(opts.corpus)
        written = update(result, path, corpus=opts.corpus, sources=opts.sources)
        click.echo(f"Scoreboard: {len(written)} entr{'y' if len(written) == 1 else 'ies'} written to {path}")
    sys.exit(result.exit_code)


# --------------------------------------------------------------------------- band


@click.command("band")
@click.option("--sweeps", "n_sweeps", type=click.IntRange(2), default=None,
              help="How many sweeps (N ≥ 2): with --backend, run it N times; with --sweep-backend, must match.")
@click.option("--backend", "backend", default=None, type=BACKEND, metavar="NAME=SPEC",
              help="The baseline backend, run --sweeps times (live).")
@click.option("--sweep-backend", "sweep_backends", multiple=True, type=BACKEND, metavar="NAME=SPEC",
              help="One sweep's backend (repeat once per sweep), e.g. independently recorded cassettes: "
                   "--sweep-backend gemma=cassette:path=a.jsonl --sweep-backend gemma=cassette:path=b.jsonl.")
@click.option("--from-run", "from_runs", multiple=True, type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="An existing run or sweep folder as one sweep (repeat once per sweep).")
@click.option("--label", default=None, help="The backend label to measure when a sweep folder holds several.")
@click.option("--out", "band_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Band file (default: <corpus>/band.json).")
@click.option("--runs", "runs_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("runs"),
              show_default=True, help="Where the sweeps' folders go (<runs>/<time>-band-<i>-<label>).")
@click.option("--readme", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Rewrite the <!-- band:start -->…<!-- band:end --> block of this file (e.g. README.md).")
@click.option("--seed", type=int, default=None, help="Bootstrap seed (default: fixed).")
@click.option("--resamples", type=click.IntRange(100), default=2000, show_default=True)
@click.option("--confidence", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True)
@click.option("--allow-failures", is_flag=True, help="Write the band even if a sweep had refused/failed members.")
@_sweep_options
def band_cmd(n_sweeps, backend, sweep_backends, from_runs, label, band_out, runs_dir, readme, seed, resamples,
             confidence, allow_failures, corpus, sources, tasks, only, threshold, workers, max_concurrency,
             notebooks, html):
    """Measure the noise band from N ≥ 2 baseline sweeps; write band.json and print its table.

    Give exactly one of: --backend NAME=SPEC with --sweeps N (live, N runs), --sweep-backend
    NAME=SPEC once per sweep (recorded cassettes), or --from-run DIR once per sweep.
    """
    from .backends import labels_slug
    from .band import band_path, compute_band, render_markdown, update_readme, write_band
    from .corpus import heldout_keys
    from .stats import SEED
    from .sweep import print_sweep_summary, sweep

    modes = sum(bool(x) for x in (backend, sweep_backends, from_runs))
    if modes != 1:
        raise UsageError("band: give exactly one of --backend (with --sweeps N), --sweep-backend (once per sweep) "
                         "or --from-run (once per sweep)")
    if backend and not n_sweeps:
        raise UsageError("band: --backend needs --sweeps N (N ≥ 2)")
    if sweep_backends and n_sweeps and n_sweeps != len(sweep_backends):
        raise UsageError(f"band: --sweeps {n_sweeps} but {len(sweep_backends)} --sweep-backend given")
    if from_runs and n_sweeps and n_sweeps != len(from_runs):
        raise UsageError(f"band: --sweeps {n_sweeps} but {len(from_runs)} --from-run given")
    corpus = _corpus(corpus)
    if from_runs:
        roots = list(from_runs)
    else:
        specs = [backend] * n_sweeps if backend else list(sweep_backends)
        if len(specs) < 2:
            raise UsageError("band: a band needs at least 2 sweeps")
        roots, failed_codes, stamp = [], [], _stamp()
        for i, spec in enumerate(specs, 1):
            out = Path(runs_dir) / f"{stamp}-band-{i}-{labels_slug([spec.label])}"
            click.echo(f"Sweep {i}/{len(specs)}: {spec.redacted()} → {out}")
            result = sweep(_sweep_opts(corpus, sources, tasks, only, threshold, workers, max_concurrency, notebooks,
                                       html, [spec], out, force=True))
            record_history(result)
            if result.failures:
                print_sweep_summary(result, click.echo)
                failed_codes.append(result.exit_code)
            roots.append(out)
        if failed_codes and not allow_failures:
            raise _SweepFailed(max(failed_codes))
    path = band_out or band_path(corpus)
    band = compute_band(roots, tasks=list(tasks) or None, label=label, seed=SEED if seed is None else seed,
                        resamples=resamples, confidence=confidence, band_dir=path.parent,
                        heldout=heldout_keys(corpus, list(tasks) or None))
    write_band(path, band)
    md = render_markdown(band)
    click.echo(md, nl=False)
    click.echo(f"Band: {path}")
    if readme:
        update_readme(readme, md)
        click.echo(f"README: band table rewritten in {readme}")
    sys.exit(EXIT_OK)


class _SweepFailed(EvalkitError):
    def __init__(self, code: int):
        super().__init__("a band sweep had refused or failed members (listed above); fix them, or pass "
                         "--allow-failures to measure the band on the members every sweep scored")
        self.exit_code = code


# --------------------------------------------------------------------------- check


@click.command("check")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--backend", "backends", multiple=True, type=BACKEND, metavar="NAME=SPEC",
              help="Run a new sweep with this backend (repeatable) instead of reading RUN_DIR.")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Folder for the new sweep (default: runs/<time>-check-<backends>).")
@click.option("--justify", "justify", multiple=True, metavar='METRIC="reason"',
              help="Accept a regression of METRIC (or TASK/METRIC, TASK/BACKEND/METRIC) with a recorded reason.")
@click.option("--band", "band_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Band file (default: <corpus>/band.json; without one every band is the 0.02 floor).")
@click.option("--update-scoreboard", is_flag=True,
              help="On a pass, make the new sweep the standing entry (always done when --justify was needed).")
@click.option("--seed", type=int, default=None, help="Permutation seed (default: fixed).")
@_BOARD
@_sweep_options
def check_cmd(run_dir, backends, out, justify, band_file, update_scoreboard, seed, board, corpus, sources, tasks, only,
              threshold, workers, max_concurrency, notebooks, html):
    """Compare a new sweep (RUN_DIR, or run one with --backend) with the standing scoreboard.

    A gated metric (higher is better) whose corpus mean drops by more than its band is a
    regression. A member that errored in the new sweep is named as not comparable and left out.
    Exit 0: no regression, or every one justified (recorded in the scoreboard);
    1: an unjustified regression; 3: no scoreboard / nothing to compare; 4/5/6: the new sweep had
    refused / errored or failed members or a cassette problem (and no unjustified regression).
    """
    from .backends import labels_slug
    from .band import band_path, collect, load_band
    from .corpus import heldout_keys
    from .regress import compare, parse_justify
    from .runfolder import scan
    from .scoreboard import ScoreboardError, board_path, entries_by_task, load_board, update_scoreboard as update
    from .stats import SEED
    from .status import ERROR, failure_of
    from .sweep import print_sweep_summary, sweep

    if bool(run_dir) == bool(backends):
        raise UsageError("check: give a RUN_DIR to read, or --backend NAME=SPEC to run a new sweep (not both)")
    justifications = parse_justify(justify)
    corpus = _corpus(corpus)
    board_file = board or board_path(corpus)
    standing_board = load_board(board_file, must_exist=True)
    band = load_band(band_file or band_path(corpus), must_exist=bool(band_file))
    sweep_code, result = EXIT_OK, None
    if backends:
        out = out or Path("runs") / f"{_stamp()}-check-{labels_slug(spec.label for spec in backends)}"
        result = sweep(_sweep_opts(corpus, sources, tasks, only, threshold, workers, max_concurrency, notebooks, html,
                                   list(backends), out, force=True))
        print_sweep_summary(result, click.echo)
        record_history(result)
        sweep_code = result.exit_code
        run_dir = result.run_dir
    def keep(t: str, m: str) -> bool:
        return not only or m in only or f"{t}/{m}" in only

    new = {t: {b: {m: v for m, v in per.items() if keep(t, m)} for b, per in d.items()}
           for t, d in collect(run_dir, list(tasks) or None).items()}
    errors: dict = {}  # the new sweep's errored members: no score, not comparable
    for s in scan(run_dir, status=ERROR):
        if (not tasks or s.task in tasks) and keep(s.task, s.member):
            errors.setdefault(s.task, {}).setdefault(s.backend, {})[s.member] = str(failure_of(s.score()))
    standing = {t: {b: {m: e.get("metrics") or {} for m, e in per.items() if keep(t, m)} for b, per in d.items()}
                for t, d in entries_by_task(standing_board, list(tasks) or None).items()}
    cmp = compare(standing, new, band, seed=SEED if seed is None else seed, justifications=justifications,
                  errors=errors, heldout=heldout_keys(corpus, list(tasks) or None))
    if band is None:
        click.echo(f"note: no band file at {band_file or band_path(corpus)}: every band is the 0.02 floor")
    for note in cmp.notes:
        click.echo(f"note: {note}")
    if not cmp.compared:
        raise ScoreboardError(f"{run_dir}: nothing to compare with {board_file} (no task × backend × member in both)")
    click.echo(f"Regressions ({len(cmp.regressions)}):")
    for c in cmp.regressions:
        why = f'  — justified: "{c.justification}"' if c.justification else ""
        click.echo(f"  REGRESSION {c.line()}{why}")
    click.echo(f"Improvements ({len(cmp.improvements)}):")
    for c in cmp.improvements:
        click.echo(f"  improved   {c.line()}")
    within = [c for c in cmp.changes if c.kind == "within"]
    click.echo(f"Within the band: {len(within)} metric(s)")
    used = {k for c in cmp.regressions for k in (c.metric, f"{c.task}/{c.metric}", f"{c.task}/{c.backend}/{c.metric}")
            if k in justifications}
    for k in sorted(set(justifications) - used):
        click.echo(f"note: --justify {k}: no regression of that metric; nothing to justify")
    if cmp.unjustified:
        names = ", ".join(f"{c.task}/{c.metric}" + (f" [{c.backend}]" if len({x.backend for x in cmp.changes}) > 1 else "")
                          for c in cmp.unjustified)
        first = cmp.unjustified[0].metric
        click.echo(f"FAIL: {len(cmp.unjustified)} unjustified regression(s): {names}. Fix it, or accept it with "
                   f'--justify {first}="reason" (recorded in the scoreboard).')
        sys.exit(EXIT_FAILED)
    justified = [c for c in cmp.regressions if c.justification]
    if justified or update_scoreboard:
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        record = {f"{c.task}/{c.backend}/{c.metric}": {
            "reason": c.justification, "standing": round(c.standing, 6), "new": round(c.new, 6),
            "band": round(c.band, 6), "p_value": None if c.p_value is None else round(c.p_value, 6), "date": stamp,
        } for c in justified}
        written = update(result if result is not None else run_dir, board_file, record, corpus=corpus, sources=sources)
        click.echo(f"Scoreboard: {len(written)} entr{'y' if len(written) == 1 else 'ies'} written to {board_file}"
                   + (f" with {len(justified)} justification(s)" if justified else ""))
    if sweep_code == EXIT_OK and errors:
        sweep_code = EXIT_BACKEND  # errored members: the check could not compare them
    if sweep_code != EXIT_OK:
        click.echo("The new sweep had failures (listed above).")
        sys.exit(sweep_code)
    click.echo("OK: no unjustified regression" + (f" ({len(justified)} justified)" if justified else ""))
    sys.exit(EXIT_OK)


# --------------------------------------------------------------------------- rescore


@click.command("rescore")
@_CORPUS
@_SOURCES
@_TASKS
@_BOARD
@click.option("--only", multiple=True, help="Only this member (id or TASK/MEMBER; repeatable).")
@click.option("--backend-label", "labels", multiple=True, help="Only entries of this backend label (repeatable).")
def rescore_cmd(corpus, sources, tasks, board, only, labels):
    """Re-score standing entries from their retained run folders with the current truth and scorer.

    No backend is constructed, no model called; run blocks are carried verbatim. Exit 0, 3 if an
    entry could not be re-scored (its run folder is gone), 4 if a member's source changed.
    """
    from .rescore import rescore
    from .scoreboard import board_path

    corpus = _corpus(corpus)
    path = board or board_path(corpus)
    result = rescore(path, corpus=corpus, sources=sources, tasks=list(tasks) or None, only=list(only) or None,
                     backends=list(labels) or None)
    for e in result.entries:
        name = f"{e.task}/{e.member} [{e.backend}]"
        if e.status != "rescored":
            click.echo(f"  {name} … {e.status.upper()}")
            click.echo(f"      ↳ {e.message}")
        elif e.changed:
            diffs = ", ".join(f"{k} {e.before.get(k)!r} → {e.after.get(k)!r}" for k in e.changed)
            click.echo(f"  {name} … re-scored: {diffs}")
        else:
            click.echo(f"  {name} … re-scored: unchanged")
    n = sum(e.status == "rescored" for e in result.entries)
    click.echo(f"Rescore: {n}/{len(result.entries)} entr{'y' if len(result.entries) == 1 else 'ies'} re-scored in {path} "
               "(0 backend calls)")
    sys.exit(result.exit_code)


# --------------------------------------------------------------------------- publish


@click.command("publish")
@click.argument("member")
@click.option("--corpus", type=click.Path(path_type=Path, file_okay=False, exists=True), required=True,
              help="The private corpus holding MEMBER (and its scoreboard.json).")
@_SOURCES
@click.option("--board", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The BYOM board to write (default: byom-scoreboard.json at the evalkit checkout's root).")
@click.option("--backend-label", "labels", multiple=True, help="Only these backend labels (default: all scored).")
def publish_cmd(member, corpus, sources, board, labels):
    """Copy MEMBER's scored entry (TASK/MEMBER or a unique member id) onto the committed BYOM board.

    Aggregate metrics, run block, truth hash and identity metadata only — never document text,
    truth values or names. Exit 3 if refused (no scored entry, no truth provenance, stale truth),
    4 if the member's source changed.
    """
    from .corpus import sources_dir
    from .publish import default_byom_board, publish

    target = board or default_byom_board()
    keys = publish(member, corpus, board=target, sources=sources_dir(sources), backends=list(labels) or None)
    for task, m, label in keys:
        click.echo(f"published {task}/{m} [{label}] → {target}")
    sys.exit(EXIT_OK)


def report_byom(board: Path | None = None, out: Path | None = None) -> Path:
    """What ``evalkit report --byom`` does: render the BYOM board to self-contained HTML; print its path."""
    from .publish import write_byom_report

    path = write_byom_report(board, out)
    click.echo(f"Report: {path}")
    return path


COMMANDS = [sweep_cmd, band_cmd, check_cmd, rescore_cmd, publish_cmd]
