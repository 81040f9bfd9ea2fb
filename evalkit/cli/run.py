"""`evalkit run`, `score`, `compare`, `report`, `diff`, `runs`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalkit.cli.app import main
from evalkit.cli.options import (
    ALLOW_UNPRICED,
    BACKEND,
    CORPUS,
    JUDGE_OPTIONS,
    MAX_CONCURRENCY,
    RUN_OPTIONS,
    SAMPLES,
    SCOPE_OPTIONS,
    SOURCES,
    apply,
    run_options,
)
from evalkit.cli.summary import print_summary, printer
from evalkit.errors import EXIT_OK, EvalkitError, UsageError


def _progress():
    from tqdm import tqdm  # lazy: tqdm is loaded only where it is used (import cost)

    bars = []

    def start(what: str, total: int):
        bar = tqdm(total=total, desc=what, unit="", file=sys.stderr, leave=False,
                   disable=None if sys.stderr.isatty() else True)
        bars.append(bar)
        return lambda: bar.update(1)

    return start, bars


def _run(opts) -> int:
    """Run `opts` (`runner.run`), print its plan or its summary; return its exit code."""
    from evalkit.stages.runner import run  # lazy: keeps `evalkit --help` fast

    start, bars = _progress()
    try:
        scored = [b for b in opts.backends if b.label != opts.reference]  # the reference is the truth, not a result
        result = run(opts, progress=start, on_outcome=printer(len(scored)))
    finally:
        for bar in bars:
            bar.close()
    if result.plan is not None:
        click.echo(result.plan.render())
        if opts.judge:
            click.echo(f"  judge: {opts.judge.redacted().spec} ({opts.judge_mode or 'reference'}): "
                       "its calls depend on the extractions and are not counted above; cached in its judge cache")
    else:
        print_summary(result)
    return result.exit_code


BACKEND_HELP = ("Backend (repeatable): anthropic[:model=M], openai:url=U|socket=PATH[,model=M], cassette:path=P, "
                "python:MODULE:FUNCTION, fake, predictions:dir=D (default: the committed cassette).")
RECORD = click.option("--record", multiple=True, metavar="NAME=PATH",
                      help="Record backend NAME's calls to a cassette (appends; replays what it already holds).")


@main.command("run")
@click.option("--backend", "backends", multiple=True, type=BACKEND, metavar="NAME=SPEC", help=BACKEND_HELP)
@RECORD
@click.option("--dry-run", is_flag=True,
              help="Resolve backends and show calls, an upper bound of the cost, and guards; call nothing (exit 0).")
@click.option("--strict", is_flag=True, help="With --dry-run: exit with the code of a guard that would abort the run.")
@click.option("--max-usd", type=click.FloatRange(0), default=None, help="Stop before a call would pass this spend.")
@ALLOW_UNPRICED
@click.option("--prices", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Price table (YAML/JSON) overriding the built-in one (or $EVALKIT_PRICES).")
@click.option("--batch", is_flag=True,
              help="anthropic / openai: send the uncached calls through the provider's batch API (half price, "
                   "answers within 24 h); an interrupted run resumes its batches.")
@JUDGE_OPTIONS
@RUN_OPTIONS
@SCOPE_OPTIONS
def run_cmd(backends, **given):
    """Extract, score and report every selected member; exit 0 only if all pass."""
    from evalkit.backends.spec import default_specs  # lazy: keeps `evalkit --help` fast

    sys.exit(_run(run_options(backends=backends or default_specs(), **given)))


@main.command("score")
@click.option("--predictions", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Folder of <member-id>.json records made elsewhere.")
@RUN_OPTIONS
def score_cmd(predictions, **given):
    """Score predictions made elsewhere (one JSON per member, named by member id)."""
    if not predictions.is_dir():
        raise EvalkitError(f"{predictions}: predictions folder not found")
    from evalkit.backends import BackendSpec  # lazy: keeps `evalkit --help` fast

    backend = BackendSpec("predictions", "predictions", {"dir": str(predictions)})
    sys.exit(_run(run_options(backends=[backend], **given)))


@main.command("compare")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--backend", "backends", multiple=True, type=BACKEND, metavar="NAME=SPEC",
              help="Run these backends into RUN_DIR first (as `evalkit run --out RUN_DIR`), then compare.")
@click.option("--record", multiple=True, metavar="NAME=PATH", help="As for `evalkit run` (with --backend).")
@click.option("--max-usd", type=click.FloatRange(0), default=None, help="As for `evalkit run` (with --backend).")
@ALLOW_UNPRICED
@click.option("--show", "show", multiple=True, metavar="NAME",
              help="Only these backends in the comparison (repeatable; default: every backend of the run).")
@JUDGE_OPTIONS
@apply(CORPUS, SOURCES)
@click.option("--task", "tasks", multiple=True, help="Task id (repeatable; default: every task of the run).")
@click.option("--only", multiple=True, help="With --backend: only this member id (repeatable).")
@click.option("--workers", type=click.IntRange(1), default=None, help="Notebook processes (default: cores).")
@MAX_CONCURRENCY
@SAMPLES
def compare_cmd(run_dir, backends, show, **given):
    """Render compare.ipynb (and its HTML) for a run: backends side by side, pairwise win rates.

    With --backend, the run is made first (with --judge/--judge-mode/--ontology as given)."""
    from evalkit.compare.sides import compare_run, text  # lazy: keeps `evalkit --help` fast

    code = EXIT_OK
    if backends:
        code = _run(run_options(backends=backends, out=run_dir, **given))
    else:
        if not run_dir.is_dir():
            raise UsageError(f"{run_dir}: run folder not found (give --backend to make the run first)")
        run_only = ("judge", "judge_mode", "judge_cache", "ontology", "ontology_mode", "only", "record", "reference")
        named = [f"--{k.replace('_', '-')}" for k in run_only if given.get(k)]
        named += ["--samples"] if given.get("samples", 1) > 1 else []
        if named:
            raise UsageError(f"{', '.join(named)} only apply when the run is made here: add --backend")
    pages = compare_run(run_dir, list(given["tasks"]) or None, list(show) or None, workers=given["workers"])
    click.echo(text(run_dir, list(given["tasks"]) or None, list(show) or None), nl=False)
    for page in pages:
        click.echo(f"Comparison: {page}")
    sys.exit(code)  # the run's own exit code when it was made here (1: a member failed its verdict)


@main.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), required=False)
@click.option("--byom", is_flag=True, help="Render the published BYOM scoreboard instead of a run.")
@click.option("--scoreboard", is_flag=True,
              help="Render the corpus's committed scoreboard (with its band and what changed since its previous "
                   "commit) instead of a run.")
@CORPUS
@click.option("--board", type=click.Path(path_type=Path), default=None, help="BYOM board file.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="HTML file for --byom or --scoreboard.")
@click.option("--bundle", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the whole run as this one self-contained HTML file (to attach to an email).")
def report_cmd(run_dir, byom, scoreboard, corpus, board, out, bundle):
    """Re-render the HTML of an existing run folder (or, with --byom, the BYOM board; with --scoreboard, the
    corpus's scoreboard)."""
    if byom:
        from evalkit.board.publish import write_byom_report  # lazy: keeps `evalkit --help` fast

        click.echo(f"Report: {write_byom_report(board, out)}")
        return
    if scoreboard:
        from evalkit.report.boardpage import write_board_report  # lazy: keeps `evalkit --help` fast

        click.echo(f"Report: {write_board_report(corpus, out)}")
        return
    if run_dir is None:
        raise UsageError("give a RUN_DIR, --scoreboard or --byom")
    from evalkit.report.render import render_run  # lazy: keeps `evalkit --help` fast
    from evalkit.results.runfolder import INDEX  # lazy: keeps `evalkit --help` fast
    from evalkit.results.summary import write_summary  # lazy: keeps `evalkit --help` fast

    write_summary(run_dir)  # what the folder holds now (runs into it add up): the index reads it
    render_run(run_dir)
    click.echo(f"Report: {run_dir / INDEX}")
    if bundle is not None:
        from evalkit.report.bundle import bundle_run  # lazy: keeps `evalkit --help` fast

        click.echo(f"Bundle: {bundle_run(run_dir, bundle)}")


@main.command("diff")
@click.argument("run_a", type=click.Path(path_type=Path, file_okay=False))
@click.argument("run_b", type=click.Path(path_type=Path, file_okay=False))
@click.option("--html/--no-html", default=True, help="Also write the diff notebook and its HTML page into RUN_B.")
@click.option("--workers", type=click.IntRange(1), default=None, help="Notebook processes (default: cores).")
def diff_cmd(run_a, run_b, html, workers):
    """What changed from RUN_A to RUN_B: per-metric deltas with paired CIs, verdict flips, every item whose
    outcome changed (newly hallucinated first)."""
    from evalkit.compare.diff import diff_notebook, diff_runs, text  # lazy: keeps `evalkit --help` fast
    from evalkit.report import runspage  # lazy: keeps `evalkit --help` fast

    d = diff_runs(run_a, run_b)  # once: printed, and shown by the notebook (RUN_B's diff.json)
    click.echo(text(d), nl=False)
    if html:
        click.echo(f"Diff: {diff_notebook(run_a, run_b, workers, computed=d)}")
        runspage.refresh(run_b)  # the runs page links the new diff


@main.command("runs")
@click.option("--runs", "runs_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("runs"),
              help="The folder holding the run folders and their history, index.jsonl (default: runs).")
@click.option("--last", type=click.IntRange(1), default=20, help="Runs to print (the page lists more).")
def runs_cmd(runs_dir, last):
    """List every run the history records, newest first, and rewrite RUNS/index.html: each run's command,
    members passed/N, errors, mean scores, and links to its pages (index, comparisons, diff)."""
    from evalkit.report.runspage import runs_text, write_runs_page  # lazy: keeps `evalkit --help` fast

    out, rows, total = write_runs_page(runs_dir)
    click.echo(runs_text(rows[:last], total), nl=False)
    click.echo(f"Runs: {out}")
