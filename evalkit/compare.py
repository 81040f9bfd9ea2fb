"""Backends side by side for one task of a run: what ``compare.ipynb`` shows, and `evalkit compare`.

Everything here reads the run folder only (run.json, each member's
extraction.json / score.json / judgments.json, the task's pairwise.json):

* `f1_table`: per backend and axis, strict and judged micro F1 with a
  bootstrap confidence interval over members (`evalkit.stats.micro_f1_ci`:
  members resampled with replacement, micro F1 recomputed from the
  resample's summed tp/fp/fn; a fixed seed, so the same run gives the same
  interval);
* `calls_table`: per backend, latency percentiles, error rate, structured-
  output counts (parse outcomes), tokens and USD (`evalkit.pool.summarize_calls`
  over the extraction calls' run blocks), and, under a strict ontology,
  vocabulary compliance;
* `pairwise_table` / `win_rate_matrix` / `win_rate_chart`: the blind pairwise
  results, as a table and as an altair matrix (row backend's win rate against
  the column backend, ties excluded; cells whose order inconsistency exceeds
  20 % are outlined and starred);
* `disagreements`: per member, the pairwise items where the judge's verdict
  changed with the slot order or went against the strict F1, and
  `judge_accepted`: the pairs the reference judge matched that the strict pass
  had not.

`compare_run` executes the notebook with papermill (`evalkit.execute`) and
renders its HTML (`evalkit.render.render_notebook`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import runfolder
from .errors import CorpusError
from .stats import CONFIDENCE, RESAMPLES, SEED, micro_f1, micro_f1_ci
from .status import SCORED

AXES = ("entities", "relations")
INCONSISTENCY_MARK = 0.20


def _quietly(read: Any) -> Any:
    """What `read()` returns, or None for a missing or unreadable file: a comparison shows what is there."""
    try:
        return read()
    except CorpusError:
        return None


@dataclass
class Comparison:
    run_dir: Path
    task: str
    backends: list[str]
    members: pd.DataFrame  # one row per member × backend: member, backend, metrics (flattened), parse, error
    calls: dict[str, list[Any]]  # backend -> Completions (run blocks of extraction.json)
    run: dict[str, Any] = field(default_factory=dict)
    pairwise: dict[str, Any] | None = None
    judgments: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    judge_mode: str | None = None

    @property
    def ontology_mode(self) -> str:
        return self.run.get("ontology_mode") or "freeform"


def _completion(run: dict[str, Any]) -> Any:
    from .backends.base import Completion

    names = {f.name for f in dataclasses.fields(Completion)} - {"record", "raw"}
    return Completion(record=None, raw="", **{k: v for k, v in (run or {}).items() if k in names})


def load(run_dir: str | Path, task: str, backends: list[str] | None = None, judge_mode: str | None = None) -> Comparison:
    """Read one task of a run folder. `backends`: only these (default: every backend of the run, in run order).
    A member × backend that errored (`evalkit.status`) is not ``scored``: out of every F1 and bootstrap,
    counted in its backend's error rate (its extraction call is among the calls)."""
    run_dir = Path(run_dir)
    run = _quietly(lambda: runfolder.read_run_json(run_dir)) or {}
    order = [b.get("label") for b in run.get("backends") or [] if isinstance(b, dict)]
    found_results = runfolder.task_results(run_dir, task)
    labels = {s.backend for s in found_results}
    found = list(dict.fromkeys([b for b in order if b in labels] + sorted(labels - set(order))))
    chosen = [b for b in (backends or found) if b in found]
    rows, calls, judgments = [], {b: [] for b in chosen}, {}
    for s in found_results:
        member, backend = s.member, s.backend
        if backend not in chosen:
            continue
        ext = _quietly(s.extraction) or {}
        run_block = ext.get("run") or {}
        if ext:
            calls[backend].append(_completion(run_block))
        j = runfolder.read_judgments(s.home)
        if j is not None:
            judgments[(member, backend)] = j
        rows.append({"member": member, "backend": backend, "scored": s.status == SCORED,
                     "parse": run_block.get("parse"), "error": run_block.get("error"),
                     **{f"metric.{k}": v for k, v in sorted((s.score().get("metrics") or {}).items())}})
    members = pd.DataFrame(rows, columns=None if rows else ["member", "backend", "scored", "parse", "error"])
    pw = runfolder.read_pairwise(run_dir, task)
    if isinstance(pw, dict) and chosen:
        keep = set(chosen)
        pw = {**pw, "pairs": [r for r in pw.get("pairs") or [] if r["a"] in keep and r["b"] in keep],
              "items": [i for i in pw.get("items") or [] if i["a"] in keep and i["b"] in keep]}
    mode = judge_mode or (run.get("judge") or {}).get("mode")
    return Comparison(run_dir=run_dir, task=task, backends=chosen, members=members, calls=calls, run=run,
                      pairwise=pw if isinstance(pw, dict) else None, judgments=judgments, judge_mode=mode)


