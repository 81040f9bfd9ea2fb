"""Options several commands share, and `run_options`: parsed values → the one `RunOptions`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click


class _Spec(click.ParamType):
    """``--backend NAME=SPEC`` (with `label`: a bare SPEC, as ``--judge``), parsed here, once, into a `BackendSpec`.
    A NAME that is not a label is an `Escape` (exit 3), raised through to the CLI group like any `EvalkitError`."""

    name = "spec"

    def __init__(self, label: str | None = None):
        self.label = label

    def convert(self, value, param, ctx):
        from evalkit.backends import BackendSpec  # lazy: keeps `evalkit --help` fast

        return value if isinstance(value, BackendSpec) else BackendSpec.parse(value, self.label)


BACKEND = _Spec()  # the type of every --backend option (run, compare, sweep, band, check)
JUDGE = _Spec("judge")  # --judge SPEC


class _Scheduler(click.ParamType):
    """``--scheduler local[:N]|tcp://HOST:PORT``, checked here (`evalkit.execution.scheduler.parse`: a `UsageError`, exit 2)."""

    name = "scheduler"

    def convert(self, value, param, ctx):
        from evalkit.execution.scheduler import parse  # lazy: keeps `evalkit --help` fast

        return str(parse(value))


SCHEDULER = click.option(
    "--scheduler", type=_Scheduler(), default=None, metavar="local[:N]|tcp://HOST:PORT",
    help="Run the work as Dask distributed tasks: local[:N] starts a cluster of N worker processes (default: cores) "
         "on this machine, tcp://HOST:PORT uses a running `dask scheduler` (README: Past one machine).")


def apply(*options):
    """Decorate with several options, in the order given (as --help lists them)."""
    def deco(f):
        for opt in reversed(options):
            f = opt(f)
        return f
    return deco


CORPUS = click.option("--corpus", type=click.Path(path_type=Path), default=None,
                      help="Corpus folder (default: the bundled corpus/). Its scoreboard.json and band.json live in it.")
SOURCES = click.option("--sources", type=click.Path(path_type=Path), default=None,
                       help="Folder holding pointer members' sources (default: $EVALKIT_SOURCES).")
TASKS = click.option("--task", "tasks", multiple=True, help="Task id (repeatable; default: every task).")
ONLY = click.option("--only", multiple=True, help="Only this member (id or TASK/MEMBER; repeatable).")
BOARD = click.option("--board", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="Scoreboard file (default: <corpus>/scoreboard.json).")
THRESHOLD = click.option("--threshold", type=click.FloatRange(0, 1), default=None, help="Override the pass threshold.")
MAX_CONCURRENCY = click.option("--max-concurrency", type=click.IntRange(1), default=8, help="Concurrent backend calls.")
KERNELS = click.option(
    "--kernels", type=click.Choice(["warm", "cold"]), default="warm", show_default=True,
    help="Notebook kernels: warm (each worker keeps one kernel, reset between notebooks) or cold (a new kernel "
         "per notebook). The executed notebooks are the same bytes; cold is ~5x slower, kept for comparison.")
ALLOW_UNPRICED = click.option(
    "--allow-unpriced", is_flag=True,
    help="Let a model with no price run under --max-usd or --dry-run (its calls count $0 and are not capped); "
         "without it such a run stops before any call (exit 2).")

def _pipeline_timeout(ctx, param, value):
    """Set as the limit's override, read wherever it is checked (sweep workers inherit it): `evalkit.limits`."""
    from evalkit.limits import PIPELINE_TIMEOUT_S  # lazy: keeps `evalkit --help` fast

    if value is not None:
        os.environ[PIPELINE_TIMEOUT_S.env] = repr(value)


