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

Views are generic over an item table (one row per compared item, any
columns): the per-field chart (bars weighted by ``weight``) and the field ×
member heatmap need ``field`` and ``outcome`` columns; other shapes get item
counts per ``axis``/``family`` and outcome, or per outcome. Chart builders
return an ``alt.Chart`` (or None when the table cannot make one) so a
researcher can adjust it before passing it to :func:`chart`.
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

__all__ = [
    "OUTCOMES", "OUTCOME_COLORS", "verdict", "fmt", "text", "show_json", "table", "kv", "chart_bundle", "chart",
    "items_frame", "run_block", "record", "summary", "gate", "mismatches", "notes", "field_outcome_chart",
    "members_table", "report_summary", "accuracy_heatmap", "outcome_distribution",
]

# Outcome colours are fixed, so every chart uses the same legend: the flat-fields scorer's five
# outcomes always appear in this order; set-shaped scorers (graph: matched / missed / spurious) reuse
# the colours of their counterparts; any other outcome is grey.
OUTCOMES = ["match", "mismatch", "missing", "extra", "hallucinated"]
OUTCOME_COLORS = {
    "match": "#54a24b", "matched": "#54a24b", "mismatch": "#e45756", "spurious": "#e45756",
    "missing": "#f2b701", "missed": "#f2b701", "extra": "#9d755d", "hallucinated": "#b279a2",
}
SUCCESS = ("match", "matched")  # outcomes that are not shown as mismatches
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


def _outcome_scale(values: Iterable[str]) -> Any:
    alt = _alt()

    present = {str(v) for v in values}
    if present <= set(OUTCOMES):
        domain = list(OUTCOMES)
    else:
        domain = [o for o in OUTCOME_COLORS if o in present] + sorted(present - set(OUTCOME_COLORS))
    return alt.Scale(domain=domain, range=[OUTCOME_COLORS.get(o, "#79706e") for o in domain])


# --------------------------------------------------------------------------- items

def items_frame(items: Any) -> pd.DataFrame:
    """The item table (a ScoreResult, its items, or a DataFrame) as a DataFrame."""
    if isinstance(items, pd.DataFrame):
        return items
    if hasattr(items, "items") and not isinstance(items, Mapping) and not callable(items.items):
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

def summary(result: Any) -> None:
    """Headline: score and verdict, then the metrics table."""
    score = "n/a" if result.score is None else f"{result.score:.3f}"
    print(f"score {score}   verdict {verdict(result.passed)}")
    if result.metrics:
        kv(result.metrics, "metric", "value")


def gate(result: Any) -> None:
    """The scorer's gate output (details['gate']) when it has one."""
    g = (result.details or {}).get("gate")
    if g is None:
        print("no gate for this scorer")
        return
    if isinstance(g, Mapping):
        kv(g, "gate", "value")
    else:
        show_json(g)


MISMATCH_COLUMNS = ["field", "kind", "weight", "expected", "extracted", "outcome", "credit", "reason"]


def mismatches(items: Any, columns: list[str] | None = None) -> None:
    """Rows whose outcome is not a success (match/matched), with their reasons (all rows without an outcome column)."""
    df = items_frame(items)
    if "outcome" in df.columns:
        df = df[~df["outcome"].isin(SUCCESS)]
    if columns is None:
        preferred = [c for c in MISMATCH_COLUMNS if c in df.columns]
        columns = preferred + [c for c in df.columns if c not in preferred and c != "member"] if preferred else None
    table(df, columns, empty="(no mismatches)")


def notes(result: Any) -> None:
    for n in result.notes or []:
        print(f"- {n}")
    if not result.notes:
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


# --------------------------------------------------------------------------- report page

def report_summary(members: pd.DataFrame, items: pd.DataFrame) -> None:
    from .report import mean_field_accuracy

    n = len(members)
    counts = members["verdict"].value_counts() if "verdict" in members.columns else {}
    acc = mean_field_accuracy(items)
    parts = [f"{n} member run(s)"] + [f"{counts.get(v, 0)} {v}" for v in ("PASS", "FAIL") if n]
    others = n - sum(counts.get(v, 0) for v in ("PASS", "FAIL")) if n else 0
    if others:
        parts.append(f"{others} other")
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


if "altair" in sys.modules:
    _register_renderer()
