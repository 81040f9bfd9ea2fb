"""`evalkit runs`: every run the history records (``runs/index.jsonl``, `evalkit.results.history`), newest first, as
``runs/index.html`` and a terminal table.

One row per run (the history's lines grouped by run id; a folder run into again is one run, each member ×
backend taken at its latest line): when it last ran, its command, tasks and backends, members passed/N,
errors, and per task × backend the mean score over its scored tuned members (held-out members apart), then
relative links to the pages that exist: the run's index.html, each task's compare.html, its diff.html
(`evalkit diff OTHER <run>`). Rows come from the history alone, so a run whose folder was moved or deleted
is still listed (unlinked); only a link looks at the disk.

Every run (and sweep) that records its history rewrites the page (`refresh`, from `runner.record`), under
the history's lock so two runs finishing together leave a page listing both. Text from the history is
escaped, and a command is scrubbed again (`redact.scrub`): a line written before commands were redacted
cannot put a key on the page. Bounded: one pass over the lines, then at most `SHOWN` runs on the page
(it says how many of how many).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit._util.jsonio import write_text
from evalkit.backends.redact import scrub
from evalkit.errors import UsageError
from evalkit.report import chrome
from evalkit.results.history import INDEX_NAME, HistoryLine, index_path, read_history
from evalkit.results.runfolder import COMPARE, DIFF, INDEX, page
from evalkit.results.scoreboard import _selected, locked
from evalkit.scoring.stats import mean
from evalkit.status import ERROR, SCORED

__all__ = ["RunRow", "group_runs", "add_links", "runs_html", "runs_text", "write_runs_page", "refresh", "is_runs_page",
           "SHOWN", "BOARD_DIR"]

SHOWN = 500  # runs on the page; the rest are counted, not listed
BOARD_DIR = "scoreboard"  # `evalkit report --scoreboard` writes <runs>/scoreboard/index.html by default
MARK = "<!-- evalkit runs page -->"  # a page this module wrote: the only index.html it overwrites
e = html.escape


@dataclass
class RunRow:
    """One run of the history: its latest line per member × backend, summed up."""

    run_id: str
    when: str = ""
    command: str | None = None
    tasks: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    members: int = 0  # member × backend outcomes (scored or errored)
    passed: int = 0
    errors: int = 0
    # (task, backend) → {"tuned": (mean, n), "heldout": (mean, n) or None}
    means: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)  # (text, href relative to the runs folder)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def group_runs(lines: Iterable[HistoryLine]) -> list[RunRow]:
    """The runs of these history lines (`read_history`), newest first (by their latest line's time, then id)."""
    latest: dict[str, dict[tuple[str, str, str], HistoryLine]] = {}
    for line in lines:
        key = (_text(line.task), _text(line.member), _text(line.backend))
        mine = latest.setdefault(line.run_id, {})
        if key not in mine or _text(line.time) >= _text(mine[key].time):
            mine[key] = line
    rows = [_row(run_id, outcomes) for run_id, outcomes in latest.items()]
    return sorted(rows, key=lambda r: (r.when, r.run_id), reverse=True)


def _row(run_id: str, outcomes: Mapping[tuple[str, str, str], HistoryLine]) -> RunRow:
    values = list(outcomes.values())
    newest = max(values, key=lambda x: _text(x.time))
    row = RunRow(run_id, when=_text(newest.time), command=newest.command,
                 tasks=sorted({t for t, _, _ in outcomes}), backends=sorted({b for _, _, b in outcomes}),
                 members=len(values), passed=sum(x.passed is True for x in values),
                 errors=sum(x.status == ERROR for x in values))
    scores: dict[tuple[str, str], dict[str, list[Any]]] = {}  # one pass: a sweep may hold thousands
    for (task, _, backend), x in sorted(outcomes.items()):
        sides = scores.setdefault((task, backend), {"tuned": [], "heldout": []})
        if x.status == SCORED:
            sides["heldout" if x.heldout else "tuned"].append(x.score)
    row.means = {pair: {side: (mean(v), sum(s is not None for s in v)) if v else None for side, v in sides.items()}
                 for pair, sides in scores.items()}
    return row


def _safe_part(name: str) -> bool:
    """A history value that may name a folder in a link: one plain path segment."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def add_links(rows: Iterable[RunRow], runs_dir: Path) -> None:
    """Each row's links to the pages its folder holds, relative to `runs_dir` (the page's folder)."""
    for row in rows:
        if not _safe_part(row.run_id):
            continue
        run = runs_dir / row.run_id
        wanted = [("run", (row.run_id, INDEX))]
        wanted += [(f"compare {t}", (row.run_id, t, page(COMPARE).name)) for t in row.tasks if _safe_part(t)]
        wanted.append(("diff", (row.run_id, page(DIFF).name)))
        row.links = [(text, chrome.href(*parts)) for text, parts in wanted if (run.parent / Path(*parts)).is_file()]


def _mean(figure: tuple[float | None, int] | None) -> str:
    if figure is None:
        return ""
    m, n = figure
    return f"{'—' if m is None else f'{m:.3f}'} (n {n})"


def _means_html(row: RunRow) -> str:
    items = []
    for (task, backend), sides in row.means.items():
        text = f"{task} · {backend}: {_mean(sides['tuned']) or 'no tuned member'}"
        if sides["heldout"]:
            text += f"; held-out {_mean(sides['heldout'])}"
        items.append(f"<li>{e(text)}</li>")
    return f"<ul class=\"ek-means\">{''.join(items)}</ul>" if items else ""


def runs_html(rows: list[RunRow], total: int, title: str = "evalkit runs",
              links: list[tuple[str, str | None]] | None = None) -> str:
    """The page: `rows` (already cut to what is shown) out of `total` runs; `links`: the navigation bar's."""
    out = [MARK, f"<h1>{e(title)}</h1>",
           f"<p>{total} run{'s' if total != 1 else ''} in the history (<code>{e(INDEX_NAME)}</code>), newest first"
           + (f"; the newest {len(rows)} are listed" if len(rows) < total else "") + ". A run's figures are its "
           "latest outcome per member × backend; means are over scored members, held-out members apart; errors "
           "are counted, never averaged.</p>"]
    head = ["run", "when (UTC)", "command", "tasks", "backends", "passed/N", "errors", "mean score", "pages"]
    body = []
    for r in rows:
        pages = " · ".join(f'<a href="{href}">{e(text)}</a>' for text, href in r.links) or '<span class="missing">—</span>'
        err = f'<td class="num ERROR">{r.errors}</td>' if r.errors else '<td class="num">0</td>'
        body.append(f"<tr><td>{e(r.run_id)}</td><td class=\"nowrap\">{e(r.when[:19].replace('T', ' '))}</td>"
                    f"<td><code>{e(scrub(r.command or '', key_shaped=True)) or '—'}</code></td>"
                    f"<td>{e(', '.join(r.tasks))}</td><td>{e(', '.join(r.backends))}</td>"
                    f"<td class=\"num\">{r.passed}/{r.members}</td>{err}<td>{_means_html(r)}</td><td>{pages}</td></tr>")
    out.append('<div class="ek-wide"><table><thead><tr>' + "".join(f"<th>{e(h)}</th>" for h in head)
               + "</tr></thead><tbody>" + "".join(body) + "</tbody></table></div>")
    return chrome.document(title, "\n".join(out), chrome.nav([("runs", None)], links or ()), extra_css=RUNS_CSS)


