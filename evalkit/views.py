"""Safe display helpers for the notebooks: tables, text and static charts.

Everything a notebook shows goes through here, because documents and model
outputs are untrusted text:

* tables are ``DataFrame.to_html(escape=True)`` (never a Styler, never raw
  ``IPython.display.HTML``/``Markdown`` built from data);
* text is ``print``-ed (a stream output: rendered as text everywhere);
* charts are altair specs drawn to static images by vl-convert (offline,
  deterministic) and shown as one bundle holding both ``image/svg+xml`` (what
  nbconvert HTML uses: inspectable marks) and ``image/png`` (what JupyterLab
  shows for an untrusted, papermill-made notebook). No vega-embed, no CDN;
  altair's own renderer is switched to the same bundle, so a chart left as a
  cell's last expression is safe too.

Pages dispatch on the item table's shape (`evalkit.report.item_shape`: a
``field`` column → flat fields, ``axis`` → graph, ``family`` → tree, else a
generic view): :func:`score_page` for one member, :func:`report_page` for a
task across a run's members and backends, :func:`trend` for the headline
metric over the run history. The notebooks call these and hold no
task-specific code. Outcomes: ``match``/``matched`` are fine; ``ignored`` and
``excluded`` are set aside by design (the scorer counted them toward
nothing), so they are never listed as problems: problem tables leave them out
and say how many, and pages show them in their own "set aside" table. Null
figures show as "—", never 0.

Chart builders return an ``alt.Chart`` (or None when the table cannot make
one) so a researcher can adjust it before passing it to :func:`chart`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
from IPython.display import display

from . import report as _report

__all__ = [
    "OUTCOMES", "OUTCOME_COLORS", "SUCCESS", "SET_ASIDE", "NULL", "verdict", "fmt", "figure", "text", "heading",
    "para", "show_json", "table", "kv", "chart_bundle", "chart", "items_frame", "run_block", "record", "summary",
    "metrics_table", "gate", "mismatches", "set_aside", "notes", "field_outcome_chart",
    "score_page", "fields_view", "graph_view", "tree_view", "items_view", "graph_axis_table", "family_figures",
    "family_score_chart", "site_table", "edge_graph_chart", "ordered_families", "FAMILY_ORDER",
    "report_page", "fields_report", "graph_report", "tree_report", "items_report", "trend",
    "members_table", "report_summary", "accuracy_heatmap", "score_heatmap", "outcome_distribution",
]

# Outcome colours are fixed, so every chart uses the same legend: the flat-fields scorer's five
# outcomes always appear in this order; other scorers' outcomes reuse the colour of their counterpart
# (matched ~ match, missed ~ missing, spurious ~ hallucinated: extracted with no true counterpart);
# what a scorer sets aside by design (ignored, excluded) is grey; any other outcome is dark grey.
OUTCOMES = ["match", "mismatch", "missing", "extra", "hallucinated"]
OUTCOME_COLORS = {
    "match": "#54a24b", "matched": "#54a24b", "mismatch": "#e45756", "missing": "#f2b701", "missed": "#f2b701",
    "extra": "#9d755d", "hallucinated": "#b279a2", "spurious": "#b279a2", "excluded": "#bab0ac",
    "ignored": "#d8d8d8",
}
# An outcome is fine when it is a success; set-aside outcomes are not problems either (the scorer
# counted them toward nothing). Pages list them in their own table, never among the problems.
SUCCESS = _report.SUCCESS
SET_ASIDE = _report.SET_ASIDE
NULL = "—"  # how a null figure is shown (an undefined ratio, a metric no judge has filled in): never 0
MAX_CHARS = 200  # longest cell shown in a table (the full value is in score.json)


# --------------------------------------------------------------------------- formatting

def verdict(passed: bool | None) -> str:
    """PASS / FAIL / n/a for a ScoreResult.passed value."""
    if passed is None or (isinstance(passed, float) and math.isnan(passed)):
        return "n/a"
    return "PASS" if passed else "FAIL"


def fmt(value: Any, max_chars: int = MAX_CHARS) -> str:
    """One cell as text: JSON for structures, 4 significant digits for floats, '' for null."""
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4g}"
    if isinstance(value, (dict, list, tuple)):
        s = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    else:
        s = str(value)
    if len(s) > max_chars:
        s = s[: max_chars - 1] + "…"
    return s


def _is_null(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):  # arrays, dicts
        return False


# --------------------------------------------------------------------------- primitives

def text(*lines: Any) -> None:
    """Print lines (a stream output: shown as text by Lab and escaped by nbconvert)."""
    for line in lines:
        print(line)


def heading(title: Any, level: int = 2) -> None:
    """A section heading shown by a view (the title is escaped: it may come from data)."""
    import html

    level = min(max(int(level), 1), 6)
    t = html.escape(str(title), quote=False)
    display({"text/html": f"<h{level}>{t}</h{level}>", "text/plain": str(title)}, raw=True)


def para(*lines: Any) -> None:
    """A paragraph of prose (escaped), for the explanations a view puts under its headings."""
    import html

    t = " ".join(html.escape(str(line), quote=False) for line in lines)
    display({"text/html": f"<p>{t}</p>", "text/plain": " ".join(str(x) for x in lines)}, raw=True)


def figure(value: Any, digits: int = 3) -> str:
    """A metric as text: floats to `digits` decimals, integers as they are, null as "—" (never 0)."""
    if _is_null(value):
        return NULL
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) >= 2 else f"{value:.{digits}f}"
    if isinstance(value, int):
        return str(value)
    return fmt(value)


def show_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str))


def _as_frame(data: Any, columns: list[str] | None = None) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        df = data
    elif isinstance(data, Mapping):
        df = pd.DataFrame([data])
    else:
        df = pd.DataFrame(list(data))
    if columns is not None:
        df = df[[c for c in columns if c in df.columns]]
    return df


def table(data: Any, columns: list[str] | None = None, max_chars: int = MAX_CHARS,
          empty: str = "(none)") -> None:
    """Display rows (a DataFrame, or an iterable of dicts) as an escaped HTML table.

    Every cell is turned into text first (see :func:`fmt`), so nested values,
    long strings and nulls all show the same way in Lab and in HTML.
    """
    df = _as_frame(data, columns)
    if df.empty:
        print(empty)
        return
    shown = pd.DataFrame({str(c): [fmt(None if _is_null(v) else v, max_chars) for v in df[c]] for c in df.columns},
                         columns=[str(c) for c in df.columns])
    html = shown.to_html(escape=True, index=False, border=0, classes="evalkit-table", na_rep="")
    display({"text/html": html, "text/plain": shown.to_string(index=False)}, raw=True)


def kv(mapping: Mapping[str, Any], key: str = "key", value: str = "value") -> None:
    """A two-column key/value table."""
    table([{key: k, value: v} for k, v in mapping.items()], empty="(empty)")


# --------------------------------------------------------------------------- charts

def _vl_version(spec: dict[str, Any]) -> str | None:
    import vl_convert as vlc

    m = re.search(r"/v(\d+)\.(\d+)", str(spec.get("$schema", "")))
    if not m:
        return None
    want = f"{m.group(1)}.{m.group(2)}"
    known = vlc.get_vegalite_versions()
    if want in known:
        return want
    same_major = [v for v in known if v.split(".")[0] == m.group(1)]
    return same_major[-1] if same_major else None


def chart_bundle(spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of a display bundle for an altair chart or a Vega-Lite dict.

    Drawn offline by vl-convert: SVG (text is XML-escaped by vega's renderer)
    and a PNG rasterized from that SVG (a bitmap: nothing to inject). Same
    spec, same bytes.
    """
    import base64

    import vl_convert as vlc

    if hasattr(spec, "to_dict"):
        spec = spec.to_dict()
    version = _vl_version(spec)
    svg = vlc.vegalite_to_svg(spec, **({"vl_version": version} if version else {}))
    png = vlc.svg_to_png(svg, scale=1)
    m = re.search(r'<svg[^>]*\bwidth="([\d.]+)"[^>]*\bheight="([\d.]+)"', svg)
    meta = {"image/png": {"width": round(float(m.group(1))), "height": round(float(m.group(2)))}} if m else {}
    data = {"image/svg+xml": svg, "image/png": base64.b64encode(png).decode("ascii"), "text/plain": "[chart]"}
    return data, meta


