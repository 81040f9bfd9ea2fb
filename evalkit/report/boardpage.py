"""`evalkit report --scoreboard`: the committed standings as one page.

First the standings, per task × backend: members, passed/N, the mean score with its bootstrap CI over the
tuned members, and the held-out members' on a row apart (`summary.figure`, the seed `summary.json` uses).
Then what changed since the board's previous version in git (the last commit whose board differs from this
one): only the entries whose figures moved — added, removed, a verdict flipped, the score or another metric
moved — and one line counting the rest (a re-run that scored the same only has a new run block). Then per
task: the band (`evalkit.results.band`: each gated metric's mean over members, its bootstrap interval and
the noise band a regression must exceed), then one row per member × backend of the board
(`evalkit.results.scoreboard`): verdict, score, the gated metrics, the run block (model, date, tokens, USD,
latency, replayed), the non-default settings. The page has the shared head (`evalkit.report.chrome`), so its tables sort and filter.

A table of more than `chrome.TABLE_ROWS` rows (the members of a 10,000-member task, the changes after a first
sweep) shows its first rows and a line saying how many there are and where the full table is: the CSV files
`write_board_report` writes beside the page (`MEMBERS_CSV`: every entry, `CHANGES_CSV`: every change), so the
page stays small and opens in a second; every section is still there.
"""

from __future__ import annotations

import csv
import html
import io
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from evalkit._util.jsonio import write_text
from evalkit.corpus.tasks import DEFAULT_CORPUS, HELDOUT, TUNED, heldout_keys
from evalkit.report import chrome
from evalkit.report.runspage import BOARD_DIR, is_runs_page
from evalkit.results.band import Band, band_path, read_band
from evalkit.results.runfolder import INDEX
from evalkit.results.scoreboard import Board, BoardEntry, ScoreboardError, board_of, board_path, read_board
from evalkit.results.summary import figure
from evalkit.scoring.stats import SEED, as_number, sub_seed

__all__ = ["previous_board", "Changes", "board_changes", "standings", "render_board_html", "board_csvs",
           "write_board_report", "MEMBERS_CSV", "CHANGES_CSV"]

e = html.escape
MEMBERS_CSV = "scoreboard.csv"  # beside the page: every entry's row (the page shows the first TABLE_ROWS a task)
CHANGES_CSV = "changes.csv"  # … and every change since the previous board
CHANGE_KEYS = ("task", "member", "backend", "change", "score before", "score after")


