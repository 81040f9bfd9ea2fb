"""compare.ipynb's figures, and the Done-when run: `evalkit run` on two cassette backends, then `evalkit compare`."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from servers.fixtures import *  # noqa: F401,F403
from test_judge import cli, evalkit, python_judge, run_graph, two_cassettes

from evalkit.compare import sides
from evalkit.report import chrome
from evalkit.scoring import stats


def test_bootstrap_ci_is_seeded_and_brackets_the_micro_f1():
    counts = np.array([[8, 2, 1], [3, 0, 4], [5, 5, 0], [9, 1, 1]], dtype=float)
    f1 = stats.micro_f1(counts)
    assert f1 == pytest.approx(2 * 25 / (2 * 25 + 8 + 6))
    lo, hi = stats.micro_f1_ci(counts, resamples=500, seed=7)
    assert (lo, hi) == stats.micro_f1_ci(counts, resamples=500, seed=7)  # same seed, same interval
    assert lo <= f1 <= hi and lo < hi
    assert stats.micro_f1_ci(np.array([[2, 0, 0]], dtype=float)) == (1.0, 1.0)
    assert stats.micro_f1_ci(np.zeros((0, 3))) is None
    assert stats.micro_f1(np.zeros((2, 3))) is None


def test_figures_from_a_judged_run(tmp_path):
    out = tmp_path / "runs" / "both"
    run_graph(out, two_cassettes(tmp_path), judge=python_judge(tmp_path), judge_mode="both")
    c = sides.load(out, "encyclopedia")
    assert c.backends == ["alpha", "beta"] and c.judge_mode == "both" and c.ontology_mode == "freeform"
    f1 = {(r["backend"], r["axis"], r["kind"]): r for r in sides.f1_figures(c, n_boot=200)}
    assert f1[("alpha", "relations", "judged")]["f1"] == 1.0 > f1[("alpha", "relations", "strict")]["f1"]
    assert f1[("alpha", "relations", "strict")]["members"] == 2
    calls = {r["backend"]: r for r in sides.calls_figures(c)}
    assert calls["alpha"]["calls"] == 2 and calls["alpha"]["parse_ok"] == 2 and calls["alpha"]["error_rate"] == 0
    assert calls["alpha"]["latency_p50"] is not None and calls["alpha"]["input_tokens"] == 1800
    matrix = sides.win_rate_matrix(c)
    cell = matrix[(matrix.axis == "relations") & (matrix.backend == "alpha")].iloc[0]
    mirror = matrix[(matrix.axis == "relations") & (matrix.backend == "beta")].iloc[0]
    assert cell.win_rate == 1.0 and mirror.win_rate == 0.0 and cell.label == "100%" and not cell.flagged
    assert not sides.disagreements(c).empty  # alpha wins on entities although its strict F1 is lower
    assert set(sides.judge_accepted(c)["backend"]) == {"alpha"}
    # only some backends; a run without a judge has null judged figures and no matrix
    assert sides.load(out, "encyclopedia", ["beta"]).backends == ["beta"]
    plain = tmp_path / "runs" / "plain"
    run_graph(plain, two_cassettes(tmp_path))
    c = sides.load(plain, "encyclopedia")
    assert all(r["f1"] is None for r in sides.f1_figures(c, n_boot=50) if r["kind"] == "judged")
    assert sides.win_rate_chart(c) is None and sides.pairwise_table(c).empty


def test_order_inconsistency_is_marked_in_the_matrix(tmp_path):
    out = tmp_path / "runs" / "biased"
    run_graph(out, two_cassettes(tmp_path), judge=python_judge(tmp_path, "biased"), judge_mode="pairwise")
    matrix = sides.win_rate_matrix(sides.load(out, "encyclopedia"))
    rel = matrix[matrix.axis == "relations"]
    assert rel.flagged.all() and set(rel.label) == {"— *"}


def test_compare_usage_errors(tmp_path):
    res = cli("compare", tmp_path / "nope")
    assert res.exit_code == 2 and "run folder not found" in res.output
    (tmp_path / "run").mkdir()
    res = cli("compare", tmp_path / "run", "--judge", "anthropic")
    assert res.exit_code == 2 and "add --backend" in res.output


def test_done_when_run_two_cassette_backends_offline_then_compare_renders_the_win_rate_matrix(tmp_path):
    backends = two_cassettes(tmp_path)
    run_dir = tmp_path / "runs" / "enc"
    args = ["run", "--task", "encyclopedia", "--only", "copper-wolves", "--only", "orla-fenwick", "--out", run_dir,
            "--no-html", "--workers", "2", "--judge", python_judge(tmp_path), "--judge-mode", "both"]
    for label, spec in backends:
        args += ["--backend", f"{label}={spec}"]
    proc = evalkit(*args, env={"EVALKIT_RECORD_LLM": "", "EVALKIT_REPLAY_LLM": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "win rate 100.0% for alpha" in proc.stderr  # the stderr note; the data stay pure
    score = json.loads((run_dir / "encyclopedia" / "orla-fenwick" / "alpha" / "score.json").read_text())
    assert score["metrics"]["judged_relations_f1"] == 1.0  # score.ipynb read judgments.json

    proc = evalkit("compare", run_dir, "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nb_path, html_path = run_dir / "encyclopedia" / "compare.ipynb", run_dir / "encyclopedia" / "compare.html"
    assert f"Comparison: {html_path}" in proc.stdout
    # the headline in the terminal too: each backend's passed/N and mean, then the paired statement
    assert re.search(r"^  alpha: \d+/2 passed · 0 errors · mean \S+ ", proc.stdout, re.M), proc.stdout
    assert re.search(r"^  beta − alpha = [+−]\d\.\d{3}", proc.stdout, re.M), proc.stdout
    nb = json.loads(nb_path.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    charts = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
    assert len(charts) == 2 and all("image/png" in ch["data"] for ch in charts)  # paired chart, win rates: static
    html = html_path.read_text()
    assert "Win rate of the row backend" in html and "<svg" in html
    assert "vega-embed" not in html and re.findall(r"<script\b[^>]*>", html) == ["<script>"]  # evalkit's own only
    assert f"<script>{chrome.script()}</script>" in html
    for text in ("alpha", "beta", "judge vs strict", "U.S.", "beta − alpha = ", "F1 per relation type"):
        assert text in html, text
    # the long item table comes after the summary tables (F1, calls), not before them
    assert html.index("F1 per relation type") < html.index("Items whose outcome changed")
    assert "p (Holm)" in html and "resample members" in html
