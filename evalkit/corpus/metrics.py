"""The metrics a task's scorer declares (`evalkit.scoring.Metric`), as a table: `evalkit metrics TASK` and
docs/metrics.md, both generated from the declarations.

Each row is a metric's name, its one-line definition and where it is computed, ``file:function`` — the
file relative to the folder above the corpus (a task's own scorer) or above the evalkit package (a
built-in one). After changing a declaration, regenerate the docs page (tests/test_metrics.py fails
while it is stale)::

    .venv/bin/evalkit metrics --markdown > docs/metrics.md
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.corpus.tasks import Task

__all__ = ["Row", "rows", "where", "text", "markdown", "REGENERATE"]

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the evalkit package
REGENERATE = "evalkit metrics --markdown > docs/metrics.md"


@dataclass(frozen=True)
class Row:
    name: str
    definition: str
    where: str  # file:function


def where(function: Any, roots: Iterable[Path] = ()) -> str:
    """``file:function`` of a callable, the file relative to the first of `roots` (then evalkit's) holding it."""
    fn = inspect.unwrap(function)
    path = Path(inspect.getsourcefile(fn) or inspect.getfile(fn)).resolve()
    for root in (*roots, PACKAGE_ROOT):
        root = Path(root).resolve()
        if root in path.parents:
            path = Path(os.path.relpath(path, root))
            break
    return f"{path.as_posix()}:{fn.__qualname__}"


def rows(task: Task) -> list[Row]:
    """The task scorer's declared metrics, in declaration order."""
    return [Row(m.name, m.definition, where(m.function, [task.corpus.parent])) for m in task.scorer.metrics]


def text(task: Task) -> str:
    """The table for a terminal: name, definition, file:function; or why there is none."""
    found = rows(task)
    if not found:
        return (f"{task.id}: its scorer {task.scorer.name!r} declares no metrics "
                "(give its Scorer metrics=(Metric(name, definition, function), …))\n")
    wn, wd = max(len(r.name) for r in found), max(len(r.definition) for r in found)
    head = f"{task.id}: {len(found)} metrics of scorer {task.scorer.name!r}\n"
    return head + "".join(f"{r.name:<{wn}}  {r.definition:<{wd}}  {r.where}\n" for r in found)


def _cell(value: str) -> str:
    return value.replace("|", "\\|")


def markdown(tasks: Iterable[Task]) -> str:
    """docs/metrics.md: one section per scorer (with the tasks it scores), one table row per metric."""
    by_scorer: dict[str, list[Task]] = {}
    for task in tasks:
        by_scorer.setdefault(task.scorer.name, []).append(task)
    lines = ["# Metrics", "",
             "Every metric a bundled task's scorer returns, as the scorer declares it "
             "(`evalkit.scoring.Metric`: name, one-line definition, the function that computes it — for a "
             "figure aggregated from the item table, the function that writes those rows). "
             f"Generated: do not edit; regenerate with `{REGENERATE}` (tests/test_metrics.py checks it is "
             "current). `evalkit metrics TASK` prints one task's table.", ""]
    for name in sorted(by_scorer):
        group = sorted(by_scorer[name], key=lambda t: t.id)
        found = rows(group[0])
        lines += [f"## `{name}`", "",
                  f"Tasks: {', '.join(f'`{t.id}`' for t in group)}. {len(found)} metrics.", "",
                  "| metric | definition | computed by |", "| --- | --- | --- |"]
        lines += [f"| `{r.name}` | {_cell(r.definition)} | `{r.where}` |" for r in found]
        lines.append("")
    return "\n".join(lines)
