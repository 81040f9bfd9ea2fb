"""`evalkit diff RUN_A RUN_B`: the prompt-iteration loop. Same corpus, two runs (two prompts, two models,
before / after): per task, per-metric deltas B − A with paired bootstrap CIs over the members both scored,
verdict flips, and every item whose outcome changed (newly hallucinated first) — `evalkit.scoring.delta` over each
run's `runfolder.scan`.

What differs in how the two runs were made comes first (`config_differences`: settings, model, backend spec,
the requests sent, threshold, corpus, evalkit and package versions), so a zero delta can be read: when the
configuration differs and no figure moved, the diff says whether the requests were identical (the difference
never reached the model) or the backend answered identically anyway (fake, predictions, a replay).
Held-out members are compared apart from the tuned ones (`delta.compare_sides`).

Pairing, per task both runs hold: each backend label the two runs share is compared with itself; when they
share none and each has exactly one backend for the task, those two are compared (two models, one each).
Anything else is listed as not comparable, with why.

`diff_runs` returns the whole diff as plain data (what diff.ipynb shows and the CLI prints); `diff_notebook`
executes diff.ipynb into RUN_B and renders its HTML. The CLI computes the diff once: it prints it and hands
it to the notebook as RUN_B's diff.json (`runfolder.write_diff`); run standalone, the notebook computes it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.errors import CorpusError, EvalkitError, UsageError
from evalkit.execution.execute import NOTEBOOKS_DIR, NotebookJob, execute
from evalkit.results import runfolder
from evalkit.results.band import Band, band_path, read_band
from evalkit.results.records import BackendRef, ScoreRecord
from evalkit.scoring import delta
from evalkit.scoring.stats import format_p

__all__ = ["load_side", "diff_runs", "config_differences", "text", "diff_notebook", "band_of"]

Sides = dict[str, dict[str, dict[str, dict[str, Any]]]]  # task → backend → member → score.json data


def load_side(run_dir: str | Path, requests: dict[tuple[str, str, str], str | None] | None = None) -> Sides:
    """``{task: {backend: {member: score.json data}}}`` of every member × backend of a run (errors too);
    `requests`, when given, is filled with each one's ``request_sha256`` (from its extraction.json)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: run folder not found")
    out: Sides = {}
    for s in runfolder.iter_scan(run_dir, status=None, unscored=True):  # one score.json at a time, slimmed
        out.setdefault(s.task, {}).setdefault(s.backend, {})[s.member] = _slim(s.record)
        if requests is not None:
            requests[(s.task, s.backend, s.member)] = s.extraction().request_sha256
    return out


_READ = ("status", "cause", "message", "score", "passed", "metrics", "backend", "run")  # what a diff reads


def _slim(score: ScoreRecord) -> dict[str, Any]:
    """The parts of a score.json a diff reads (`evalkit.scoring.delta`, `_pair_config`): its details, notes and the
    member name every item repeats are left behind, which at 10,000 members is much of the memory."""
    out = score.to_json(keys=_READ)
    out["items"] = [{k: v for k, v in row.items() if k != "member"} if "member" in row else row for row in score.rows]
    return out


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {k: v for key, sub in value.items() for k, v in _flat(f"{prefix}.{key}" if prefix else str(key), sub).items()}
    return {prefix: value}


# run.json entries that describe how a run was made (not where it was written or when)
_RUN_KEYS = (("parameters.settings", "setting"), ("parameters.threshold", "threshold"), ("parameters.corpus", "corpus"),
             ("ontology_mode", "ontology mode"), ("evalkit_version", "evalkit version"), ("versions", "version"))


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    fa, fb = _flat("", a), _flat("", b)
    return [{"what": k, "a": fa.get(k), "b": fb.get(k)} for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)]


def config_differences(run_a: str | Path, run_b: str | Path) -> list[dict[str, Any]]:
    """What differs in how the runs were made, from their run.json: ``{"what", "a", "b"}`` rows for settings,
    threshold, corpus, ontology mode, evalkit and package versions (the per-backend ones are each pair's)."""
    ja, jb = runfolder.read_run_json(run_a).to_json(), runfolder.read_run_json(run_b).to_json()  # by key path
    return [d for path, name in _RUN_KEYS for d in _differences({name: _get(ja, path)}, {name: _get(jb, path)})]