RUNS_CSS = "\nul.ek-means { margin: 0; padding-left: 1.1em; }\n"


def runs_text(rows: list[RunRow], total: int) -> str:
    """The terminal table: one line per run (newest first), then how many more there are."""
    lines = [f"{'run':<34} {'when (UTC)':<19} {'passed/N':>9} {'errors':>6}  mean score (task · backend)"]
    for r in rows:
        means = "; ".join(f"{t} · {b} {_mean(s['tuned']) or '—'}" for (t, b), s in r.means.items())
        lines.append(f"{r.run_id[:34]:<34} {r.when[:19].replace('T', ' '):<19} {f'{r.passed}/{r.members}':>9} "
                     f"{r.errors:>6}  {means}")
    if len(rows) < total:
        lines.append(f"… {total - len(rows)} older run(s) not shown")
    return "\n".join(lines) + "\n"


def write_runs_page(runs_dir: str | Path, shown: int = SHOWN) -> tuple[Path, list[RunRow], int]:
    """Write ``<runs_dir>/index.html`` from ``<runs_dir>/index.jsonl``: (page, every run newest first, total).

    Refuses (`UsageError`) to overwrite an index.html this module did not write (a run folder's own)."""
    runs_dir = Path(runs_dir)
    index = runs_dir / INDEX_NAME
    if not index.is_file():
        raise UsageError(f"{index}: no run history here (runs that record it write it; give --runs DIR)")
    out = runs_dir / INDEX
    if not _ours(out):
        raise UsageError(f"{out} is not evalkit's runs page (a run folder's index?): not overwritten; "
                         "give the folder that holds the run folders with --runs")
    with locked(index):
        rows = group_runs(read_history(index))
        listed = rows[:shown]
        add_links(listed, runs_dir)
        links = [("scoreboard", chrome.href(BOARD_DIR, INDEX))] if (runs_dir / BOARD_DIR / INDEX).is_file() else []
        write_text(out, runs_html(listed, len(rows), links=links))
    return out, rows, len(rows)


def is_runs_page(path: Path) -> bool:
    """Whether `path` is a runs page this module wrote."""
    return path.is_file() and _ours(path)


def _ours(path: Path) -> bool:
    """Whether this module may write `path`: nothing there yet, or a runs page it wrote."""
    if not path.exists():
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return MARK in f.read(1 << 18)
    except OSError:
        return False


def refresh(run_result: Any) -> Path | None:
    """After a run or sweep recorded its history: rewrite the runs page beside it (None: not ours to write)."""
    root, _ = _selected(run_result)
    runs_dir = index_path(root).parent
    if not (runs_dir / INDEX_NAME).is_file() or not _ours(runs_dir / INDEX):
        return None
    return write_runs_page(runs_dir)[0]
