"""The `evalkit` command line. User mistakes print one message and exit with
a documented code (see README "Exit codes"); they never print a traceback.
SIGINT and SIGTERM stop a command the same way (`evalkit.interrupt`): one line
says what finished and how to finish the rest; the exit code is 128 + the
signal number (130, 143)."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
from pathlib import Path

import click

from . import __version__
from .backends import BackendSpec
from .board_cli import BACKEND, JUDGE
from .corpus import DEFAULT_CORPUS, sources_dir
from .errors import EXIT_INVALID, EXIT_OK, EvalkitError, UsageError
from .runfolder import INDEX
from .validate import validate_corpus

# The default backend replays the committed cassette: one real extraction pass of the bundled
# corpus by Gemma 3 270M (a small base model: real output, mostly wrong) — offline and free.
DEFAULT_CASSETTE = Path(__file__).resolve().parent.parent / "cassettes" / "gemma-3-270m-q4_k_m.jsonl"


def default_backends() -> tuple[BackendSpec, ...]:
    if not DEFAULT_CASSETTE.is_file():
        return (BackendSpec("fake", "fake"),)
    return (BackendSpec("gemma-3-270m", "cassette", {"path": os.path.relpath(DEFAULT_CASSETTE)}),)

CORPUS = click.option("--corpus", type=click.Path(path_type=Path), default=None,
                      help="Corpus folder (default: the bundled corpus/).")
SOURCES = click.option("--sources", type=click.Path(path_type=Path), default=None,
                       help="Folder holding pointer members' sources (default: $EVALKIT_SOURCES).")


def _fail(err: EvalkitError) -> None:
    click.echo(f"evalkit: {err}", err=True)
    sys.exit(err.exit_code)


# Commands whose run folder a re-run completes (a check or band sweep starts over).
RESUMABLE = ("run", "score", "compare", "sweep")


def _stopped(err: KeyboardInterrupt, args: list[str]) -> None:
    from .interrupt import Interrupted, received

    sig = err.signum if isinstance(err, Interrupted) else received()
    done = err.done if isinstance(err, Interrupted) else ""
    click.echo(f"evalkit: stopped by {signal.Signals(sig).name}" + (f": {done}" if done else ""), err=True)
    command = next((a for a in args if a in main.commands), None)
    run_dir = getattr(err, "run_dir", None)
    if run_dir is not None and command in RESUMABLE:
        again = [a for a in args if not (command == "sweep" and a == "--force")]  # --force would redo the finished
        if command != "compare" and not any(a == "--out" or a.startswith("--out=") for a in again):
            again += ["--out", str(run_dir)]
        click.echo(f"evalkit: to finish the rest: {shlex.join(['evalkit', *again])}", err=True)
    sys.exit(128 + sig)


class _Group(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["evalkit.args"] = list(args)  # for the resume line of an interrupted run
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except EvalkitError as e:
            _fail(e)
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: the run has stopped its workers already
            _stopped(e, ctx.meta.get("evalkit.args", []))


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="evalkit")
def main() -> None:
    """Measure how well an LLM extracts structured data from documents."""
    if threading.current_thread() is threading.main_thread():
        from .interrupt import handle_signals

        handle_signals()


def _progress():
    from tqdm import tqdm

    bars = []

    def start(what: str, total: int):
        bar = tqdm(total=total, desc=what, unit="", file=sys.stderr, leave=False,
                   disable=None if sys.stderr.isatty() else True)
        bars.append(bar)
        return lambda: bar.update(1)

    return start, bars


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100 * x:5.1f}%"


def verdict_line(o, n: int, total: int, multi: bool) -> str:
    """One member × backend as soon as it is scored: ``[n/total] task/member [backend] … 85.0% PASS``, and a
    ↳ line per note (or, for an error, its cause and message)."""
    from .status import SCORED

    name = f"[{n}/{total}] {o.task}/{o.member}" + (f" [{o.backend}]" if multi else "")
    if o.status == SCORED:
        verdict = {True: "PASS", False: "FAIL", None: ""}[o.passed]
        lines = [f"{name} … {_pct(o.score)} {verdict}".rstrip(), *(f"      ↳ {note}" for note in o.notes)]
    else:
        lines = [f"{name} … {o.status.upper()}", f"      ↳ {o.why}"]
    return "\n".join(lines)


def _printer(labels: int):
    """on_outcome for `runner.run`: each verdict line printed (and flushed) the moment it exists, above any
    progress bar; piped to a file too."""
    from tqdm import tqdm

    def show(o, n: int, total: int) -> None:
        with tqdm.external_write_mode(file=sys.stdout):
            click.echo(verdict_line(o, n, total, labels > 1))
    return show


def print_summary(result) -> None:
    """After the verdict lines: per task, the skipped members with the reason (it names the fix), then one
    line per backend (`evalkit.summary.backend_line`: never pooled across backends)."""
    from .summary import backend_line

    tasks = (result.summary or {}).get("tasks") or {}
    skipped = {}  # a run where nothing passed the gate has no summary.json: its outcomes say what was skipped
    for o in result.outcomes:
        if o.status not in ("scored", "error"):
            skipped.setdefault(o.task, {}).setdefault(o.member, o)
    for task in sorted(set(tasks) | set(skipped)):
        click.echo(task)
        for member, o in skipped.get(task, {}).items():
            click.echo(f"  {member} … {o.status.upper()}")
            click.echo(f"      ↳ {o.why}")
        t = tasks.get(task)
        for entry in (t or {}).get("backends") or []:
            if entry["members"] or not entry["skipped"]:
                click.echo("  " + backend_line(entry, t["headline"]))
    index = result.run_dir / INDEX
    click.echo(f"Report: {index if index.exists() else result.run_dir}")


def _run(corpus, sources, tasks, only, backends, out, threshold, workers, max_concurrency, html,
         update_board=False, board=None, record=(), dry_run=False, max_usd=None, prices=None,
         allow_unpriced=False, exit: bool = True, **judging) -> int:
    """Run and print the summary; exit with the run's code (or return it, with exit=False).

    `judging`: judge, judge_mode, judge_cache, ontology, ontology_mode (RunOptions fields)."""
    from .board_cli import record_history
    from .runner import RunOptions, run
    from .scoreboard import board_path, update_scoreboard

    opts = RunOptions(
        corpus=corpus or DEFAULT_CORPUS, sources=sources_dir(sources), tasks=list(tasks) or None,
        only=list(only) or None, backends=list(backends),
        out=out, threshold=threshold, max_concurrency=max_concurrency, html=html,
        record=list(record), dry_run=dry_run, max_usd=max_usd, prices=prices, allow_unpriced=allow_unpriced,
        **judging,
    )
    if workers:
        opts.workers = workers
    start, bars = _progress()
    try:
        result = run(opts, progress=start, on_outcome=_printer(len(opts.backends)))
    finally:
        for bar in bars:
            bar.close()
    if result.plan is not None:
        click.echo(result.plan.render())
        if judging.get("judge"):
            click.echo(f"  judge: {judging['judge'].redacted().spec} ({judging.get('judge_mode') or 'reference'}): "
                       "its calls depend on the extractions and are not counted above; cached in its judge cache")
        sys.exit(result.exit_code)
    print_summary(result)
    if result.reused:
        click.echo(f"Resumed: {result.reused} extraction(s) reused from the unfinished run in {result.run_dir}")
    record_history(result)
    if update_board:
        path = board or board_path(opts.corpus)
        entries = update_scoreboard(result, path, corpus=opts.corpus, sources=opts.sources)
        click.echo(f"Scoreboard: {len(entries)} entries written to {path}")
    if not exit:
        return result.exit_code
    sys.exit(result.exit_code)


RUN_OPTIONS = [
    CORPUS, SOURCES,
    click.option("--task", "tasks", multiple=True, help="Task id (repeatable; default: every task)."),
    click.option("--only", multiple=True, help="Only this member id (repeatable)."),
    click.option("--out", type=click.Path(path_type=Path), default=None,
                 help="Run folder (default: runs/<time>-<backends>)."),
    click.option("--threshold", type=click.FloatRange(0, 1), default=None, help="Override the pass threshold."),
    click.option("--workers", type=click.IntRange(1), default=None, help="Notebook processes (default: cores)."),
    click.option("--max-concurrency", type=click.IntRange(1), default=8, help="Concurrent backend calls."),
    click.option("--html/--no-html", default=True, help="Render the HTML report."),
    click.option("--update-scoreboard", "update_board", is_flag=True,
                 help="Write the scored entries to the corpus's scoreboard.json."),
    click.option("--board", type=click.Path(path_type=Path), default=None,
                 help="Scoreboard file (default: <corpus>/scoreboard.json)."),
]


ALLOW_UNPRICED = click.option(
    "--allow-unpriced", is_flag=True,
    help="Let a model with no price run under --max-usd or --dry-run (its calls count $0 and are not capped); "
         "without it such a run stops before any call (exit 2).")

JUDGE_OPTIONS = [
    click.option("--judge", default=None, type=JUDGE, metavar="SPEC",
                 help="Judge backend (any backend spec: anthropic[:model=M] for the hosted default, openai:url=U, "
                      "python:M:F, cassette:path=P): judged metrics, and pairwise judging with --judge-mode."),
    click.option("--judge-mode", type=click.Choice(["reference", "pairwise", "both"]), default=None,
                 help="reference (default): judge the strict pass's leftovers against the truth; pairwise: blind "
                      "A/B comparison of every pair of backends; both."),
    click.option("--judge-cache", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="The judge's cassette (default: judge-cache.jsonl beside the run folder): re-runs reuse it."),
    click.option("--ontology", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="Ontology YAML (entity_types, relation_types): its vocabulary is added to the prompt."),
    click.option("--ontology-mode", type=click.Choice(["open", "strict"]), default=None,
                 help="open: preferred labels; strict: only these labels, plus vocabulary_compliance "
                      "(default: the file's mode:, else strict). Needs --ontology."),
]


def _apply(options):
    def deco(f):
        for opt in reversed(options):
            f = opt(f)
        return f
    return deco


@main.command("run")
@click.option("--backend", "backends", multiple=True, type=BACKEND, metavar="NAME=SPEC",
              help="Backend (repeatable): anthropic[:model=M], openai:url=U[,model=M], cassette:path=P, "
                   "python:MODULE:FUNCTION, fake, predictions:dir=D (default: the committed cassette).")
@click.option("--record", multiple=True, metavar="NAME=PATH",
              help="Record backend NAME's calls to a cassette (appends; replays what it already holds).")
@click.option("--dry-run", is_flag=True,
              help="Resolve backends and show calls, an upper bound of the cost, and guards; call nothing.")
@click.option("--max-usd", type=click.FloatRange(0), default=None, help="Stop before a call would pass this spend.")
@ALLOW_UNPRICED
@click.option("--prices", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Price table (YAML/JSON) overriding the built-in one (or $EVALKIT_PRICES).")
@_apply(JUDGE_OPTIONS)
@_apply(RUN_OPTIONS)
def run_cmd(backends, record, dry_run, max_usd, allow_unpriced, prices, corpus, sources, tasks, only, out, threshold,
            workers, max_concurrency, html, update_board, board, judge, judge_mode, judge_cache, ontology,
            ontology_mode):
    """Extract, score and report every selected member; exit 0 only if all pass."""
    _run(corpus, sources, tasks, only, backends or default_backends(), out, threshold, workers, max_concurrency,
         html, update_board, board, record, dry_run, max_usd, prices, allow_unpriced, judge=judge,
         judge_mode=judge_mode, judge_cache=judge_cache, ontology=ontology, ontology_mode=ontology_mode)


@main.command("compare")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--backend", "backends", multiple=True, type=BACKEND, metavar="NAME=SPEC",
              help="Run these backends into RUN_DIR first (as `evalkit run --out RUN_DIR`), then compare.")
@click.option("--record", multiple=True, metavar="NAME=PATH", help="As for `evalkit run` (with --backend).")
@click.option("--max-usd", type=click.FloatRange(0), default=None, help="As for `evalkit run` (with --backend).")
@ALLOW_UNPRICED
@click.option("--show", "show", multiple=True, metavar="NAME",
              help="Only these backends in the comparison (repeatable; default: every backend of the run).")
@_apply(JUDGE_OPTIONS)
@CORPUS
@SOURCES
@click.option("--task", "tasks", multiple=True, help="Task id (repeatable; default: every task of the run).")
@click.option("--only", multiple=True, help="With --backend: only this member id (repeatable).")
@click.option("--workers", type=click.IntRange(1), default=None, help="Notebook processes (default: cores).")
@click.option("--max-concurrency", type=click.IntRange(1), default=8, help="Concurrent backend calls.")
def compare_cmd(run_dir, backends, record, max_usd, allow_unpriced, show, judge, judge_mode, judge_cache, ontology,
                ontology_mode, corpus, sources, tasks, only, workers, max_concurrency):
    """Render compare.ipynb (and its HTML) for a run: backends side by side, pairwise win rates.

    With --backend, the run is made first (with --judge/--judge-mode/--ontology as given)."""
    from .compare import compare_run

    code = EXIT_OK
    if backends:
        code = _run(corpus, sources, tasks, only, backends, run_dir, None, workers, max_concurrency, True, record=record,
             max_usd=max_usd, allow_unpriced=allow_unpriced, exit=False, judge=judge, judge_mode=judge_mode,
             judge_cache=judge_cache, ontology=ontology, ontology_mode=ontology_mode)
    else:
        if not run_dir.is_dir():
            raise UsageError(f"{run_dir}: run folder not found (give --backend to make the run first)")
        given = [n for n, v in (("--judge", judge), ("--judge-mode", judge_mode), ("--judge-cache", judge_cache),
                                ("--ontology", ontology), ("--ontology-mode", ontology_mode), ("--only", only),
                                ("--record", record)) if v]
        if given:
            raise UsageError(f"{', '.join(given)} only apply when the run is made here: add --backend")
    pages = compare_run(run_dir, list(tasks) or None, list(show) or None, workers=workers)
    for page in pages:
        click.echo(f"Comparison: {page}")
    sys.exit(code)  # the run's own exit code when it was made here (1: a member failed its verdict)


@main.command("diff")
@click.argument("run_a", type=click.Path(path_type=Path, file_okay=False))
@click.argument("run_b", type=click.Path(path_type=Path, file_okay=False))
@click.option("--html/--no-html", default=True, help="Also write RUN_B/diff.ipynb and its HTML page.")
@click.option("--workers", type=click.IntRange(1), default=None, help="Notebook processes (default: cores).")
def diff_cmd(run_a, run_b, html, workers):
    """What changed from RUN_A to RUN_B: per-metric deltas with paired CIs, verdict flips, every item whose
    outcome changed (newly hallucinated first)."""
    from .diff import diff_notebook, diff_runs, text

    click.echo(text(diff_runs(run_a, run_b)), nl=False)
    if html:
        click.echo(f"Diff: {diff_notebook(run_a, run_b, workers)}")


@main.command("score")
@click.option("--predictions", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Folder of <member-id>.json records made elsewhere.")
@_apply(RUN_OPTIONS)
def score_cmd(predictions, corpus, sources, tasks, only, out, threshold, workers, max_concurrency, html,
              update_board, board):
    """Score predictions made elsewhere (one JSON per member, named by member id)."""
    if not predictions.is_dir():
        raise EvalkitError(f"{predictions}: predictions folder not found")
    backend = BackendSpec("predictions", "predictions", {"dir": str(predictions)})
    _run(corpus, sources, tasks, only, [backend], out, threshold, workers, max_concurrency, html, update_board, board)


@main.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), required=False)
@click.option("--byom", is_flag=True, help="Render the published BYOM scoreboard instead of a run.")
@click.option("--board", type=click.Path(path_type=Path), default=None, help="BYOM board file.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="HTML file for --byom.")
def report_cmd(run_dir, byom, board, out):
    """Re-render the HTML of an existing run folder (or, with --byom, the BYOM board)."""
    if byom:
        from .board_cli import report_byom

        report_byom(board, out)
        return
    if run_dir is None:
        raise UsageError("give a RUN_DIR, or --byom")
    from .render import render_run
    from .summary import write_summary

    write_summary(run_dir)  # what the folder holds now (runs into it add up): the index reads it
    render_run(run_dir)
    click.echo(f"Report: {run_dir / INDEX}")


@main.command("validate")
@CORPUS
@SOURCES
def validate_cmd(corpus, sources):
    """Lint a whole corpus and report every problem at once (exit 3 if any)."""
    corpus = corpus or DEFAULT_CORPUS
    problems = validate_corpus(corpus, sources_dir(sources))
    for p in problems:
        click.echo(p, err=True)
    if problems:
        click.echo(f"{len(problems)} problem(s) in {corpus}", err=True)
        sys.exit(EXIT_INVALID)
    click.echo(f"{corpus}: ok")
    sys.exit(EXIT_OK)


@main.command("metrics")
@click.argument("tasks", nargs=-1)
@CORPUS
@click.option("--markdown", is_flag=True, help="Print docs/metrics.md (every task) instead of the table.")
def metrics_cmd(tasks, corpus, markdown):
    """Print the metrics TASK's scorer declares: name, definition, file:function (default: every task)."""
    from . import metrics
    from .corpus import load_tasks

    loaded = load_tasks(corpus or DEFAULT_CORPUS, list(tasks) or None)
    click.echo(metrics.markdown(loaded) if markdown else "\n".join(metrics.text(t) for t in loaded), nl=False)


from .board_cli import COMMANDS as _BOARD_COMMANDS  # noqa: E402

for _command in _BOARD_COMMANDS:
    main.add_command(_command)


if __name__ == "__main__":
    main()
