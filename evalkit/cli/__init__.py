"""The `evalkit` command line: each command parses its options, calls one library function, prints,
and exits with a documented code (README "Exit codes"); user mistakes print one message, never a
traceback.

- `app`: the command group, how errors and interrupts end a command.
- `options`: the options commands share (``--backend``, ``--corpus``, the run and judge options).
- `summary`: the one printer of a run's or a sweep's outcomes.
- `run` (run, score, compare, report, diff), `corpus` (validate, metrics), `board` (sweep, band, check,
  rescore, publish), `project` (init, new-member, sources): the commands.
"""

from __future__ import annotations

from evalkit.cli import board, corpus, project, run  # noqa: F401 - each module registers its commands on `main`
from evalkit.cli.app import main

__all__ = ["main"]