def chart(c: Any, missing: str = "(no chart for this item table)") -> None:
    """Display an altair chart as a static SVG + PNG bundle (None prints `missing`)."""
    _register_renderer()
    if c is None:
        print(missing)
        return
    data, meta = chart_bundle(c)
    display(data, metadata=meta, raw=True)


def _renderer(spec: dict[str, Any], **_: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return chart_bundle(spec)


_registered = False


def _register_renderer() -> None:
    """Make altair's own display (a chart as a cell's last expression) use the same safe bundle.

    Done when a views chart function first runs (or at import when altair is
    already loaded), so notebooks without charts never pay altair's import.
    """
    global _registered
    if _registered:
        return
    try:
        import altair as alt

        alt.renderers.register("evalkit", _renderer)
        alt.renderers.enable("evalkit")
        _registered = True
    except Exception:  # pragma: no cover - altair missing or changed: views still work
        pass


def _alt() -> Any:
    import altair as alt

    _register_renderer()
    return alt


def _outcome_domain(values: Iterable[Any]) -> list[str]:
    """Outcomes in legend order: the five flat-field ones when only those occur, else the ones present
    in OUTCOME_COLORS order, then any others sorted."""
    present = {str(v) for v in values}
    if present <= set(OUTCOMES):
        return list(OUTCOMES)
    return [o for o in OUTCOME_COLORS if o in present] + sorted(present - set(OUTCOME_COLORS))


def _outcome_scale(values: Iterable[str]) -> Any:
    alt = _alt()

    domain = _outcome_domain(values)
    return alt.Scale(domain=domain, range=[OUTCOME_COLORS.get(o, "#79706e") for o in domain])


# --------------------------------------------------------------------------- items

def items_frame(items: Any) -> pd.DataFrame:
    """The item table (a ScoreResult, its JSON form, its items, or a DataFrame) as a DataFrame."""
    if isinstance(items, pd.DataFrame):
        return items
    if isinstance(items, Mapping):
        items = items.get("items")  # score.json
    elif hasattr(items, "items") and not callable(items.items):
        items = items.items  # a ScoreResult
    return pd.DataFrame(list(items or []))


# --------------------------------------------------------------------------- extract page

def run_block(extraction: Mapping[str, Any]) -> None:
    """Who answered and what it cost: backend, model, parse outcome, tokens, usd, latency."""
    run = extraction.get("run") or {}
    backend = extraction.get("backend") or {}
    rows = {
        "member": extraction.get("member"),
        "backend": backend.get("label"),
        "model": backend.get("model"),
        "parse": run.get("parse"),
        "input tokens": run.get("input_tokens"),
        "output tokens": run.get("output_tokens"),
        "usd": run.get("usd"),
        "latency s": run.get("latency_s"),
        "calls": run.get("calls"),
        "finish reason": run.get("finish_reason"),
        "truncated": run.get("truncated"),
        "replayed": run.get("replayed"),
        "error": run.get("error"),
    }
    kv(rows, "run", "value")


def record(extraction: Mapping[str, Any]) -> None:
    """The extracted record, one row per top-level field; the raw text when nothing parsed."""
    rec = extraction.get("record")
    if isinstance(rec, Mapping):
        table([{"field": k, "value": v} for k, v in rec.items()], max_chars=1000, empty="(empty record)")
        return
    run = extraction.get("run") or {}
    print(f"no record (parse: {run.get('parse')}; error: {run.get('error')})")
    raw = extraction.get("raw")
    if raw:
        print("raw output:")
        print(raw)


# --------------------------------------------------------------------------- score page

def _get(result: Any, name: str, default: Any = None) -> Any:
    """An attribute of a ScoreResult, or a key of its JSON form (score.json)."""
    if isinstance(result, Mapping):
        return result.get(name, default)
    return getattr(result, name, default)


def summary(result: Any) -> None:
    """Headline: score and verdict (the figures behind it are on the shape's page, see `score_page`)."""
    score = _get(result, "score")
    score = "n/a" if score is None else f"{score:.3f}"
    headline = (_get(result, "details") or {}).get("headline")
    print(f"score {score}   verdict {verdict(_get(result, 'passed'))}" + (f"   (score = {headline})" if headline else ""))


def metrics_table(result: Any) -> None:
    """Every metric of the result, one row each (nulls as "—")."""
    metrics = _get(result, "metrics") or {}
    if not metrics:
        print("(no metrics)")
        return
    table([{"metric": k, "value": figure(v, 4)} for k, v in metrics.items()])


def gate(result: Any) -> None:
    """The scorer's gate output (details['gate']) when it has one."""
    g = (_get(result, "details") or {}).get("gate")
    if g is None:
        print("no gate for this scorer")
        return
    if isinstance(g, Mapping):
        kv(g, "gate", "value")
    else:
        show_json(g)


MISMATCH_COLUMNS = ["field", "kind", "weight", "expected", "extracted", "outcome", "credit", "reason"]


def _columns(df: pd.DataFrame, preferred: list[str], drop: Iterable[str] = ("member",)) -> list[str] | None:
    first = [c for c in preferred if c in df.columns]
    if not first:
        return None
    return first + [c for c in df.columns if c not in first and c not in drop]


def _set_aside_line(df: pd.DataFrame) -> str | None:
    aside = _report.set_aside_rows(df)
    if aside.empty:
        return None
    counts = aside["outcome"].map(str).value_counts()
    parts = ", ".join(f"{o} {counts[o]}" for o in SET_ASIDE if o in counts)
    return f"{len(aside)} item(s) set aside by design ({parts}): not problems, not listed here"


def mismatches(items: Any, columns: list[str] | None = None, empty: str = "(no mismatches)") -> None:
    """The problem rows, with their reasons: every row whose outcome is neither a success (match/matched)
    nor set aside by design (ignored/excluded: shown apart, see `set_aside`); all rows without an
    outcome column. A line under the table counts the set-aside rows left out."""
    df = items_frame(items)
    shown = _report.problem_rows(df)
    table(shown, columns if columns is not None else _columns(shown, MISMATCH_COLUMNS), empty=empty)
    note = _set_aside_line(df)
    if note:
        print(note)


def set_aside(items: Any, columns: list[str] | None = None, empty: str = "(nothing set aside)") -> None:
    """The rows a scorer set aside by design (ignored, excluded), with the reason: they count toward nothing."""
    df = _report.set_aside_rows(items_frame(items))
    table(df, columns if columns is not None else _columns(df, MISMATCH_COLUMNS), empty=empty)


def notes(result: Any) -> None:
    for n in _get(result, "notes") or []:
        print(f"- {n}")
    if not _get(result, "notes"):
        print("(no notes)")


GROUP_COLUMNS = ("field", "axis", "family")  # what an item belongs to, by scorer shape


def field_outcome_chart(items: Any) -> Any:
    """Outcomes per field (bar length = the field's weight); for other item tables, item counts per
    ``axis``/``family`` and outcome, or per outcome alone. None without an ``outcome`` column."""
    alt = _alt()
    df = items_frame(items)
    if df.empty or "outcome" not in df.columns:
        return None
    color = alt.Color("outcome:N", scale=_outcome_scale(df["outcome"]), title="outcome")
    group = next((c for c in GROUP_COLUMNS if c in df.columns), None)
    if group is None:
        counts = df.groupby(df["outcome"].map(str), sort=True).size().reset_index(name="items")
        return alt.Chart(counts).mark_bar().encode(
            y=alt.Y("outcome:N", sort=None, title=None), x=alt.X("items:Q", title="items"), color=color,
        ).properties(width=360)
    weighted = group == "field" and "weight" in df.columns
    data = pd.DataFrame({
        group: df[group].map(str),
        "outcome": df["outcome"].map(str),
        "weight": pd.to_numeric(df["weight"], errors="coerce").fillna(1.0) if weighted else 1.0,
    })
    order = list(dict.fromkeys(data[group]))
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y(f"{group}:N", sort=order, title=None),
        x=alt.X("sum(weight):Q", title="weight" if weighted else "items"),
        color=color,
    ).properties(width=360)


