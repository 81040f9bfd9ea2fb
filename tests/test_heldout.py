"""Held-out members (issue 12.5): scored like the rest, every corpus mean, band and check reported twice —
tuned members and held-out members — and `check` gates both."""

from __future__ import annotations

import json

from corpus_factory import cli, make_corpus, specs

from evalkit.board.regress import compare
from evalkit.board.sweep import sweep
from evalkit.corpus.tasks import DEFAULT_CORPUS, HELDOUT, TUNED, heldout_keys, load_tasks
from evalkit.errors import EXIT_FAILED
from evalkit.results.band import Band, compute_band, render_markdown
from evalkit.stages.runner import RunOptions


def hold_out(corpus, *members):
    for m in members:
        manifest = corpus / "memos" / m / "manifest.yaml"
        manifest.write_text(manifest.read_text() + "heldout: true\n")


def test_every_bundled_task_has_a_held_out_member():
    keys = heldout_keys(DEFAULT_CORPUS)
    assert {k.split("/")[0] for k in keys} == {t.id for t in load_tasks(DEFAULT_CORPUS)}


def test_check_gates_the_held_out_members_apart_from_the_tuned_ones():
    standing = {"t": {"b": {f"m{i}": {"score": 1.0} for i in range(8)}}}
    new = {"t": {"b": {f"m{i}": {"score": 1.0 if i < 7 else 0.7} for i in range(8)}}}  # the held-out one drops
    band = Band.from_json({"tasks": {"t": {"metrics": {"score": {"band": 0.05}}}}}, "band.json")
    pooled = compare(standing, new, band)
    assert pooled.regressions == []  # diluted over 8 members: a drop of 0.0375, inside the band
    split = compare(standing, new, band, heldout={"t/m7"})
    (reg,) = split.regressions  # judged by the tuned band, as band.json has no held-out block
    assert (reg.group, reg.members, round(reg.new, 3), reg.band) == (HELDOUT, 1, 0.7, 0.05)
    assert "t (held-out) [b] score" in reg.line()
    own = Band.from_json({"tasks": {"t": {"metrics": {"score": {"band": 0.05}},
                                          "heldout": {"metrics": {"score": {"band": 0.4}}}}}}, "band.json")
    assert compare(standing, new, own, heldout={"t/m7"}).regressions == []  # its own, wider band
    assert [(c.group, c.kind) for c in split.changes] == [(TUNED, "within"), (HELDOUT, "regression")]


def test_band_and_run_summary_report_held_out_members_apart(tmp_path):
    corpus = make_corpus(tmp_path, members=4)
    hold_out(corpus, "m3")
    roots = []
    for i in range(2):  # two samples: the second answers m0's rate 0.0001 off (inside the tolerance)
        answers = tmp_path / f"answers{i}"
        answers.mkdir()
        for j in range(4):
            rate = float(f"0.{j + 5}") + (0.0001 if i and not j else 0.0)
            (answers / f"m{j}.json").write_text(json.dumps({"account_id": f"ACC-{j:03d}", "rate": rate}))
        roots.append(tmp_path / f"s{i}")
        sweep(RunOptions(corpus=corpus, backends=specs(f"b=predictions:dir={answers}"), out=roots[-1],
                         notebooks=False))
    band = compute_band(roots, heldout=heldout_keys(corpus), allow_predictions=True)
    task = band["tasks"]["memos"]
    assert task["members"] == 3 and task["heldout"]["members"] == 1
    assert task["heldout"]["metrics"]["score"]["n"] == 1 and task["metrics"]["score"]["n"] == 3
    assert "| `memos` (held-out) | `score` |" in render_markdown(band)

    res = cli("run", "--corpus", corpus, "--backend", "fake", "--out", tmp_path / "r", "--no-html")
    assert res.exit_code == 0, res.output
    # the tuned mean over the 3 tuned members, the held-out one apart
    assert "fake: 4/4 passed · mean score 100.0% [100.0%, 100.0%] over 3 scored · held out 1: mean 100.0%" in res.output


def test_check_fails_on_a_held_out_regression_the_pooled_mean_hides(tmp_path):
    corpus = make_corpus(tmp_path, members=8)
    hold_out(corpus, "m7")
    res = cli("run", "--corpus", corpus, "--backend", "b=fake", "--out", tmp_path / "base", "--no-html",
              "--update-scoreboard")
    assert res.exit_code == 0, res.output
    preds = tmp_path / "preds"
    preds.mkdir()
    for i in range(8):  # the same records, except the held-out member loses its rate
        rec = {"account_id": f"ACC-{i:03d}", "rate": float(f"0.{i + 5}") if i < 7 else None}
        (preds / f"m{i}.json").write_text(json.dumps(rec))
    run = cli("run", "--corpus", corpus, "--backend", f"b=predictions:dir={preds}", "--out", tmp_path / "new",
              "--no-html")
    assert run.exit_code in (0, 1), run.output
    res = cli("check", tmp_path / "new", "--corpus", corpus)
    assert res.exit_code == EXIT_FAILED, res.output
    assert "REGRESSION memos (held-out) [b] score" in res.output
    assert "REGRESSION memos [b]" not in res.output  # the tuned members held steady
