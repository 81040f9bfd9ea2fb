"""Power before a run (issue 25.3): `evalkit.compare.power` and `evalkit plan`.

The MDE is checked by simulation: 4,000 paired runs of the bundled deal-memos task, members resampled from
the committed cassette replay's per-member scores (corpus/scoreboard.json: test_committed_figures proves the
cassette replays to them) and noise shaped like those scores, with the predicted MDE injected, each tested
with a vectorised two-sided paired t-test (and 1,000 of them with the exact two-sided sign-flip test
`stats.paired_difference` uses for 13 members): the empirical power is 0.80 ± 0.05.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from corpus_factory import cli, make_corpus, specs

from evalkit.board.sweep import sweep
from evalkit.compare.power import (
    mde,
    members_needed,
    plan,
    sd,
    sd_diff_from_band,
    sd_diff_from_scores,
    t_quantile,
    with_samples,
    within_sd,
)
from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.errors import EXIT_OK, EXIT_USAGE
from evalkit.results.band import Band
from evalkit.stages.runner import RunOptions


def test_t_quantiles_match_the_tables():
    for p, df, want in ((0.975, 12, 2.178813), (0.8, 12, 0.872609), (0.975, 1, 12.706205), (0.975, 4, 2.776445),
                        (0.975, 30, 2.042272), (0.025, 12, -2.178813)):
        assert t_quantile(p, df) == pytest.approx(want, abs=1e-5), (p, df)
    assert t_quantile(0.975, 500) == pytest.approx(1.959964, abs=1e-5)  # the normal beyond df 200


def test_mde_and_members_needed_are_inverse_and_t_corrected():
    sd_diff = 0.2
    assert mde(sd_diff, 13) == pytest.approx((2.178813 + 0.872609) * 0.2 / math.sqrt(13), abs=1e-5)
    for n in (3, 5, 13, 40, 300):
        assert members_needed(sd_diff, mde(sd_diff, n)) == n
        assert members_needed(sd_diff, mde(sd_diff, n) * 0.999) == n + 1
    # the t correction: more members than the normal formula's 2·(1.96 + 0.84)²·… for a small n
    normal = math.ceil(((1.959964 + 0.841621) * sd_diff / 0.5) ** 2)
    assert members_needed(sd_diff, 0.5) > normal


def test_sd_sources_and_samples():
    assert sd_diff_from_scores(0.2, 0.5) == pytest.approx(0.2)  # √2·0.2·√0.5
    assert sd_diff_from_scores(0.2, 0.0) == pytest.approx(0.2 * math.sqrt(2))
    assert sd_diff_from_band(0.1) == pytest.approx(0.1 * math.sqrt(2))
    assert with_samples(0.3, 4) == pytest.approx(0.15)  # all noise: /√K
    # measured within-member SD 0.1: only 2·0.01 of the 0.09 variance shrinks
    assert with_samples(0.3, 4, 0.1) == pytest.approx(math.sqrt(0.09 - 0.02 + 0.02 / 4))
    assert within_sd({"a": [0.0, 1.0], "b": [0.5, 0.5], "c": [0.7]}) == pytest.approx(math.sqrt(0.25))
    assert sd([1.0]) is None


def test_plan_from_band_and_pilot_states_what_is_assumed():
    band = Band.from_json({"tasks": {"t": {"members": 10, "metrics": {"score": {"member_sd": 0.05, "n": 10}}}}}, "band.json")
    p = plan("t", band=band, effect=0.05)
    assert p.n == 10 and p.sd_diff == pytest.approx(0.05 * math.sqrt(2)) and p.mde == pytest.approx(mde(p.sd_diff, 10))
    assert p.needed == members_needed(p.sd_diff, 0.05)
    four = plan("t", band=band, samples=4)
    assert four.mde == pytest.approx(p.mde / 2)  # the band's SD is sampling noise: K = 4 halves it
    pilot = ("b", {"m0": [0.2], "m1": [0.4], "m2": [0.9]})
    q = plan("t", pilot=pilot, rho=0.0)
    assert q.sd_diff == pytest.approx(math.sqrt(2) * sd([0.2, 0.4, 0.9]))
    assert any("ρ" in k for k in q.assumed) and "assumed" in "\n".join(q.lines())
    with pytest.raises(Exception, match="member_sd"):
        plan("t", band=Band.from_json({"tasks": {"t": {"metrics": {"score": {"band": 0.02}}}}}, "band.json"))


def test_plan_command_reads_a_pilot_run(tmp_path):
    corpus = make_corpus(tmp_path, members=4)
    answers = tmp_path / "answers"
    answers.mkdir()
    for i, rate in enumerate([0.5, 0.1, 0.7, 0.2]):  # two members right, two with the rate wrong
        (answers / f"m{i}.json").write_text(json.dumps({"account_id": f"ACC-{i:03d}", "rate": rate}))
    sweep(RunOptions(corpus=corpus, backends=specs(f"b=predictions:dir={answers}"), out=tmp_path / "pilot",
                     notebooks=False))
    res = cli("plan", "--task", "memos", "--pilot", tmp_path / "pilot", "--effect", 0.3, "--corpus", corpus)
    assert res.exit_code == EXIT_OK, res.output
    sd_diff = sd_diff_from_scores(sd([1.0, 0.5, 1.0, 0.5]))
    assert f"minimum detectable effect with 4 members: {mde(sd_diff, 4):.4f}" in res.output
    assert f"members needed for an effect of 0.3: {members_needed(sd_diff, 0.3)}" in res.output
    res = cli("plan", "--task", "memos", "--corpus", corpus)  # no band.json there
    assert res.exit_code == 3 and "no band file" in res.output
    res = cli("plan", "--task", "memos", "--pilot", tmp_path / "pilot", "--band", tmp_path / "pilot" / "sweep.json")
    assert res.exit_code == EXIT_USAGE


def test_the_predicted_mde_has_80_percent_power_in_simulated_paired_runs():
    board = json.loads((DEFAULT_CORPUS / "scoreboard.json").read_text())["tasks"]["deal-memos"]
    x = np.array([e["metrics"]["score"] for _, per in sorted(board.items()) for e in per.values()])
    n = len(x)
    sd_diff = sd_diff_from_scores(sd(x))  # ρ = 0.5
    effect = mde(sd_diff, n)
    rng = np.random.default_rng(2025)
    reps = 4000
    noise = (x - x.mean()) / x.std(ddof=1) * sd_diff / math.sqrt(2)  # the pilot's shape, each arm's share of SD
    member = x[rng.integers(0, n, (reps, n))]
    a = member + noise[rng.integers(0, n, (reps, n))]
    b = member + effect + noise[rng.integers(0, n, (reps, n))]
    d = b - a
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    t_power = float(np.mean(np.abs(t) > t_quantile(0.975, n - 1)))
    # the exact two-sided sign-flip test (all 2^13 patterns) on the first 1,000 runs
    signs = (((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2 - 1).astype(float)
    flipped = signs @ d[:1000].T / n
    p = np.mean(np.abs(flipped) >= np.abs(d[:1000].mean(axis=1)) - 1e-12, axis=0)
    flip_power = float(np.mean(p <= 0.05))
    print(f"deal-memos: n={n}, sd_diff={sd_diff:.4f}, MDE={effect:.4f}; empirical power: paired t {t_power:.3f}, "
          f"sign-flip {flip_power:.3f}")
    assert abs(t_power - 0.80) <= 0.05
    assert abs(flip_power - 0.80) <= 0.05
    # and no effect: the test keeps its size
    t0 = (d - effect).mean(axis=1) / ((d - effect).std(axis=1, ddof=1) / math.sqrt(n))
    assert abs(float(np.mean(np.abs(t0) > t_quantile(0.975, n - 1))) - 0.05) < 0.02
