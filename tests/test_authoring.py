"""Truth authoring discipline (docs/authoring.md): provenance as four structured legs, each checked by
`evalkit validate` at its manifest line; the bundled members carry theirs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from corpus_factory import make_corpus, write_yaml

from evalkit.corpus.tasks import load_member, load_task, task_dirs
from evalkit.errors import InvalidCorpus
from evalkit.stages.validate import validate_corpus

REPO = Path(__file__).resolve().parents[1]


def _set_provenance(corpus: Path, **legs) -> Path:
    manifest = corpus / "memos" / "m0" / "manifest.yaml"
    data = yaml.safe_load(manifest.read_text())
    data["truth_provenance"] = {**data["truth_provenance"], **legs}
    write_yaml(manifest, data)
    return manifest


def _line(path: Path, key: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(key + ":"))


def test_each_leg_that_states_nothing_is_a_problem_at_its_line(tmp_path):
    corpus = make_corpus(tmp_path)
    assert validate_corpus(corpus) == []
    manifest = _set_provenance(corpus, verified_by="TODO", adversarial_pass="none", date="30 Nov 2026")
    problems = validate_corpus(corpus)
    assert problems == [
        f"{manifest}:{_line(manifest, 'verified_by')}: truth_provenance.verified_by is blank or a placeholder "
        "(docs/authoring.md)",
        f"{manifest}:{_line(manifest, 'adversarial_pass')}: truth_provenance.adversarial_pass is blank or a "
        "placeholder (say what the pass found, or 'not done') (docs/authoring.md)",
        f"{manifest}:{_line(manifest, 'date')}: truth_provenance.date '30 Nov 2026' is not a date YYYY-MM-DD "
        "(docs/authoring.md)",
    ]
    _set_provenance(corpus, verified_by="a second reader, against the memo", adversarial_pass="not done",
                    date="2026-02-30")
    assert [p.split(": ", 1)[1] for p in validate_corpus(corpus)] == [
        "truth_provenance.date '2026-02-30' is not a calendar date (docs/authoring.md)"]


def test_free_text_provenance_is_refused_naming_the_legs(tmp_path):
    corpus = make_corpus(tmp_path)
    manifest = corpus / "memos" / "m0" / "manifest.yaml"
    data = yaml.safe_load(manifest.read_text())
    data["truth_provenance"] = {"authored": "2026-11-30", "instrument": "by hand", "verified": "re-read"}
    write_yaml(manifest, data)
    with pytest.raises(InvalidCorpus) as e:
        load_member(load_task(corpus / "memos"), corpus / "memos" / "m0")
    text = "\n".join(e.value.problems)
    assert "truth_provenance.authored_by" in text and "truth_provenance.instrument" in text


def test_every_bundled_member_states_all_four_legs():
    for tdir in task_dirs(REPO / "corpus"):
        task = load_task(tdir)
        for mdir in task.member_dirs():
            prov = load_member(task, mdir).manifest.truth_provenance
            assert prov.problems() == [], mdir
            assert prov.adversarial_pass == "not done" or "refutation" in prov.adversarial_pass, mdir


# ---------------------------------------------------------------- the self-test (docs/corpus-format.md)

def _self_test_corpus(tmp_path: Path, threshold: float = 0.3, declare: dict | None = None) -> Path:
    """m0's truth names an account its document does not state: echoed back, the id is HALLUCINATED (2 of 6)."""
    corpus = make_corpus(tmp_path, members=1)
    task = yaml.safe_load((corpus / "memos" / "task.yaml").read_text())
    write_yaml(corpus / "memos" / "task.yaml", {**task, "threshold": threshold})
    truth = corpus / "memos" / "m0" / "truth.yaml"
    write_yaml(truth, {**yaml.safe_load(truth.read_text()), "record": {"account_id": "ACC-999", "rate": 0.5}})
    if declare is not None:
        manifest = corpus / "memos" / "m0" / "manifest.yaml"
        write_yaml(manifest, {**yaml.safe_load(manifest.read_text()), "self_test": declare})
    return corpus


REASON = "the document's account is redacted; the truth keeps the one the contract names"


def test_a_truth_that_cannot_score_itself_100_percent_must_say_why(tmp_path):
    corpus = _self_test_corpus(tmp_path)
    (problem,) = validate_corpus(corpus)
    assert problem.startswith(f"{corpus / 'memos' / 'm0' / 'manifest.yaml'}:1: memos/m0: self-test: the truth scores "
                              "itself 33.3%, not 100% PASS")
    assert "self_test: {expected, reason}" in problem


def test_a_declared_self_test_is_checked_and_its_reason_printed_by_the_fake_run(tmp_path):
    from corpus_factory import cli

    corpus = _self_test_corpus(tmp_path / "ok", declare={"expected": 0.333, "reason": REASON})
    assert validate_corpus(corpus) == []
    res = cli("sweep", "--corpus", corpus, "--backend", "fake", "--no-notebooks", "--out", tmp_path / "sweep")
    assert res.exit_code == 0, res.output
    assert f"memos/m0 …  33.3% PASS\n      ↳ self-test: the truth scores itself 33.3%, as its manifest declares: " \
           f"{REASON}" in res.output
    wrong = _self_test_corpus(tmp_path / "wrong", declare={"expected": 0.5, "reason": REASON})
    manifest = wrong / "memos" / "m0" / "manifest.yaml"
    assert validate_corpus(wrong) == [
        f"{manifest}:{_line(manifest, 'expected')}: memos/m0: self-test: the truth scores itself 33.3%, but its "
        "manifest declares self_test.expected 0.5 (fix the declaration or the truth)"]
    failing = _self_test_corpus(tmp_path / "fail", threshold=0.9, declare={"expected": 0.333, "reason": REASON})
    (problem,) = validate_corpus(failing)
    assert "scores itself 33.3% FAIL: a declared self_test must still PASS" in problem


def test_every_bundled_member_scores_itself_100_percent_or_declares_why():
    from evalkit.corpus.tasks import DEFAULT_CORPUS

    declared = [m.key for t in task_dirs(DEFAULT_CORPUS) for m in load_task(t).members() if m.manifest.self_test]
    assert declared == ["adventure/jn1-chaotic-caves"]
    assert validate_corpus(DEFAULT_CORPUS, None) == []  # pointer members without sources: skipped