# ----------------------------------------------------------------------------- F1 with bootstrap CIs

def _counts(members: pd.DataFrame, backend: str, prefix: str) -> np.ndarray | None:
    """(n, 3) tp/fp/fn per scored member of one backend; None when some member lacks them (e.g. not judged)."""
    cols = [f"metric.{prefix}_{c}" for c in ("tp", "fp", "fn")]
    rows = members[(members["backend"] == backend) & (members["scored"])] if not members.empty else members
    if rows.empty or not all(c in rows.columns for c in cols):
        return None
    values = rows[cols]
    if values.isna().any().any():
        return None
    return values.to_numpy(dtype=float)


def f1_figures(c: Comparison, n_boot: int = RESAMPLES, seed: int = SEED) -> list[dict[str, Any]]:
    """Per backend, axis and kind (strict / judged): micro F1, its bootstrap CI (`evalkit.stats`), members."""
    out = []
    for b in c.backends:
        for axis in AXES:
            for kind, prefix in (("strict", axis), ("judged", f"judged_{axis}")):
                counts = _counts(c.members, b, prefix)
                f1 = micro_f1(counts) if counts is not None else None
                lo, hi = (micro_f1_ci(counts, seed, n_boot) if f1 is not None else None) or (None, None)
                out.append({"backend": b, "axis": axis, "kind": kind, "f1": f1, "ci_low": lo, "ci_high": hi,
                            "members": 0 if counts is None else len(counts)})
    return out


def _fig(value: Any, digits: int = 3) -> str:
    from .views import figure

    return figure(value, digits)