def previous_board(path: Path) -> tuple[Board | None, str | None]:
    """(board, "commit date") of the last git commit of `path` whose content differs from the file now;
    (None, why) when there is none (not in git, or never changed)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=path.parent, capture_output=True, text=True, check=True).stdout

    try:
        now = path.read_text(encoding="utf-8")
        for line in git("log", "--format=%H %h %cs", "--", path.name).splitlines():
            full, short, date = line.split(" ", 2)
            then = git("show", f"{full}:./{path.name}")
            if then != now:
                return board_of(json.loads(then), f"{path} at {short}"), f"{short} ({date})"
    except (OSError, subprocess.CalledProcessError, ValueError, ScoreboardError):
        return None, "no git history of the board here"
    return None, "no earlier version of the board in git"


def _score(entry: BoardEntry | None) -> Any:
    return None if entry is None else entry.score


class Changes(NamedTuple):
    """What `board_changes` found: the entries whose figures moved, and how many did not."""

    rows: list[dict[str, Any]]  # task, member, backend, change, score before, score after
    unchanged: int  # entries in both boards with the same figures
    rerun: int  # of those, how many have a new run block (re-run, same figures)


def _figures(entry: BoardEntry) -> tuple[Any, dict[str, Any]]:
    """What an entry measures (its verdict and metrics), apart from how and when it was run."""
    return entry.passed, dict(entry.metrics)


def board_changes(before: Board, after: Board) -> Changes:
    """Per task × member × backend whose figures differ: added, removed, verdict flipped, score or other
    metrics moved; every other entry is counted as unchanged (`Changes`)."""
    old = {(t, m, b): x for t, m, b, x in before.entries()}
    new = {(t, m, b): x for t, m, b, x in after.entries()}
    rows, unchanged, rerun = [], 0, 0
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a is not None and b is not None and _figures(a) == _figures(b):
            unchanged += 1
            rerun += a != b
            continue
        if a is None or b is None:
            what = "added" if a is None else "removed"
        elif a.passed != b.passed:
            what = "verdict " + " → ".join(_verdict(x.passed) for x in (a, b))
        elif _score(a) != _score(b):
            what = "score"
        else:
            ma, mb = _figures(a)[1], _figures(b)[1]
            what = "metrics: " + ", ".join(sorted(k for k in ma.keys() | mb.keys() if ma.get(k) != mb.get(k)))
        rows.append({"task": key[0], "member": key[1], "backend": key[2], "change": what,
                     "score before": _score(a), "score after": _score(b)})
    return Changes(rows, unchanged, rerun)


def standings(board: Board, heldout: frozenset[str] | set[str] = frozenset()) -> list[dict[str, Any]]:
    """Per task × backend, tuned then held-out members apart: members, passed, the mean score and its CI."""
    groups: dict[tuple[str, str, str], list[BoardEntry]] = {}
    for task, member, label, x in board.entries():
        group = HELDOUT if f"{task}/{member}" in heldout else TUNED
        groups.setdefault((task, label, group), []).append(x)
    rows = []
    for (task, label, group), xs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != TUNED)):
        fig = figure([as_number(_score(x)) for x in xs], sub_seed(SEED, task, "score"))
        rows.append({"task": task, "backend": label, "members": group, "n": len(xs),
                     "passed": sum(x.passed is True for x in xs), "mean": fig["mean"], "ci": fig["ci"]})
    return rows


def _verdict(passed: Any) -> str:
    return "n/a" if passed is None else ("PASS" if passed else "FAIL")


def _cell(value: Any, cls: str = "") -> str:
    if value is None:
        text = "—"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = f"{value:.4g}" if abs(value) >= 1 or value == 0 else f"{value:.3f}"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, sort_keys=True) if value else "—"
    else:
        text = str(value)
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{e(text)}</td>"


def _table(head: list[str], rows: list[list[str]], total: int | None = None, full: str = "") -> str:
    """`rows` (cells), of `total` rows in all: when there are more, a line under the table says so and
    names `full` (a CSV beside the page) — the caller gives only the first `chrome.TABLE_ROWS`."""
    out = ('<div class="ek-wide"><table><thead><tr>' + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead><tbody>"
           + "".join("<tr>" + "".join(r) + "</tr>" for r in rows) + "</tbody></table></div>")
    if total is not None and total > len(rows):
        link = f'<a href="{chrome.href(full)}">{e(full)}</a> beside this page'
        out += f'<p class="ek-cut">{chrome.cut_note(len(rows), total, link)}</p>'
    return out


# A member row's column: (heading, its value of (task, member, backend label, entry), how its cell shows it).
Column = tuple[str, Callable[[str, str, str, BoardEntry], Any], str]


def _columns(shown: list[str], heldout: frozenset[str] | set[str]) -> list[Column]:
    """The member table's columns (`shown`: the gated metrics besides the score); one owner for the page's cells
    and the CSV's values."""
    def metric(name: str) -> Callable[[str, str, str, BoardEntry], Any]:
        return lambda t, m, b, x: x.metrics.get(name)

    return [("member", lambda t, m, b, x: m, ""),
            ("held out", lambda t, m, b, x: "held out" if f"{t}/{m}" in heldout else "", ""),
            ("backend", lambda t, m, b, x: b, ""), ("verdict", lambda t, m, b, x: _verdict(x.passed), "verdict"),
            ("score", metric("score"), "num"), *[(g, metric(g), "num") for g in shown],
            ("model", lambda t, m, b, x: x.run.model, ""), ("date", lambda t, m, b, x: x.run.date, "date"),
            ("input tokens", lambda t, m, b, x: x.run.input_tokens, "num"),
            ("output tokens", lambda t, m, b, x: x.run.output_tokens, "num"),
            ("USD", lambda t, m, b, x: x.run.usd, "num"), ("latency s", lambda t, m, b, x: x.run.latency_s, "num"),
            ("replayed", lambda t, m, b, x: x.run.replayed, ""), ("settings", lambda t, m, b, x: x.settings, ""),
            ("run", lambda t, m, b, x: x.run.run_id, "")]


def _member_cell(value: Any, how: str) -> str:
    if how == "verdict":
        return f'<td class="{value if value != "n/a" else "missing"}">{value}</td>'
    if how == "date":
        return _cell(value[:16].replace("T", " ") if value else None, "nowrap")
    return _cell(value, how)


def _shown_metrics(band: Band | None, task: str) -> list[str]:
    """The gated metrics of a task's band, besides the score (which has its own column)."""
    tb = band.tasks.get(task) if band is not None else None
    return [g for g in sorted(k for k, v in tb.metrics.items() if v.gated) if g != "score"] if tb is not None else []


