"""Truth authoring discipline (docs/authoring.md): provenance as four structured legs, each checked by
`evalkit validate` at its manifest line; the bundled members carry theirs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from corpus_factory import make_corpus, write_yaml
from evalkit.corpus import load_member, load_task, task_dirs
from evalkit.errors import InvalidCorpus
from evalkit.validate import validate_corpus

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
