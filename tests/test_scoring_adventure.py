"""The `adventure` scorer plugin (the corpus/adventure/scorer/ package): one test per rule of
docs/scoring-adventure.md, on small synthetic truths, plus the generic tree helpers."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from evalkit.corpus.tasks import load_task, load_truth
from evalkit.errors import InvalidCorpus
from evalkit.scoring import ScoreContext
from evalkit.scoring import text as text_mod
from evalkit.scoring.tree import align_many_to_one, align_one_to_one, mean_metrics, norm_key

TASK_DIR = Path(__file__).resolve().parent.parent / "corpus" / "adventure"
COLUMNS = {"family", "metric", "site", "level", "area", "expected", "extracted", "outcome", "reason"}


@pytest.fixture(scope="module")
def task():
    return load_task(TASK_DIR)


@pytest.fixture(scope="module")
def mod(task):
    """The scorer package (task.yaml: ``scorer: scorer/:SCORER``)."""
    return sys.modules[task.scorer.score.__module__.rpartition(".")[0]]


def run(task, truth: dict, extraction, *, scope=None, options=None):
    t = task.scorer.truth_model.model_validate(truth)
    opts = task.options if options is None else task.scorer.options_model.model_validate(options)
    ctx = ScoreContext(task_id="adventure", member_id="m", source_text="", options=opts, threshold=0.9,
                       extra={"task_dir": str(TASK_DIR), "scope": scope})
    return task.scorer.score(extraction, t, ctx)


def rows(res, family, metric=None, outcome=None):
    return [r for r in res.items if r["family"] == family and (metric is None or r["metric"] == metric)
            and (outcome is None or r["outcome"] == outcome)]


# A small two-level site that exercises every family.
TOWER = {
    "dungeons": [{
        "name": "Tower",
        "levels": [
            {"number": 1, "areas": [
                {"key": "1", "encounters": [{"name": "orc", "template": "orc", "count": 3}],
                 "connections": ["2"], "doors": {"2": {"kind": "door", "locked": True}},
                 "treasure": {"present": True, "letters": ["C"]}},
                {"key": "2", "encounters": [], "connections": ["1"], "doors": {"1": {"kind": "door", "locked": True}},
                 "treasure": {"present": False}},
            ]},
            {"number": 2, "areas": [
                {"key": "3", "encounters": [{"name": "bell warden", "custom": True, "count": 1,
                                             "stat_block": {"ac": 15, "hd": "4*"}}],
                 "connections": ["4"], "doors": {}, "treasure": {"present": True}},
                {"key": "4", "encounters": [{"name": "wolf", "template": "normal_wolf", "count": 2}],
                 "connections": ["3"], "doors": {}, "treasure": {"present": False}},
            ]},
        ],
        "transitions": [{"from_level": 1, "from_key": "2", "to_level": 2, "to_key": "3", "kind": "stairs"}],
        "entrance": {"level": 1, "key": "1"},
    }]
}


def one_area(area: dict, extracted_area: dict | None = None, **site) -> tuple[dict, dict]:
    truth = {"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [area]}], **site}]}
    ext = {"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [extracted_area or {"key": area["key"]}]}]}]}
    return truth, ext


# ------------------------------------------------------------- the shape


def test_perfect_extraction_scores_ones(task):
    res = run(task, TOWER, copy.deepcopy(TOWER))
    assert res.score == 1.0 and res.passed is True
    for fam in ("areas", "encounters", "connections", "treasure", "doors", "transitions", "entrance"):
        assert res.metrics[f"{fam}_score"] == 1.0, fam
    ratios = {k: v for k, v in res.metrics.items() if k.endswith(("_recall", "_precision", "_f1", "_accuracy"))}
    assert ratios and all(v == 1.0 for v in ratios.values()), ratios
    assert res.notes == []


def test_the_truth_is_its_own_extraction(task):
    truth = task.scorer.truth_model.model_validate(TOWER)
    assert task.scorer.expected_extraction(truth) == TOWER  # omitted keys stay omitted, [] and {} stay


def test_empty_extraction_scores_zero_recall_with_null_precision(task):
    for empty in ({}, {"dungeons": []}, None):
        m = run(task, TOWER, empty).metrics
        assert m["areas_recall"] == 0 and m["areas_precision"] is None
        assert m["encounters_name_recall"] == 0 and m["encounters_name_precision"] is None
        assert m["transitions_recall"] == 0 and m["transitions_precision"] is None
        assert m["areas_truth_dungeons"] == 1 and m["areas_extracted_dungeons"] == 0
        # families scored only between matched areas / aligned sites have no denominator at all
        for k in ("connections_f1", "doors_recall", "treasure_presence_accuracy", "entrance_accuracy",
                  "encounters_count_accuracy"):
            assert m[k] is None, k
        assert m["score"] == 0.0


def test_item_table_has_the_documented_columns_and_metrics_are_its_aggregate(task, mod):
    ext = copy.deepcopy(TOWER)
    ext["dungeons"][0]["levels"][0]["areas"][0]["encounters"][0]["count"] = 4
    res = run(task, TOWER, ext)
    assert res.items and all(set(r) == COLUMNS for r in res.items)
    assert mod.compute_metrics(res.items) == res.metrics
    assert res.details["sites"]["Tower"]["encounters_count_accuracy"] == 2 / 3
    assert any(n.startswith("encounters.count: 1 mismatch") for n in res.notes)


def test_figures_are_computed_from_counts_not_rounded(task):
    truth, ext = one_area({"key": "1", "encounters": [{"name": "orc"}, {"name": "goblin"}, {"name": "kobold"}]},
                          {"key": "1", "encounters": [{"name": "orc"}]})
    assert run(task, truth, ext).metrics["encounters_name_recall"] == 1 / 3


# ------------------------------------------------------- load-time rules


def test_custom_beside_template_is_rejected_at_load(task, tmp_path):
    path = tmp_path / "truth.yaml"
    path.write_text("dungeons:\n  - name: S\n    levels:\n      - number: 1\n        areas:\n"
                    "          - key: \"1\"\n            encounters:\n"
                    "              - {name: orc chief, template: orc, custom: true}\n")
    with pytest.raises(InvalidCorpus) as e:
        load_truth(task, path)
    assert f"{path}:8:" in str(e.value) and "custom: true` is legal only with `template` omitted" in str(e.value)
    # custom: true with the template omitted is legal
    path.write_text(path.read_text().replace("template: orc, ", ""))
    assert load_truth(task, path).dungeons[0].levels[0].areas[0].encounters[0].custom is True


@pytest.mark.parametrize("bad, message", [
    ({"key": 5}, "printed keys are strings"),
    ({"key": "1", "doors": {"2": {"kind": "door"}}}, "give `connections` too"),
    ({"key": "1", "connections": ["2"], "doors": {"3": {"kind": "door"}}}, "not one of its connections"),
    ({"key": "1", "encounters": [{"name": "orc"}, {"name": "Orcs"}]}, "listed twice"),
    ({"key": "1", "encounters": [{"name": "orc", "count": 0}]}, "greater than or equal to 1"),
    ({"key": "1", "treasure": {"present": True, "letters": ["c"]}}, "single upper-case codes"),
    ({"key": "1", "surprise": True}, "Extra inputs are not permitted"),
])
def test_truth_is_strict(task, bad, message):
    with pytest.raises(Exception, match=message):
        task.scorer.truth_model.model_validate(one_area(bad)[0])


def test_truth_cross_checks_sites(task):
    def site(**kw):
        base = {"name": "S", "levels": [{"number": 1, "areas": [{"key": "1"}, {"key": "Jail Area"}]}]}
        return {"dungeons": [{**base, **kw}]}

    tm = task.scorer.truth_model
    with pytest.raises(Exception, match="appears twice"):
        tm.model_validate({"dungeons": [{"name": "S", "levels": [
            {"number": 1, "areas": [{"key": "Jail Area"}]}, {"number": 2, "areas": [{"key": "jail-area"}]}]}]})
    with pytest.raises(Exception, match="not an area of level 2"):
        tm.model_validate(site(entrance={"level": 2, "key": "1"}))
    with pytest.raises(Exception, match="transition endpoint"):
        tm.model_validate(site(transitions=[{"from_level": 1, "from_key": "1", "to_level": 2, "to_key": "9"}]))
    with pytest.raises(Exception, match="asserts a complete neighbour list without it"):
        tm.model_validate({"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [
            {"key": "1", "connections": ["2"]}, {"key": "2", "connections": []}]}]}]})
    with pytest.raises(Exception, match="disagree about the door"):
        tm.model_validate({"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [
            {"key": "1", "connections": ["2"], "doors": {"2": {"kind": "door", "locked": True}}},
            {"key": "2", "connections": ["1"], "doors": {}}]}]}]})


# --------------------------------------------------- asserted universe


def test_asserted_empty_makes_extracted_names_false_positives(task):
    truth, ext = one_area({"key": "1", "encounters": []},
                          {"key": "1", "encounters": [{"name": "giant rat", "count": 3}, {"name": "Giant Rats"}]})
    m = run(task, truth, ext).metrics
    # distinct folds, not mentions: "giant rat" and "Giant Rats" are one false positive
    assert (m["encounters_name_tp"], m["encounters_name_fp"], m["encounters_name_fn"]) == (0, 1, 0)
    assert m["encounters_name_precision"] == 0 and m["encounters_name_recall"] is None


def test_unasserted_families_leave_both_denominators(task):
    truth, ext = one_area({"key": "1"}, {"key": "1", "encounters": [{"name": "orc", "count": 2}],
                                         "connections": ["2"], "doors": {"2": {"kind": "door"}},
                                         "treasure": {"present": True}})
    truth["dungeons"][0]["levels"][0]["areas"].append({"key": "2"})
    ext["dungeons"][0]["levels"][0]["areas"].append({"key": "2", "connections": ["1"]})
    res = run(task, truth, ext)
    m = res.metrics
    assert m["areas_recall"] == 1.0 and m["areas_precision"] == 1.0
    for fam in ("encounters_name", "connections", "doors", "transitions"):
        assert (m[f"{fam}_tp"], m[f"{fam}_fp"], m[f"{fam}_fn"]) == (0, 0, 0), fam
    assert m["treasure_presence_denominator"] == 0 and m["entrance_denominator"] == 0
    assert m["score"] == 1.0  # only the areas family is asserted
    assert {r["family"] for r in res.items if r["outcome"] == "ignored"} == {"encounters", "connections", "doors"}


def test_connection_universe_needs_one_asserting_endpoint(task):
    truth = {"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [
        {"key": "1", "connections": ["2"]}, {"key": "2"}, {"key": "3"}]}]}]}
    ext = {"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [
        {"key": "1", "connections": ["2", "3"]}, {"key": "2", "connections": ["3"]}, {"key": "3"}]}]}]}
    m = run(task, truth, ext).metrics
    # 1-3 is a false positive (1's list is complete); 2-3 has no asserting endpoint
    assert (m["connections_tp"], m["connections_fp"], m["connections_fn"]) == (1, 1, 0)


# --------------------------------------------------------------- alignment


def test_sites_align_by_shared_keys_with_name_breaking_ties(task):
    truth = {"dungeons": [
        {"name": "B. Orc Lair", "levels": [{"number": 1, "areas": [{"key": "Entrance"}, {"key": "11"}]}]},
        {"name": "C. Hobgoblin Lair", "levels": [{"number": 1, "areas": [{"key": "Entrance"}, {"key": "16"}]}]},
    ]}
    # both extracted sites share only "Entrance" with each truth site: the names decide
    ext = {"dungeons": [
        {"name": "c hobgoblin lair", "levels": [{"number": 1, "areas": [{"key": "ENTRANCE"}]}]},
        {"name": "B - Orc Lair", "levels": [{"number": 1, "areas": [{"key": "entrance"}]}]},
    ]}
    res = run(task, truth, ext)
    assert [(a["site"], a["extracted_site"]) for a in res.details["alignment"]] == [
        ("B. Orc Lair", "B - Orc Lair"), ("C. Hobgoblin Lair", "c hobgoblin lair")]
    # more shared keys beat a matching name
    ext["dungeons"][0]["levels"][0]["areas"].append({"key": "11"})
    res = run(task, truth, ext)
    assert res.details["alignment"][0]["extracted_site"] == "c hobgoblin lair"
    assert res.metrics["areas_matched_dungeons"] == 2


def test_area_keys_normalize(task):
    truth, ext = one_area({"key": "Jail Area", "encounters": []}, {"key": "JAIL-AREA", "encounters": []})
    truth["dungeons"][0]["levels"][0]["areas"].append({"key": "A"})
    ext["dungeons"][0]["levels"][0]["areas"].append({"key": "a."})
    assert run(task, truth, ext).metrics["areas_f1"] == 1.0
    assert norm_key("Jail Area") == norm_key("jail-area") == norm_key("JAIL AREA") and norm_key("A") == "a"


def test_many_to_one_level_alignment(task):
    collapsed = copy.deepcopy(TOWER)
    lv1, lv2 = collapsed["dungeons"][0]["levels"]
    collapsed["dungeons"][0]["levels"] = [{"number": 1, "areas": lv1["areas"] + lv2["areas"]}]
    res = run(task, TOWER, collapsed)
    assert [(lv["level"], lv["extracted_level"]) for lv in res.details["alignment"][0]["levels"]] == [(1, 1), (2, 1)]
    m = res.metrics
    assert m["areas_recall"] == 1.0 and m["areas_precision"] == 1.0
    assert m["connections_f1"] == 1.0 and m["doors_f1"] == 1.0 and m["encounters_name_f1"] == 1.0
    assert m["score"] == 1.0


def test_inter_level_stair_survives_a_collapsed_level_extraction(task):
    collapsed = copy.deepcopy(TOWER)
    lv1, lv2 = collapsed["dungeons"][0]["levels"]
    collapsed["dungeons"][0]["levels"] = [{"number": 1, "areas": lv1["areas"] + lv2["areas"]}]
    # recorded from both ends, both on the one extracted level, kind in another inflection
    collapsed["dungeons"][0]["transitions"] = [
        {"from_level": 1, "from_key": "3", "to_level": 1, "to_key": "2", "kind": "stair"},
        {"from_level": 1, "from_key": "2", "to_level": 1, "to_key": "3", "kind": "Stairs"},
    ]
    m = run(task, TOWER, collapsed).metrics
    assert (m["transitions_tp"], m["transitions_fp"], m["transitions_fn"]) == (1, 0, 0)
    assert m["transitions_kind_accuracy"] == 1.0


def test_transition_kind_is_an_attribute_of_a_match(task):
    ext = copy.deepcopy(TOWER)
    ext["dungeons"][0]["transitions"] = [{"from_key": "3", "to_key": "2", "kind": "ladder"},
                                         {"from_key": "1", "to_key": "woods"}]
    res = run(task, TOWER, ext)
    m = res.metrics
    assert m["transitions_recall"] == 1.0 and m["transitions_precision"] == 1.0
    assert m["transitions_kind_accuracy"] == 0.0
    assert rows(res, "transitions", "link", "ignored")[0]["reason"].startswith("names no area of the site")


def test_links_naming_no_area_of_the_site_are_dropped_not_false_positives(task):
    truth = {"dungeons": [
        {"name": "S", "levels": [{"number": 1, "areas": [
            {"key": "1", "connections": ["2", "woods"], "doors": {"woods": {"kind": "door", "locked": False}}},
            {"key": "2", "connections": ["1"]}]}]},
        {"name": "T", "levels": [{"number": 1, "areas": [{"key": "T1"}]}]},
    ]}
    ext = copy.deepcopy(truth)
    ext["dungeons"][0]["levels"][0]["areas"][0]["connections"] = ["2", "outside", "T1"]
    ext["dungeons"][0]["levels"][0]["areas"][0]["doors"] = {"outside": {"kind": "door"}, "T1": {"kind": "door"}}
    res = run(task, truth, ext)
    m = res.metrics
    assert (m["connections_tp"], m["connections_fp"], m["connections_fn"]) == (1, 0, 0)
    assert (m["doors_tp"], m["doors_fp"], m["doors_fn"]) == (0, 0, 0)
    assert all("names no area of the site" in r["reason"] for r in res.items if r["outcome"] == "ignored")


# --------------------------------------------------------------- encounters


def test_singular_truth_matches_extracted_plural_in_all_three_encounter_metrics(task):
    truth, ext = one_area(
        {"key": "1", "encounters": [
            {"name": "wolf", "template": "normal_wolf", "count": 3},
            {"name": "lizard man", "template": "lizard_man", "count": 5},
            {"name": "bandit crony", "template": "veteran_2", "count": 2}]},
        {"key": "1", "encounters": [
            {"name": "Wolves", "template": "normal_wolf", "count": 3},
            {"name": "lizard men", "template": "Lizard Man", "count": "5"},   # a catalog name resolves too
            {"name": "bandit cronies", "template": "veteran_2", "count": 2}]})
    m = run(task, truth, ext).metrics
    assert m["encounters_name_recall"] == m["encounters_name_precision"] == 1.0
    assert m["encounters_count_accuracy"] == 1.0 and m["encounters_count_denominator"] == 3
    assert m["encounters_resolution_accuracy"] == 1.0 and m["encounters_resolution_denominator"] == 3


def test_token_subsets_and_rank_variants_stay_misses(task):
    truth, ext = one_area(
        {"key": "1", "encounters": [{"name": "hobgoblin chief", "custom": True}, {"name": "orc"}]},
        {"key": "1", "encounters": [{"name": "hobgoblin"}, {"name": "orc warden"}]})
    res = run(task, truth, ext)
    m = res.metrics
    assert (m["encounters_name_tp"], m["encounters_name_fp"], m["encounters_name_fn"]) == (0, 2, 2)
    assert text_mod.fold("zombies") == "zombie"  # dictionary-correct, never "zomby"


def test_counts_sum_over_a_folded_group_and_dice_disqualify(task):
    truth, ext = one_area(
        {"key": "1", "encounters": [{"name": "orc", "count": 5}, {"name": "goblin", "count": 4},
                                    {"name": "kobold", "count": 2}, {"name": "rat"}]},
        {"key": "1", "encounters": [{"name": "orc", "count": 2}, {"name": "Orcs", "count": 3},
                                    {"name": "goblin", "count": 2}, {"name": "goblins", "count": "1d4"},
                                    {"name": "kobolds"}, {"name": "rats", "count": 7}]})
    res = run(task, truth, ext)
    counts = {r["expected"]: (r["outcome"], r["reason"]) for r in rows(res, "encounters", "count")}
    assert counts[5][0] == "matched" and "sum of 2 groups" in counts[5][1]
    assert counts[4] == ("mismatch", "dice count '1d4' in the group: no fixed count to compare")
    assert counts[2][0] == "mismatch"
    assert res.metrics["encounters_count_denominator"] == 3  # no stated count for the rats: not counted


def test_resolution_needs_every_folded_name_to_resolve(task):
    truth, ext = one_area(
        {"key": "1", "encounters": [{"name": "wolf", "template": "normal_wolf"},
                                    {"name": "orc", "template": "orc"}, {"name": "gnoll", "template": "gnoll"}]},
        {"key": "1", "encounters": [{"name": "wolf", "template": "wolf"}, {"name": "wolves", "template": "dire_wolf"},
                                    {"name": "orc"}, {"name": "gnoll", "template": "gnoll"}]})
    res = run(task, truth, ext)
    got = {r["expected"]: (r["outcome"], r["reason"]) for r in rows(res, "encounters", "resolution")}
    assert got["normal_wolf"] == ("mismatch", "'dire_wolf' is not in the catalog")
    assert got["orc"] == ("mismatch", "no template")
    assert got["gnoll"][0] == "matched"


def test_usable_stat_block_is_one_predicate(mod):
    usable = mod.usable_stat_block
    assert usable({"ac": 15, "hd": "4*"}) and usable({"AC": "14", "class_level": "F3"})
    assert usable({"armor_class": 12, "hit_dice": "1-1"}) and usable({"ac": 13, "hd": "½"})
    assert usable("Bell Warden: AC 15, HD 4*, #At 1 clapper") and usable("Mag Orrin (F3): AC 15, #At 1")
    assert usable("AC 16, 3rd-level cleric")
    assert not usable({"ac": 15}) and not usable({"hd": 3}) and not usable({"ac": "plate", "hd": 2})
    assert not usable("a terrible foe") and not usable(None) and not usable("AC 15")


def test_custom_emission_accuracy(task):
    truth, _ = one_area({"key": "1", "encounters": [{"name": "bell warden", "custom": True}]})

    def outcome(enc, **options):
        ext = {"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [{"key": "1", "encounters": [enc]}]}]}]}
        res = run(task, truth, ext, options=options or None)
        (row,) = rows(res, "encounters", "custom")
        return row["outcome"], row["reason"]

    assert outcome({"name": "Bell Wardens", "custom": True, "stat_block": {"ac": 15, "hd": "4*"}})[0] == "matched"
    assert outcome({"name": "bell warden", "custom": True, "stat_block": {"ac": 15}}) == (
        "mismatch", "stat block is not usable (needs an AC plus HD or a class level)")
    assert outcome({"name": "bell warden", "template": "wight", "custom": True})[0] == "mismatch"
    assert outcome({"name": "bell warden"}) == ("mismatch", "not marked custom")
    # custom: true with no stat block fails by default (the source rule); only an opted-out task accepts it
    assert outcome({"name": "bell warden", "custom": True}) == (
        "mismatch", "custom: true with no stat block (a bespoke creature needs a usable one)")
    assert outcome({"name": "bell warden", "custom": True}, custom_requires_stat_block=False)[0] == "matched"


def test_the_bundled_task_requires_a_stat_block_and_truth_carries_a_usable_one(task, tmp_path):
    assert task.options.custom_requires_stat_block is True  # task.yaml states nothing: the default governs
    path = tmp_path / "truth.yaml"
    for block, why in (("{ac: 15}", "is not usable"), ("{ac: 15, hd: '4*'}", None)):
        path.write_text("dungeons:\n  - name: S\n    levels:\n      - number: 1\n        areas:\n"
                        "          - key: '1'\n            encounters:\n"
                        f"              - {{name: bell warden, custom: true, stat_block: {block}}}\n")
        if why is None:
            load_truth(task, path)
        else:
            with pytest.raises(InvalidCorpus, match=why):
                load_truth(task, path)


def test_non_srd_names_are_tallied_not_scored(task):
    truth, ext = one_area({"key": "1", "encounters": [{"name": "lizard man shaman", "count": 1}]},
                          {"key": "1", "encounters": [{"name": "lizard man shaman", "count": 1}]})
    m = run(task, truth, ext).metrics
    assert m["encounters_non_srd"] == 1
    assert m["encounters_resolution_accuracy"] is None and m["encounters_custom_accuracy"] is None


# ------------------------------------------------- treasure, doors, entrance


def test_treasure_presence_and_letters(task, mod):
    assert mod.read_treasure("a sack of something shiny") == (True, set())  # unparsed counts as seen
    assert mod.read_treasure("None") == (False, set())
    assert mod.read_treasure(["Treasure Type C", "12 gp"]) == (True, {"C"})
    assert mod.read_treasure({"present": False}) == (False, set())
    truth, ext = one_area({"key": "1", "treasure": {"present": True, "letters": ["C"]}},
                          {"key": "1", "treasure": "an iron box (treasure type C)"})
    m = run(task, truth, ext).metrics
    assert m["treasure_presence_accuracy"] == 1.0 and m["treasure_letters_accuracy"] == 1.0
    ext["dungeons"][0]["levels"][0]["areas"][0]["treasure"] = None
    m = run(task, truth, ext).metrics
    assert m["treasure_presence_accuracy"] == 0.0 and m["treasure_letters_accuracy"] == 0.0


def test_doors_presence_kind_and_lock(task):
    truth = {"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [
        {"key": "1", "connections": ["2", "3"], "doors": {"2": {"kind": "door", "locked": True}}},
        {"key": "2", "connections": ["1"]},
        {"key": "3", "connections": ["1", "4"]},
        {"key": "4", "connections": ["3"], "doors": {"3": {"kind": "secret_door", "locked": False}}},
        {"key": "5"}]}]}]}
    ext = {"dungeons": [{"name": "S", "levels": [{"number": 1, "areas": [
        {"key": "1", "doors": {"2": {"kind": "door", "locked": False}, "3": {"kind": "door"}}},  # 1-3: omitted → FP
        {"key": "2", "doors": {"5": {"kind": "door"}}},                                          # no asserting end
        {"key": "3", "doors": {"4": "secret door"}},
        {"key": "4"}, {"key": "5"}]}]}]}
    res = run(task, truth, ext)
    m = res.metrics
    assert (m["doors_tp"], m["doors_fp"], m["doors_fn"]) == (2, 1, 0)
    assert m["doors_kind_accuracy"] == 1.0
    assert m["doors_locked_accuracy"] == 0.5  # 1-2 extracted unlocked
    assert rows(res, "doors", "door", "spurious")[0]["area"] == "1 – 3"
    assert "neither endpoint asserts doors" in rows(res, "doors", "door", "ignored")[0]["reason"]


def test_entrance_per_aligned_site(task):
    truth, ext = one_area({"key": "1"}, entrance={"level": 1, "key": "1"})
    assert run(task, truth, ext).metrics["entrance_accuracy"] == 0.0  # none extracted
    ext["dungeons"][0]["entrance"] = {"key": "1"}
    assert run(task, truth, ext).metrics["entrance_accuracy"] == 1.0
    ext["dungeons"][0]["entrance"] = "2"
    assert run(task, truth, ext).metrics["entrance_accuracy"] == 0.0


# ------------------------------------------------------------------- scope


def test_scope_sets_out_of_scope_truth_aside(task):
    truth = {"dungeons": [
        {"name": "A", "levels": [{"number": 1, "areas": [{"key": "1", "encounters": []}, {"key": "2"}]}]},
        {"name": "E", "levels": [{"number": 1, "areas": [
            {"key": "26", "connections": ["27"]}, {"key": "27", "connections": ["26"]}]}],
         "transitions": [], "entrance": {"level": 1, "key": "27"}},
        {"name": "F", "levels": [{"number": 1, "areas": [{"key": "32"}]}]},
    ]}
    scope = {"sites": [{"name": "A"}, {"name": "E", "areas": ["26"]}]}
    full = copy.deepcopy(truth)
    res = run(task, truth, full, scope=scope)
    m = res.metrics
    assert m["score"] == 1.0
    assert (m["areas_truth"], m["areas_extracted"], m["areas_truth_dungeons"]) == (3, 3, 2)
    assert m["connections_tp"] + m["connections_fn"] + m["connections_fp"] == 0  # 26-27 leaves both sides
    assert m["entrance_denominator"] == 0  # E's way in is outside the pages
    # a hallucinated area still counts; an unaligned site counts unless the scope says the list is partial
    full["dungeons"][0]["levels"][0]["areas"].append({"key": "99"})
    full["dungeons"].append({"name": "Town", "levels": [{"number": 1, "areas": [{"key": "R1"}]}]})
    m = run(task, truth, full, scope=scope).metrics
    assert (m["areas_fp"], m["areas_dungeons_fp"]) == (2, 1)
    m = run(task, truth, full, scope={**scope, "unaligned_sites": "ignore"}).metrics
    assert (m["areas_fp"], m["areas_dungeons_fp"]) == (1, 0)
    with pytest.raises(InvalidCorpus, match="no truth dungeon named 'Z'"):
        run(task, truth, full, scope={"sites": [{"name": "Z"}]})


# ------------------------------------------------------- generic helpers


def test_tree_alignment_helpers():
    assert align_one_to_one([{1, 2, 3}, {3, 4}], [{3, 4}, {1, 2}]) == {0: (1, 2), 1: (0, 2)}
    assert align_one_to_one([{1}], [{2}], ["Crypt"], ["the crypt"]) == {0: (0, 0)}  # equal names, no shared key
    assert align_one_to_one([{1}], [{2}], ["Crypt"], ["Tomb"]) == {}
    assert align_many_to_one([{1, 2}, {3}, {9}], [{1, 2, 3}, {3}], [1, 2, 3], [1, 2]) == {0: (0, 2), 1: (1, 1)}
    assert mean_metrics([{"a": 1.0, "b": None}, {"a": 0.0, "b": None}]) == {"a": 0.5, "b": None}


def test_the_fold_is_the_shared_one(mod):
    assert mod.models.fold is text_mod.fold and mod.families.fold is text_mod.fold and mod.catalog.fold is text_mod.fold


def test_a_record_off_the_schema_scores_as_empty_with_a_note(task):
    res = run(task, TOWER, {"dungeons": "the tower"})
    assert res.metrics["areas_recall"] == 0 and res.score == 0.0
    assert res.notes[0].startswith("extraction does not follow the schema")
    # lenient where it is harmless: bare creature names, numeric keys, unknown extra keys
    truth, _ = one_area({"key": "7", "encounters": [{"name": "orc"}]})
    ext = {"dungeons": [{"name": "S", "summary": "x", "levels": [{"areas": [{"key": 7, "encounters": ["Orcs"]}]}]}]}
    assert run(task, truth, ext).metrics["encounters_name_f1"] == 1.0


def test_an_area_on_the_wrong_level_is_a_miss_and_a_false_positive(task):
    ext = copy.deepcopy(TOWER)
    lv1, lv2 = ext["dungeons"][0]["levels"]
    lv2["areas"].append(lv1["areas"].pop(1))  # area 2 printed on level 1, extracted on level 2
    res = run(task, TOWER, ext)
    assert (res.metrics["areas_fn"], res.metrics["areas_fp"]) == (1, 1)
    (fp,) = rows(res, "areas", "area", "spurious")
    assert fp["reason"] == "printed on level 1, extracted on level 2, which printed level(s) 2 align to"


def test_details_carry_the_scored_graph_for_charts(task):
    ext = copy.deepcopy(TOWER)
    ext["dungeons"][0]["levels"][1]["areas"][0]["connections"] = []
    edges = run(task, TOWER, ext).details["edges"]
    assert {(e["family"], e["a"], e["b"], e["outcome"]) for e in edges} == {
        ("connections", "1", "2", "matched"), ("connections", "3", "4", "matched"),
        ("doors", "1", "2", "matched"), ("transitions", "2", "3", "matched")}
    assert {(e["a_level"], e["b_level"]) for e in edges if e["family"] == "transitions"} == {(1, 2)}
