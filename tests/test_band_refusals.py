"""`evalkit band` refuses inputs that would make a band hide any regression (issue 25.2): the same folder
twice, two sweeps with byte-identical answers, `predictions:` sweeps unless allowed; and band.json reports
each metric's per-member SD across sweeps (`member_sd`)."""

from __future__ import annotations

import json
import math

import pytest
from corpus_factory import cli, make_corpus, specs

from evalkit.board.sweep import sweep
from evalkit.errors import EXIT_OK, EXIT_USAGE, UsageError
from evalkit.results.band import compute_band, member_sd
from evalkit.stages.runner import RunOptions


def preds(root, name, rates):
    """A predictions folder: member m<i> answers its account and `rates[i]`."""
    d = root / name
    d.mkdir()
    for i, rate in enumerate(rates):
        (d / f"m{i}.json").write_text(json.dumps({"account_id": f"ACC-{i:03d}", "rate": rate}))
    return d


@pytest.fixture
def world(tmp_path):
    corpus = make_corpus(tmp_path, members=4)

    def swept(name, spec):
        sweep(RunOptions(corpus=corpus, backends=specs(spec), out=tmp_path / name, notebooks=False))
        return tmp_path / name

    right = [0.5, 0.6, 0.7, 0.8]
    return {
        "corpus": corpus, "tmp": tmp_path,
        "fake1": swept("fake1", "b=fake"), "fake2": swept("fake2", "b=fake"),
        # two "samples": the second gets m1's rate wrong and m3's account wrong
        "p1": swept("p1", f"b=predictions:dir={preds(tmp_path, 'd1', right)}"),
        "p2": swept("p2", f"b=predictions:dir={preds(tmp_path, 'd2', [0.5, 0.9, 0.7, 0.8])}"),
    }


def band(world, *runs, extra=()):
    args = [a for r in runs for a in ("--from-run", r)]
    return cli("band", "--corpus", world["corpus"], *args, "--out", world["tmp"] / "band.json", *extra)


def test_the_same_folder_twice_is_refused_even_spelled_differently(world):
    other = world["fake1"] / ".." / world["fake1"].name
    res = band(world, world["fake1"], other)
    assert res.exit_code == EXIT_USAGE, res.output
    assert "is given twice" in res.output and str(world["fake1"]) in res.output
    assert not (world["tmp"] / "band.json").exists()


def test_byte_identical_answers_are_refused_naming_both_sweeps(world):
    res = band(world, world["fake1"], world["fake2"])
    assert res.exit_code == EXIT_USAGE, res.output
    line = res.output.strip().splitlines()[-1]
    assert f"sweeps {world['fake1']} and {world['fake2']} hold byte-identical answers" in line
    assert "independent samples (temperature > 0 or independent recordings)" in line
    with pytest.raises(UsageError, match="byte-identical"):  # the library refuses too, not only the command
        compute_band([world["fake1"], world["fake2"]])


def test_predictions_sweeps_are_refused_unless_allowed(world):
    res = band(world, world["p1"], world["p2"])
    assert res.exit_code == EXIT_USAGE and "predictions: answers" in res.output and "--allow-predictions" in res.output
    res = band(world, world["p1"], world["p2"], extra=["--allow-predictions"])
    assert res.exit_code == EXIT_OK, res.output
    # allowed, identical predictions are still no noise
    same = world["tmp"] / "p1b"
    sweep(RunOptions(corpus=world["corpus"], backends=specs(f"b=predictions:dir={world['tmp'] / 'd1'}"), out=same,
                     notebooks=False))
    res = band(world, world["p1"], same, extra=["--allow-predictions"])
    assert res.exit_code == EXIT_USAGE and "byte-identical" in res.output


def test_member_sd_is_the_mean_over_members_of_the_sd_across_sweeps(world):
    b = compute_band([world["p1"], world["p2"]], allow_predictions=True)
    score = b["tasks"]["memos"]["metrics"]["score"]
    # m1 scores 1 then 0.5 (rate wrong: 2 of 4 weight), m3 scores 1 then 0 (the identifier is wrong: the gate
    # fails); m0, m2 do not move. SD of two values is |a − b| / √2.
    per = json.loads((world["p2"] / "members" / "memos" / "m3" / "memos" / "m3" / "b" / "score.json").read_text())
    m3 = per["metrics"]["score"]
    m1 = json.loads((world["p2"] / "members" / "memos" / "m1" / "memos" / "m1" / "b" / "score.json").read_text()
                    )["metrics"]["score"]
    want = ((1 - m1) / math.sqrt(2) + (1 - m3) / math.sqrt(2)) / 4
    assert want > 0 and score["member_sd"] == round(want, 6)
    assert member_sd([{"a": {"x": 1.0}}, {"a": {"x": 0.0}}, {"a": {"x": 0.5}}], ["a"], "x") == 0.5
    assert member_sd([{"a": {"x": 1.0}}], ["a"], "x") is None  # one sweep: no SD
