"""Nested structures (an item table with a ``family`` column, e.g. the adventure task): family scores,
per-site figures and the scored connection graph, for one member (score view) and across a run
(report view)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from evalkit.report import frames
from evalkit.report.views import charts
from evalkit.report.views.base import NULL, SET_ASIDE, _get, _is_null, figure, heading, items_frame, para, table
from evalkit.report.views.charts import _alt, _outcome_domain, _outcome_scale, outcome_distribution, score_heatmap
from evalkit.report.views.sections import _member_columns, _outcome_summary, _problems_first, linked_members, set_aside

# --------------------------------------------------------------------------- families

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


# --------------------------------------------------------------------------- score view

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
            "items": len(rows_f), "problems": len(frames.problem_rows(rows_f)),
            "set aside": len(frames.set_aside_rows(rows_f)),
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
    axis = {"axis": None, "scale": alt.Scale(domain=[-1.45, 1.45])}
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
    charts.chart(family_score_chart({f: metrics.get(f"{f}_score") for f in families}, families))

    heading("Sites")
    para("Each truth site, the extracted site aligned to it and the family scores over its items alone.")
    table(site_table(result, families), empty="(no site has a scored item)")

    heading("Connection graph")
    para("The scored links: areas of each site on a circle (ordered by level, then key), one panel per "
         "family; matched links green, missed yellow (dashed), spurious purple.")
    charts.chart(edge_graph_chart(details.get("edges") or []), missing="(no links were scored)")

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
        aside = frames.set_aside_rows(rows)
        if not aside.empty:
            heading(f"{fam} items set aside: {len(aside)} (counted toward nothing: not problems)", 3)
            set_aside(aside, columns)


# --------------------------------------------------------------------------- report view

def _report_families(members: pd.DataFrame, items: pd.DataFrame) -> list[str]:
    names = [str(c)[len("metric."):-len("_score")] for c in members.columns
             if str(c).startswith("metric.") and str(c).endswith("_score") and str(c) != "metric.score"]
    return ordered_families((list(items["family"]) if "family" in items.columns else []) + names)


def tree_corpus_table(corpus: pd.DataFrame, families: list[str]) -> pd.DataFrame:
    """The metric × backend means of `evalkit.report.frames.tree_corpus` laid out like a family's figures:
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
    linked_members(_member_columns(members, {f: f"{f}_score" for f in families}))
    heading("Corpus mean per metric")
    para("Each metric's mean over the members where it is defined (a null figure is left out, not "
         f"counted as 0), per backend, family by family; {NULL}: defined for no member.")
    corpus = frames.tree_corpus(members)
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
    charts.chart(score_heatmap(frames.metric_matrix(members, {f: f"{f}_score" for f in families}), "family score"),
          missing="(no scored members)")
    heading("Outcomes")
    charts.chart(outcome_distribution(items))
