"""The `encyclopedia` task: task.yaml, the hand-written members and their traps, the
Re-DocRED importer (determinism, pins, no copied text), the ontology file, and the
self-test (the truth echoed back scores 1.0 on every member).

Tests marked `needs_sources` need the Re-DocRED data folder: $EVALKIT_SOURCES, or the
repo's ../shared/data; they are skipped with the reason when it is absent.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.specs import Manifest
from evalkit.corpus.tasks import load_task
from evalkit.scoring import ScoreContext
from evalkit.scoring.graph import GraphTruth
from evalkit.scoring.text import fold, normalize
from evalkit.stages.validate import validate_corpus

REPO = Path(__file__).resolve().parent.parent
TASK_DIR = REPO / "corpus" / "encyclopedia"
TOOL = REPO / "tools" / "import_redocred.py"
SOURCES = Path(os.environ.get("EVALKIT_SOURCES") or REPO.parent / "shared" / "data")
REDOCRED = SOURCES / "redocred"
TYPES = ["PER", "ORG", "LOC", "TIME", "NUM", "MISC"]

needs_sources = pytest.mark.skipif(
    not (REDOCRED / "index.jsonl").is_file(),
    reason=f"Re-DocRED data not found at {REDOCRED} (set EVALKIT_SOURCES to the folder holding redocred/)",
)


def _yaml(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _member_dirs() -> list[Path]:
    return sorted(p for p in TASK_DIR.iterdir() if (p / "manifest.yaml").is_file())


def _authored() -> list[Path]:
    return [p for p in _member_dirs() if not p.name.startswith("redocred-")]


def _imported() -> list[Path]:
    return [p for p in _member_dirs() if p.name.startswith("redocred-")]


def _index() -> list[dict]:
    return [json.loads(line) for line in (REDOCRED / "index.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def _ontology() -> dict:
    return _yaml(TASK_DIR / "redocred-ontology.yaml")


def _run_importer(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), "--sources", str(SOURCES), "--out", str(out), *extra],
                          capture_output=True, text=True, cwd=REPO)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- task.yaml


def test_task_loads_with_the_graph_scorer():
    task = load_task(TASK_DIR)
    assert task.id == "encyclopedia" and task.scorer.name == "graph"
    assert task.options.symmetric_relations == ["spouse", "sibling"] and task.options.entity_type_in_key is True
    assert 0 < task.spec.threshold <= 1


def test_prompt_has_document_once_and_no_other_braces():
    spec = _yaml(TASK_DIR / "task.yaml")
    user, system = spec["prompt"]["user"], spec["prompt"]["system"]
    assert user.count("{document}") == 1
    assert "{" not in user.replace("{document}", "") and "}" not in user.replace("{document}", "")
    assert "{" not in system and "}" not in system
    # some local models drop the system message: the user message repeats the key instructions
    for needle in ("PER", "ORG", "LOC", "TIME", "NUM", "MISC", "head", "relation", "tail", "summary",
                   "Wikidata", "pronoun", "denies", "JSON object only"):
        assert needle in user, needle


def test_prompt_relation_examples_are_ontology_labels():
    user = _yaml(TASK_DIR / "task.yaml")["prompt"]["user"]
    line = next(x for x in user.splitlines() if "Wikidata property label, such as" in x)
    examples = [s.strip() for s in line.split("such as", 1)[1].rstrip(".").split(",")]
    assert len(examples) >= 20
    assert set(examples) <= set(_ontology()["relation_types"])


def test_schema_is_tight():
    schema = _yaml(TASK_DIR / "task.yaml")["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["entities", "relations", "summary"]
    ent, rel = schema["properties"]["entities"], schema["properties"]["relations"]
    assert ent["maxItems"] and rel["maxItems"]
    assert ent["items"]["properties"]["type"]["enum"] == TYPES
    for items in (ent["items"], rel["items"]):
        assert items["additionalProperties"] is False and set(items["required"]) == set(items["properties"])
        for prop in items["properties"].values():
            assert prop.get("maxLength") or prop.get("enum")
    assert schema["properties"]["summary"]["maxLength"]


def test_ontology_file():
    onto = _ontology()
    assert set(onto) == {"mode", "entity_types", "relation_types"}
    assert onto["mode"] == "strict" and onto["entity_types"] == TYPES
    labels = onto["relation_types"]
    assert len(labels) == 96 == len(set(labels)) == len({fold(x) for x in labels})  # distinct even folded


@needs_sources
def test_ontology_is_relations_json():
    relations = json.loads((REDOCRED / "relations.json").read_text(encoding="utf-8"))
    assert _ontology()["relation_types"] == list(relations.values())


# ----------------------------------------------------------------------------- every member


@pytest.mark.parametrize("member_dir", _member_dirs(), ids=lambda p: p.name)
def test_member_truth_uses_the_vocabulary(member_dir):
    truth = GraphTruth.model_validate(_yaml(member_dir / "truth.yaml"))
    labels = set(_ontology()["relation_types"])
    assert truth.entities and truth.relations
    assert {e.type for e in truth.entities} <= set(TYPES)
    assert {r.relation for r in truth.relations} <= labels


def test_encyclopedia_validates_cleanly(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copytree(TASK_DIR, corpus / "encyclopedia")  # a copy: a task folder linked from elsewhere is refused
    sources = SOURCES if (REDOCRED / "index.jsonl").is_file() else None
    assert validate_corpus(corpus, sources) == []


@pytest.mark.parametrize("member_dir", _member_dirs(), ids=lambda p: p.name)
def test_truth_echoed_scores_one(member_dir):
    task = load_task(TASK_DIR)
    member = task.member(member_dir.name)
    text = ""
    if not member.manifest.source.is_pointer or (REDOCRED / "index.jsonl").is_file():
        text = read_document(check_integrity(member, SOURCES)).text
    truth = member.load_truth()
    c = ScoreContext(task_id=task.id, member_id=member.id, source_text=text, options=task.options,
                     threshold=task.spec.threshold)
    result = task.scorer.score(task.scorer.expected_extraction(truth), truth, c)
    assert result.score == 1.0 and result.passed is True
    assert result.metrics["entities_f1"] == 1.0 and result.metrics["relations_f1"] == 1.0
    assert result.metrics["summary_f1"] == (None if truth.summary is None else 1.0)
    assert all(row["outcome"] == "matched" for row in result.items)
    assert all(v is None for k, v in result.metrics.items() if k.startswith("judged_"))


# ----------------------------------------------------------------------------- the hand-written members


def test_at_least_eight_authored_members_cc0_with_pinned_text():
    authored = _authored()
    assert len(authored) >= 8
    for d in authored:
        m = Manifest.model_validate(_yaml(d / "manifest.yaml"))
        assert m.source.paths == ["text.md"] and not m.source.is_pointer
        assert m.license.spdx == "CC0-1.0"
        assert m.sha256 == hashlib.sha256((d / "text.md").read_bytes()).hexdigest(), d.name
        truth = _yaml(d / "truth.yaml")
        assert truth["summary"], d.name  # hand-written members have a summary


@pytest.mark.parametrize("member_dir", _authored(), ids=lambda p: p.name)
def test_authored_entities_occur_in_the_text(member_dir):
    words = normalize((member_dir / "text.md").read_text(encoding="utf-8")).split()
    grams = {fold(" ".join(words[i:j])) for i in range(len(words)) for j in range(i + 1, min(i + 8, len(words)) + 1)}
    for e in _yaml(member_dir / "truth.yaml")["entities"]:
        assert fold(e["name"]) in grams, e["name"]


def _triples(slug: str) -> set[tuple[str, str, str]]:
    return {(r["head"], r["relation"], r["tail"]) for r in _yaml(TASK_DIR / slug / "truth.yaml")["relations"]}


def _names(slug: str) -> set[str]:
    return {e["name"] for e in _yaml(TASK_DIR / slug / "truth.yaml")["entities"]}


def _text(slug: str) -> str:
    return (TASK_DIR / slug / "text.md").read_text(encoding="utf-8")


def test_trap_negated_relations_are_not_in_the_truth():
    cases = [
        ("harlow-namesakes", "did not join the firm", ("Edmund Harlow Jr.", "employer", "Harlow Iron Works")),
        ("brannock-lighthouse", "but he was not", ("Thomas Gale", "place of birth", "Skerry Point")),
        ("copper-wolves", "does not play on the record", ("Low Tide Lanterns", "performer", "Ciarán Walsh")),
    ]
    for slug, denial, triple in cases:
        assert denial in _text(slug)
        assert triple not in _triples(slug)
        assert {triple[0], triple[2]} <= _names(slug)  # both ends are entities: only the relation is denied
    assert ("Thomas Gale", "place of birth", "Lancaster") in _triples("brannock-lighthouse")


def test_trap_aliases():
    assert "the United States" in _text("orla-fenwick") and "the U.S." in _text("orla-fenwick")
    assert "United States" in _names("orla-fenwick") and "U.S." not in _names("orla-fenwick")
    assert "(NRC)" in _text("northern-rail-consortium") and "NRC" not in _names("northern-rail-consortium")


def test_trap_coreference():
    # relations stated only through pronouns are in the truth
    assert "She died in Budapest." in _text("margit-velden")
    assert ("Margit Velden", "place of death", "Budapest") in _triples("margit-velden")
    assert "In 2009 she became a citizen of the U.S." in _text("orla-fenwick")
    assert ("Orla Fenwick", "country of citizenship", "United States") in _triples("orla-fenwick")


def test_trap_near_duplicate_entities():
    names = _names("harlow-namesakes")
    assert {"Edmund Harlow", "Edmund Harlow Jr.", "Edmond Harlowe"} <= names
    assert len({fold(n) for n in ("Edmund Harlow", "Edmund Harlow Jr.", "Edmond Harlowe")}) == 3
    assert {"Ingrid Sundby", "Ingrun Sundby"} <= _names("sundby-sisters")


def test_trap_plural_names():
    names = _names("grey-hill-warrens")
    text = _text("grey-hill-warrens")
    for singular, plural in (("kobold", "kobolds"), ("lizard man", "lizard men"), ("hobgoblin", "hobgoblins")):
        assert singular in names and plural in text and fold(plural) == fold(singular)
    assert "hobgoblin chief" in text and "hobgoblin chief" not in names


# ----------------------------------------------------------------------------- the Re-DocRED members


def test_twenty_pointer_members_with_truth_in_the_repo():
    imported = _imported()
    assert len(imported) == 20
    for d in imported:
        m = Manifest.model_validate(_yaml(d / "manifest.yaml"))
        slug = d.name.removeprefix("redocred-")
        assert m.source.paths == [f"redocred/{slug}/text.txt"] and m.source.is_pointer
        assert m.license.spdx == "CC-BY-SA-4.0" and "MIT" in m.license.verified
        assert m.truth is None and (d / "truth.yaml").is_file()
        assert _yaml(d / "truth.yaml")["summary"] is None
        assert sorted(p.name for p in d.iterdir()) == ["manifest.yaml", "truth.yaml"]  # no text copied


def test_licence_and_attribution_travel_with_the_truth():
    assert (TASK_DIR / "LICENSE-Re-DocRED.txt").read_text(encoding="utf-8").startswith("MIT License")
    attribution = (TASK_DIR / "ATTRIBUTION.md").read_text(encoding="utf-8")
    for needle in ("CC BY-SA 4.0", "MIT License", "Copyright (c) 2023 tonytan48", "arXiv:2205.12696",
                   "Wikipedia contributors", "CC0"):
        assert needle in attribution, needle
    assert attribution.count("| `redocred-") == 20


@needs_sources
def test_pins_match_the_index_and_the_files():
    index = {row["slug"]: row for row in _index()}
    assert {d.name.removeprefix("redocred-") for d in _imported()} == set(index)
    for d in _imported():
        slug = d.name.removeprefix("redocred-")
        pin = _yaml(d / "manifest.yaml")["sha256"]
        assert pin == index[slug]["sha256"]
        assert pin == hashlib.sha256((REDOCRED / slug / "text.txt").read_bytes()).hexdigest()


@needs_sources
def test_importer_is_deterministic_and_matches_the_repo(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        proc = _run_importer(out)
        assert proc.returncode == 0, proc.stderr
    tree = _tree(a)
    assert tree == _tree(b)
    assert len(tree) == 20 * 2 + 3
    for rel, data in tree.items():
        assert (TASK_DIR / rel).read_bytes() == data, f"{rel} differs from a fresh import: re-run tools/import_redocred.py"
    again = _run_importer(a)  # re-running over its own output changes nothing
    assert again.returncode == 0 and "wrote 0 of 43" in again.stdout
    check = _run_importer(TASK_DIR, "--check")
    assert check.returncode == 0, check.stdout + check.stderr


@needs_sources
def test_importer_conversion():
    spec = importlib.util.spec_from_file_location("import_redocred", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    relations = json.loads((REDOCRED / "relations.json").read_text(encoding="utf-8"))
    for row in _index():
        record = json.loads((REDOCRED / row["slug"] / "redocred.json").read_text(encoding="utf-8"))
        truth = _yaml(TASK_DIR / f"redocred-{row['slug']}" / "truth.yaml")
        text = (REDOCRED / row["slug"] / "text.txt").read_text(encoding="utf-8")
        assert [(e["name"], e["type"]) for e in truth["entities"]] == list(
            dict.fromkeys((e["name"], e["type"]) for e in record["entities"]))
        assert [(r["head"], r["relation"], r["tail"]) for r in truth["relations"]] == list(
            dict.fromkeys((t["head"], relations[t["relation"]], t["tail"]) for t in record["triples"]))
        for e in truth["entities"]:
            assert e["name"] in text, e["name"]  # detokenised first mention, verbatim in the text
    conv = tool.convert_record({"entities": [{"name": "A", "type": "PER"}, {"name": "A", "type": "PER"},
                                             {"name": "B", "type": "LOC"}],
                                "triples": [{"head": "A", "relation": "P19", "relation_name": "place of birth",
                                             "tail": "B", "h": 0, "t": 2},
                                            {"head": "A", "relation": "P19", "relation_name": "place of birth",
                                             "tail": "B", "h": 1, "t": 2}]}, relations)
    assert conv["entities"] == [{"name": "A", "type": "PER"}, {"name": "B", "type": "LOC"}]
    assert conv["relations"] == [{"head": "A", "relation": "place of birth", "tail": "B"}]
    assert conv["summary"] is None and conv["dropped"] == {"entities": 1, "relations": 1}


@needs_sources
def test_no_redocred_text_is_copied_into_the_repo():
    repo_text = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                          for p in sorted(TASK_DIR.rglob("*")) if p.is_file())
    for row in _index():
        text = (REDOCRED / row["slug"] / "text.txt").read_text(encoding="utf-8")
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            window = sentence.strip()[:60]
            if len(window) >= 60:
                assert window not in repo_text, f"{row['slug']}: text copied into the repo: {window!r}"


@needs_sources
def test_importer_takes_any_document_list(tmp_path):
    rows = _index()[:3]
    index = tmp_path / "other-index.jsonl"
    index.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    proc = _run_importer(tmp_path / "out", "--index", str(index))
    assert proc.returncode == 0, proc.stderr
    members = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert members == sorted(f"redocred-{r['slug']}" for r in rows)
    for m in members:
        assert (tmp_path / "out" / m / "truth.yaml").read_bytes() == (TASK_DIR / m / "truth.yaml").read_bytes()
    proc = _run_importer(tmp_path / "one", "--only", rows[0]["slug"])
    assert proc.returncode == 0 and [p.name for p in (tmp_path / "one").iterdir() if p.is_dir()] == [
        f"redocred-{rows[0]['slug']}"]
    bad = _run_importer(tmp_path / "bad", "--only", "nope")
    assert bad.returncode == 2 and "does not list nope" in bad.stderr
