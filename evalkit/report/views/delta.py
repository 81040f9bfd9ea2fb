"""Views of A-vs-B figures (`evalkit.scoring.delta`): what compare.ipynb and diff.ipynb show. Present only: every
number comes from `evalkit.scoring.delta` / `evalkit.compare.sides` / `evalkit.compare.diff`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from evalkit.report.views.base import figure, heading, para, table, text
from evalkit.report.views.charts import CHART_MEMBERS, _alt, chart
from evalkit.scoring.delta import TUNED_MEANS
from evalkit.scoring.stats import RESAMPLING_UNIT, format_p

__all__ = ["paired_chart", "deltas_table", "fields_delta_table", "changes_table", "flips_table", "pair_view",
           "changes_view", "config_table", "diff_page"]


def paired_chart(d: Mapping[str, Any], title: str = "B − A per member") -> Any:
    """Per-member differences B − A (a point each), their mean (a rule) and its CI (a band); None without
    pairs."""
    pairs = d.get("pairs") or []
    if not pairs:
        return None
    alt = _alt()
    if len(pairs) > CHART_MEMBERS:
        return _paired_histogram(d, title)
    df = pd.DataFrame([{"member": p["member"], "difference": p["b"] - p["a"], "a": p["a"], "b": p["b"]}
                       for p in pairs])
    base = alt.Chart(df)
    points = base.mark_circle(size=60, color="#0969da").encode(
        x=alt.X("difference:Q", title=f"{d.get('metric', 'score')}: B − A"),
        y=alt.Y("member:N", sort=list(df["member"]), title=None),
        tooltip=["member", "a", "b", "difference"])
    layers = [points]
    layers.insert(0, alt.Chart(_summary(d)).mark_rect(opacity=0.18, color="#0969da").encode(x="lo:Q", x2="hi:Q"))
    layers += _rules(d)
    return alt.layer(*layers).properties(title=title, width=420, height=alt.Step(18))


def _summary(d: Mapping[str, Any]) -> pd.DataFrame:
    ci = d.get("ci") or [d["mean"]] * 2
    return pd.DataFrame([{"mean": d["mean"], "lo": ci[0], "hi": ci[1], "zero": 0.0}])


def _rules(d: Mapping[str, Any]) -> list[Any]:
    """The mean difference (a rule) and zero (dashed)."""
    alt = _alt()
    stats = alt.Chart(_summary(d))
    return [stats.mark_rule(color="#0969da", strokeWidth=2).encode(x="mean:Q"),
            stats.mark_rule(color="#57606a", strokeDash=[4, 3]).encode(x="zero:Q")]


HISTOGRAM_BINS = 40


def _paired_histogram(d: Mapping[str, Any], title: str) -> Any:
    """Many members: how many members' B − A falls in each of HISTOGRAM_BINS equal bins (binned here, so the
    chart carries the bins, not the members), with the mean, its CI and zero; the title counts the members."""
    import numpy as np  # lazy: numpy is loaded only where it is used (import cost)

    alt = _alt()
    diffs = np.asarray([p["b"] - p["a"] for p in d["pairs"]], dtype=float)
    lo, hi = float(diffs.min()), float(diffs.max())
    counts, edges = np.histogram(diffs, bins=HISTOGRAM_BINS, range=(lo, hi) if hi > lo else (lo - 0.5, hi + 0.5))
    bins = pd.DataFrame({"from": edges[:-1].round(6), "to": edges[1:].round(6), "members": counts})
    bars = alt.Chart(bins[bins["members"] > 0]).mark_rect(color="#0969da", opacity=0.7).encode(
        x=alt.X("from:Q", title=f"{d.get('metric', 'score')}: B − A"), x2="to:Q",
        y=alt.Y("members:Q", title="members"), tooltip=["from", "to", "members"])
    band = alt.Chart(_summary(d)).mark_rect(opacity=0.18, color="#0969da").encode(x="lo:Q", x2="hi:Q")
    return alt.layer(band, bars, *_rules(d)).properties(
        title=f"{title}: {len(diffs):,} members, a histogram", width=420, height=160)


def deltas_table(metrics: list[Mapping[str, Any]]) -> pd.DataFrame:
    rows = [{"metric": m["metric"], "A": figure(m["a"]), "B": figure(m["b"]), "B − A": figure(m["mean"]),
             "95% CI": "—" if not m.get("ci") else f"[{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]",
             "p": format_p(m["p"]), "p (Holm)": "primary" if i == 0 else format_p(m.get("p_adj")),
             "members": m["n"]} for i, m in enumerate(metrics)]
    return pd.DataFrame(rows)


def fields_delta_table(fields: list[Mapping[str, Any]]) -> pd.DataFrame:
    rows = [{"field": f["field"], "accuracy A": figure(f["a"]), "accuracy B": figure(f["b"]),
             "B − A": figure(f["mean"]),
             "95% CI": "—" if not f.get("ci") else f"[{f['ci'][0]:.3f}, {f['ci'][1]:.3f}]",
             "p": format_p(f["p"]), "p (Holm)": format_p(f.get("p_adj")), "members": f["n"]} for f in fields]
    return pd.DataFrame(rows)


def changes_table(changes: list[Mapping[str, Any]]) -> pd.DataFrame:
    rows = [{"new": "NEW" if c["newly_wrong"] else "", "member": c["member"], "item": c["item"],
             "before → after": f"{c['before']} → {c['after']}", "value before": c["value_before"],
             "value after": c["value_after"], "expected": c["expected"], "reason": c["reason"]} for c in changes]
    return pd.DataFrame(rows)


def flips_table(flips: list[Mapping[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{"member": f["member"], "before → after": f"{f['before']} → {f['after']}",
                          "score before": figure(f["score_before"]), "score after": figure(f["score_after"])}
                         for f in flips])


def _comparison(p: Mapping[str, Any]) -> None:
    text(p["statement"])
    chart(paired_chart(p["metrics"][0], f"{p['b']} − {p['a']} per member (score{', ' + p['group'] if p.get('group') else ''})"),
          missing="(no member scored by both: no paired chart)")
    table(deltas_table(p["metrics"]), empty="(no metric to compare)")
    if p.get("fields"):
        heading("Per-field accuracy", 3)
        para("The share of the paired members whose field matched, per side, and the difference with a paired "
             "bootstrap CI over members.")
        table(fields_delta_table(p["fields"]))
    heading("Verdict flips", 3)
    table(flips_table(p["flips"]), empty="(no verdict changed)")


def pair_view(p: Mapping[str, Any], items: bool = True) -> None:
    """One A-vs-B comparison: the statement, the paired chart, metric deltas, per-field accuracy and flips
    over the tuned members, the same for the held-out members apart, and last the (long) changed items
    (`items=False`: the page shows them itself, after its other tables: `changes_view`)."""
    if p.get("heldout"):
        para(f"Members are compared in two groups, never pooled. {TUNED_MEANS[0].upper()}{TUNED_MEANS[1:]}.")
    _comparison(p)
    if p.get("heldout"):
        heading("Held-out members", 3)
        _comparison(p["heldout"])
    para(f"CIs and p-values resample {RESAMPLING_UNIT}. p (Holm): {p.get('adjustment', '')}.")
    if p.get("zero_delta"):
        text(f"No figure moved: {p['zero_delta']}")
    if items:
        changes_view(p)


def changes_view(p: Mapping[str, Any]) -> None:
    """Every item whose outcome changed (tuned and held-out members): the longest table, shown last."""
    changes = [*p["changes"], *((p.get("heldout") or {}).get("changes") or [])]
    heading(f"Items whose outcome changed: {p['b']} against {p['a']}", 3)
    table(changes_table(changes), empty="(no item changed its outcome)")


def config_table(rows: list[Mapping[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{"what": r["what"], "A": "—" if r["a"] is None else str(r["a"]),
                          "B": "—" if r["b"] is None else str(r["b"])} for r in rows])


def diff_page(d: Mapping[str, Any]) -> None:
    """diff.ipynb: A and B named, what differs in how they were made, then per task each A-vs-B pair
    (`evalkit.compare.diff.diff_runs`)."""
    text(f"A = {d['a']}", f"B = {d['b']}")
    heading("Configuration", 2)
    table(config_table(d.get("config") or []), empty="(identical: settings, threshold, corpus, evalkit and package versions)")
    for task, t in d["tasks"].items():
        heading(task)
        if t["not_comparable"]:
            text(f"nothing comparable: {t['not_comparable']}")
        for p in t["pairs"]:
            c = p.get("config") or {}
            if c.get("differences"):
                table(config_table(c["differences"]))
            if c.get("requests_compared"):
                text(f"requests: {c['requests_changed']} of {c['requests_compared']} members' requests differ "
                     "(prompt, template, settings or document)")
            pair_view(p)
