"""The judge against people (issue 25.5): `evalkit.compare.judgeaudit` and `evalkit judge-audit`.

The correction is checked by simulation: a judge with known error rates (10% false accept, 20% false
reject), 500 labelled pairs, 1,000 replications of a judged set of 80 members; the corrected 95% CI (bootstrap
over members and labelled pairs jointly) covers the true F1 in ≥ 93% of them, the uncorrected judged
interval far less often.
"""

from __future__ import annotations

import csv
import sys

import numpy as np
import pytest
from corpus_factory import cli

from evalkit.compare.judgeaudit import (
    agreement,
    candidates,
    confusion,
    corrected_counts,
    corrected_f1_ci,
    read_labels,
    write_labels,
)
from evalkit.errors import EXIT_OK, EXIT_USAGE

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_judge import python_judge, run_graph, two_cassettes  # noqa: E402


def test_confusion_agreement_kappa_and_error_rates():
    pairs = [("accept", "accept")] * 40 + [("accept", "reject")] * 10 + [("reject", "accept")] * 5 + \
        [("reject", "reject")] * 45
    m = confusion(pairs)
    assert m == {"aa": 40, "ar": 10, "ra": 5, "rr": 45}
    a = agreement(m)
    assert a["agreement"] == 0.85 and a["human_accept_rate"] == 0.45 and a["judge_accept_rate"] == 0.5
    pe = 0.45 * 0.5 + 0.55 * 0.5
    assert a["kappa"] == pytest.approx((0.85 - pe) / (1 - pe))
    assert a["far"] == pytest.approx(10 / 55) and a["frr"] == pytest.approx(5 / 45)


def test_rogan_gladen_recovers_the_true_accepts():
    # 100 candidates, 60 truly matches; FAR 0.1, FRR 0.2 → the judge accepts 0.8·60 + 0.1·40 = 52
    tp, fp, fn = corrected_counts(200, 100, 70, 100, 52, 0.1, 0.2)
    assert (tp, fp, fn) == pytest.approx((260, 40, 10))
    tp, *_ = corrected_counts(200, 100, 70, 100, 52, 0.6, 0.5)  # no better than chance: no estimate
    assert np.isnan(tp)


def simulate(rng, members=80, far=0.1, frr=0.2, pi=0.6, labelled=500):
    """One judged set and one audit: per member strict tp, candidates n (spurious items), t of them truly
    matches, fn = t + truly missed; the judge accepts with the known error rates."""
    tp = rng.poisson(10, members)
    n = rng.poisson(10, members)
    t = rng.binomial(n, pi)
    fn = t + rng.poisson(3, members)
    accepted = rng.binomial(t, 1 - frr) + rng.binomial(n - t, far)
    rows = np.column_stack([tp, n, fn, n, accepted]).astype(float)  # fp = n: every spurious item is a candidate
    cells = rng.multinomial(labelled, [pi * (1 - frr), (1 - pi) * far, pi * frr, (1 - pi) * (1 - far)])
    return rows, dict(zip(("aa", "ar", "ra", "rr"), map(int, cells)))


def test_corrected_ci_covers_the_true_f1_and_the_uncorrected_does_not():
    pi = 0.6
    # the population F1: expected counts tp 10 + 6, fp 10 − 6, fn 3
    true_f1 = 2 * 16 / (2 * 16 + 4 + 3)
    rng = np.random.default_rng(25)
    hits = {"corrected": 0, "judged": 0}
    reps = 1000
    for i in range(reps):
        rows, matrix = simulate(rng, pi=pi)
        for name, correct in (("corrected", True), ("judged", False)):
            ci = corrected_f1_ci(rows, matrix, seed=i, resamples=400, correct=correct)["ci"]
            hits[name] += ci[0] <= true_f1 <= ci[1]
    cover = {k: v / reps for k, v in hits.items()}
    print(f"coverage of the true F1 {true_f1:.4f}: corrected {cover['corrected']:.3f}, "
          f"uncorrected {cover['judged']:.3f}")
    assert cover["corrected"] >= 0.93
    assert cover["judged"] < 0.5


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    run_graph(tmp / "runs" / "one", two_cassettes(tmp), judge=python_judge(tmp))
    return tmp / "runs" / "one"


def test_export_lists_the_candidates_the_judge_decided(judged_run, tmp_path):
    rows = candidates(judged_run)
    # alpha writes aliases the scripted judge accepts; beta has nothing spurious (nothing to judge)
    assert len(rows) == 5 and {r["backend"] for r in rows} == {"alpha"} and {r["judge"] for r in rows} == {"accept"}
    res = cli("judge-audit", judged_run, "--export", tmp_path / "labels.csv")
    assert res.exit_code == EXIT_OK and "5 candidate(s)" in res.output, res.output
    back = list(csv.DictReader((tmp_path / "labels.csv").open()))
    assert [r["human"] for r in back] == [""] * 5 and back[0]["paired_with"]
    assert read_labels(tmp_path / "labels.csv") == []  # nothing labelled yet
    write_labels(tmp_path / "labels.jsonl", rows)
    assert len((tmp_path / "labels.jsonl").read_text().splitlines()) == 5


def test_labels_give_agreement_and_corrected_figures(judged_run, tmp_path):
    rows = candidates(judged_run)
    for i, r in enumerate(rows):
        r["human"] = "yes" if i else "no"  # people reject the first pairing
    write_labels(tmp_path / "labels.csv", rows)
    res = cli("judge-audit", judged_run, "--labels", tmp_path / "labels.csv")
    assert res.exit_code == EXIT_OK, res.output
    assert "judge accepts              4              1" in res.output
    assert "agreement 80.0%" in res.output and "false-accept rate 100.0%" in res.output
    assert "no correction" in res.output  # FAR 1 + FRR 0: the judge is no better than chance here
    rows[0]["judge"] = "reject"  # labels of another judgment
    write_labels(tmp_path / "other.csv", rows)
    res = cli("judge-audit", judged_run, "--labels", tmp_path / "other.csv")
    assert res.exit_code == EXIT_USAGE and "another judgment" in res.output
    (tmp_path / "bad.csv").write_text("task,member,backend,axis,key,judge,human\nt,m,b,entities,[],accept,maybe\n")
    res = cli("judge-audit", judged_run, "--labels", tmp_path / "bad.csv")
    assert res.exit_code == 3 and "'maybe' is not a verdict" in res.output
    res = cli("judge-audit", judged_run)
    assert res.exit_code == EXIT_USAGE
