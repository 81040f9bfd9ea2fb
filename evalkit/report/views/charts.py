"""Static charts: altair specs drawn offline by vl-convert into one SVG + PNG display bundle.

No vega-embed, no CDN: :func:`chart` shows the bundle (SVG for nbconvert HTML, PNG for JupyterLab)
and altair's own renderer is switched to the same bundle when a chart is first drawn. Holds the
fixed outcome colours and the outcome charts every shape's pages share; builders return an
``alt.Chart`` (or None) that a researcher can adjust before passing it to :func:`chart`.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from typing import Any

import IPython.display
import pandas as pd

from evalkit.report.views.base import NULL, _is_null, items_frame
from evalkit.results.runfolder import SCORE

# How much one chart may carry. Up to CHART_MEMBERS members a chart draws every member (what every page of a
# small run has always shown, byte for byte); above, the builders switch to an aggregated form that names
# itself in its title (binned heatmaps, outcomes summed, a histogram of differences) and counts every member.
# CHART_ROWS bounds the rows of data any chart carries (altair refuses 5,000; a chart is a small SVG): one
# above it is not drawn, and a one-line note says so instead.
CHART_MEMBERS = 100
CHART_ROWS = 2000
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


# --------------------------------------------------------------------------- bundles and renderer

def _vl_version(spec: dict[str, Any]) -> str | None:
    import vl_convert as vlc  # lazy: vl_convert is loaded only where it is used (import cost)

    m = re.search(r"/v(\d+)\.(\d+)", str(spec.get("$schema", "")))
    if not m:
        return None
    want = f"{m.group(1)}.{m.group(2)}"
    known = vlc.get_vegalite_versions()
    if want in known:
        return want
    same_major = [v for v in known if v.split(".")[0] == m.group(1)]
    return same_major[-1] if same_major else None


_COUNTED_ID = re.compile(r'\bid="([A-Za-z]+)_(\d+)"')


def _stable_ids(svg: str) -> str:
    """The SVG with vega's counted ids (``gradient_3``, ``clip_7``) renamed after its own content.

    vega numbers them with counters that live as long as the process, so the same chart drawn after
    another got other ids: a notebook's bytes depended on what its kernel drew before (a warm kernel,
    `evalkit.execution.kernels`, or a second run in JupyterLab). Named by a hash of the chart with its ids blanked,
    they are the same for the same chart and still differ between two charts of one page.
    """
    ids = list(dict.fromkeys(f"{m.group(1)}_{m.group(2)}" for m in _COUNTED_ID.finditer(svg)))
    if not ids:
        return svg
    refs = re.compile(r'(\bid="|url\(#|href="#)(' + "|".join(map(re.escape, ids)) + r')(?=[")])')
    index = {old: i for i, old in enumerate(ids)}
    # NUL marks the blanked ids: it cannot occur in XML, so no label text is taken for one
    blank = refs.sub(lambda m: f"{m.group(1)}\0{index[m.group(2)]}\0", svg)
    tag = hashlib.sha256(blank.encode()).hexdigest()[:10]
    return re.sub(r"\0(\d+)\0", lambda m: f"{ids[int(m.group(1))].rsplit('_', 1)[0]}-{tag}-{m.group(1)}", blank)


def chart_bundle(spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of a display bundle for an altair chart or a Vega-Lite dict.

    Drawn offline by vl-convert: SVG (text is XML-escaped by vega's renderer)
    and a PNG rasterized from that SVG (a bitmap: nothing to inject). Same
    spec, same bytes.
    """
    import vl_convert as vlc  # lazy: vl_convert is loaded only where it is used (import cost)

    if hasattr(spec, "to_dict"):
        spec = spec.to_dict()
    version = _vl_version(spec)
    svg = _stable_ids(vlc.vegalite_to_svg(spec, **({"vl_version": version} if version else {})))
    png = vlc.svg_to_png(svg, scale=1)
    m = re.search(r'<svg[^>]*\bwidth="([\d.]+)"[^>]*\bheight="([\d.]+)"', svg)
    meta = {"image/png": {"width": round(float(m.group(1))), "height": round(float(m.group(2)))}} if m else {}
    data = {"image/svg+xml": svg, "image/png": base64.b64encode(png).decode("ascii"), "text/plain": "[chart]"}
    return data, meta


def chart_rows(spec: Any) -> int:
    """The most rows of data any one data set of a chart (an altair chart or a Vega-Lite dict) carries."""
    if hasattr(spec, "to_dict"):
        spec = spec.to_dict(validate=False)
    return max((len(v) for v in (spec.get("datasets") or {}).values() if isinstance(v, list)), default=0)


def chart(c: Any, missing: str = "(no chart for this item table)") -> None:
    """Display an altair chart as a static SVG + PNG bundle (None prints `missing`).

    A chart that cannot be drawn — more than CHART_ROWS rows of data, or any error while drawing it — is
    replaced by a one-line note saying why: it never costs the page the sections after it."""
    _register_renderer()
    if c is None:
        print(missing)
        return
    try:
        import altair as alt  # lazy: altair is loaded only where it is used (import cost)

        with alt.data_transformers.disable_max_rows():  # our own bound, checked here, is the lower one
            spec = c.to_dict() if hasattr(c, "to_dict") else c
        rows = chart_rows(spec)
        if rows > CHART_ROWS:
            print(f"(chart not drawn: {rows:,} rows of data, more than the {CHART_ROWS:,} a chart may carry; "
                  f"the figures are in the tables and {SCORE})")
            return
        data, meta = chart_bundle(spec)
    except Exception as e:  # noqa: BLE001 - one chart's failure is a note, not the end of the page
        reason = (str(e).strip().splitlines() or [""])[0][:200]
        print(f"(chart not drawn: {type(e).__name__}: {reason})")
        return
    IPython.display.display(data, metadata=meta, raw=True)


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
        import altair as alt  # lazy: altair is loaded only where it is used (import cost)

        alt.renderers.register("evalkit", _renderer)
        alt.renderers.enable("evalkit")
        _registered = True
    except Exception:  # pragma: no cover - altair missing or changed: views still work
        pass


