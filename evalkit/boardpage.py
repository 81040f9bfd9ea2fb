"""`evalkit report --scoreboard`: the committed standings as one page.

Per task: the band (`evalkit.band`: each gated metric's mean over members, its bootstrap interval and
the noise band a regression must exceed), then one row per member × backend of the board
(`evalkit.scoreboard`): verdict, score, the gated metrics, the run block (model, date, tokens, USD,
latency, replayed), the non-default settings. First, what changed since the board's previous version in
git (the last commit whose board differs from this one): entries added or removed, verdicts that flipped,
scores that moved. The page has the shared head (`evalkit.chrome`), so its tables sort and filter.
"""

from __future__ import annotations

import html
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import chrome
from .band import band_path, load_band
from .jsonio import write_text
from .runfolder import INDEX
from .scoreboard import board_path, iter_entries, load_board

__all__ = ["previous_board", "board_changes", "render_board_html", "write_board_report"]

e = html.escape


def previous_board(path: Path) -> tuple[dict[str, Any] | None, str | None]:
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
                return json.loads(then), f"{short} ({date})"
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None, "no git history of the board here"
    return None, "no earlier version of the board in git"


def _score(entry: Mapping[str, Any] | None) -> Any:
    return None if entry is None else (entry.get("metrics") or {}).get("score")


def board_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per task × member × backend that differs: added, removed, verdict flipped, score changed."""
    old = {(t, m, b): x for t, m, b, x in iter_entries(before)}
    new = {(t, m, b): x for t, m, b, x in iter_entries(after)}
    rows = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if a is None or b is None:
            what = "added" if a is None else "removed"
        elif a.get("passed") != b.get("passed"):
            what = "verdict " + " → ".join(_verdict(x.get("passed")) for x in (a, b))
        elif _score(a) != _score(b):
            what = "score"
        else:
            what = "run or other metrics"
        rows.append({"task": key[0], "member": key[1], "backend": key[2], "change": what,
                     "score before": _score(a), "score after": _score(b)})
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


def _table(head: list[str], rows: list[list[str]]) -> str:
    return ('<div class="ek-wide"><table><thead><tr>' + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(r) + "</tr>" for r in rows) + "</tbody></table></div>")


def render_board_html(board: Mapping[str, Any], band: Mapping[str, Any] | None, changes: list[dict[str, Any]] | None,
                      since: str | None, title: str = "evalkit scoreboard", heldout: frozenset[str] | set[str] = frozenset()
                      ) -> str:
    """The page; `heldout`: ``task/member`` of the held-out members, whose figures are shown apart."""
    entries = list(iter_entries(board))
    tasks = sorted({t for t, *_ in entries})
    out = [f"<h1>{e(title)}</h1>",
           f"<p>{len(entries)} entries: {len(tasks)} task(s) × member × backend, the standing of each as committed.</p>"]
    out.append("<h2>What changed</h2>")
    if changes is None:
        out.append(f"<p>{e(since or 'no earlier version')}: nothing to compare with.</p>")
    elif not changes:
        out.append(f"<p>No entry changed since {e(since or '')}.</p>")
    else:
        out.append(f"<p>{len(changes)} entr{'y' if len(changes) == 1 else 'ies'} changed since {e(since or '')}.</p>")
        out.append(_table(["task", "member", "backend", "change", "score before", "score after"],
                          [[_cell(c[k]) for k in ("task", "member", "backend", "change", "score before", "score after")]
                           for c in changes]))
    bands = (band or {}).get("tasks") or {}
    for task in tasks:
        out.append(f"<h2>{e(task)}</h2>")
        tb = bands.get(task) or {}
        gated = sorted(k for k, v in (tb.get("metrics") or {}).items() if isinstance(v, dict) and v.get("gated"))
        shown = [g for g in gated if g != "score"]
        if tb:
            out.append(f"<p>The band over {e(str(tb.get('members', '—')))} members: a regression must exceed it "
                       "(and the interval is a bootstrap over members).</p>")
            groups = [("tuned", tb), ("held-out", tb.get("heldout") or {})]
            out.append(_table(["metric", "members", "n", "mean", "95% CI", "band", "spread across sweeps"],
                              [[_cell(k), _cell(group), _cell(v.get("n"), "num"), _cell(v.get("mean"), "num"),
                                _cell(None if not v.get("ci") else f"[{v['ci'][0]:.3f}, {v['ci'][1]:.3f}]"),
                                _cell(v.get("band"), "num"), _cell(v.get("spread"), "num")]
                               for group, block in groups
                               for k, v in sorted((block.get("metrics") or {}).items()) if k in gated]))
        else:
            out.append("<p>No band measured for this task (<code>evalkit band</code>).</p>")
        head = ["member", "held out", "backend", "verdict", "score", *shown, "model", "date", "input tokens", "output tokens",
                "USD", "latency s", "replayed", "settings", "run"]
        rows = []
        for t, member, label, x in entries:
            if t != task:
                continue
            run, metrics = x.get("run") or {}, x.get("metrics") or {}
            v = _verdict(x.get("passed"))
            rows.append([_cell(member), _cell("held out" if f"{task}/{member}" in heldout else ""), _cell(label), f'<td class="{v if v != "n/a" else "missing"}">{v}</td>',
                         _cell(metrics.get("score"), "num"), *[_cell(metrics.get(g), "num") for g in shown],
                         _cell(run.get("model")), _cell(str(run["date"])[:16].replace("T", " ") if run.get("date") else None, "nowrap"), _cell(run.get("input_tokens"), "num"),
                         _cell(run.get("output_tokens"), "num"), _cell(run.get("usd"), "num"),
                         _cell(run.get("latency_s"), "num"), _cell(run.get("replayed")), _cell(x.get("settings")),
                         _cell(run.get("run_id"))])
        out.append(_table(head, rows))
    return chrome.document(title, "\n".join(out), chrome.nav([("scoreboard", None)]))


def write_board_report(corpus: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Render the corpus's committed scoreboard (and band) to `out` (default ``runs/scoreboard/index.html``)."""
    path = board_path(corpus)
    board = load_board(path, must_exist=True)
    before, since = previous_board(path)
    changes = board_changes(before, board) if before is not None else None
    from .corpus import DEFAULT_CORPUS, heldout_keys

    page = render_board_html(board, load_band(band_path(corpus)), changes, since,
                             heldout=heldout_keys(corpus or DEFAULT_CORPUS))
    out = Path(out) if out is not None else Path("runs") / "scoreboard" / INDEX
    write_text(out, page)
    return out