def _problems_first(df: pd.DataFrame) -> pd.DataFrame:
    """Problem rows first, then successes (each in the scorer's order)."""
    if "outcome" not in df.columns or df.empty:
        return df
    fine = df["outcome"].isin(SUCCESS)
    return pd.concat([df[~fine], df[fine]])


def _outcome_summary(df: pd.DataFrame) -> str:
    """"12 items (10 matched, 1 missed, 1 spurious)"."""
    n = f"{len(df)} item{'' if len(df) == 1 else 's'}"
    if "outcome" not in df.columns or df.empty:
        return n
    counts = df["outcome"].map(str).value_counts()
    return n + " (" + ", ".join(f"{counts[o]} {o}" for o in _outcome_domain(counts.index) if o in counts) + ")"


# --------------------------------------------------------------------------- score page: by item shape

def score_page(result: Any, shape: str | None = None) -> None:
    """Everything a member's score page shows below its headline, chosen by the item table's shape.

    `shape` ("fields", "graph", "tree", "items") defaults to `evalkit.report.item_shape` of the items:
    a ``field`` column → the flat-fields view, ``axis`` → the graph view, ``family`` → the tree view,
    anything else → a generic one. Each view writes its own section headings.
    """
    items = items_frame(result)
    shape = shape or _report.item_shape(items)
    {"fields": fields_view, "graph": graph_view, "tree": tree_view}.get(shape, items_view)(result, items)