def _alt() -> Any:
    import altair as alt  # lazy: altair is loaded only where it is used (import cost)

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


# --------------------------------------------------------------------------- aggregated forms

BANDS = ("0–19%", "20–39%", "40–59%", "60–79%", "80–99%", "100%")  # a figure in 0..1, binned


def band(value: Any) -> str:
    """The band of a figure in 0..1 (`BANDS`; 1 has its own, the perfect score being the common one), or "—"."""
    if _is_null(value):
        return NULL
    v = float(value)
    return BANDS[-1] if v >= 1 else BANDS[min(int(max(v, 0.0) * 5), 4)]


def binned_heatmap(long: pd.DataFrame, group: str, order: list[str], members: int, title: str) -> Any:
    """A heatmap of many members: per `group` row (a field, an axis, a family) and band of its ``value``
    (`band`; null: "—"), how many members fall there. Every member counted, `members` of them named in the
    title; the per-member figures are in the page's tables and score.json."""
    alt = _alt()
    data = pd.DataFrame({group: long[group].map(str), "band": [band(v) for v in long["value"]]})
    counts = data.groupby([group, "band"], sort=True).size().reset_index(name="members")
    bands = [*BANDS, *([NULL] if (counts["band"] == NULL).any() else [])]
    base = alt.Chart(counts).encode(
        x=alt.X("band:N", sort=bands, scale=alt.Scale(domain=bands), title=title,
                axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y(f"{group}:N", sort=order, title=None, axis=alt.Axis(labelLimit=260)))
    rect = base.mark_rect().encode(color=alt.Color("members:Q", scale=alt.Scale(scheme="blues"), title="members"))
    label = base.mark_text(fontSize=10).encode(text="members:Q")
    return (rect + label).properties(width=alt.Step(64), height=alt.Step(20),
                                     title=f"{members:,} members: how many per {title} band")


# --------------------------------------------------------------------------- outcome charts

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
    if len(data) > CHART_ROWS:  # a long item table: summed here, one row per group and outcome (same bars)
        data = data.groupby([group, "outcome"], sort=False)["weight"].sum().reset_index()
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y(f"{group}:N", sort=order, title=None),
        x=alt.X("sum(weight):Q", title="weight" if weighted else "items"),
        color=color,
    ).properties(width=360)


def score_heatmap(matrix: pd.DataFrame | None, title: str = "score") -> Any:
    """Member × column (axis, family) figures in 0..1 as a heatmap (a frame from
    `evalkit.report.frames.metric_matrix`); a null cell is grey and labelled "—"."""
    alt = _alt()
    if matrix is None or matrix.empty:
        return None
    rows = [str(r) for r in matrix.index]
    cols = [str(c) for c in matrix.columns]
    if len(rows) > CHART_MEMBERS:
        return binned_heatmap(pd.DataFrame([{"column": c, "value": v} for row in matrix.itertuples(index=False)
                                            for c, v in zip(cols, row)]), "column", cols, len(rows), title)
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
    members, title = data["member"].nunique(), {}
    if members > CHART_MEMBERS:  # one bar per backend (or one in all), summed over its members
        data["member"] = items["backend"].map(str) if "backend" in items.columns else "all members"
        title = {"title": f"{members:,} members: items per outcome, summed"}
    counts = data.groupby(["member", "outcome"], sort=True).size().reset_index(name="items")
    return alt.Chart(counts).mark_bar().encode(
        y=alt.Y("member:N", sort=sorted(counts["member"].unique()), title=None),
        x=alt.X("items:Q", title="items"),
        color=alt.Color("outcome:N", scale=_outcome_scale(counts["outcome"]), title="outcome"),
        order=alt.Order("outcome:N"),
    ).properties(width=360, **title)


# --------------------------------------------------------------------------- run history and pairwise judging

def trend_chart(frame: pd.DataFrame | None, metric: str = "score") -> Any:
    """A line chart of a `evalkit.results.history.trend_frame`: one line per series (a backend over one member
    set, see `run_means`), on a UTC time axis in 24-hour ISO form; None when there is nothing to draw."""
    if frame is None or len(frame) == 0:
        return None
    alt = _alt()

    frame = frame.assign(when=frame["time"].map(str))
    return (alt.Chart(frame).mark_line(point=True)
            .encode(x=alt.X("time:T", title="run (UTC)", scale=alt.Scale(type="utc"),
                            axis=alt.Axis(labelExpr="utcFormat(datum.value, '%Y-%m-%d %H:%M')", labelAngle=-30)),
                    y=alt.Y("value:Q", title=metric, scale=alt.Scale(zero=False)),
                    color=alt.Color("series:N", title="backend"),
                    tooltip=["run_id", "when", "series", "value", "members"])
            .properties(width=480, height=220))


def win_rate_chart(df: pd.DataFrame, names: list[str]) -> Any:
    """A matrix per axis of `evalkit.compare.sides.win_rate_matrix` (the row backend's win rate against the
    column backend, ties excluded; an order-inconsistent pair starred and outlined), backends in `names` order;
    None without pairwise results."""
    if df.empty:
        return None
    alt = _alt()

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
