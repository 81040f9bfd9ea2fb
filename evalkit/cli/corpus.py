"""`evalkit validate`, `metrics`: what a corpus holds."""

from __future__ import annotations

import sys

import click

from evalkit.cli.app import main
from evalkit.cli.options import CORPUS, SOURCES
from evalkit.errors import EXIT_INVALID, EXIT_OK


@main.command("validate")
@CORPUS
@SOURCES
def validate_cmd(corpus, sources):
    """Lint a whole corpus and report every problem at once (exit 3 if any)."""
    from evalkit.corpus.tasks import DEFAULT_CORPUS, sources_dir  # lazy: keeps `evalkit --help` fast
    from evalkit.stages.validate import validate_corpus  # lazy: keeps `evalkit --help` fast

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
    from evalkit.corpus import metrics  # lazy: keeps `evalkit --help` fast
    from evalkit.corpus.tasks import DEFAULT_CORPUS, load_tasks  # lazy: keeps `evalkit --help` fast

    loaded = load_tasks(corpus or DEFAULT_CORPUS, list(tasks) or None)
    click.echo(metrics.markdown(loaded) if markdown else "\n".join(metrics.text(t) for t in loaded), nl=False)