def fields_view(result: Any, items: pd.DataFrame | None = None) -> None:
    """Flat fields: every metric, the gate, the mismatches with their reasons, outcomes by field."""
    items = items_frame(result) if items is None else items
    heading("Metrics")
    metrics_table(result)
    heading("Gate")
    gate(result)
    heading("Mismatches")
    para("Every item whose outcome is not match, with the scorer's reason.")
    mismatches(items)
    heading("Outcomes by field")
    chart(field_outcome_chart(items))


def items_view(result: Any, items: pd.DataFrame | None = None) -> None:
    """Any other item table: every metric, the gate when there is one, the problems, outcome counts."""
    items = items_frame(result) if items is None else items
    heading("Metrics")
    metrics_table(result)
    if (_get(result, "details") or {}).get("gate") is not None:
        heading("Gate")
        gate(result)
    heading("Problems")
    para("Every item whose outcome is not a success (set-aside items are counted under the table).")
    mismatches(items, empty="(no problems)")
    aside = _report.set_aside_rows(items)
    if not aside.empty:
        heading("Set aside", 3)
        set_aside(aside)
    heading("Outcomes")
    chart(field_outcome_chart(items))


# --------------------------------------------------------------------------- graph view

GRAPH_ITEM_COLUMNS = ["key", "expected", "extracted", "outcome", "judged", "reason", "score"]


def _axes(items: pd.DataFrame, metrics: Mapping[str, Any]) -> list[str]:
    seen = list(dict.fromkeys(str(a) for a in items["axis"])) if "axis" in items.columns else []
    from_metrics = [k[: -len("_f1")] for k in metrics if k.endswith("_f1") and not k.startswith("judged_")]
    return list(dict.fromkeys(seen + from_metrics))