def f1_table(c: Comparison, n_boot: int = RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    rows = []
    for r in f1_figures(c, n_boot, seed):
        ci = "—" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        rows.append({"backend": r["backend"], "axis": r["axis"], "kind": r["kind"], "micro F1": _fig(r["f1"]),
                     f"{CONFIDENCE:.0%} CI": ci, "members": r["members"]})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- calls

def calls_figures(c: Comparison) -> list[dict[str, Any]]:
    from .ontology import aggregate_compliance
    from .pool import summarize_calls

    scored = runfolder.scan(runfolder.task_dir(c.run_dir, c.task)) if c.ontology_mode == "strict" else []
    out = []
    for b in c.backends:
        s = summarize_calls(c.calls.get(b, []))
        row = {"backend": b, "calls": s["calls"], "errors": s["errors"], "error_rate": s["error_rate"],
               "latency_p50": s["latency_p50"], "latency_p90": s["latency_p90"], "latency_p99": s["latency_p99"],
               **{f"parse_{k}": s["parse"].get(k, 0) for k in ("clean", "recovered", "malformed", "error")},
               "truncated_exhausted": s["truncated_exhausted"], "input_tokens": s["input_tokens"],
               "output_tokens": s["output_tokens"], "usd": s["usd"], "replayed": s["replayed"]}
        if c.ontology_mode == "strict":  # micro: summed inside / summed emitted over the scored members
            figures = [v for r in scored
                       if r.backend == b and (v := (r.score().get("details") or {}).get("vocabulary"))]
            row["vocabulary_compliance"] = aggregate_compliance(figures)["vocabulary_compliance"] if figures else None
        out.append(row)
    return out


def calls_table(c: Comparison) -> pd.DataFrame:
    rows = []
    for r in calls_figures(c):
        row = {"backend": r["backend"], "calls": r["calls"], "error rate": _fig(r["error_rate"]),
               "latency p50 s": _fig(r["latency_p50"], 2), "p90 s": _fig(r["latency_p90"], 2),
               "p99 s": _fig(r["latency_p99"], 2), "clean": r["parse_clean"], "recovered": r["parse_recovered"],
               "malformed": r["parse_malformed"], "error": r["parse_error"], "input tokens": r["input_tokens"],
               "output tokens": r["output_tokens"], "USD": f"{r['usd']:.4f}", "replayed": r["replayed"]}
        if "vocabulary_compliance" in r:
            row["vocabulary compliance"] = _fig(r["vocabulary_compliance"])
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- pairwise

def pairwise_table(c: Comparison) -> pd.DataFrame:
    if not c.pairwise:
        return pd.DataFrame()
    rows = []
    for r in c.pairwise.get("pairs") or []:
        rows.append({"backend": r["a"], "against": r["b"], "axis": r["axis"], "wins": r["wins"],
                     "losses": r["losses"], "ties": r["ties"], "win rate": _fig(r["win_rate"]),
                     "order inconsistency": _fig(r["order_inconsistency_rate"]),
                     "compared": r["compared"], "identical": r["identical"], "skipped": r["skipped"],
                     "errors": r["errors"]})
    return pd.DataFrame(rows)


def win_rate_matrix(c: Comparison) -> pd.DataFrame:
    """Long frame: axis, backend (row), against (column), win_rate of the row against the column
    (ties excluded), inconsistency, flagged (> 20 %), label."""
    rows = []
    if not c.pairwise:
        return pd.DataFrame(rows)
    for r in c.pairwise.get("pairs") or []:
        wr, rate = r["win_rate"], r["order_inconsistency_rate"]
        flagged = rate is not None and rate > INCONSISTENCY_MARK
        for row, col, value, w, l in ((r["a"], r["b"], wr, r["wins"], r["losses"]),
                                      (r["b"], r["a"], None if wr is None else 1 - wr, r["losses"], r["wins"])):
            label = "—" if value is None else f"{value:.0%}"
            rows.append({"axis": r["axis"], "backend": row, "against": col, "win_rate": value,
                         "inconsistency": rate, "flagged": flagged, "label": label + (" *" if flagged else ""),
                         "record": f"{w}-{l}-{r['ties']}"})
    return pd.DataFrame(rows)


def win_rate_chart(c: Comparison) -> Any:
    """Altair matrix per axis; None without pairwise results. Draw it with `evalkit.views.chart`."""
    df = win_rate_matrix(c)
    if df.empty:
        return None
    import altair as alt  # views.chart draws it (a static SVG + PNG bundle)

    names = list(c.backends)
    axes = [a for a in ("entities", "relations", "summary") if a in set(df["axis"])]
    charts = []
    for axis in axes:
        part = df[df["axis"] == axis]
        base = alt.Chart(part).encode(
            x=alt.X("against:N", sort=names, title="against", axis=alt.Axis(labelAngle=-30, orient="top")),
            y=alt.Y("backend:N", sort=names, title=None))
        nulls = base.transform_filter("datum.win_rate === null").mark_rect(color="#eeeeee")
        rect = base.transform_filter("datum.win_rate !== null").mark_rect().encode(
            color=alt.Color("win_rate:Q", scale=alt.Scale(domain=[0, 1], scheme="redblue"), title="win rate"))
        flag = base.transform_filter("datum.flagged").mark_rect(fill=None, stroke="#000000", strokeWidth=3,
                                                                 strokeDash=[4, 2])
        text = base.mark_text(fontSize=11).encode(
            text="label:N", color=alt.condition("datum.win_rate !== null && (datum.win_rate >= 0.8 || "
                                                "datum.win_rate <= 0.2)", alt.value("white"), alt.value("black")))
        charts.append((nulls + rect + flag + text).properties(
            title=axis, width=alt.Step(70), height=alt.Step(28)))
    chart = alt.hconcat(*charts).properties(title=alt.TitleParams(
        "Win rate of the row backend against the column backend (ties excluded)",
        subtitle="* and a dashed outline: the judge's verdict changed with the slot order on more than 20% "
                 "of the pair's items"))
    return chart.resolve_scale(color="shared")


def disagreements(c: Comparison) -> pd.DataFrame:
    """Per member: pairwise items whose verdict changed with the slot order, or whose winner has the
    lower strict F1 on that axis (summary: token F1)."""
    if not c.pairwise:
        return pd.DataFrame()
    metric = {"entities": "entities_f1", "relations": "relations_f1", "summary": "summary_f1"}
    strict: dict[tuple[str, str, str], Any] = {}
    for _, row in c.members.iterrows():
        for axis, name in metric.items():
            v = row.get(f"metric.{name}")
            strict[(row["member"], row["backend"], axis)] = None if v is None or pd.isna(v) else float(v)
    rows = []
    for i in c.pairwise.get("items") or []:
        if i.get("status") != "judged":
            continue
        fa, fb = strict.get((i["member"], i["a"], i["axis"])), strict.get((i["member"], i["b"], i["axis"]))
        leader = None if fa is None or fb is None or fa == fb else (i["a"] if fa > fb else i["b"])
        kinds = []
        if i.get("inconsistent"):
            kinds.append("order: the verdict changed with the slot order")
        if leader is not None and i["outcome"] not in ("tie", leader):
            kinds.append(f"judge vs strict: the judge prefers {i['outcome']}, strict F1 {leader}")
        if not kinds:
            continue
        o = i.get("orders") or [{}, {}]
        rows.append({"member": i["member"], "axis": i["axis"], "pair": f"{i['a']} vs {i['b']}",
                     "disagreement": "; ".join(kinds),
                     "first order (A / B → winner)": f"{o[0].get('slot_a')} / {o[0].get('slot_b')} → {o[0].get('winner')}",
                     "second order (A / B → winner)": f"{o[1].get('slot_a')} / {o[1].get('slot_b')} → {o[1].get('winner')}",
                     "outcome": i["outcome"], f"strict {i['a']}": _fig(fa), f"strict {i['b']}": _fig(fb),
                     "reasons": " | ".join(x.get("reason") or "" for x in o)})
    return pd.DataFrame(rows).sort_values(["member", "axis", "pair"], kind="stable") if rows else pd.DataFrame()


def judge_accepted(c: Comparison) -> pd.DataFrame:
    """Per member × backend: the pairs the reference judge accepted (strict: a miss plus a spurious item)."""
    rows = []
    for (member, backend), j in sorted(c.judgments.items()):
        if backend not in c.backends:
            continue
        for axis, v in (j.get("axes") or {}).items():
            if v.get("status") == "error":
                rows.append({"member": member, "backend": backend, "axis": axis, "truth": "", "extracted": "",
                             "judge": f"error: {v.get('error')}"})
            for p in v.get("accepted") or []:
                rows.append({"member": member, "backend": backend, "axis": axis,
                             "truth": " / ".join(str(x) for x in (p.get("expected") or {}).values()),
                             "extracted": " / ".join(str(x) for x in (p.get("extracted") or {}).values()),
                             "judge": p.get("reason") or ""})
    return pd.DataFrame(rows)


def header(c: Comparison) -> dict[str, Any]:
    judge = c.run.get("judge") or {}
    scored = int(c.members["scored"].sum()) if not c.members.empty else 0
    return {"task": c.task, "backends": ", ".join(c.backends) or "(none)",
            "members": c.members["member"].nunique() if not c.members.empty else 0,
            "scored member × backend": scored, "errored (no score, left out)": len(c.members) - scored,
            "ontology mode": c.ontology_mode,
            "judge": f"{judge.get('spec')} ({judge.get('model')})" if judge else "none (judged figures are null)",
            "judge mode": c.judge_mode or "—"}


# ----------------------------------------------------------------------------- running the notebook

def plan_compare(run_dir: str | Path, task: str, backends: list[str] | None = None, judge_mode: str | None = None,
                 notebooks: str | Path | None = None) -> Any:
    """compare.ipynb for one task, written to ``<run>/<task>/compare.ipynb`` (run_dir passed relative)."""
    from .execute import NOTEBOOKS_DIR, NotebookJob

    folder = runfolder.task_dir(run_dir, task)
    folder.mkdir(parents=True, exist_ok=True)
    return NotebookJob(Path(notebooks or NOTEBOOKS_DIR) / runfolder.COMPARE, folder / runfolder.COMPARE,
                       {"run_dir": "..", "task": task, "backends": backends, "judge_mode": judge_mode})


def graph_tasks(run_dir: str | Path) -> list[str]:
    """Tasks of a run whose scores have the graph shape (an ``axis`` item column)."""
    out = []
    for task_dir in sorted(p for p in Path(run_dir).iterdir() if p.is_dir() and not p.name.startswith(".")):
        for s in runfolder.scan(task_dir):  # scored only: an error has no items to tell the shape by
            data = s.score()
            if (data.get("details") or {}).get("headline") == "relations_f1" or any(
                    "axis" in i for i in (data.get("items") or [])[:1]):
                out.append(task_dir.name)
            break
    return out


def compare_run(run_dir: str | Path, tasks: list[str] | None = None, backends: list[str] | None = None,
                judge_mode: str | None = None, workers: int | None = None) -> list[Path]:
    """Execute compare.ipynb per task and render its HTML; returns the HTML pages."""
    from .errors import EvalkitError
    from .execute import execute
    from .render import render_index, render_notebook

    run_dir = Path(run_dir)
    tasks = tasks or graph_tasks(run_dir)
    if not tasks:
        raise EvalkitError(f"{run_dir}: no scored graph task to compare (give --task)")
    jobs = [plan_compare(run_dir, t, backends, judge_mode) for t in tasks]
    results = execute(jobs, workers=workers)
    failed = [r for r in results if not r.ok]
    if failed:
        raise EvalkitError("compare notebook failed: " + "; ".join(f"{r.job.output}: {r.error}" for r in failed))
    pages = [render_notebook(j.output) for j in jobs]
    render_index(run_dir)  # link the comparison from the run's index page
    return pages
