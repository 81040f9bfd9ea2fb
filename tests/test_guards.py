"""Guards as the source harness has them (issue 12.7): `band` refuses sweeps that are not repeats of one
baseline; a cassette covering some members scores those and lists the rest as `not covered`; `--dry-run`
exits 0 unless `--strict`; the EVALKIT_RECORD_LLM + EVALKIT_REPLAY_LLM conflict is one startup check
(exit 2 in every command); two fresh recordings with byte-identical answers are an error naming both labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_factory import cli, make_corpus, specs

from evalkit.backends import Completion
from evalkit.backends.cassette import make_record
from evalkit.board.sweep import sweep
from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.tasks import load_task
from evalkit.errors import EXIT_CASSETTE, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from evalkit.results.runfolder import RUN_JSON, scan
from evalkit.stages.pipeline import render_request
from evalkit.stages.runner import RunOptions, run
from evalkit.status import NOT_COVERED, SCORED

MODEL = "toy-model"


@pytest.fixture(autouse=True)
def _no_cassette_env(monkeypatch):
    monkeypatch.delenv("EVALKIT_RECORD_LLM", raising=False)
    monkeypatch.delenv("EVALKIT_REPLAY_LLM", raising=False)


def cassette(corpus: Path, path: Path, members: list[str], wrong: tuple[str, ...] = ()) -> Path:
    """A cassette recorded for `members` only (a member in `wrong` got a wrong rate)."""
    task = load_task(corpus / "memos")
    lines = []
    for m in members:
        member = task.member(m)
        request = render_request(task, member, read_document(check_integrity(member, None)))
        i = int(m[1:])
        record = {"account_id": f"ACC-{i:03d}", "rate": float(f"0.{i + 5}")}  # make_corpus's truth
        if m in wrong:
            record["rate"] = 0.01
        completion = Completion(record=record, raw=json.dumps(record), model=MODEL)
        lines.append(json.dumps(make_record(request, MODEL, "openai", completion), sort_keys=True))
    path.write_text("\n".join(lines) + "\n")
    return path


def replay(path: Path) -> list:
    return specs(f"toy=cassette:path={path},model={MODEL}")


# ------------------------------------------------------------------------------------------ not covered


def test_a_cassette_covering_some_members_scores_those_and_lists_the_rest(tmp_path):
    corpus = make_corpus(tmp_path, members=4)
    cas = cassette(corpus, tmp_path / "part.jsonl", ["m0", "m2"])
    res = cli("run", "--corpus", corpus, "--backend", f"toy=cassette:path={cas},model={MODEL}",
              "--out", tmp_path / "r", "--no-html")
    assert res.exit_code == EXIT_OK, res.output  # the covered members passed: not 6
    assert "m1 … NOT COVERED" in res.output and "m3 … NOT COVERED" in res.output
    assert "↳ not_covered: no recording of this request" in res.output and "2 not covered" in res.output
    assert "m0 … 100.0% PASS" in res.output and "mean score 100.0%" in res.output
    assert sorted(s.member for s in scan(tmp_path / "r")) == ["m0", "m2"]  # nothing written for the others
    assert json.loads((tmp_path / "r" / RUN_JSON).read_text())["not_covered"] == ["memos/m1 [toy]", "memos/m3 [toy]"]

    # The verdicts of the covered ones decide the exit code.
    bad = cassette(corpus, tmp_path / "bad.jsonl", ["m0"], wrong=("m0",))
    result = run(RunOptions(corpus=corpus, backends=replay(bad), out=tmp_path / "b", notebooks=False))
    assert [o.status for o in result.outcomes] == [SCORED, NOT_COVERED, NOT_COVERED, NOT_COVERED]
    assert result.exit_code == EXIT_FAILED


def test_strict_replay_and_a_cassette_covering_nothing_exit_6(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    cas = cassette(corpus, tmp_path / "part.jsonl", ["m0"])
    res = cli("run", "--corpus", corpus, "--backend", f"toy=cassette:path={cas},model={MODEL}", "--strict-replay",
              "--out", tmp_path / "r", "--no-html")
    assert res.exit_code == EXIT_CASSETTE and "2 request(s) not in" in res.output
    assert not (tmp_path / "r").exists()  # refused before any call
    result = run(RunOptions(corpus=corpus, backends=replay(cas), out=tmp_path / "n", notebooks=False,
                            only=["m1", "m2"]))  # none of these is covered
    assert {o.status for o in result.outcomes} == {NOT_COVERED} and result.exit_code == EXIT_CASSETTE


def test_a_sweep_with_a_partial_cassette_scores_what_it_covers(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    cas = cassette(corpus, tmp_path / "part.jsonl", ["m0", "m1"])
    result = sweep(RunOptions(corpus=corpus, backends=replay(cas), out=tmp_path / "sw", notebooks=False, workers=2))
    assert {m.member: m.outcomes[0].status for m in result.members} == {"m0": SCORED, "m1": SCORED, "m2": NOT_COVERED}
    assert result.failures == [] and result.exit_code == EXIT_OK
    strict = sweep(RunOptions(corpus=corpus, backends=replay(cas), out=tmp_path / "st", notebooks=False, workers=2,
                              strict_replay=True))
    assert strict.exit_code == EXIT_CASSETTE and [m.member for m in strict.members if m.status == "failed"] == ["m2"]


# ------------------------------------------------------------------------------------------ dry run


def test_dry_run_prints_the_plan_and_exits_0_unless_strict(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    missing = f"toy=cassette:path={tmp_path / 'nope.jsonl'},model={MODEL}"
    res = cli("run", "--corpus", corpus, "--backend", missing, "--dry-run", "--out", tmp_path / "r")
    assert res.exit_code == EXIT_OK and "dry run: no calls made" in res.output and "a real run would abort" in res.output
    res = cli("run", "--corpus", corpus, "--backend", missing, "--dry-run", "--strict", "--out", tmp_path / "r")
    assert res.exit_code == EXIT_CASSETTE and "a real run would abort" in res.output
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------------------ environment


@pytest.mark.parametrize("command", [["run", "--backend", "fake"], ["sweep", "--backend", "fake", "--no-notebooks"],
                                     ["validate"]])
def test_record_and_replay_variables_both_set_is_exit_2_in_every_command(tmp_path, monkeypatch, command):
    corpus = make_corpus(tmp_path, members=1)
    monkeypatch.setenv("EVALKIT_RECORD_LLM", str(tmp_path / "a.jsonl"))
    monkeypatch.setenv("EVALKIT_REPLAY_LLM", str(tmp_path / "b.jsonl"))
    res = cli(*command, "--corpus", corpus, *(["--out", tmp_path / "o"] if command[0] != "validate" else []))
    assert res.exit_code == EXIT_USAGE, res.output
    assert "EVALKIT_RECORD_LLM and EVALKIT_REPLAY_LLM are both set" in res.output
    assert not (tmp_path / "o").exists()


def test_the_sweep_library_refuses_the_conflict_before_any_member(tmp_path, monkeypatch):
    from evalkit.errors import UsageError

    corpus = make_corpus(tmp_path, members=2)
    monkeypatch.setenv("EVALKIT_RECORD_LLM", "a.jsonl")
    monkeypatch.setenv("EVALKIT_REPLAY_LLM", "b.jsonl")
    with pytest.raises(UsageError, match="both set"):
        sweep(RunOptions(corpus=corpus, backends=specs("fake"), out=tmp_path / "sw", notebooks=False))
    assert not (tmp_path / "sw").exists()


# ------------------------------------------------------------------------------------------ recordings

PIPELINE = '''
import json
def extract(document, task):
    acc = document.split()[1]
    return {"account_id": acc, "rate": float(document.split()[-1].rstrip("."))}
def other(document, task):
    return {"account_id": None, "rate": 0.0}
'''


def test_two_fresh_recordings_with_identical_answers_are_an_error_naming_both(tmp_path):
    corpus = make_corpus(tmp_path, members=2)
    pipe = tmp_path / "pipe.py"
    pipe.write_text(PIPELINE)
    args = ["run", "--corpus", corpus, "--no-html", "--backend", f"a=python:{pipe}:extract",
            "--record", f"a={tmp_path / 'a.jsonl'}", "--record", f"b={tmp_path / 'b.jsonl'}"]
    res = cli(*args, "--backend", f"b=python:{pipe}:extract", "--out", tmp_path / "r")
    assert res.exit_code == EXIT_CASSETTE, res.output
    assert "backends a and b recorded byte-identical answers" in res.output
    assert len(scan(tmp_path / "r")) == 4  # the run is kept
    for f in ("a.jsonl", "b.jsonl"):
        (tmp_path / f).unlink()
    res = cli(*args, "--backend", f"b=python:{pipe}:other", "--out", tmp_path / "s")
    assert res.exit_code == EXIT_FAILED, res.output  # b's answers are wrong, but they are b's own
    assert "byte-identical" not in res.output


# ------------------------------------------------------------------------------------------ band


def test_band_refuses_sweeps_that_are_not_repeats_of_one_baseline(tmp_path):
    corpus = make_corpus(tmp_path, members=4)
    preds = tmp_path / "preds"
    preds.mkdir()
    for i in range(4):
        (preds / f"m{i}.json").write_text("{}")  # an empty-predictions sweep

    def swept(name, **kw):
        opts = RunOptions(corpus=corpus, backends=kw.pop("backends", specs("b=fake")), out=tmp_path / name,
                          notebooks=False, **kw)
        assert sweep(opts).outcomes
        return tmp_path / name

    base, again = swept("s1"), swept("s2")
    fewer = swept("s3", limit=2)
    warmer = swept("s4", settings={"temperature": 0.5})
    empty = swept("s5", backends=specs(f"b=predictions:dir={preds}"))

    def band(other):
        return cli("band", "--corpus", corpus, "--from-run", base, "--from-run", other, "--out", tmp_path / "band.json")

    same = band(again)  # the same baseline, but fake answers never vary: repeats, yet no noise to measure
    assert same.exit_code == EXIT_USAGE and "hold byte-identical answers" in same.output, same.output
    for other, says in ((fewer, "member set: only in the first: memos/m2, memos/m3"),
                        (warmer, 'settings: only in the first: {}; only in the other: {"temperature": 0.5}'),
                        (empty, "model: only in the first: fake; only in the other: predictions")):
        res = band(other)
        assert res.exit_code == EXIT_USAGE and "not repeats of one baseline" in res.output and says in res.output, \
            res.output