def _compact(value: Any) -> Any:
    """An item as one line: a structure's values joined by " · " (``Orla Fenwick · place of birth · Cork``)."""
    if isinstance(value, Mapping):
        return " · ".join(fmt(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return " · ".join(fmt(v) for v in value)
    return value


def graph_axis_table(metrics: Mapping[str, Any], axes: Iterable[str]) -> pd.DataFrame:
    """Per axis: strict precision / recall / F1 and tp / fp / fn beside the judged figures (null: "—")."""
    rows = []
    for axis in axes:
        row = {"axis": axis}
        for m in ("precision", "recall", "f1", "tp", "fp", "fn"):
            row[m] = figure(metrics.get(f"{axis}_{m}"))
        for m in ("precision", "recall", "f1"):
            row[f"judged {m}"] = figure(metrics.get(f"judged_{axis}_{m}"))
        rows.append(row)
    return pd.DataFrame(rows)


def graph_view(result: Any, items: pd.DataFrame | None = None) -> None:
    """Graph (entities / relations / summary): per-axis P/R/F1 strict beside judged, outcomes per axis,
    and each axis's item table (problems first)."""
    items = items_frame(result) if items is None else items
    metrics = _get(result, "metrics") or {}
    axes = _axes(items, metrics)
    heading("Precision, recall and F1 per axis")
    para("Strict: items match when their normalized keys are equal. Judged: an LLM judge's verdicts, "
         f"{NULL} until a judge has looked at this result (never 0). The summary is scored by token F1 alone.")
    table(graph_axis_table(metrics, axes))
    shown = {f"{p}{a}_{m}" for p in ("", "judged_") for a in axes
             for m in ("precision", "recall", "f1", "tp", "fp", "fn")}
    others = {k: v for k, v in metrics.items() if k not in shown}
    if others:
        print(" · ".join(f"{k} {figure(v)}" for k, v in others.items()))
    if (_get(result, "details") or {}).get("gate") is not None:
        heading("Gate")
        gate(result)
    heading("Outcomes per axis")
    para("matched: on both sides; missed: in the truth only; spurious: extracted only.")
    chart(field_outcome_chart(items))
    heading("Items")
    para("One table per axis, problems (missed, spurious) first, with the scorer's reason.")
    if "axis" not in items.columns or items.empty:
        print("(no items)")
    for axis in [a for a in axes if "axis" in items.columns and (items["axis"].map(str) == a).any()]:
        rows = items[items["axis"].map(str) == axis]
        heading(f"{axis}: {_outcome_summary(rows)}", 3)
        cols = [c for c in GRAPH_ITEM_COLUMNS
                if c in rows.columns and (c not in ("score", "judged") or rows[c].notna().any())]
        shown = _problems_first(rows).copy()
        for c in ("key", "expected", "extracted"):
            if c in shown.columns:
                shown[c] = [_compact(v) for v in shown[c]]
        table(shown, cols, empty=f"(no {axis} items)")
        note = _set_aside_line(rows)
        if note:
            print(note)


# --------------------------------------------------------------------------- tree view

# Display order of the families of a tree-shaped scorer (the adventure task's seven); families a
# scorer adds beyond these follow in the order they first appear.
FAMILY_ORDER = ("areas", "encounters", "connections", "treasure", "doors", "transitions", "entrance")
TREE_ITEM_COLUMNS = ["metric", "site", "level", "area", "expected", "extracted", "outcome", "reason"]
STATS = ("precision", "recall", "f1", "accuracy", "tp", "fp", "fn", "matched", "denominator")


def ordered_families(names: Iterable[Any]) -> list[str]:
    """Family names in display order: FAMILY_ORDER first, others after in first-seen order."""
    seen = list(dict.fromkeys(str(n) for n in names if not _is_null(n)))
    return [f for f in FAMILY_ORDER if f in seen] + [f for f in seen if f not in FAMILY_ORDER]


def _families(result: Any, items: pd.DataFrame) -> list[str]:
    details = _get(result, "details") or {}
    metrics = _get(result, "metrics") or {}
    names = list(details.get("families") or [])
    names += [k[: -len("_score")] for k in metrics if k.endswith("_score")]
    if "family" in items.columns:
        names += list(items["family"])
    return ordered_families(names)


def family_figures(metrics: Mapping[str, Any], family: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A family's metrics as (table, others): one row per measure (``areas``, ``name``, ``count``, …)
    with a column per statistic (precision … denominator), plus the figures that fit no column."""
    prefix = f"{family}_"
    rows: dict[str, dict[str, str]] = {}
    others: dict[str, Any] = {}
    for name, value in metrics.items():
        if not name.startswith(prefix) or name == f"{family}_score":
            continue
        rest = name[len(prefix):]
        stat = next((s for s in STATS if rest == s or rest.endswith("_" + s)), None)
        if stat is None:
            others[name] = value
            continue
        measure = family if rest == stat else rest[: -len(stat) - 1]
        rows.setdefault(measure, {"measure": measure})[stat] = figure(value)
    cols = ["measure"] + [s for s in STATS if any(s in r for r in rows.values())]
    frame = pd.DataFrame(list(rows.values()), columns=cols).fillna("")
    return frame, others


def family_overview(result: Any, items: pd.DataFrame, families: list[str]) -> pd.DataFrame:
    metrics = _get(result, "metrics") or {}
    info = (_get(result, "details") or {}).get("families") or {}
    rows = []
    for fam in families:
        rows_f = items[items["family"].map(str) == fam] if "family" in items.columns else items.iloc[0:0]
        headline = (info.get(fam) or {}).get("headline_figures") or []
        rows.append({
            "family": fam, "score": figure(metrics.get(f"{fam}_score", (info.get(fam) or {}).get("score"))),
            "headline figures": " · ".join(f"{h} {figure(metrics.get(h))}" for h in headline),
            "items": len(rows_f), "problems": len(_report.problem_rows(rows_f)),
            "set aside": len(_report.set_aside_rows(rows_f)),
        })
    return pd.DataFrame(rows)


def family_score_chart(scores: Mapping[str, Any], families: list[str] | None = None) -> Any:
    """Bars of each family's score (0..1); a family with a null score gets "— nothing asserted"."""
    alt = _alt()
    families = families or ordered_families(scores)
    if not families:
        return None
    data = pd.DataFrame({"family": families,
                         "score": [None if _is_null(scores.get(f)) else float(scores[f]) for f in families]})
    data["label"] = [f"{NULL} nothing asserted" if _is_null(v) else f"{v:.3f}" for v in data["score"]]
    data["x"] = data["score"].fillna(0.0)
    y = alt.Y("family:N", sort=families, title=None)
    bars = alt.Chart(data).mark_bar().encode(
        y=y, x=alt.X("x:Q", title="family score", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("x:Q", scale=alt.Scale(domain=[0, 1], scheme="redyellowgreen"), legend=None))
    labels = alt.Chart(data).mark_text(align="left", dx=4, fontSize=11).encode(y=y, x="x:Q", text="label:N")
    return (bars + labels).properties(width=360)


def site_table(result: Any, families: list[str]) -> pd.DataFrame:
    """Per truth site: its alignment and score, and each family's score there (details["sites"])."""
    details = _get(result, "details") or {}
    sites = details.get("sites") or {}
    aligned = {a.get("site"): a for a in details.get("alignment") or [] if isinstance(a, Mapping)}
    rows = []
    for site, m in sites.items():
        a = aligned.get(site) or {}
        row = {"site": site, "extracted site": a.get("extracted_site"), "shared keys": a.get("shared_keys"),
               "score": figure((m or {}).get("score"))}
        row.update({fam: figure((m or {}).get(f"{fam}_score")) for fam in families})
        rows.append(row)
    return pd.DataFrame(rows)


EDGE_FAMILIES = ("connections", "doors", "transitions")


def edge_graph_chart(edges: Iterable[Mapping[str, Any]], families: Iterable[str] | None = None,
                     size: int = 190) -> Any:
    """The scored graph (details["edges"]) as node-link drawings: a row per site, a panel per edge family.

    Each site's areas sit on a circle, ordered by level then key, at the same places in every panel;
    an edge is coloured by its outcome (missed edges dashed). None when there are no edges.
    """
    alt = _alt()
    edges = [dict(e) for e in edges or [] if isinstance(e, Mapping)]
    if not edges:
        return None
    fams = [f for f in (families or ordered_families(e.get("family") for e in edges))
            if any(e.get("family") == f for e in edges)]
    fams = [f for f in EDGE_FAMILIES if f in fams] + [f for f in fams if f not in EDGE_FAMILIES]
    domain = _outcome_domain(e.get("outcome") for e in edges)
    color = alt.Color("outcome:N", scale=_outcome_scale(domain), title="outcome")
    dash = alt.StrokeDash("dashed:N", scale=alt.Scale(domain=["no", "yes"], range=[[1, 0], [4, 3]]), legend=None)
    axis = dict(axis=None, scale=alt.Scale(domain=[-1.45, 1.45]))
    rows = []
    for site in dict.fromkeys(str(e.get("site")) for e in edges):
        site_edges = [e for e in edges if str(e.get("site")) == site]

        def level_key(node: tuple[Any, str]) -> tuple:
            lv = node[0]
            return (0 if isinstance(lv, (int, float)) else 1, lv if isinstance(lv, (int, float)) else 0, node[1])

        nodes = sorted({(e.get("a_level"), str(e.get("a"))) for e in site_edges}
                       | {(e.get("b_level"), str(e.get("b"))) for e in site_edges}, key=level_key)
        pos = {}
        for i, node in enumerate(nodes):
            angle = math.pi / 2 - 2 * math.pi * i / max(len(nodes), 1)
            pos[node] = (round(math.cos(angle), 6), round(math.sin(angle), 6))
        node_df = pd.DataFrame([{"area": n[1], "level": "" if _is_null(n[0]) else str(n[0]),
                                 "x": p[0], "y": p[1], "lx": round(1.22 * p[0], 6), "ly": round(1.22 * p[1], 6)}
                                for n, p in pos.items()])
        panels = []
        for fam in fams:
            fe = [e for e in site_edges if e.get("family") == fam]
            edge_df = pd.DataFrame([{"x": pos[(e.get("a_level"), str(e.get("a")))][0],
                                     "y": pos[(e.get("a_level"), str(e.get("a")))][1],
                                     "x2": pos[(e.get("b_level"), str(e.get("b")))][0],
                                     "y2": pos[(e.get("b_level"), str(e.get("b")))][1],
                                     "outcome": str(e.get("outcome")),
                                     "dashed": "yes" if e.get("outcome") == "missed" else "no"} for e in fe],
                                   columns=["x", "y", "x2", "y2", "outcome", "dashed"])
            base_nodes = alt.Chart(node_df)
            layers = []
            if not edge_df.empty:
                layers.append(alt.Chart(edge_df).mark_rule(strokeWidth=2).encode(
                    x=alt.X("x:Q", **axis), y=alt.Y("y:Q", **axis), x2="x2:Q", y2="y2:Q",
                    color=color, strokeDash=dash))
            layers.append(base_nodes.mark_circle(size=60, color="#4c4c4c", opacity=1).encode(
                x=alt.X("x:Q", **axis), y=alt.Y("y:Q", **axis)))
            layers.append(base_nodes.mark_text(fontSize=10).encode(
                x=alt.X("lx:Q", **axis), y=alt.Y("ly:Q", **axis), text="area:N"))
            title = f"{site} · {fam}" + ("" if fe else " (none)")
            panels.append(alt.layer(*layers).properties(width=size, height=size, title=title))
        rows.append(alt.hconcat(*panels))
    return alt.vconcat(*rows).configure_view(strokeWidth=0).configure_title(fontSize=11, limit=3 * size)


def tree_view(result: Any, items: pd.DataFrame | None = None) -> None:
    """Nested structure (families of metrics): family scores (table and bars), the per-site breakdown,
    the scored connection graph, then one section per family: its figures with its item table."""
    items = items_frame(result) if items is None else items
    metrics = _get(result, "metrics") or {}
    details = _get(result, "details") or {}
    families = _families(result, items)

    heading("Families")
    if details.get("headline_rule"):
        para(f"Score: {details['headline_rule']}.", f"A family scored {NULL} has nothing asserted in the truth.")
    table(family_overview(result, items, families))
    chart(family_score_chart({f: metrics.get(f"{f}_score") for f in families}, families))

    heading("Sites")
    para("Each truth site, the extracted site aligned to it and the family scores over its items alone.")
    table(site_table(result, families), empty="(no site has a scored item)")

    heading("Connection graph")
    para("The scored links: areas of each site on a circle (ordered by level, then key), one panel per "
         "family; matched links green, missed yellow (dashed), spurious purple.")
    chart(edge_graph_chart(details.get("edges") or []), missing="(no links were scored)")

    columns = [c for c in TREE_ITEM_COLUMNS if c in items.columns]
    sites = items["site"].dropna().map(str).unique() if "site" in items.columns else []
    intro = ("One section per family follows: its figures, then its items (problems first), then the items "
             "it set aside by design (ignored, excluded: counted toward nothing), if any.")
    if len(sites) == 1:
        columns.remove("site")  # one site: named once, not on every row
        intro += f" Every item is of the site {sites[0]}."
    para(intro)
    for fam in families:
        rows = items[items["family"].map(str) == fam] if "family" in items.columns else items.iloc[0:0]
        heading(f"{fam}: score {figure(metrics.get(f'{fam}_score'))}")
        figs, others = family_figures(metrics, fam)
        table(figs, empty="(no figures)")
        if others:
            print(" · ".join(f"{k} {figure(v)}" for k, v in others.items()))
        counted = rows[~rows["outcome"].isin(SET_ASIDE)] if "outcome" in rows.columns else rows
        heading(f"{fam} items: {_outcome_summary(rows)}", 3)
        table(_problems_first(counted), columns, empty=f"(no {fam} items counted)")
        aside = _report.set_aside_rows(rows)
        if not aside.empty:
            heading(f"{fam} items set aside: {len(aside)} (counted toward nothing: not problems)", 3)
            set_aside(aside, columns)


# --------------------------------------------------------------------------- report page

def report_summary(members: pd.DataFrame, items: pd.DataFrame) -> None:
    """One line per backend: members scored, verdicts, mean score (and mean field accuracy for fields)."""
    from .report import mean_field_accuracy

    if members is None or members.empty:
        print("0 member run(s)")
        return
    backends = sorted(members["backend"].map(str).unique()) if "backend" in members.columns else [None]
    fields = _report.item_shape(items) == "fields"
    for backend in backends:
        m = members if backend is None else members[members["backend"].map(str) == backend]
        n = len(m)
        counts = m["verdict"].value_counts() if "verdict" in m.columns else {}
        parts = ([f"backend {backend}"] if len(backends) > 1 else []) + [f"{n} member run(s)"]
        parts += [f"{counts.get(v, 0)} {v}" for v in ("PASS", "FAIL")]
        others = n - sum(counts.get(v, 0) for v in ("PASS", "FAIL"))
        if others:
            parts.append(f"{others} other")
        scores = pd.to_numeric(m["score"], errors="coerce").dropna() if "score" in m.columns else pd.Series([])
        parts.append("mean score " + (f"{scores.mean():.3f}" if len(scores) else "n/a"))
        if fields:
            its = items if backend is None or "backend" not in items.columns else items[items["backend"].map(str) == backend]
            acc = mean_field_accuracy(its)
            parts.append("mean field accuracy " + ("n/a" if acc is None else f"{acc:.3f}"))
        print(" · ".join(parts))


MEMBER_COLUMNS = ["member", "backend", "score", "verdict", "parse", "input_tokens", "output_tokens", "usd",
                  "latency_s", "items", "notes"]


def members_table(members: pd.DataFrame) -> None:
    df = members.copy()
    if "score" in df.columns:
        df["score"] = [("" if _is_null(s) else f"{s:.3f}") for s in df["score"]]
    table(df, [c for c in MEMBER_COLUMNS if c in df.columns], empty="(no scored members)")


def accuracy_heatmap(accuracy: pd.DataFrame | None) -> Any:
    """Field × member accuracy (a frame from report.field_accuracy) as a heatmap."""
    alt = _alt()
    if accuracy is None or accuracy.empty:
        return None
    long = accuracy.reset_index(names="field").melt(id_vars="field", var_name="member", value_name="accuracy")
    long = long.dropna(subset=["accuracy"]).astype({"field": str, "member": str})
    fields = [str(f) for f in accuracy.index]
    members = [str(m) for m in accuracy.columns]
    base = alt.Chart(long).encode(
        x=alt.X("member:N", sort=members, title=None, axis=alt.Axis(labelAngle=-40, labelLimit=180)),
        y=alt.Y("field:N", sort=fields, title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("accuracy:Q", scale=alt.Scale(domain=[0, 1], scheme="redyellowgreen"), title="accuracy"),
    )
    label = base.mark_text(fontSize=10).encode(text=alt.Text("accuracy:Q", format=".0%"))
    return (rect + label).properties(width=alt.Step(48), height=alt.Step(20))


def score_heatmap(matrix: pd.DataFrame | None, title: str = "score") -> Any:
    """Member × column (axis, family) figures in 0..1 as a heatmap (a frame from
    `evalkit.report.metric_matrix`); a null cell is grey and labelled "—"."""
    alt = _alt()
    if matrix is None or matrix.empty:
        return None
    rows = [str(r) for r in matrix.index]
    cols = [str(c) for c in matrix.columns]
    long = pd.DataFrame([{"member": str(r), "column": str(c),
                          "value": None if _is_null(v) else float(v),
                          "label": NULL if _is_null(v) else f"{float(v):.2f}"}
                         for r, row in zip(rows, matrix.itertuples(index=False)) for c, v in zip(cols, row)])
    base = alt.Chart(long).encode(
        x=alt.X("column:N", sort=cols, title=None, axis=alt.Axis(labelAngle=-40, labelLimit=180, orient="top")),
        y=alt.Y("member:N", sort=list(dict.fromkeys(rows)), title=None, axis=alt.Axis(labelLimit=260)),
    )
    nulls = base.transform_filter("datum.value === null").mark_rect(color="#eeeeee")
    rect = base.transform_filter("datum.value !== null").mark_rect().encode(
        color=alt.Color("value:Q", scale=alt.Scale(domain=[0, 1], scheme="redyellowgreen"), title=title))
    label = base.mark_text(fontSize=10).encode(
        text="label:N",
        color=alt.condition("datum.value !== null && (datum.value >= 0.8 || datum.value <= 0.2)",
                            alt.value("white"), alt.value("black")))
    return (nulls + rect + label).properties(width=alt.Step(64), height=alt.Step(20))


def outcome_distribution(items: pd.DataFrame) -> Any:
    """How each member's items split over outcomes (stacked bars)."""
    alt = _alt()
    if items is None or items.empty or "outcome" not in items.columns:
        return None
    who = "label" if "label" in items.columns else ("member" if "member" in items.columns else None)
    data = pd.DataFrame({"outcome": items["outcome"].map(str),
                         "member": items[who].map(str) if who else "all"})
    counts = data.groupby(["member", "outcome"], sort=True).size().reset_index(name="items")
    return alt.Chart(counts).mark_bar().encode(
        y=alt.Y("member:N", sort=sorted(counts["member"].unique()), title=None),
        x=alt.X("items:Q", title="items"),
        color=alt.Color("outcome:N", scale=_outcome_scale(counts["outcome"]), title="outcome"),
        order=alt.Order("outcome:N"),
    ).properties(width=360)


def _figures_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Every cell through `figure` (nulls "—"), for tables of metrics."""
    return pd.DataFrame({c: [figure(v) for v in df[c]] for c in df.columns}, columns=list(df.columns))


def _member_columns(members: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    rows = _report.member_metrics(members)
    return pd.DataFrame([{"member": r["member"], "backend": r["backend"], "score": figure(r["score"]),
                          "verdict": r["verdict"], **{t: figure(r["metrics"].get(n)) for t, n in names.items()}}
                         for r in rows], columns=["member", "backend", "score", "verdict", *names])


def report_page(members: pd.DataFrame, items: pd.DataFrame, shape: str | None = None) -> None:
    """Everything a task report shows about a run's members, chosen by the item table's shape
    (see `score_page`; with no items, by the members' metrics). Every backend of the run is shown:
    member rows carry a backend column, heatmaps label rows ``member [backend]``, corpus figures are
    per backend."""
    if shape is None:
        shape = _report.item_shape(items)
        if shape == "items" and members is not None:
            cols = {str(c) for c in members.columns}
            shape = ("graph" if any(c.endswith("s_f1") and c.startswith("metric.relations") for c in cols)
                     else "tree" if any(c.endswith("_score") and c != "metric.score" for c in cols) else "items")
    {"fields": fields_report, "graph": graph_report, "tree": tree_report}.get(shape, items_report)(members, items)


def fields_report(members: pd.DataFrame, items: pd.DataFrame) -> None:
    heading("Members")
    members_table(members)
    heading("Field accuracy")
    para("Share of each member's items for a field whose outcome is match.")
    chart(accuracy_heatmap(_report.field_accuracy(items)),
          missing="(this task's items have no field/outcome columns: no heatmap)")
    heading("Outcomes")
    chart(outcome_distribution(items))


def items_report(members: pd.DataFrame, items: pd.DataFrame) -> None:
    heading("Members")
    members_table(members)
    heading("Outcomes")
    chart(outcome_distribution(items))


def graph_corpus_table(corpus: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """`evalkit.report.graph_corpus` as rows of backend × axis: members with a figure, micro precision /
    recall / F1, macro F1 and the judged F1 (the summary: its mean token F1 as the macro figure)."""
    rows = []
    for rec in corpus.to_dict("records"):
        for axis in axes:
            rows.append({"backend": rec["backend"], "axis": axis, "members": figure(rec.get(f"{axis}_members")),
                         "micro precision": figure(rec.get(f"{axis}_precision")),
                         "micro recall": figure(rec.get(f"{axis}_recall")),
                         "micro f1": figure(rec.get(f"{axis}_f1")), "macro f1": figure(rec.get(f"{axis}_macro_f1")),
                         "judged f1": figure(rec.get(f"judged_{axis}_f1"))})
        if "summary_f1" in rec:
            rows.append({"backend": rec["backend"], "axis": "summary", "members": figure(rec.get("summary_members")),
                         "micro precision": NULL, "micro recall": NULL, "micro f1": NULL,
                         "macro f1": figure(rec.get("summary_f1")), "judged f1": NULL})
    return pd.DataFrame(rows)


def graph_report(members: pd.DataFrame, items: pd.DataFrame) -> None:
    axes = [a for a in ("entities", "relations") if f"metric.{a}_f1" in members.columns]
    axes += [str(a) for a in (items["axis"].unique() if "axis" in items.columns else [])
             if str(a) not in axes and str(a) != "summary" and f"metric.{a}_f1" in members.columns]
    names = {f"{a} {m}": f"{a}_{m}" for a in axes for m in ("precision", "recall", "f1")}
    if "metric.summary_f1" in members.columns:
        names["summary f1"] = "summary_f1"
    names.update({f"judged {a} f1": f"judged_{a}_f1" for a in axes})
    heading("Members")
    para(f"Strict precision, recall and F1 per member and backend; {NULL}: undefined (an empty denominator) "
         "or not judged yet (judged figures stay null until a judge has looked at the result).")
    table(_member_columns(members, names), empty="(no scored members)")
    heading("Corpus")
    para("Per backend and axis. Micro: precision, recall and F1 from the members' summed tp / fp / fn; macro: "
         "the mean of the members' non-null F1 (members: how many had one; for the summary, the mean token F1 "
         f"over members whose truth has a summary); judged: {NULL} until a judge has looked at the results.")
    table(graph_corpus_table(_report.graph_corpus(members), axes), empty="(no scored members)")
    heading("F1 by member and axis")
    chart(score_heatmap(_report.metric_matrix(members, {a: f"{a}_f1" for a in axes + ["summary"]
                                                       if f"metric.{a}_f1" in members.columns}), "F1"),
          missing="(no scored members)")
    heading("Outcomes")
    chart(outcome_distribution(items))


def _report_families(members: pd.DataFrame, items: pd.DataFrame) -> list[str]:
    names = [str(c)[len("metric."):-len("_score")] for c in members.columns
             if str(c).startswith("metric.") and str(c).endswith("_score") and str(c) != "metric.score"]
    return ordered_families((list(items["family"]) if "family" in items.columns else []) + names)


def tree_corpus_table(corpus: pd.DataFrame, families: list[str]) -> pd.DataFrame:
    """The metric × backend means of `evalkit.report.tree_corpus` laid out like a family's figures:
    a row per backend, family and measure, a column per statistic, the family score on its first row."""
    rows = []
    for backend in corpus.columns:
        means = corpus[backend].to_dict()
        for fam in families:
            figs, _ = family_figures(means, fam)
            for i, r in enumerate(figs.to_dict("records")):
                rows.append({"backend": str(backend), "family": fam if i == 0 else "",
                             "family score": figure(means.get(f"{fam}_score")) if i == 0 else "", **r})
    cols = ["backend", "family", "family score", "measure"] + [s for s in STATS if any(s in r for r in rows)]
    return pd.DataFrame(rows, columns=cols).fillna("")


def tree_report(members: pd.DataFrame, items: pd.DataFrame) -> None:
    families = _report_families(members, items)
    heading("Members")
    para(f"Each member's score and family scores, per backend; {NULL}: nothing of that family asserted.")
    table(_member_columns(members, {f: f"{f}_score" for f in families}), empty="(no scored members)")
    heading("Corpus mean per metric")
    para("Each metric's mean over the members where it is defined (a null figure is left out, not "
         f"counted as 0), per backend, family by family; {NULL}: defined for no member.")
    corpus = _report.tree_corpus(members)
    if corpus.empty:
        print("(no scored members)")
    else:
        table(tree_corpus_table(corpus, families))
        for backend in corpus.columns:
            means = corpus[backend].to_dict()
            others = {k: v for f in families for k, v in family_figures(means, f)[1].items()}
            if others:
                print(f"{backend}: " + " · ".join(f"{k} {figure(v)}" for k, v in others.items()))
    heading("Family scores by member")
    chart(score_heatmap(_report.metric_matrix(members, {f: f"{f}_score" for f in families}), "family score"),
          missing="(no scored members)")
    heading("Outcomes")
    chart(outcome_distribution(items))


def trend(run_dir: Any, task: str, metric: str | None = None) -> None:
    """The task's headline metric over the runs of the run history, per backend (`evalkit.report.run_trend`),
    or a one-line note while the history holds fewer than two earlier runs of the task."""
    from .history import trend_chart

    frame, metric, _ = _report.run_trend(run_dir, task, metric)
    if frame is None:
        print(f"No trend yet: the run history (index.jsonl beside the run folder) holds fewer than "
              f"{_report.TREND_MIN_RUNS} earlier runs of this task.")
        return
    runs = frame["run_id"].nunique()
    print(f"{metric}: mean over members, per backend, over {runs} runs (the history and this run)")
    chart(trend_chart(frame, metric))
