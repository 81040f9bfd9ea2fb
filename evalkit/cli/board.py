"""The scoreboard workflow: `evalkit sweep`, `band`, `check`, `rescore`, `publish` (docs/scoreboard.md)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from evalkit.cli.app import main
from evalkit.cli.options import (
    ALLOW_UNPRICED,
    BACKEND,
    BOARD,
    CORPUS,
    SCOPE_OPTIONS,
    SOURCES,
    SWEEP_OPTIONS,
    TASKS,
    run_options,
)
from evalkit.cli.summary import print_summary
from evalkit.errors import EXIT_OK, EXIT_PARTIAL, UsageError


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


@main.command("sweep")
@click.option("--backend", "backends", multiple=True, type=BACKEND, metavar="NAME=SPEC",
              help="Backend (repeatable): fake, predictions:dir=D, cassette:path=P, … (default: fake).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Sweep folder (default: runs/sweep-<backends>; re-running it skips current members).")
@click.option("--force", is_flag=True, help="Re-run every member, current or not.")
@click.option("--update-scoreboard", "update_board", is_flag=True, help="Write the scored members into the scoreboard.")
@click.option("--max-usd", type=click.FloatRange(0), default=None,
              help="With --scheduler: stop before a call would take the whole sweep past this spend.")
@ALLOW_UNPRICED
@BOARD
@SWEEP_OPTIONS
@SCOPE_OPTIONS
def sweep_cmd(backends, **given):
    """Run every member of every selected task in worker processes; skip members whose outputs are current.

    Exit 0 when every member ran (or was current), 4 if any was refused by the integrity gate,
    5 if any errored or failed otherwise (backend error, notebook or worker crash; 6 for a cassette
    problem). Verdicts (PASS/FAIL) are results, not failures; an errored member is never written
    to the scoreboard and is retried by the next sweep.
    """
    from evalkit.backends import BackendSpec  # lazy: keeps `evalkit --help` fast
    from evalkit.board.sweep import sweep  # lazy: keeps `evalkit --help` fast

    result = sweep(run_options(backends=backends or [BackendSpec("fake", "fake")], **given))
    print_summary(result)
    sys.exit(result.exit_code)


@main.command("band")
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
@click.option("--allow-predictions", is_flag=True,
              help="Accept predictions: sweeps (answers read from files) as samples of the baseline (refused by default).")
@SWEEP_OPTIONS
def band_cmd(n_sweeps, backend, sweep_backends, from_runs, label, band_out, runs_dir, readme, seed, resamples,
             confidence, allow_failures, allow_predictions, **given):
    """Measure the noise band from N ≥ 2 baseline sweeps; write band.json and print its table.

    Give exactly one of: --backend NAME=SPEC with --sweeps N (live, N runs), --sweep-backend
    NAME=SPEC once per sweep (recorded cassettes), or --from-run DIR once per sweep.
    """
    from evalkit.board.measure import measure  # lazy: keeps `evalkit --help` fast
    from evalkit.scoring.stats import SEED  # lazy: keeps `evalkit --help` fast

    if sum(bool(x) for x in (backend, sweep_backends, from_runs)) != 1:
        raise UsageError("band: give exactly one of --backend (with --sweeps N), --sweep-backend (once per sweep) "
                         "or --from-run (once per sweep)")
    if backend and not n_sweeps:
        raise UsageError("band: --backend needs --sweeps N (N ≥ 2)")
    for flag, given_n in (("--sweep-backend", len(sweep_backends)), ("--from-run", len(from_runs))):
        if given_n and n_sweeps and n_sweeps != given_n:
            raise UsageError(f"band: --sweeps {n_sweeps} but {given_n} {flag} given")
    specs = [backend] * n_sweeps if backend else list(sweep_backends)
    done = measure(
        run_options(**given), specs=specs, from_runs=from_runs, runs_dir=runs_dir, out=band_out, label=label,
        readme=readme, seed=SEED if seed is None else seed, resamples=resamples, confidence=confidence,
        allow_failures=allow_failures, allow_predictions=allow_predictions,
        on_sweep=lambda i, n, spec, folder: click.echo(f"Sweep {i}/{n}: {spec.redacted()} → {folder}"),
        on_swept=print_summary)
    click.echo(done.markdown, nl=False)
    click.echo(f"Band: {done.path}")
    if done.readme:
        click.echo(f"README: band table rewritten in {done.readme}")
    sys.exit(EXIT_OK)


@main.command("check")
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
@click.option("--allow-partial", is_flag=True,
              help="Gate on the standing entries the new sweep covered, when some were not covered or errored "
                   "(without it such a check exits 7).")
@BOARD
@SWEEP_OPTIONS
def check_cmd(run_dir, backends, out, justify, band_file, update_scoreboard, seed, allow_partial, board, **given):
    """Compare a new sweep (RUN_DIR, or run one with --backend) with the standing scoreboard.

    A gated metric (higher is better) whose corpus mean drops by more than its band is a
    regression. A member that errored in the new sweep is named as not comparable and left out.
    Exit 0: no regression, or every one justified (recorded in the scoreboard);
    1: an unjustified regression; 3: no scoreboard / nothing to compare; 7: a standing entry in scope
    was not covered or errored in the new sweep, so the gate saw only part of the board (--allow-partial
    gates on what was covered); 4/5/6: the new sweep had refused / errored or failed members or a cassette
    problem (and no unjustified regression).
    """
    from evalkit.backends import labels_slug  # lazy: keeps `evalkit --help` fast
    from evalkit.board.regress import check, parse_justify  # lazy: keeps `evalkit --help` fast
    from evalkit.scoring.stats import SEED  # lazy: keeps `evalkit --help` fast

    if bool(run_dir) == bool(backends):
        raise UsageError("check: give a RUN_DIR to read, or --backend NAME=SPEC to run a new sweep (not both)")
    if backends and out is None:
        out = Path("runs") / f"{_stamp()}-check-{labels_slug(spec.label for spec in backends)}"
    res = check(run_options(backends=backends, out=out, **given), run_dir=run_dir, board=board, band_file=band_file,
                justifications=parse_justify(justify), update_scoreboard=update_scoreboard,
                seed=SEED if seed is None else seed, on_sweep=print_summary, allow_partial=allow_partial)
    cmp = res.comparison
    if res.band_missing:
        click.echo(f"note: no band file at {res.band_file}: every band is the 0.02 floor")
    for note in cmp.notes:
        click.echo(f"note: {note}")
    click.echo(f"Regressions ({len(cmp.regressions)}):")
    for c in cmp.regressions:
        why = f'  — justified: "{c.justification}"' if c.justification else ""
        click.echo(f"  REGRESSION {c.line()}{why}")
    click.echo(f"Improvements ({len(cmp.improvements)}):")
    for c in cmp.improvements:
        click.echo(f"  improved   {c.line()}")
    click.echo(f"Within the band: {sum(c.kind == 'within' for c in cmp.changes)} metric(s)")
    for k in res.unused:
        click.echo(f"note: --justify {k}: no regression of that metric; nothing to justify")
    if res.coverage and res.coverage.partial:  # one line, whatever else decides the exit code
        click.echo(("PARTIAL: " if res.exit_code == EXIT_PARTIAL else "note: ") + res.coverage.line(res.allow_partial))
    if cmp.unjustified:
        multi = len({x.backend for x in cmp.changes}) > 1
        names = ", ".join(f"{c.task}/{c.metric}" + (f" [{c.backend}]" if multi else "") for c in cmp.unjustified)
        click.echo(f"FAIL: {len(cmp.unjustified)} unjustified regression(s): {names}. Fix it, or accept it with "
                   f'--justify {cmp.unjustified[0].metric}="reason" (recorded in the scoreboard).')
        sys.exit(res.exit_code)
    if res.written is not None:
        click.echo(f"Scoreboard: {res.written} entr{'y' if res.written == 1 else 'ies'} written to "
                   f"{res.board_file}"
                   + (f" with {len(res.justified)} justification(s)" if res.justified else ""))
    if res.exit_code != EXIT_OK:
        if res.exit_code != EXIT_PARTIAL:
            click.echo("The new sweep had failures (listed above).")
        sys.exit(res.exit_code)
    click.echo("OK: no unjustified regression" + (f" ({len(res.justified)} justified)" if res.justified else ""))
    sys.exit(EXIT_OK)


@main.command("rescore")
@CORPUS
@SOURCES
@TASKS
@BOARD
@click.option("--only", multiple=True, help="Only this member (id or TASK/MEMBER; repeatable).")
@click.option("--backend-label", "labels", multiple=True, help="Only entries of this backend label (repeatable).")
def rescore_cmd(corpus, sources, tasks, board, only, labels):
    """Re-score standing entries from their retained run folders with the current truth and scorer.

    No backend is constructed, no model called; run blocks are carried verbatim. Exit 0, 3 if an
    entry could not be re-scored (its run folder is gone), 4 if a member's source changed.
    """
    from evalkit.board.rescore import rescore  # lazy: keeps `evalkit --help` fast
    from evalkit.corpus.tasks import DEFAULT_CORPUS  # lazy: keeps `evalkit --help` fast
    from evalkit.results.scoreboard import board_path  # lazy: keeps `evalkit --help` fast

    corpus = Path(corpus or DEFAULT_CORPUS)
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


@main.command("publish")
@click.argument("member")
@click.option("--corpus", type=click.Path(path_type=Path, file_okay=False, exists=True), required=True,
              help="The private corpus holding MEMBER (and its scoreboard.json).")
@SOURCES
@click.option("--board", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The BYOM board to write (default: byom-scoreboard.json at the evalkit checkout's root).")
@click.option("--backend-label", "labels", multiple=True, help="Only these backend labels (default: all scored).")
def publish_cmd(member, corpus, sources, board, labels):
    """Copy MEMBER's scored entry (TASK/MEMBER or a unique member id) onto the committed BYOM board.

    Aggregate metrics, run block, truth hash and identity metadata only — never document text,
    truth values or names. Exit 3 if refused (no scored entry, no truth provenance, stale truth),
    4 if the member's source changed.
    """
    from evalkit.board.publish import default_byom_board, publish  # lazy: keeps `evalkit --help` fast
    from evalkit.corpus.tasks import sources_dir  # lazy: keeps `evalkit --help` fast

    target = board or default_byom_board()
    for task, m, label in publish(member, corpus, board=target, sources=sources_dir(sources),
                                  backends=list(labels) or None):
        click.echo(f"published {task}/{m} [{label}] → {target}")
    sys.exit(EXIT_OK)


@main.command("plan")
@click.option("--task", required=True, help="The task the comparison is on.")
@click.option("--band", "band_file", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="Size from band.json's member_sd (default: <corpus>/band.json when --pilot is not given).")
@click.option("--pilot", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="Size from the per-member scores of this run or sweep folder.")
@click.option("--label", default=None, help="The pilot's backend label when it holds several.")
@click.option("--metric", default="score", show_default=True, help="The metric compared.")
@click.option("--effect", type=click.FloatRange(0, min_open=True), default=None,
              help="A target paired effect: also print the members needed to detect it.")
@click.option("--alpha", type=click.FloatRange(0, 0.5, min_open=True), default=0.05, show_default=True,
              help="Two-sided significance level.")
@click.option("--power", type=click.FloatRange(0.5, 1, max_open=True), default=0.8, show_default=True)
@click.option("--samples", type=click.IntRange(1), default=1, show_default=True,
              help="Extractions per member (its figure is their mean).")
@click.option("--rho", type=click.FloatRange(-1, 1), default=0.5, show_default=True,
              help="With --pilot: the assumed correlation of a member's scores under the two configurations.")
@click.option("--members", type=click.IntRange(2), default=None, help="Members of the comparison (default: the input's).")
@CORPUS
def plan_cmd(task, band_file, pilot, label, metric, effect, alpha, power, samples, rho, members, corpus):
    """Power before a run: the minimum detectable paired effect (MDE) for the members, and the members needed
    for --effect (docs/scoreboard.md: what is measured, what is assumed). Exit 0; 2 bad input; 3 no band file."""
    from evalkit.compare.power import pilot_samples, plan  # lazy: keeps `evalkit --help` fast
    from evalkit.results.band import (  # lazy: keeps `evalkit --help` fast  # lazy: keeps `evalkit --help` fast
        band_path,
        read_band,
    )

    if band_file and pilot:
        raise UsageError("plan: give --band FILE or --pilot RUN, not both")
    src = {"pilot": pilot_samples(pilot, task, metric, label)} if pilot else \
        {"band": read_band(band_file or band_path(corpus), must_exist=True)}
    p = plan(task, metric=metric, effect=effect, alpha=alpha, power=power, samples=samples, rho=rho, members=members,
             **src)
    click.echo("\n".join(p.lines()))
    sys.exit(EXIT_OK)


@main.command("judge-audit")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--export", "export", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the candidates the judge decided (.csv, else JSONL) with an empty human column to fill in.")
@click.option("--labels", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="A filled-in labels file: agreement, κ, error rates and corrected judged F1.")
@click.option("--seed", type=int, default=None, help="Bootstrap seed (default: fixed).")
def judge_audit_cmd(run_dir, export, labels, seed):
    """The judge against people (docs/judging.md). Exit 0; 2 neither/both options or labels of another
    judgment; 3 an unreadable labels file."""
    # lazy: keeps `evalkit --help` fast
    from evalkit.compare.judgeaudit import audit, candidates, read_labels, write_labels
    from evalkit.scoring.stats import SEED  # lazy: keeps `evalkit --help` fast

    if bool(export) == bool(labels):
        raise UsageError("judge-audit: give --export FILE (to label) or --labels FILE (labelled), not both")
    if export:
        rows = candidates(run_dir)
        write_labels(export, rows)
        accepted = sum(r["judge"] == "accept" for r in rows)
        click.echo(f"judge-audit: {len(rows)} candidate(s) ({accepted} accepted by the judge) → {export}; fill in "
                   "the human column (accept/reject) and run with --labels")
        sys.exit(EXIT_OK)
    result = audit(run_dir, read_labels(labels), SEED if seed is None else seed)
    click.echo("\n".join(result.lines()))
    sys.exit(EXIT_OK)