def _get(data: Mapping[str, Any], path: str) -> Any:
    for key in path.split("."):
        data = data.get(key) if isinstance(data, Mapping) else None  # type: ignore[assignment]
    return data


def _pair_config(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]],
                 req_a: Mapping[str, str | None], req_b: Mapping[str, str | None]) -> dict[str, Any]:
    """One pair's own differences: backend spec and model, the settings its calls were made with, and how many
    members' requests differ (prompt, template, settings or document)."""
    def described(side: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        scores = [ScoreRecord(d) for d in side.values()]  # score.json data `load_side` read (and slimmed)
        settings = {k: v for d in scores for k, v in (d.run.settings or {}).items()}
        first = scores[0].backend if scores else BackendRef()
        return {"backend": {"spec": first.spec, "model": first.model}, "settings": settings}

    rows = _differences(described(a), described(b))
    both = sorted(a.keys() & b.keys())
    changed = [m for m in both if req_a.get(m) != req_b.get(m)]
    return {"differences": rows, "requests_changed": len(changed), "requests_compared": len(both)}


def _zero_delta_reason(pair: Mapping[str, Any], config: list[dict[str, Any]]) -> str | None:
    """Why nothing moved although the configuration differs (None when something moved or nothing differs)."""
    moved = pair["flips"] or pair["changes"] or any(m["n"] and m["mean"] for m in pair["metrics"])
    if moved or not (config or pair["config"]["differences"] or pair["config"]["requests_changed"]):
        return None
    c = pair["config"]
    if not c["requests_changed"]:
        return ("the configuration differs, but every member's request to the backend is byte-identical in both "
                "runs: the difference never reached the model, so no figure could move")
    return (f"{c['requests_changed']} of {c['requests_compared']} members' requests differ, yet every answer scored "
            "the same: this backend answers the same whatever the request (fake, predictions, or a model that "
            "ignores the difference)")


def band_of(run_dir: str | Path) -> Band | None:
    """The corpus's band.json (`evalkit.results.band`) named by the run's run.json, or None (no band, unreadable)."""
    corpus = runfolder.read_run_json(run_dir).corpus
    try:
        return read_band(band_path(corpus)) if corpus else None
    except (CorpusError, OSError):
        return None


def band_width(band: Band | None, task: str, metric: str) -> float | None:
    m = band.metric(task, metric) if band is not None else None
    return m.band if m is not None else None


def _pairs(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[tuple[str, str]], str | None]:
    common = [x for x in a if x in b]
    if common:
        return [(x, x) for x in common], None
    if len(a) == 1 and len(b) == 1:
        return [(next(iter(a)), next(iter(b)))], None
    return [], f"no backend label in common ({', '.join(a)} vs {', '.join(b)}) and not one backend each"


def diff_runs(run_a: str | Path, run_b: str | Path) -> dict[str, Any]:
    """The diff of two runs: ``{"a", "b", "config": [differences], "tasks": {task: {"pairs": [...],
    "not_comparable": why | None}}}``; each pair carries its own ``config`` and, when the configuration
    differs but nothing moved, ``zero_delta`` (why)."""
    req_a: dict[tuple[str, str, str], str | None] = {}
    req_b: dict[tuple[str, str, str], str | None] = {}
    side_a, side_b = load_side(run_a, req_a), load_side(run_b, req_b)
    band, config = band_of(run_b), config_differences(run_a, run_b)
    heldout = runfolder.read_run_json(run_a).heldout | runfolder.read_run_json(run_b).heldout
    tasks: dict[str, Any] = {}
    for task in sorted(side_a.keys() | side_b.keys()):
        a, b = side_a.get(task, {}), side_b.get(task, {})
        if not a or not b:
            tasks[task] = {"pairs": [], "not_comparable": f"only in run {'A' if a else 'B'}"}
            continue
        pairs, why = _pairs(a, b)
        found = []
        for x, y in pairs:
            pair = delta.compare_sides(task, a[x], b[y], f"A:{x}", f"B:{y}", band_width(band, task, "score"), heldout)
            pair["config"] = _pair_config(a[x], b[y], {m: req_a.get((task, x, m)) for m in a[x]},
                                          {m: req_b.get((task, y, m)) for m in b[y]})
            pair["zero_delta"] = _zero_delta_reason(pair, config)
            found.append(pair)
        tasks[task] = {"pairs": found, "not_comparable": why}
    return {"a": str(run_a), "b": str(run_b), "config": config, "tasks": tasks}


def _fig(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}"


def _value(x: Any) -> str:
    return "—" if x is None else repr(x) if isinstance(x, str) else str(x)


def _comparison_lines(p: Mapping[str, Any], indent: str) -> list[str]:
    lines = [f"{indent}{p['statement']}"]
    for m in p["metrics"][1:]:
        if m["n"] and m["mean"]:
            ci = f" [{_fig(m['ci'][0])}, {_fig(m['ci'][1])}]" if m["ci"] else ""
            lines.append(f"{indent}  {m['metric']}: {_fig(m['a'])} → {_fig(m['b'])} ({m['mean']:+.3f}{ci}, "
                         f"p {_p(m['p'])}, Holm p {_p(m.get('p_adj'))}, n = {m['n']})")
    for f in p["flips"]:
        lines.append(f"{indent}  flip {f['member']}: {f['before']} → {f['after']}")
    for c in p["changes"]:
        mark = "NEW " if c["newly_wrong"] else ""
        lines.append(f"{indent}  {mark}{c['member']} · {c['item']}: {c['before']} → {c['after']} "
                     f"({c['value_before']!r} → {c['value_after']!r})")
    if not p["changes"]:
        lines.append(f"{indent}  no item changed its outcome")
    return lines


def _p(p: float | None) -> str:
    shown = format_p(p)
    return shown if shown.startswith("<") or shown == "—" else f"= {shown}"


def text(d: Mapping[str, Any]) -> str:
    """The diff for a terminal: A and B named, what differs in their configuration, then per task and pair
    the statement, the metric deltas (raw and Holm-adjusted p), flips and changed items; held-out apart."""
    lines = [f"A = {d['a']}", f"B = {d['b']}"]
    config = d.get("config") or []
    lines.append("Configuration: " + ("identical (settings, threshold, corpus, versions)" if not config else
                                      f"{len(config)} difference{'s' if len(config) != 1 else ''}"))
    lines += [f"  {c['what']}: {_value(c['a'])} → {_value(c['b'])}" for c in config]
    for task, t in d["tasks"].items():
        lines.append(task)
        if t["not_comparable"]:
            lines.append(f"  nothing comparable: {t['not_comparable']}")
        for p in t["pairs"]:
            c = p.get("config") or {}
            lines += [f"  {p['a']} vs {p['b']}: {r['what']}: {_value(r['a'])} → {_value(r['b'])}"
                      for r in c.get("differences") or []]
            if c.get("requests_compared"):
                lines.append(f"  requests: {c['requests_changed']} of {c['requests_compared']} members' requests differ")
            lines += _comparison_lines(p, "  ")
            if p.get("heldout"):
                lines += _comparison_lines(p["heldout"], "  ")
            if p.get("zero_delta"):
                lines.append(f"  no figure moved: {p['zero_delta']}")
    if any(p.get("heldout") for t in d["tasks"].values() for p in t["pairs"]):
        lines.append(f"({delta.TUNED_MEANS})")
    return "\n".join(lines) + "\n"


def diff_notebook(run_a: str | Path, run_b: str | Path, workers: int | None = None,
                  computed: Mapping[str, Any] | None = None) -> Path:
    """Execute diff.ipynb into RUN_B (run A's path relative to it) and render its HTML; returns the page.
    `computed`: this diff's `diff_runs`, already made: written to RUN_B's diff.json for the notebook to
    show, so it is not computed twice (at 10,000 members, minutes)."""
    from evalkit.report.render import render_notebook  # lazy: read per call: tests patch render.render_notebook

    run_b = Path(run_b)
    out = run_b / runfolder.DIFF
    params: dict[str, Any] = {"run_a": os.path.relpath(Path(run_a).resolve(), run_b.resolve()), "run_b": "."}
    if computed is not None:
        # A and B named as the notebook names them (its parameters), so the page is the one it would compute
        shown = {**computed, "a": params["run_a"], "b": params["run_b"]}
        params["diff_json"] = runfolder.write_diff(run_b, shown).name  # relative to the notebook, in RUN_B
    job = NotebookJob(NOTEBOOKS_DIR / runfolder.DIFF, out, params)
    result = execute([job], workers=workers)[0]
    if not result.ok:
        raise EvalkitError(f"diff notebook failed: {out}: {result.error}")
    return render_notebook(out)
