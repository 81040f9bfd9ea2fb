"""--limit / --sample / --seed (which members) and --set KEY=VALUE (task settings), in `run` and `sweep` (issue 12.6)."""

from __future__ import annotations

import json

import pytest
from corpus_factory import TASK, cli, make_corpus, specs, write_yaml

from evalkit._util.jsonio import read_json
from evalkit.board.sweep import sweep
from evalkit.corpus.specs import Settings, parse_settings
from evalkit.errors import UsageError
from evalkit.results.runfolder import RUN_JSON, SWEEP_JSON, scan
from evalkit.results.scoreboard import load_board
from evalkit.stages.runner import RunOptions, run


def members_of(run_dir):
    return sorted(s.member for s in scan(run_dir))


def test_parse_settings_types_values_and_refuses_unknown_keys():
    assert parse_settings(["temperature=0.5", "max_tokens=512"]) == {"temperature": 0.5, "max_tokens": 512}
    with pytest.raises(UsageError, match="top_p: not a task setting .*max_tokens, temperature"):
        parse_settings(["top_p=0.9"])
    with pytest.raises(UsageError, match="temperature=warm"):
        parse_settings(["temperature=warm"])
    with pytest.raises(UsageError, match="max_tokens=0"):
        parse_settings(["max_tokens=0"])
    with pytest.raises(UsageError, match="expected KEY=VALUE"):
        parse_settings(["temperature"])
    assert Settings(max_tokens=2048).with_overrides({"temperature": 0.5}).non_default() == \
        {"max_tokens": 2048, "temperature": 0.5}


def test_limit_set_run_records_the_override_in_run_json_and_every_run_block(tmp_path):
    corpus = make_corpus(tmp_path, members=5)
    out = tmp_path / "r"
    res = cli("run", "--corpus", corpus, "--limit", 3, "--set", "temperature=0.5", "--backend", "fake",
              "--out", out, "--no-html", "--update-scoreboard")
    assert res.exit_code == 0, res.output
    assert members_of(out) == ["m0", "m1", "m2"]  # the first three, in id order
    params = read_json(out / RUN_JSON)["parameters"]
    assert params["limit"] == 3 and params["settings"] == {"temperature": 0.5}
    for s in scan(out):
        assert s.score().run.settings == {"temperature": 0.5}
        assert s.extraction().run.settings == {"temperature": 0.5}
    board = load_board(corpus / "scoreboard.json")
    assert {m: e["fake"]["settings"] for m, e in board["tasks"]["memos"].items()} == \
        {f"m{i}": {"temperature": 0.5} for i in range(3)}


def test_task_settings_are_non_default_too_and_the_override_replaces_them(tmp_path):
    corpus = make_corpus(tmp_path, members=1)
    write_yaml(corpus / "memos" / "task.yaml", {**TASK, "settings": {"max_tokens": 2048}})
    plain = run(RunOptions(corpus=corpus, backends=specs("fake"), out=tmp_path / "a", notebooks=False))
    assert scan(plain.run_dir)[0].score().run.settings == {"max_tokens": 2048}
    over = run(RunOptions(corpus=corpus, backends=specs("fake"), out=tmp_path / "b", notebooks=False,
                          settings={"max_tokens": 1024}))  # back to evalkit's default: nothing non-default left
    assert scan(over.run_dir)[0].score().run.settings == {}


def test_sample_is_seeded_recorded_and_differs_by_seed(tmp_path):
    corpus = make_corpus(tmp_path, members=8)
    picks = {}
    for i, seed in enumerate((1, 1, 2)):
        out = tmp_path / f"s{i}"
        run(RunOptions(corpus=corpus, backends=specs("fake"), out=out, notebooks=False, sample=3, seed=seed))
        picks.setdefault(seed, []).append(members_of(out))
        params = read_json(out / RUN_JSON)["parameters"]
        assert (params["sample"], params["seed"], params["limit"]) == (3, seed, None)
    assert picks[1][0] == picks[1][1] and len(picks[1][0]) == 3  # same seed, same members
    assert picks[2][0] != picks[1][0]  # another seed, another draw (these two seeds happen to differ)


def test_scope_and_set_mistakes_are_usage_errors(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    for args, says in ((["--limit", 1, "--sample", 1], "not both"), (["--seed", 3], "--seed S goes with --sample"),
                       (["--set", "top_p=1"], "not a task setting")):
        res = cli("run", "--corpus", corpus, *args, "--backend", "fake", "--out", tmp_path / "x", "--no-html")
        assert res.exit_code == 2 and says in res.output, res.output
        assert not (tmp_path / "x").exists()
    res = cli("sweep", "--corpus", corpus, "--set", "top_p=1", "--backend", "fake", "--out", tmp_path / "y")
    assert res.exit_code == 2 and "not a task setting" in res.output


def test_sweep_takes_the_same_scope_and_a_settings_change_is_not_current(tmp_path):
    corpus = make_corpus(tmp_path, members=4)
    out = tmp_path / "sw"
    opts = RunOptions(corpus=corpus, backends=specs("fake"), out=out, notebooks=False, limit=2,
                      settings={"temperature": 0.5})
    first = sweep(opts)
    assert [m.member for m in first.members] == ["m0", "m1"] and first.exit_code == 0
    data = read_json(out / SWEEP_JSON)
    assert data["limit"] == 2 and data["settings"] == {"temperature": 0.5}
    assert all(s.score().run.settings == {"temperature": 0.5} for s in scan(out))
    assert [m.status for m in sweep(opts).members] == ["current", "current"]
    opts.settings = {"temperature": 0.7}
    assert [m.status for m in sweep(opts).members] == ["ran", "ran"]
    assert json.dumps(sorted({s.score().run.settings["temperature"] for s in scan(out)})) == "[0.7]"
