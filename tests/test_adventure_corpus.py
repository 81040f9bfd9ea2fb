"""The `adventure` task as a corpus: task.yaml and its scorer plugin load, the
self-written PDF members are byte-stable and read page-aware, the fake extraction
passes, and JN1's truth loads unchanged and scores itself — whole and restricted
to what its pages cover.

Tests marked `needs_jn1` need the JN1 data folder: $EVALKIT_SOURCES, or the repo's
../shared/data; they are skipped with the reason when it is absent.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.tasks import load_task, load_truth
from evalkit.scoring import ScoreContext
from evalkit.stages.validate import validate_corpus

REPO = Path(__file__).resolve().parent.parent
TASK_DIR = REPO / "corpus" / "adventure"
TOOL = REPO / "tools" / "make_adventure_pdfs.py"
SOURCES = Path(os.environ.get("EVALKIT_SOURCES") or REPO.parent / "shared" / "data")
JN1 = SOURCES / "jn1"
PDF_MEMBERS = ("drowned-bell-tower", "fen-hollow")

needs_jn1 = pytest.mark.skipif(
    not (JN1 / "truth.yaml").is_file(),
    reason=f"JN1 data not found at {JN1} (set EVALKIT_SOURCES to the folder holding jn1/)",
)


@pytest.fixture(scope="module")
def task():
    return load_task(TASK_DIR)


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("make_adventure_pdfs", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def score(task, member, record, document_text=""):
    ctx = ScoreContext(task_id=task.id, member_id=member.id, source_text=document_text, options=task.options,
                       threshold=task.spec.threshold,
                       extra={"task_dir": str(task.dir), "scope": member.manifest.scope})
    return task.scorer.score(record, member.load_truth(SOURCES), ctx)


def test_task_loads_with_its_scorer_plugin(task):
    assert task.spec.scorer == "scorer/:SCORER" and task.scorer.name == "adventure"
    assert task.scorer.truth_model.__name__ == "AdventureTruth"
    assert {m.name for m in task.member_dirs()} >= {*PDF_MEMBERS, "jn1-chaotic-caves"}


def test_task_validates(tmp_path):
    shutil.copytree(TASK_DIR, tmp_path / "adventure")  # this task alone (a copy: a linked task folder is refused)
    assert validate_corpus(tmp_path, SOURCES if JN1.is_dir() else None) == []


@pytest.mark.parametrize("member_id", PDF_MEMBERS)
def test_fake_extraction_of_each_pdf_member_passes(task, member_id):
    member = task.member(member_id)
    document = read_document(check_integrity(member, None))
    record = task.scorer.expected_extraction(member.load_truth())
    res = score(task, member, json.loads(json.dumps(record)), document.text)
    assert res.score == 1.0 and res.passed is True, res.notes
    assert all(v in (1.0, None) for k, v in res.metrics.items() if k.endswith(("_recall", "_precision", "_accuracy")))


def test_pdf_regeneration_is_byte_stable(task, tool):
    for member_id in PDF_MEMBERS:
        first, second = tool.render(member_id), tool.render(member_id)
        assert first == second
        committed = (TASK_DIR / member_id / "module.pdf").read_bytes()
        assert first == committed, f"{member_id}: re-run tools/make_adventure_pdfs.py and commit"
        assert task.member(member_id).manifest.sha256 == hashlib.sha256(committed).hexdigest()


def test_pdf_members_are_read_page_aware(task):
    member = task.member("drowned-bell-tower")
    doc = read_document(check_integrity(member, None))
    assert len(doc.pages) == 2
    assert "4. SEXTON'S ROOM" in doc.pages[0] and "Bell Warden: AC 15, HD 4*" in doc.pages[0]
    assert "C3. FLOODED CISTERN" in doc.pages[1]


def test_the_self_written_modules_carry_the_required_traps(task):
    bell = task.member("drowned-bell-tower").load_truth()
    (site,) = bell.dungeons
    assert len(site.levels) >= 3 and {t.kind for t in site.transitions} == {"stairs", "trapdoor"}
    doors = [d for lv in site.levels for a in lv.areas for d in (a.doors or {}).values()]
    assert any(d.locked for d in doors) and any(d.kind == "secret_door" for d in doors)
    assert any(e.custom for lv in site.levels for a in lv.areas for e in a.encounters or [])
    assert len(task.member("fen-hollow").load_truth().dungeons) == 2


def test_catalog_covers_every_truth_template(task):
    mod = importlib.import_module(task.scorer.score.__module__)
    catalog = mod.load_catalog(TASK_DIR, task.options)
    truths = [task.member(m).load_truth() for m in PDF_MEMBERS]
    if (JN1 / "truth.yaml").is_file():
        truths.append(load_truth(task, JN1 / "truth.yaml"))
    templates = {e.template for t in truths for d in t.dungeons for lv in d.levels for a in lv.areas
                 for e in a.encounters or [] if e.template}
    assert templates and templates <= catalog.ids, templates - catalog.ids


# ---------------------------------------------------------------- JN1


@needs_jn1
def test_jn1_truth_loads_unchanged_and_scores_itself(task):
    path = JN1 / "truth.yaml"
    member = task.member("jn1-chaotic-caves")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == member.manifest.truth.sha256
    truth = load_truth(task, path)
    assert len(truth.dungeons) == 14
    # the truth itself is the extraction (`evalkit score --predictions` of truth.yaml)
    record = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert task.scorer.expected_extraction(truth) == record
    for scope in (None, member.manifest.scope):
        ctx = ScoreContext(task_id=task.id, member_id=member.id, source_text="", options=task.options,
                           threshold=0.9, extra={"task_dir": str(TASK_DIR), "scope": scope})
        res = task.scorer.score(record, truth, ctx)
        for fam in ("areas", "connections", "treasure", "doors", "transitions", "entrance"):
            assert res.metrics[f"{fam}_score"] in (1.0, None), (scope is not None, fam)
        ratios = {k: v for k, v in res.metrics.items() if k.endswith(("_recall", "_precision", "_f1", "_accuracy"))}
        assert all(v in (1.0, None) for k, v in ratios.items() if k != "encounters_custom_accuracy"), ratios
        # The external truth says `custom: true` without the printed stat blocks, and a bespoke creature
        # needs a usable one (the default rule): its echo fails custom emission there, and only there.
        bad = [r for r in res.items if r["outcome"] in ("missed", "spurious", "mismatch")]
        assert bad and all(r["metric"] == "custom" and r["reason"].startswith("custom: true with no stat block")
                           for r in bad)
        assert res.metrics["encounters_custom_accuracy"] == 0.0
        assert res.metrics["encounters_custom_denominator"] == len(bad)


@needs_jn1
def test_jn1_member_scores_against_what_its_pages_cover(task):
    member = task.member("jn1-chaotic-caves")
    paths = check_integrity(member, SOURCES)
    assert [p.name for p in paths] == ["0008.txt", "0022.txt", "0023.txt", "0024.txt", "0025.txt", "0026.txt",
                                       "0027.txt", "0038.txt"]
    doc = read_document(paths)
    assert "26. GUARD POST" in doc.pages[6] and not re.search(r"^27\. ", doc.text, re.M)
    full = yaml.safe_load((JN1 / "truth.yaml").read_text(encoding="utf-8"))
    res = score(task, member, full, doc.text)
    m = res.metrics
    # lairs A-D whole plus area 26 of E: 11 + 6 + 7 + 4 + 1 areas in 5 sites
    assert (m["areas_truth"], m["areas_truth_dungeons"]) == (29, 5)
    # every family whole, but the truth's custom creatures carry no stat block (see the test above)
    assert m["encounters_custom_accuracy"] == 0.0 and res.passed
    assert all(r["metric"] == "custom" for r in res.items if r["outcome"] in ("missed", "spurious", "mismatch"))
    ignored = [r for r in res.items if r["outcome"] == "ignored"]
    assert {r["site"] for r in ignored if r["metric"] == "dungeon"} == {
        d["name"] for d in full["dungeons"][5:]}
    assert sorted(r["area"] for r in ignored if r["metric"] == "area") == ["27", "28", "29", "30", "31"]
    # what a text-only extractor of these pages might send: the town key as a site of its own, lairs A-E
    # as printed, nothing from the map (no connections, doors or transitions)
    pages_only = {"dungeons": [
        {"name": "Town", "levels": [{"number": 1, "areas": [{"key": k} for k in ("1", "2", "3")]}]},
        *[{"name": d["name"], "levels": [{"number": 1, "areas": [
            {"key": a["key"], "encounters": a.get("encounters", []), "treasure": a.get("treasure")}
            for a in d["levels"][0]["areas"] if d["name"] != "E. Goblin Lair" or a["key"] == "26"]}],
           "entrance": d["entrance"]} for d in full["dungeons"][:5]],
    ]}
    m = score(task, member, pages_only, doc.text).metrics
    assert m["areas_f1"] == 1.0 and m["encounters_name_f1"] == 1.0 and m["entrance_accuracy"] == 1.0
    assert m["connections_recall"] == 0.0 and m["doors_recall"] == 0.0
    assert m["transitions_f1"] is None  # every in-scope site asserts no vertical links
    assert m["areas_extracted_dungeons"] == 5  # the town is set aside, not a false positive


@needs_jn1
def test_predictions_tool_writes_the_truth_itself(tool, tmp_path):
    written = tool.write_predictions(tmp_path, SOURCES)
    assert sorted(written) == sorted([*PDF_MEMBERS, "jn1-chaotic-caves"])
    record = json.loads((tmp_path / "jn1-chaotic-caves.json").read_text(encoding="utf-8"))
    assert record == yaml.safe_load((JN1 / "truth.yaml").read_text(encoding="utf-8"))


def test_no_jn1_text_or_truth_is_copied_into_the_repo():
    files = [p for p in TASK_DIR.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix == ".txt"]
    assert (TASK_DIR / "jn1-chaotic-caves").is_dir() and not (TASK_DIR / "jn1-chaotic-caves" / "truth.yaml").exists()
    joined = "\n".join(p.read_text(encoding="utf-8", errors="ignore") for p in files if p.suffix in (".yaml", ".py"))
    assert "wily orc chief" not in joined.lower() and "orc war leader" not in joined.lower()
