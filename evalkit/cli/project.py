"""`evalkit init`, `new-member`, `sources`: a researcher's own project, and the files real-data members need."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from evalkit.cli.app import main
from evalkit.cli.options import CORPUS, SOURCES
from evalkit.errors import EXIT_INTEGRITY, EXIT_INVALID, EXIT_OK


@main.command("init")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
def init_cmd(directory):
    """Start a project in DIRECTORY: a corpus with an example task and member, a scoreboard, a README."""
    from evalkit.board.scaffold import init_project  # lazy: keeps `evalkit --help` fast

    init_project(directory)
    click.echo(f"{directory}: project created; next: cd {shlex.quote(str(directory))} && evalkit run --backend fake"
               f" (see {directory / 'README.md'})")


@main.command("new-member")
@click.argument("task")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--id", "member_id", default=None, help="Member id (default: the file name, lower-case, dashed).")
@CORPUS
def new_member_cmd(task, file, member_id, corpus):
    """Add FILE to TASK as a new member: sha256 pinned, truth.yaml skeleton from the task's schema."""
    from evalkit.board.scaffold import new_member  # lazy: keeps `evalkit --help` fast
    from evalkit.corpus.tasks import DEFAULT_CORPUS  # lazy: keeps `evalkit --help` fast

    member = new_member(corpus or DEFAULT_CORPUS, task, file, member_id)
    click.echo(f"{member}: added; fill in {member / 'truth.yaml'} and the licence in {member / 'manifest.yaml'}")


@main.command("sources")
@click.option("--check", is_flag=True, help="Exit 3 if any expected file is missing (4 if one is altered).")
@CORPUS
@SOURCES
def sources_cmd(check, corpus, sources):
    """List every file the pointer members need under the sources folder, whether it is present and
    matches its sha256, and per public data set where to get it, its licence and the layout to unpack."""
    from evalkit.corpus.datasets import ALTERED, expected_files, problems, render  # lazy: keeps `evalkit --help` fast
    from evalkit.corpus.tasks import DEFAULT_CORPUS, sources_dir  # lazy: keeps `evalkit --help` fast

    folder = sources_dir(sources)
    expected = expected_files(corpus or DEFAULT_CORPUS, folder)
    click.echo(render(expected, folder), nl=False)
    if check:
        bad = problems(expected, folder)
        for line in bad:
            click.echo(f"evalkit: {line}", err=True)
        if bad:
            sys.exit(EXIT_INTEGRITY if any(e.status == ALTERED for e in expected) else EXIT_INVALID)
    sys.exit(EXIT_OK)


@main.command("docs")
@click.argument("name", required=False)
def docs_cmd(name):
    """Print the path of the shipped docs page NAME (tutorial, authoring, corpus-format, …); without NAME, list
    the pages and the folder holding them."""
    from evalkit._util.resources import DOCS_DIR, doc, docs  # lazy: keeps `evalkit --help` fast

    if name:
        click.echo(doc(name))
    else:
        click.echo(f"{DOCS_DIR}: {', '.join(docs())} (evalkit docs NAME prints a page's path)")