def _ci(ci: Any) -> str | None:
    return None if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def render_board_html(board: Board, band: Band | None, changes: Changes | None,
                      since: str | None, title: str = "evalkit scoreboard", heldout: frozenset[str] | set[str] = frozenset(),
                      links: list[tuple[str, str | None]] | None = None) -> str:
    """The page; `heldout`: ``task/member`` of the held-out members, whose figures are shown apart; `links`:
    the navigation bar's (`chrome.nav`)."""
    entries = list(board.entries())
    tasks = sorted({t for t, *_ in entries})
    out = [f"<h1>{e(title)}</h1>",
           f"<p>{len(entries)} entries: {len(tasks)} task(s) × member × backend, the standing of each as committed.</p>"]
    out.append("<h2>Standings</h2>")
    out.append("<p>Per task × backend: the mean score over the members with its 95 % bootstrap CI (resampling "
               "members); held-out members on their own row, never pooled with the tuned ones.</p>")
    out.append(_table(["task", "backend", "members", "passed/N", "mean score", "95% CI"],
                      [[_cell(r["task"]), _cell(r["backend"]), _cell(r["members"]),
                        _cell(f"{r['passed']}/{r['n']}", "num"), _cell(r["mean"], "num"),
                        _cell(_ci(r["ci"]) or "no score metric in these entries", "" if r["ci"] else "missing")]
                       for r in standings(board, heldout)]))
    out.append("<h2>What changed</h2>")
    if changes is None:
        out.append(f"<p>{e(since or 'no earlier version')}: nothing to compare with.</p>")
    else:
        rerun = f" ({changes.rerun} re-run with the same figures)" if changes.rerun else ""
        same = f"{changes.unchanged} entr{'y' if changes.unchanged == 1 else 'ies'} unchanged{rerun}."
        if not changes.rows:
            out.append(f"<p>No entry's figures changed since {e(since or '')}. {same}</p>")
        else:
            n = len(changes.rows)
            out.append(f"<p>{n} entr{'y' if n == 1 else 'ies'} changed since {e(since or '')}; {same}</p>")
            out.append(_table(list(CHANGE_KEYS), [[_cell(c[k]) for k in CHANGE_KEYS]
                                                  for c in changes.rows[:chrome.TABLE_ROWS]], n, CHANGES_CSV))
    for task in tasks:
        out.append(f"<h2>{e(task)}</h2>")
        tb = band.tasks.get(task) if band is not None else None
        gated = sorted(k for k, v in tb.metrics.items() if v.gated) if tb is not None else []
        if tb is not None:
            out.append(f"<p>The band over {e(str(tb.members if tb.members is not None else '—'))} members: a "
                       "regression must exceed it (and the interval is a bootstrap over members).</p>")
            groups = [("tuned", tb), *([("held-out", tb.heldout)] if tb.heldout is not None else [])]
            out.append(_table(["metric", "members", "n", "mean", "95% CI", "band", "spread across sweeps"],
                              [[_cell(k), _cell(group), _cell(v.n, "num"), _cell(v.mean, "num"), _cell(_ci(v.ci)),
                                _cell(v.band, "num"), _cell(v.spread, "num")]
                               for group, block in groups
                               for k, v in sorted(block.metrics.items()) if k in gated]))
        else:
            out.append("<p>No band measured for this task (<code>evalkit band</code>).</p>")
        columns = _columns(_shown_metrics(band, task), heldout)
        mine = [(member, label, x) for t, member, label, x in entries if t == task]
        rows = [[_member_cell(get(task, member, label, x), how) for _, get, how in columns]
                for member, label, x in mine[:chrome.TABLE_ROWS]]
        out.append(_table([h for h, _, _ in columns], rows, len(mine), MEMBERS_CSV))
    return chrome.document(title, "\n".join(out), chrome.nav([("scoreboard", None)], links or ()))


def _csv_value(value: Any) -> Any:
    """Null is empty, a structure its JSON; a text a spreadsheet would run as a formula (``=…``, ``+…``, ``-…``,
    ``@…``: a member id or label comes from data) starts with ``'``, so it stays text."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True)
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _csv(head: list[str], rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(head)
    writer.writerows([[_csv_value(v) for v in row] for row in rows])
    return buf.getvalue()


def board_csvs(board: Board, band: Band | None, changes: Changes | None,
               heldout: frozenset[str] | set[str] = frozenset()) -> dict[str, str]:
    """The full tables the page cuts, by file name: every entry (`MEMBERS_CSV`: a task column, then the page's
    member columns, with the gated metrics of every task) and every change (`CHANGES_CSV`)."""
    entries = list(board.entries())
    shown = sorted({g for task in {t for t, *_ in entries} for g in _shown_metrics(band, task)})
    columns = _columns(shown, heldout)
    out = {MEMBERS_CSV: _csv(["task", *(h for h, _, _ in columns)],
                             [[t, *(get(t, m, b, x) for _, get, _ in columns)] for t, m, b, x in entries])}
    if changes is not None:
        out[CHANGES_CSV] = _csv(list(CHANGE_KEYS), [[c[k] for k in CHANGE_KEYS] for c in changes.rows])
    return out


def write_board_report(corpus: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Render the corpus's committed scoreboard (and band) to `out` (default ``runs/scoreboard/index.html``),
    with the full tables beside it (`board_csvs`)."""
    path = board_path(corpus)
    board = read_board(path, must_exist=True)
    before, since = previous_board(path)
    changes = board_changes(before, board) if before is not None else None
    out = Path(out) if out is not None else Path("runs") / BOARD_DIR / INDEX
    runs = out.parent.parent / INDEX  # the default place: runs/scoreboard/, beside the runs page
    links = [("all runs", chrome.href("..", INDEX))] if is_runs_page(runs) else []
    band, heldout = read_band(band_path(corpus)), heldout_keys(corpus or DEFAULT_CORPUS)
    for name, text in board_csvs(board, band, changes, heldout).items():
        write_text(out.parent / name, text)
    if changes is None:  # nothing to compare with: no changes file from an earlier report stays beside the page
        (out.parent / CHANGES_CSV).unlink(missing_ok=True)
    write_text(out, render_board_html(board, band, changes, since, heldout=heldout, links=links))
    return out
