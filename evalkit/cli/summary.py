"""The one printer of outcomes, for a run (`runner.RunResult`) and a sweep (`sweep.SweepResult`) alike:
a line per member × backend (its score and verdict, or its status and why), then per task and backend
one line of counts and means — means over scored members only, errors counted beside, never pooled
across backends — then where the results are and what was recorded.

A run prints each member's line the moment it is scored (`printer`: ``[n/N] task/member … 85.0% PASS``,
flushed, above any progress bar, piped to a file too), a sweep all of them at its end; both then list the
skipped members with the reason (it names the fix) and one line per task × backend from their summary.json
(`evalkit.results.summary.backend_line`: the headline's mean with its CI, held-out members apart)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from evalkit.status import ERROR, SCORED, SKIPPED, count, shown

if TYPE_CHECKING:
    from evalkit.results.summary import Summary, TaskSummary


def pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100 * x:5.1f}%"


def _outcome_lines(name: str, o: Any, tag: str = "") -> list[str]:
    if o.status == SCORED:
        verdict = {True: " PASS", False: " FAIL", None: ""}[o.passed]
        return [f"{name} … {pct(o.score)}{verdict}{tag}", *(f"      ↳ {note}" for note in o.notes)]
    return [f"{name} … {shown(o.status)}", f"      ↳ {o.why}"]


def verdict_line(o: Any, n: int, total: int, multi: bool) -> str:
    """One member × backend as soon as it is scored: ``[n/total] task/member [backend] … 85.0% PASS`` and its
    ↳ lines."""
    name = f"[{n}/{total}] {o.task}/{o.member}" + (f" [{o.backend}]" if multi else "")
    return "\n".join(_outcome_lines(name, o))


def printer(backends: int, echo: Callable[[str], Any] = click.echo) -> Callable[[Any, int, int], None]:
    """`runner.run`'s on_outcome: each verdict line printed (click.echo flushes) as soon as it exists, above
    any progress bar."""
    from tqdm import tqdm  # lazy: tqdm is loaded only where it is used (import cost)

    def show(o: Any, n: int, total: int) -> None:
        with tqdm.external_write_mode(file=sys.stdout):
            echo(verdict_line(o, n, total, backends > 1))
    return show


def skipped_line(outs: list[Any]) -> str | None:
    """Members skipped for a missing source, collapsed into one line for their task (one skipped for another cause,
    a scan with no text layer, has its own line)."""
    n = len({o.member for o in outs if o.status == SKIPPED and not o.cause})
    if not n:
        return None
    return (f"{n} member{'s' if n > 1 else ''} skipped: their files are not under the sources folder (--sources or "
            "$EVALKIT_SOURCES); `evalkit sources` lists each file, where to get it and where to put it")


def print_summary(result: Any, echo: Callable[[str], Any] = click.echo) -> None:
    """Print `result` (a run's or a sweep's); see the module docstring."""
    sweep = hasattr(result, "members")
    outcomes = result.outcomes
    multi = len({o.backend for o in outcomes}) > 1
    if getattr(result, "reference", None):
        echo(f"Reference mode: every figure is a similarity to {result.reference}'s extractions, not an accuracy")
    if sweep:  # one flat list, TASK/MEMBER, in key order; crashed members have no outcome
        for m in result.members:
            if m.status == "failed":
                echo(f"  {m.key} … FAILED")
                echo(f"      ↳ {m.message}")
            tag = " (current, skipped)" if m.status == "current" else ""
            for o in m.outcomes:
                if o.status == SKIPPED:
                    continue  # a missing source: one line for its task, below
                for line in _outcome_lines(f"  {m.key}" + (f" [{o.backend}]" if multi else ""), o, tag):
                    echo(line)
    # a run's verdict lines went out as each member was scored
    _task_lines(outcomes, _summary_of(result).tasks, echo, sweep)
    if sweep:
        ran = sum(m.status == "ran" for m in result.members)
        current = sum(m.status == "current" for m in result.members)
        c = count(outcomes)
        refused = f" ({c.refused} refused)" if c.refused else ""
        echo(f"Sweep: {len(result.members)} member(s): {ran} run, {current} current (skipped), "
             f"{c.scored} scored, {c.errors} error(s), {c.skipped} skipped{refused}, "
             + (f"{c.not_covered} not covered (no recording), " if c.not_covered else "")
             + f"{len(result.failures)} failure(s)")
        if result.failures:
            echo("Failures:")
            for line in result.failures:
                echo(f"  {line}")
        echo(f"Sweep folder: {result.run_dir}")
    else:
        from evalkit.results.runfolder import INDEX  # lazy: keeps `evalkit --help` fast

        index = result.run_dir / INDEX
        echo(f"Report: {index if index.exists() else result.run_dir}")
        if result.reused:
            echo(f"Resumed: {result.reused} extraction(s) reused from the unfinished run in {result.run_dir}")
    print_recorded(getattr(result, "recorded", None), echo)


def _summary_of(result: Any) -> Summary:
    """The run's (or sweep's) summary.json as it wrote it (`RunResult.summary`), typed."""
    from evalkit.results.runfolder import SUMMARY_JSON  # lazy: no numpy or pandas for `evalkit --help`
    from evalkit.results.summary import Summary  # lazy: as above

    where = f"{getattr(result, 'run_dir', '')}/{SUMMARY_JSON}"
    return Summary.from_json(getattr(result, "summary", None) or {}, where)


def _task_lines(outcomes: list[Any], tasks: dict[str, TaskSummary], echo: Callable[[str], Any], sweep: bool) -> None:
    """Per task: a run's members not scored with why (a sweep listed every member above), those skipped for a
    missing source in one line, then one line per backend from summary.json (`summary.backend_line`)."""
    from evalkit.results.summary import backend_line  # lazy: keeps `evalkit --help` fast

    unscored: dict[str, list[Any]] = {}
    for o in outcomes:
        if o.status not in (SCORED, ERROR):
            unscored.setdefault(o.task, []).append(o)
    for task in sorted(set(tasks) | set(unscored)):
        prefix = f"  {task} " if sweep else "  "
        outs = unscored.get(task, [])
        if not sweep:
            echo(task)
            shown_members: set[str] = set()
            for o in outs:
                if (o.status != SKIPPED or o.cause) and o.member not in shown_members:
                    shown_members.add(o.member)
                    echo(f"  {o.member} … {shown(o.status)}")
                    echo(f"      ↳ {o.why}")
        if skipped := skipped_line(outs):
            echo(prefix + skipped)
        t = tasks.get(task) or _empty_task()
        for entry in t.backends:
            if entry.members or not entry.skipped:
                echo(prefix + backend_line(entry, t.headline))


def print_recorded(recorded: Any, echo: Callable[[str], Any] = click.echo) -> None:
    """What a run or sweep wrote beyond its folder (`runner.Recorded`)."""
    if recorded is None:
        return
    if recorded.history_error:
        click.echo(f"evalkit: history not updated: {recorded.history_error}", err=True)
    if recorded.board_error is not None:
        from evalkit.cli.app import fail  # lazy: a cycle, cli.app imports this module (via cli, cli.run)

        fail(recorded.board_error)  # after the summary: the run's results stand, the board is not written
    if recorded.board is not None:
        n = recorded.entries
        echo(f"Scoreboard: {n} entr{'y' if n == 1 else 'ies'} written to {recorded.board}")


def _empty_task() -> TaskSummary:
    from evalkit.results.summary import TaskSummary  # lazy: as in `_summary_of`

    return TaskSummary()