PIPELINE_TIMEOUT = click.option(
    "--pipeline-timeout", type=click.FloatRange(0, min_open=True), default=None, metavar="SECONDS",
    expose_value=False, callback=_pipeline_timeout,
    help="Wall-clock limit of one call of a python: pipeline; past it the member is an error (cause timeout). "
         "Default 300 (or $EVALKIT_LIMIT_PIPELINE_TIMEOUT_S).")

# `evalkit run` and `evalkit score`
RUN_OPTIONS = apply(
    CORPUS, SOURCES, TASKS, ONLY,
    click.option("--out", type=click.Path(path_type=Path), default=None,
                 help="Run folder (default: runs/<time>-<backends>)."),
    THRESHOLD,
    click.option("--workers", type=click.IntRange(1), default=None, help="Notebook processes (default: cores)."),
    SCHEDULER,
    KERNELS,
    MAX_CONCURRENCY,
    PIPELINE_TIMEOUT,
    click.option("--html/--no-html", default=True, help="Render the HTML report."),
    click.option("--update-scoreboard", "update_board", is_flag=True,
                 help="Write the scored entries to the corpus's scoreboard.json."),
    BOARD,
)

# `evalkit sweep`, `band`, `check`: every member in a worker process of its own
SWEEP_OPTIONS = apply(
    CORPUS, SOURCES, TASKS, ONLY, THRESHOLD,
    click.option("--workers", type=click.IntRange(1), default=None, help="Member worker processes (default: cores)."),
    SCHEDULER,
    click.option("--max-concurrency", type=click.IntRange(1), default=8,
                 help="Concurrent live backend calls across the whole sweep (made in the sweep's own pool; with "
                      "--scheduler: across its workers)."),
    click.option("--notebooks/--no-notebooks", default=True,
                 help="Run the extract/score notebooks (default), or only extraction + scoring (fast, no .ipynb)."),
    click.option("--html/--no-html", default=False, help="Render each member's HTML (default: no)."),
    KERNELS,
    PIPELINE_TIMEOUT,
)

# --samples K: K independent extractions per member × backend (`evalkit.results.samples`); run, sweep, compare --backend
SAMPLES = click.option("--samples", type=click.IntRange(1), default=1, metavar="K",
                       help="K independent extractions per member × backend (at the task's or --set temperature): "
                            "each member's score is the mean over its samples; reports show the spread, unstable "
                            "items and pass@k / pass^k.")

# `evalkit run` and `evalkit sweep`: which members of each task, the task settings overridden, replay misses
SCOPE_OPTIONS = apply(
    click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N members of each task (id order)."),
    click.option("--sample", type=click.IntRange(1), default=None,
                 help="N members of each task drawn at random (seeded: --seed; recorded with the run)."),
    click.option("--seed", "sample_seed", type=int, default=None, help="The seed of --sample (default: fixed)."),
    click.option("--set", "set_", multiple=True, metavar="KEY=VALUE",
                 help="Override a task setting (max_tokens, temperature; repeatable): recorded in every run block."),
    SAMPLES,
    click.option("--strict-replay", is_flag=True,
                 help="A replay miss aborts the run (exit 6); default: those members are `not covered`, the rest scored."),
)

JUDGE_OPTIONS = apply(
    click.option("--reference", default=None, metavar="LABEL",
                 help="Score every other backend against LABEL's extractions instead of the truth (for a corpus "
                      "without truth): the figures are similarities to LABEL, not accuracies, and never reach the "
                      "scoreboard. Judged too, with --judge."),
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
)


def run_options(**given: Any):
    """The `RunOptions` of a command's parsed values (`runner.run_options`, which `evalkit.run` calls too): the
    scope options' click names (``--set``, ``--seed``) mapped to their fields."""
    from evalkit.stages.runner import run_options as build  # lazy: keeps `evalkit --help` fast

    if "set_" in given:  # SCOPE_OPTIONS
        from evalkit.corpus.specs import parse_settings

        given["settings"] = parse_settings(given.pop("set_"))
        given["seed"] = given.pop("sample_seed")
    return build(**given)
