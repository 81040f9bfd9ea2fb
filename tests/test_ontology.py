"""Ontology modes: loading, mode precedence, prompt injection (only with --ontology), compliance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from servers.fixtures import *  # noqa: F401,F403
from test_judge import TASK, TWO, aliased, cli, dropped, run_graph, truth, write_cassette

from evalkit.backends import BackendSpec
from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.errors import CassetteMiss, CorpusError, UsageError
from evalkit.scoring.ontology import Ontology, aggregate_compliance, compliance, inject, load_ontology, resolve_mode
from evalkit.stages.pipeline import extract_member, render_request

REDOCRED = DEFAULT_CORPUS / "encyclopedia" / "redocred-ontology.yaml"


def small(tmp_path: Path, mode: str | None = None) -> Path:
    path = tmp_path / "onto.yaml"
    head = f"mode: {mode}\n" if mode else ""
    path.write_text(head + "entity_types: [PER, LOC]\nrelation_types: [\"place of birth\", spouse]\n")
    return path


def test_mode_precedence(tmp_path):
    assert load_ontology(None) is None and resolve_mode(None, None) == "freeform"
    assert load_ontology(REDOCRED).mode == "strict"  # the file says strict
    assert load_ontology(REDOCRED, "open").mode == "open"  # the command line overrides the file
    assert load_ontology(small(tmp_path, "open")).mode == "open"
    assert load_ontology(small(tmp_path)).mode == "strict"  # neither: strict
    assert load_ontology(small(tmp_path), "open").mode == "open"
    with pytest.raises(UsageError, match="needs --ontology"):
        load_ontology(None, "strict")
    onto = load_ontology(REDOCRED)
    assert len(onto.relation_types) == 96 and onto.entity_types == ("PER", "ORG", "LOC", "TIME", "NUM", "MISC")


def test_bad_ontology_files(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("entity_types: [PER]\nlabels: [x]\n")
    with pytest.raises(CorpusError, match="unknown key"):
        load_ontology(bad)
    bad.write_text("mode: loose\nentity_types: [PER]\n")
    with pytest.raises(CorpusError, match="mode"):
        load_ontology(bad)
    with pytest.raises(UsageError, match="not found"):
        load_ontology(tmp_path / "nope.yaml")


def test_mode_without_ontology_is_a_usage_error_exit_2(tmp_path):
    res = cli("run", "--task", "encyclopedia", "--only", "copper-wolves", "--backend", "fake",
              "--ontology-mode", "open", "--out", tmp_path / "run")
    assert res.exit_code == 2 and "--ontology-mode needs --ontology" in res.output
    assert not (tmp_path / "run").exists()


def test_default_prompt_is_byte_identical_and_the_vocabulary_is_injected_only_when_given():
    m = TASK.member("copper-wolves")
    doc = read_document(check_integrity(m, None))
    plain = render_request(TASK, m, doc)
    assert plain.user == TASK.spec.prompt.user.replace("{document}", doc.text)
    assert plain.system == TASK.spec.prompt.system and render_request(TASK, m, doc, None) == plain
    assert inject("x", None) == "x"
    strict = render_request(TASK, m, doc, load_ontology(REDOCRED))
    assert strict.user.startswith(plain.user) and strict.system == plain.system and strict.schema == plain.schema
    block = strict.user[len(plain.user):]
    assert "Ontology (strict)" in block and "use only" in block
    assert all(f"- {label}\n" in block + "\n" for label in load_ontology(REDOCRED).relation_types)
    open_ = render_request(TASK, m, doc, load_ontology(REDOCRED, "open")).user[len(plain.user):]
    assert "Ontology (open)" in open_ and "prefer" in open_


def test_compliance_counts_types_and_labels():
    onto = Ontology("strict", ("PER", "LOC"), ("place of birth", "spouse"))
    rec = {"entities": [{"name": "A", "type": "per"}, {"name": "B", "type": "ORG"}, {"name": "C"}, "junk"],
           "relations": [{"head": "A", "relation": "Place of Birth", "tail": "B"},
                         {"head": "A", "relation": "birthplace", "tail": "B"}]}
    c = compliance(rec, onto)
    assert (c["vocabulary_inside"], c["vocabulary_emitted"]) == (2, 4) and c["vocabulary_compliance"] == 0.5
    assert c["outside"] == {"relation:birthplace": 1, "type:ORG": 1}
    assert compliance(None, onto)["vocabulary_compliance"] is None  # nothing emitted: null, not 0
    agg = aggregate_compliance([c, compliance({"entities": [{"name": "x", "type": "LOC"}]}, onto)])
    assert agg["vocabulary_compliance"] == 3 / 5 and agg["members"] == 2


def test_strict_run_records_the_mode_and_a_compliance_figure_per_member(tmp_path):
    onto = load_ontology(REDOCRED)
    a = write_cassette(tmp_path / "c" / "alpha.jsonl", "alpha-model", aliased, ontology=onto)
    b = write_cassette(tmp_path / "c" / "beta.jsonl", "beta-model", dropped, ontology=onto)
    backends = [("alpha", f"cassette:path={a}"), ("beta", f"cassette:path={b}")]
    out = tmp_path / "runs" / "strict"
    result = run_graph(out, backends, ontology=REDOCRED)
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["ontology_mode"] == "strict" and run_json["ontology"]["sha256"] == onto.sha256
    for o in result.outcomes:
        rec = json.loads((out / "encyclopedia" / o.member / o.backend / "extraction.json").read_text())
        assert rec["ontology"]["mode"] == "strict"
        assert o.metrics["vocabulary_compliance"] == compliance(rec["record"], onto)["vocabulary_compliance"]
        assert o.metrics["vocabulary_compliance"] is not None
    # The notebooks' extract step reuses an extraction made under the ontology (it renders the same
    # request from extraction.json's ontology block), instead of asking the cassette for the plain prompt.
    home = out / "encyclopedia" / "copper-wolves" / "alpha"
    before = (home / "extraction.json").read_bytes()
    spec = json.loads(before)["backend"]["spec"]  # what the runner hands extract.ipynb
    again = extract_member("encyclopedia", "copper-wolves", BackendSpec.parse(spec, label="alpha"), DEFAULT_CORPUS,
                           None, home)
    assert again.ontology["mode"] == "strict" and (home / "extraction.json").read_bytes() == before
    # the injected prompt is a different request: the freeform run misses these cassettes
    with pytest.raises(CassetteMiss):
        run_graph(tmp_path / "runs" / "plain", backends, strict_replay=True)
    # and a freeform run records ontology_mode freeform, with no compliance figure
    c = write_cassette(tmp_path / "c" / "plain.jsonl", "m", dropped)
    res = run_graph(tmp_path / "runs" / "free", [("p", f"cassette:path={c}")])
    assert json.loads((tmp_path / "runs" / "free" / "run.json").read_text())["ontology_mode"] == "freeform"
    assert all("vocabulary_compliance" not in o.metrics for o in res.outcomes)


def test_open_mode_has_no_compliance_figure(tmp_path):
    onto = load_ontology(REDOCRED, "open")
    a = write_cassette(tmp_path / "c" / "a.jsonl", "m", lambda r, m: truth(m), members=TWO[:1], ontology=onto)
    out = tmp_path / "runs" / "open"
    res = run_graph(out, [("a", f"cassette:path={a}")], members=TWO[:1], ontology=REDOCRED, ontology_mode="open")
    assert json.loads((out / "run.json").read_text())["ontology_mode"] == "open"
    assert "vocabulary_compliance" not in res.outcomes[0].metrics
    score = json.loads((out / "encyclopedia" / TWO[0] / "a" / "score.json").read_text())
    assert score["details"]["ontology_mode"] == "open"
