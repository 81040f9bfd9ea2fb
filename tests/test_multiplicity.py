"""Uncertainty that means what it says after many comparisons and at scale (`evalkit.scoring.stats`):
Holm-adjusted p over a family of rows, p printed as `< 0.001` (never `0.000`), resampling in chunks with the
same bits as one array, and sign flips in O(members) memory (a normal approximation from 5,000 pairs)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from evalkit.scoring import stats
from evalkit.scoring.delta import compare_sides


def test_holm_matches_the_step_down_definition():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, max(0.06, 0.04·1) = 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([None, 0.2, None]) == [None, 0.2, None]  # None is not in the family
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert stats.holm([]) == []


def test_holm_controls_the_family_wise_error_under_the_null():
    # 13 independent null p-values (uniform), 2,000 families: raw p < 0.05 somewhere in ~49%; Holm in ≤ 5% (+MC slack)
    rng = np.random.default_rng(1)
    fam = rng.uniform(size=(2000, 13))
    raw = np.mean((fam < 0.05).any(axis=1))
    adjusted = np.mean([min(stats.holm(list(row))) < 0.05 for row in fam])
    assert raw > 0.4 and adjusted <= 0.06


@pytest.mark.parametrize("p, shown", [(0.0, "< 0.001"), (0.0004, "< 0.001"), (0.00099, "< 0.001"),
                                      (0.001, "0.001"), (0.0123, "0.012"), (1.0, "1.000"), (None, "—")])
def test_a_p_value_below_0_001_never_prints_as_zero(p, shown):
    assert stats.format_p(p) == shown


def _old_bootstrap(x, seed, resamples=stats.RESAMPLES):
    rng = np.random.default_rng(seed)
    figures = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    alpha = (1 - stats.CONFIDENCE) / 2
    return tuple(float(v) for v in np.quantile(figures, [alpha, 1 - alpha]))


def test_chunked_resampling_draws_the_same_resamples_as_one_array(monkeypatch):
    x = np.random.default_rng(3).uniform(size=257)
    # below ~2,000 members one chunk holds every resample: the very bits of before (test_stats pins them)
    assert stats.bootstrap_ci(x, lambda r: r.mean(axis=1), seed=11) == _old_bootstrap(x, 11)
    monkeypatch.setattr(stats, "CHUNK", 1000)  # many small chunks: the same resamples (numpy may sum in
    assert stats.bootstrap_ci(x, lambda r: r.mean(axis=1), seed=11) == pytest.approx(_old_bootstrap(x, 11), abs=1e-12)
    d = list(np.random.default_rng(4).normal(0.01, 0.1, size=40))
    chunked = stats.sign_flip_p(d, "less", 9)
    monkeypatch.setattr(stats, "CHUNK", 1 << 30)
    assert stats.sign_flip_p(d, "less", 9) == chunked


def test_sign_flips_at_100000_members_take_o_n_memory():
    d = np.random.default_rng(5).normal(0.001, 0.1, size=100_000)
    tracemalloc.start()
    p = stats.sign_flip_p(d, "less")
    ci = stats.mean_ci(list(d[:20_000]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert 0 <= p <= 1 and ci[0] < ci[1]
    assert peak < 120 * 2**20, peak  # the old code materialised 20,000 × n flips (16 GB here)
    assert stats.sign_flip_method(100_000).startswith("normal approximation")


def test_the_normal_approximation_agrees_with_monte_carlo_where_they_meet():
    d = np.random.default_rng(6).normal(0.002, 0.1, size=stats.NORMAL_MIN_N)
    normal = stats.sign_flip_p(d, "greater")
    old_min, stats.NORMAL_MIN_N = stats.NORMAL_MIN_N, 10**9
    try:
        mc = stats.sign_flip_p(d, "greater")
    finally:
        stats.NORMAL_MIN_N = old_min
    assert abs(normal - mc) < 0.01


def _side(scores: dict[str, float], fields: dict[str, dict[str, bool]]) -> dict:
    return {m: {"status": "scored", "score": s, "passed": s >= 0.5,
                "items": [{"field": f, "outcome": "match" if ok else "mismatch"} for f, ok in fields[m].items()]}
            for m, s in scores.items()}


def test_compare_sides_keeps_held_out_apart_and_adjusts_every_row_but_the_headline():
    members = [f"m{i}" for i in range(8)]
    a = _side(dict.fromkeys(members, 0.5), {m: {"x": True, "y": True, "z": False} for m in members})
    b = _side({m: (0.9 if m != "m7" else 0.1) for m in members},
              {m: {"x": m != "m7", "y": True, "z": True} for m in members})
    d = compare_sides("t", a, b, "A", "B", heldout={"t/m7"})
    assert d["metrics"][0]["n"] == 7 and d["metrics"][0]["mean"] == pytest.approx(0.4)
    assert "over 7 tuned members" in d["statement"]
    held = d["heldout"]
    assert held["metrics"][0]["n"] == 1 and held["metrics"][0]["mean"] == pytest.approx(-0.4)
    assert "over 1 held-out member" in held["statement"]
    assert d["metrics"][0]["p_adj"] is None  # the primary comparison is not adjusted
    rows = [*d["metrics"][1:], *d["fields"]]
    assert rows and all(r["p_adj"] is not None and r["p_adj"] >= r["p"] for r in rows if r["p"] is not None)
    assert stats.holm([r["p"] for r in rows]) == [r["p_adj"] for r in rows]
    # without held-out members nothing is split and the statement says plain "members"
    plain = compare_sides("t", a, b)
    assert plain["heldout"] is None and "over 8 members" in plain["statement"]
