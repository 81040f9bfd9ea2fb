"""The top of a run's index.html: what was run and what came of it, before any member row.

* the run: its date, command, corpus, evalkit version, and each backend with its cassette's sha256
  (run.json);
* one table, task × backend (summary.json, `evalkit.results.summary`): the headline metric named, its mean with
  the 95 % bootstrap CI, passed/N, errors, skipped, not covered, and the scored answers that were malformed,
  truncated or schema-invalid (`evalkit.status`: scored, not errors) — one row per backend, never pooled;
* the skipped members, each with the reason, which names the fix (where to put the source).

`render.render_index` calls `overview_html`. Everything from the run folder is escaped: ids, labels and
reasons are text. The run block sits between ``<!-- run:start -->`` and ``<!-- run:end -->``: it is the one
part of the page that depends on when and how the run was started.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.errors import CorpusError
from evalkit.results import runfolder
from evalkit.results.records import RunRecord
from evalkit.results.summary import TaskSummary, read_summary
from evalkit.status import OK, PARSE_OUTCOMES

FAULTS = tuple(o for o in PARSE_OUTCOMES if o != OK)  # scored answers with a fault: counted apart, never errors

__all__ = ["overview_html", "without_run_block", "OVERVIEW_CSS", "RUN_START", "RUN_END"]

RUN_START, RUN_END = "<!-- run:start -->", "<!-- run:end -->"

OVERVIEW_CSS = """
.overview td.ci { color: #57606a; }
.overview .skipped li { margin: 2px 0; }
dl.run { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; }
dl.run dt { color: #57606a; } dl.run dd { margin: 0; font-family: ui-monospace, monospace; font-size: 12px; }
"""


def without_run_block(page: bytes) -> bytes:
    """An index page without its run block: what two runs of the same inputs share byte for byte."""
    start, end = page.find(RUN_START.encode()), page.find(RUN_END.encode())
    return page if start < 0 or end < start else page[:start] + page[end + len(RUN_END):]


def _pct(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}"


def _run_block(run: RunRecord) -> list[str]:
    e = html.escape
    rows = [("date", run.started), ("command", run.command), ("corpus", run.corpus), ("evalkit", run.evalkit_version)]
    for b in run.backends:
        text = f"{b.spec} (model {b.model})"
        if b.cassette_sha256:
            text += f" · cassette sha256 {b.cassette_sha256}"
        rows.append((f"backend {b.label}", text))
    items = "".join(f"<dt>{e(str(k))}</dt><dd>{e(str(v))}</dd>" for k, v in rows if v)
    return [RUN_START, f'<dl class="run">{items}</dl>', RUN_END]


def _table(tasks: Mapping[str, TaskSummary]) -> list[str]:
    e = html.escape
    out = ['<table class="overview"><thead><tr><th>task</th><th>headline metric</th><th>backend</th>'
           '<th>mean (tuned)</th><th>95% CI</th><th>held-out mean (n)</th><th>passed / N</th><th>errors</th>'
           '<th>skipped</th><th>not covered</th>'
           + "".join(f"<th>{o.replace('_', ' ')}</th>" for o in FAULTS)
           + "</tr></thead><tbody>"]
    for task, t in tasks.items():
        for b in t.backends:
            name, f = b.headline(t.headline)
            ci = f"[{f.ci[0]:.3f}, {f.ci[1]:.3f}]" if f.ci else "—"
            hf = b.heldout_figure(name)  # held-out members: reported apart, never in the tuned mean
            held_cell = f"{_pct(hf.mean)} ({b.heldout.scored})" if hf and b.heldout else "—"
            out.append(f"<tr><td>{e(task)}</td><td>{e(name)}</td><td>{e(b.backend)}</td>"
                       f'<td class="num">{_pct(f.mean)}</td><td class="num ci">{ci}</td>'
                       f'<td class="num">{held_cell}</td>'
                       f'<td class="num">{b.passed}/{b.members}</td><td class="num">{b.errors}</td>'
                       f'<td class="num">{len(b.skipped)}</td><td class="num">{len(b.not_covered)}</td>'
                       + "".join(f'<td class="num">{b.parse.get(o, 0)}</td>' for o in FAULTS) + "</tr>")
    out.append("</tbody></table>")
    return out


def _skipped(tasks: Mapping[str, TaskSummary]) -> list[str]:
    e = html.escape
    rows = [(task, s) for task, t in tasks.items() for s in t.skipped]
    if not rows:
        return []
    items = "".join(f"<li><strong>{e(task)}/{e(s.member)}</strong> {e(s.status or '')}: "
                    f"{e(s.reason or '')}</li>" for task, s in rows)
    return [f"<h2>Skipped members ({len(rows)})</h2>",
            "<p>Not extracted: their source is not here (or fails its sha256). Each line says where to put it.</p>",
            f'<ul class="skipped">{items}</ul>']


def overview_html(run_dir: str | Path) -> str:
    """The run block, the task × backend table and the skipped members ("" when the run has no summary.json)."""
    try:
        run = runfolder.read_run_json(run_dir)
    except CorpusError:  # unreadable, or not a run.json (`RecordError`): the page goes without its run block
        run = RunRecord()
    summary = read_summary(run_dir)
    tasks = summary.tasks if summary else {}
    parts = _run_block(run)
    if tasks:
        parts += ["<h2>Results per task and backend</h2>", *_table(tasks), *_skipped(tasks)]
    return "\n".join(parts)
