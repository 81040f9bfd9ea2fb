"""Repeated samples (``--samples K``) on the task report and the member page: the spread of each member's
scores over its samples, the items whose outcome flips between samples, and pass@k / pass^k. The figures
come from `evalkit.report.frames` (`sample_spread`, `unstable_items`) and `evalkit.results.samples`; nothing is computed here.
Shown only when the run has samples: a run without them renders exactly as before."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalkit.report import frames
from evalkit.report.views import charts
from evalkit.report.views.base import _get, figure, heading, para, table
from evalkit.results.samples import member_figures

STRIP_ROWS = 40  # members × backends in the spread strip: the most spread ones beyond this (the chart stays legible)
UNSTABLE_ROWS = 50  # rows of the instability list


def spread_chart(members: pd.DataFrame, rows: int = STRIP_ROWS) -> Any:
    """A strip of K points per member × backend (one per scored sample) with a tick at its mean; at most
    `rows` rows, the largest SDs first when there are more. None without samples."""
    alt = charts._alt()
    data = frames.sample_spread(members)
    if data.empty:
        return None
    sd = data.groupby("label")["score"].std(ddof=1).fillna(0.0)
    labels = list(dict.fromkeys(data["label"]))
    if len(labels) > rows:
        keep = set(sd.sort_values(ascending=False, kind="stable").index[:rows])
        labels = [x for x in labels if x in keep]
        data = data[data["label"].isin(keep)]
    y = alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labelLimit=260))
    x = alt.X("score:Q", scale=alt.Scale(domain=[0, 1]), title="score per sample")
    points = alt.Chart(data).mark_circle(size=60, opacity=0.6).encode(
        x=x, y=y, tooltip=["label:N", "sample:O", alt.Tooltip("score:Q", format=".3f")])
    means = alt.Chart(data.drop_duplicates("label")).mark_tick(color="black", thickness=2).encode(
        x=alt.X("mean:Q", scale=alt.Scale(domain=[0, 1])), y=y)
    return (points + means).properties(width=360, height=alt.Step(18))


def samples_section(members: pd.DataFrame, items: pd.DataFrame) -> None:
    """The task report's samples section: per member the mean and SD over its samples, pass@k and pass^k,
    item agreement; the spread strip; the instability list. Nothing without samples."""
    if members is None or "sample_scores" not in members.columns:
        return
    k = int(pd.to_numeric(members["samples"], errors="coerce").max())
    heading("Samples")
    para(f"Each member × backend was extracted {k} times (--samples {k}). A member's score is the mean over its "
         "scored samples; SD is their standard deviation; pass@k: some sample PASSes; pass^k: every sample "
         "PASSes (the verdict shown); agreement: the mean over its items of the share of samples agreeing with "
         "the item's commonest outcome. An errored sample is left out of every figure and counted (scored).")
    rows = pd.DataFrame({
        "member": members["member"], "backend": members["backend"],
        "scored": [f"{s} of {k_}" for s, k_ in zip(members["k_scored"], members["samples"])],
        "mean": [figure(v) for v in members["score"]], "SD": [figure(v) for v in members["score_sd"]],
        "pass@k": [_verdict(v) for v in members["pass_at_k"]], "pass^k": [_verdict(v) for v in members["pass_hat_k"]],
        "agreement": [figure(v) for v in members["agreement"]],
        "path": members["path"] if "path" in members.columns else None})
    # lazy: a cycle, report.views.sections imports this module (via report.views, report.views.pages)
    from evalkit.report.views.sections import linked_members

    linked_members(rows)
    heading("Spread", 3)
    shown = len(frames.sample_spread(members)["label"].unique())
    para("One point per scored sample, the black tick at the member's mean"
         + (f"; the {STRIP_ROWS} members with the largest SD of {shown}." if shown > STRIP_ROWS else "."))
    charts.chart(spread_chart(members), missing="(no scored samples)")
    heading("Unstable items", 3)
    unstable = frames.unstable_items(items)
    para("Items whose outcome differs between samples, most unstable first (lowest agreement); outcomes in "
         "sample order, `absent` where a sample's item table lacks the item"
         + (f"; the first {UNSTABLE_ROWS} of {len(unstable)}." if len(unstable) > UNSTABLE_ROWS else "."))
    table(unstable.head(UNSTABLE_ROWS), empty="(every item has the same outcome in every sample)")


def member_samples(result: Any) -> None:
    """The member page's list of its samples (`pipeline.score_member` attaches them under --samples K > 1):
    each sample's score, verdict and error; the page itself shows sample 0."""
    samples = _get(result, "samples")
    if not samples:
        return

    f = member_figures(samples)
    print(f"samples: {f['k_scored']} of {f['k']} scored · mean {figure(f['mean'])} · SD {figure(f['sd'])} · "
          f"pass@k {_verdict(f['pass_at_k'])} · pass^k {_verdict(f['pass_hat_k'])} · agreement "
          f"{figure(f['agreement'])} (this page shows sample 0)")
    table([{"sample": i if s.sample is None else s.sample, "score": figure(s.score),
            "verdict": frames.verdict(s.passed, s.status), "cause": s.cause, "parse": s.run.parse}
           for i, s in enumerate(samples)])  # `runfolder.read_sample_scores`: score records


def _verdict(v: Any) -> str:
    return "n/a" if v is None or v != v else "PASS" if v else "FAIL"
