"""evalkit.scoring.stats: the one home of the seed, the bootstrap intervals, the paired test and micro / macro F1.

The exact figures below were computed by the code these functions replaced (`regress.bootstrap_ci`,
`regress.sign_flip_p`, `compare.bootstrap_ci`, `compare.micro_f1` at main a893e9a): the move keeps every
number bit for bit. The properties are checked on 40 random inputs each (seeded: the same every run).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.scoring import stats
from evalkit.scoring.sets import PRF

D10 = [0.1, -0.2, 0.05, -0.3, 0.0, -0.1, 0.2, -0.05, -0.15, 0.01]
D20 = [-0.3, -0.1, 0.1, -0.25, -0.05, 0.15, -0.2, 0.0, 0.2, -0.15, 0.05, -0.3, -0.1, 0.1, -0.25, -0.05, 0.15,
       -0.2, 0.0, 0.2]
XS = [0.2, 0.35, 0.1, 0.9, 0.45, 0.3, 0.05, 0.6]
COUNTS = np.array([[3, 1, 2], [0, 2, 1], [5, 0, 0], [1, 1, 1], [2, 3, 0], [0, 0, 4]], dtype=float)

CASES = range(40)


def draw(case: int) -> np.random.Generator:
    return np.random.default_rng([41, case])


def unit_sample(case: int, low: int = 1, high: int = 20) -> list[float]:
    rng = draw(case)
    return [float(x) for x in rng.random(int(rng.integers(low, high + 1)))]


def count_rows(case: int) -> list[tuple[int, int, int]]:
    rng = draw(case)
    rows = rng.integers(0, 21, size=(int(rng.integers(1, 13)), 3))
    if case % 5 == 0:
        rows[:, 0] = 0  # no true positive anywhere
    if case % 10 == 0:
        rows[:] = 0  # nothing on either side
    return [tuple(int(v) for v in r) for r in rows]


def test_the_figures_are_those_the_moved_code_gave():
    assert stats.sub_seed(stats.SEED, "deal-memos", "score") == [20261130, 3224052635, 848901969]
    assert stats.sign_flip_p(D10, "less") == 0.2109375  # exact: 2^10 patterns
    assert stats.sign_flip_p(D10, "greater") == 0.818359375
    assert stats.sign_flip_p(D20, "less", stats.sub_seed(stats.SEED, "t", "b", "m")) == 0.10914454277286136
    assert stats.sign_flip_p(D20, "greater", 7) == 0.911954402279886  # Monte Carlo: 20 000 seeded patterns
    assert stats.mean_ci(XS, stats.sub_seed(stats.SEED, "deal-memos", "score")) == (0.2, 0.5625)
    assert stats.mean_ci(XS, 7, 500, 0.9) == (0.23125, 0.51875)
    assert stats.micro_f1(COUNTS) == 0.5945945945945946
    assert stats.micro_f1_ci(COUNTS) == (0.24, 0.8163729128014839)
    assert stats.micro_f1_ci(COUNTS, 7, 500, 0.9) == (0.3076923076923077, 0.7907461240310076)


def test_one_seed():
    assert stats.SEED == 20261130
    assert stats.mean_ci(XS) == stats.mean_ci(XS, stats.SEED)  # the default is the seed, everywhere
    assert stats.micro_f1_ci(COUNTS) == stats.micro_f1_ci(COUNTS, stats.SEED)
    # A sub-seed is a stream of its own: another metric's name gives other resamples.
    assert stats.mean_ci(XS, stats.sub_seed(stats.SEED, "t", "a")) != stats.mean_ci(XS, stats.sub_seed(stats.SEED, "t", "b"))


@pytest.mark.parametrize("case", CASES)
def test_the_ci_of_a_constant_sample_is_that_constant(case):
    value, n = unit_sample(case)[0], case % 30 + 1
    assert stats.mean_ci([value] * n, case) == (value, value)


@pytest.mark.parametrize("case", CASES)
def test_the_mean_ci_lies_within_the_sample_and_is_seeded(case):
    xs, seed = unit_sample(case, 2), case
    lo, hi = stats.mean_ci(xs, seed, 300)
    assert min(xs) - 1e-12 <= lo <= hi <= max(xs) + 1e-12
    assert stats.mean_ci(xs, seed, 300) == (lo, hi)


@pytest.mark.parametrize("case", CASES)
def test_a_paired_test_of_identical_samples_gives_p_1(case):
    standing = unit_sample(case, 1, 24)  # up to 24 pairs: both the exact and the Monte Carlo branch
    differences = [x - x for x in standing]
    assert stats.sign_flip_p(differences, "less") == 1.0
    assert stats.sign_flip_p(differences, "greater") == 1.0


@pytest.mark.parametrize("case", CASES)
def test_exact_sign_flip_p_is_a_probability_and_both_tails_cover_everything(case):
    d = [2 * x - 1 for x in unit_sample(case, 1, 12)]
    less, greater = stats.sign_flip_p(d, "less"), stats.sign_flip_p(d, "greater")
    assert 0 < less <= 1 and 0 < greater <= 1
    assert less + greater >= 1  # every pattern is in one tail or the other (ties in both)


@pytest.mark.parametrize("case", CASES)
def test_micro_f1_is_the_f1_of_the_summed_counts(case):
    rows = count_rows(case)
    tp, fp, fn = (sum(r[i] for r in rows) for i in range(3))
    expected = None if 2 * tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)
    assert stats.micro_f1(rows) == expected == stats.micro_f1(np.array(rows, dtype=float))
    assert PRF(*stats.summed(rows)).f1 == expected
    ci = stats.micro_f1_ci(rows, 5, 300)
    assert ci is None if expected is None else 0 <= ci[0] <= ci[1] <= 1


@pytest.mark.parametrize("case", CASES)
def test_the_micro_f1_ci_of_identical_members_is_their_f1(case):
    row, n = count_rows(case)[0], case % 15 + 1
    f1 = stats.f1(*row)
    ci = stats.micro_f1_ci([row] * n, 11, 200)
    assert ci is None if f1 is None else ci == (pytest.approx(f1), pytest.approx(f1))


def test_f1_and_macro_f1_are_null_never_zero_when_undefined():
    assert stats.f1(0, 0, 0) is None and stats.f1(0, 1, 0) == 0.0 and stats.f1(2, 0, 0) == 1.0
    assert stats.macro_f1([None, None]) is None and stats.macro_f1([]) is None
    assert stats.macro_f1([1.0, None, 0.5]) == 0.75
    assert stats.macro_f1([0.1] * 10) == 0.09999999999999999  # summed in order, as the graph report always had it
    assert stats.summed([]) == (0, 0, 0)


def test_mean_reads_numbers_and_booleans_only():
    assert stats.mean([1, True, None, float("nan"), "x", 0.5]) == pytest.approx(2.5 / 3)
    assert stats.mean([None, "x"]) is None
    assert stats.mean([0.1] * 10) == math.fsum([0.1] * 10) / 10
    assert stats.as_number(False) == 0.0 and stats.as_number(float("nan")) is None


def test_no_members_no_interval():
    assert stats.mean_ci([]) is None and stats.mean_ci([None]) is None
    assert stats.micro_f1_ci(np.zeros((0, 3))) is None
    assert stats.micro_f1_ci([(0, 0, 0), (0, 0, 0)]) is None  # every resample undefined
    assert stats.sign_flip_p([]) is None


@pytest.mark.parametrize("n", [10, 20, 300, 6000])  # exact, Monte Carlo, and the normal approximation
def test_paired_difference_draws_its_sign_patterns_once_for_both_tails(n, monkeypatch):
    d = np.random.default_rng(n).normal(0.01, 0.2, n).round(4).tolist()
    pairs = [(0.0, x) for x in d]
    two_sided = min(1.0, 2 * min(stats.sign_flip_p(d, "less"), stats.sign_flip_p(d, "greater")))
    assert stats._sign_flip_tails(d) == (stats.sign_flip_p(d, "less"), stats.sign_flip_p(d, "greater"))
    drawn = []
    real = np.random.default_rng
    monkeypatch.setattr(stats.np.random, "default_rng", lambda *a: drawn.append(a) or real(*a))
    assert stats.paired_difference(pairs)["p"] == two_sided  # the same bits as the two one-sided calls
    # one stream for the bootstrap CI, and one for the sign flips only where they are drawn (Monte Carlo)
    assert len(drawn) == (2 if stats.EXACT_MAX_N < n < stats.NORMAL_MIN_N else 1)
