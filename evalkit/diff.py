"""`evalkit diff RUN_A RUN_B`: the prompt-iteration loop. Same corpus, two runs (two prompts, two models,
before / after): per task, per-metric deltas B − A with paired bootstrap CIs over the members both scored,
verdict flips, and every item whose outcome changed (newly hallucinated first) — `evalkit.delta` over each
run's `runfolder.scan`.

Pairing, per task both runs hold: each backend label the two runs share is compared with itself; when they
share none and each has exactly one backend for the task, those two are compared (two models, one each).
Anything else is listed as not comparable, with why.

`diff_runs` returns the whole diff as plain data (what diff.ipynb shows and the CLI prints); `diff_notebook`
executes diff.ipynb into RUN_B and renders its HTML.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import delta, runfolder
from .errors import CorpusError, UsageError

__all__ = ["load_side", "diff_runs", "text", "diff_notebook", "band_of"]


def load_side(run_dir: str | Path) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{task: {backend: {member: score.json data}}}`` of every member × backend of a run (errors too)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: run folder not found")
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for s in runfolder.scan(run_dir, status=None, unscored=True):
        out.setdefault(s.task, {}).setdefault(s.backend, {})[s.member] = s.data
    return out


def band_of(run_dir: str | Path) -> dict[str, Any]:
    """The corpus's band.json (`evalkit.band`) named by the run's run.json, or {} (no band, unreadable)."""
    from .band import band_path, load_band

    corpus = (runfolder.read_run_json(run_dir).get("parameters") or {}).get("corpus")
    try:
        return (load_band(band_path(corpus)) or {}) if corpus else {}
    except (CorpusError, OSError):
        return {}


def band_width(band: Mapping[str, Any], task: str, metric: str) -> float | None:
    value = (((band.get("tasks") or {}).get(task) or {}).get("metrics") or {}).get(metric) or {}
    return value.get("band")


def _pairs(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[tuple[str, str]], str | None]:
    common = [x for x in a if x in b]
    if common:
        return [(x, x) for x in common], None
    if len(a) == 1 and len(b) == 1:
        return [(next(iter(a)), next(iter(b)))], None
    return [], f"no backend label in common ({', '.join(a)} vs {', '.join(b)}) and not one backend each"


def diff_runs(run_a: str | Path, run_b: str | Path) -> dict[str, Any]:
    """The diff of two runs: ``{"tasks": {task: {"pairs": [...], "not_comparable": why | None}}}``."""
    side_a, side_b = load_side(run_a), load_side(run_b)
    band = band_of(run_b)
    tasks: dict[str, Any] = {}
    for task in sorted(side_a.keys() | side_b.keys()):
        a, b = side_a.get(task, {}), side_b.get(task, {})
        if not a or not b:
            tasks[task] = {"pairs": [], "not_comparable": f"only in run {'A' if a else 'B'}"}
            continue
        pairs, why = _pairs(a, b)
        tasks[task] = {"pairs": [delta.compare_sides(task, a[x], b[y], f"A:{x}", f"B:{y}", band_width(band, task, "score"))
                                 for x, y in pairs],
                       "not_comparable": why}
    return {"a": str(run_a), "b": str(run_b), "tasks": tasks}


def _fig(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}"


def text(d: Mapping[str, Any]) -> str:
    """The diff for a terminal: per task and pair the statement, the metric deltas, flips and changed items."""
    lines = [f"A = {d['a']}", f"B = {d['b']}"]
    for task, t in d["tasks"].items():
        lines.append(task)
        if t["not_comparable"]:
            lines.append(f"  nothing comparable: {t['not_comparable']}")
        for p in t["pairs"]:
            lines.append(f"  {p['statement']}")
            for m in p["metrics"][1:]:
                if m["n"] and m["mean"]:
                    ci = f" [{_fig(m['ci'][0])}, {_fig(m['ci'][1])}]" if m["ci"] else ""
                    lines.append(f"    {m['metric']}: {_fig(m['a'])} → {_fig(m['b'])} ({m['mean']:+.3f}{ci}, "
                                 f"p = {m['p']:.3f}, n = {m['n']})")
            for f in p["flips"]:
                lines.append(f"    flip {f['member']}: {f['before']} → {f['after']}")
            for c in p["changes"]:
                mark = "NEW " if c["newly_wrong"] else ""
                lines.append(f"    {mark}{c['member']} · {c['item']}: {c['before']} → {c['after']} "
                             f"({c['value_before']!r} → {c['value_after']!r})")
            if not p["changes"]:
                lines.append("    no item changed its outcome")
    return "\n".join(lines) + "\n"


def diff_notebook(run_a: str | Path, run_b: str | Path, workers: int | None = None) -> Path:
    """Execute diff.ipynb into RUN_B (run A's path relative to it) and render its HTML; returns the page."""
    from .errors import EvalkitError
    from .execute import NOTEBOOKS_DIR, NotebookJob, execute
    from .render import render_notebook

    run_b = Path(run_b)
    out = run_b / runfolder.DIFF
    job = NotebookJob(NOTEBOOKS_DIR / runfolder.DIFF, out,
                      {"run_a": os.path.relpath(Path(run_a).resolve(), run_b.resolve()), "run_b": "."})
    result = execute([job], workers=workers)[0]
    if not result.ok:
        raise EvalkitError(f"diff notebook failed: {out}: {result.error}")
    return render_notebook(out)
