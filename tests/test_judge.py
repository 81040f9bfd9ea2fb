"""The reference judge: requests, verdicts, judged metrics, the judge cache (a cassette).

Everything is local and deterministic: extraction backends are cassettes built here with
`evalkit.backends.cassette`; the judge is a scripted function (served through ``python:``, replayed
from the cassette it recorded, or answered by the local fake Anthropic server, whose request
counter proves cache hits). The helpers here are shared with test_pairwise, test_ontology and
test_compare.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_factory import cli  # noqa: F401  (also used by test_ontology, test_compare)
from servers.fixtures import *  # noqa: F401,F403  (clean environment, fake servers)

from evalkit._util.jsonio import canonical_sha
from evalkit.backends import BackendSpec
from evalkit.backends.base import Completion
from evalkit.backends.cassette import load_records, make_record
from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.tasks import DEFAULT_CORPUS, load_task
from evalkit.results.records import ExtractionRecord
from evalkit.results.runfolder import JUDGMENTS, read_judgments
from evalkit.scoring import ScoreContext
from evalkit.scoring.graph import SCORER, corpus_metrics, expected_extraction
from evalkit.stages.judge import REFERENCE, candidates, parse_matches, reference_request
from evalkit.stages.pipeline import render_request
from evalkit.stages.runner import RunOptions, run

ROOT = Path(__file__).resolve().parent.parent
TASK = load_task(DEFAULT_CORPUS / "encyclopedia")
TWO = ("copper-wolves", "orla-fenwick")
ALIASES = {"United States": "U.S.", "Brightwater Records": "Brightwater"}

# The scripted judge, as a module source: written to a file for ``--judge python:FILE:judge`` (also in a
# subprocess) and exec'd here for the fake Anthropic server. Reference: a true and an extracted item match
# when all their fields are equal after lower-casing, dropping punctuation and one alias table. Pairwise:
# the slot whose content is longer wins (a content judge: position-consistent); equal length is a tie.
# ``biased`` always answers "A" (a judge with total position bias).
JUDGE_SOURCE = r'''
import json, re
ALIAS = {"us": "united states", "brightwater": "brightwater records"}
def _norm(v):
    s = re.sub(r"[^\w\s]", "", str(v).lower()).strip()
    return ALIAS.get(s, s)
def verdict(user, call_type, biased=False):
    if call_type == "judge.reference":
        T = re.findall(r"^(T\d+): (.*)$", user, re.M)
        X = re.findall(r"^(X\d+): (.*)$", user, re.M)
        out, used = [], set()
        for t, tv in T:
            want = {k: _norm(v) for k, v in json.loads(tv).items()}
            for x, xv in X:
                if x not in used and {k: _norm(v) for k, v in json.loads(xv).items()} == want:
                    out.append({"truth": t, "extracted": x, "reason": "the same, under an alias"})
                    used.add(x)
                    break
        return {"matches": out}
    if biased:
        return {"verdict": "A", "reason": "A comes first"}
    a = re.search(r"Extraction A \(\w+\):\n<<<\n(.*?)\n>>>", user, re.S).group(1)
    b = re.search(r"Extraction B \(\w+\):\n<<<\n(.*?)\n>>>", user, re.S).group(1)
    return {"verdict": "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie", "reason": "more content"}
def judge(text, task):
    return verdict(task["user"], task["call_type"])
def biased(text, task):
    return verdict(task["user"], task["call_type"], biased=True)
'''
SCRIPTED: dict = {}
exec(JUDGE_SOURCE, SCRIPTED)


def judge_file(tmp_path: Path) -> Path:
    path = tmp_path / "scripted_judge.py"
    if not path.exists():
        path.write_text(JUDGE_SOURCE, encoding="utf-8")
    return path


def python_judge(tmp_path: Path, fn: str = "judge") -> str:
    return f"python:{judge_file(tmp_path)}:{fn}"


def anthropic_answer(body: dict) -> dict:
    """The fake Anthropic server's answer: the scripted judge on the request it received."""
    schema = body["tools"][0]["input_schema"]
    call_type = "judge.pairwise" if "verdict" in schema["properties"] else "judge.reference"
    user = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    return SCRIPTED["verdict"](user, call_type)


# -- extraction cassettes ------------------------------------------------------------------------------

def truth(member_id: str) -> dict:
    return expected_extraction(TASK.member(member_id).load_truth())


def aliased(rec: dict, member_id: str = "") -> dict:
    """The truth with some names replaced by aliases (strict misses them; the judge does not)."""
    r = json.loads(json.dumps(rec))
    for e in r["entities"]:
        e["name"] = ALIASES.get(e["name"], e["name"])
    for x in r["relations"]:
        x["head"], x["tail"] = ALIASES.get(x["head"], x["head"]), ALIASES.get(x["tail"], x["tail"])
    return r


def dropped(rec: dict, member_id: str = "") -> dict:
    """The truth less its last entity and last two relations, with a shorter summary."""
    r = json.loads(json.dumps(rec))
    r["entities"], r["relations"] = r["entities"][:-1], r["relations"][:-2]
    r["summary"] = (r["summary"] or "").split(",")[0] or None
    return r


def cassette_lines(model: str, variant, members=TWO, ontology=None, provider: str = "openai") -> list[str]:
    lines = []
    for mid in members:
        m = TASK.member(mid)
        request = render_request(TASK, m, read_document(check_integrity(m, None)), ontology)
        rec = variant(truth(mid), mid)
        completion = Completion(record=rec, raw=json.dumps(rec, ensure_ascii=False), model=model, input_tokens=900,
                                output_tokens=300 + len(mid), latency_s=1.0 + len(mid) / 10, usd=0.0)
        lines.append(json.dumps(make_record(request, model, provider, completion), ensure_ascii=False))
    return lines


def write_cassette(path: Path, model: str, variant, members=TWO, ontology=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(cassette_lines(model, variant, members, ontology)) + "\n", encoding="utf-8")
    return path


def two_cassettes(tmp_path: Path, members=TWO, ontology=None) -> list[tuple[str, str]]:
    a = write_cassette(tmp_path / "cassettes" / "alpha.jsonl", "alpha-model", aliased, members, ontology)
    b = write_cassette(tmp_path / "cassettes" / "beta.jsonl", "beta-model", dropped, members, ontology)
    return [("alpha", f"cassette:path={a}"), ("beta", f"cassette:path={b}")]


def run_graph(out: Path, backends, members=TWO, judge: str | None = None, **kw):
    """`evalkit run` in-process, scoring without notebooks (fast); `backends`: (label, spec) pairs."""
    return run(RunOptions(corpus=DEFAULT_CORPUS, backends=[BackendSpec.parse(s, label=b) for b, s in backends],
                          tasks=["encyclopedia"], only=list(members), out=out, notebooks=False, html=False, workers=1,
                          judge=BackendSpec.parse(judge, label="judge") if judge else None, **kw))


def evalkit(*args, cwd=ROOT, env=None):
    import os

    full = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=full)


def metrics_of(result) -> dict:
    return {(o.member, o.backend): o.metrics for o in result.outcomes}


# -- pure parts ----------------------------------------------------------------------------------------

def _strict(record: dict, member_id: str = "orla-fenwick", extra: dict | None = None):
    ctx = ScoreContext(task_id="encyclopedia", member_id=member_id, source_text="", options=TASK.options,
                       threshold=0.5, extra=extra or {})
    return SCORER.score(record, TASK.member(member_id).load_truth(), ctx)


def test_reference_request_lists_the_strict_leftovers_and_names_no_backend():
    strict = _strict(aliased(truth("orla-fenwick")))
    missed, spurious = candidates(strict.items, "entities")
    assert [r["expected"]["name"] for r in missed] == ["United States"]
    assert [r["extracted"]["name"] for r in spurious] == ["U.S."]
    req = reference_request("encyclopedia/orla-fenwick", "entities", "Some text.", missed, spurious)
    assert req.call_type == REFERENCE and req.temperature == 0.0
    assert 'T1: {"name": "United States", "type": "LOC"}' in req.user
    assert 'X1: {"name": "U.S.", "type": "LOC"}' in req.user
    assert "Some text." in req.user and "alpha" not in req.user
    rel = reference_request("k", "relations", "t", *candidates(strict.items, "relations"), symmetric=["spouse"])
    assert "undirected" in rel.user and "spouse" in rel.user


def test_parse_matches_is_one_to_one_and_ignores_unknown_ids():
    missed = [{"key": ["a", "LOC"], "expected": {"name": "A", "type": "LOC"}},
              {"key": ["b", "LOC"], "expected": {"name": "B", "type": "LOC"}}]
    spurious = [{"key": ["x", "LOC"], "extracted": {"name": "X", "type": "LOC"}}]
    accepted, problems = parse_matches({"matches": [
        {"truth": "T1", "extracted": "X1", "reason": "alias"},
        {"truth": "T2", "extracted": "X1", "reason": "again"},  # X1 already used
        {"truth": "T9", "extracted": "X1", "reason": "no such id"},
        "junk"]}, missed, spurious)
    assert [(p["expected_key"], p["extracted_key"]) for p in accepted] == [(["a", "LOC"], ["x", "LOC"])]
    assert len(problems) == 3
    assert parse_matches({"verdict": "A"}, missed, spurious)[0] is None  # no match list: an error, not "none"
    assert parse_matches({"matches": []}, missed, spurious) == ([], [])


def test_judged_metrics_move_accepted_pairs_to_true_positives_and_ignore_stale_ones():
    rec = aliased(truth("orla-fenwick"))
    strict = _strict(rec)
    m = strict.metrics
    assert all(m[f"judged_{a}_{k}"] is None for a in ("entities", "relations") for k in ("precision", "recall", "f1"))
    judgments = {"axes": {
        "entities": {"status": "judged", "accepted": [
            {"expected_key": ["united state", "LOC"], "extracted_key": ["u s", "LOC"], "reason": "alias"},
            {"expected_key": ["cork", "LOC"], "extracted_key": ["u s", "LOC"]},  # cork was matched: stale
        ]},
        "relations": {"status": "error", "error": "HTTP 500", "accepted": []},
    }}
    judged = _strict(rec, extra={"judgments": judgments})
    j = judged.metrics
    assert (j["judged_entities_tp"], j["judged_entities_fp"], j["judged_entities_fn"]) == (
        m["entities_tp"] + 1, m["entities_fp"] - 1, m["entities_fn"] - 1)
    assert j["judged_entities_f1"] == 1.0 and j["judged_entities_accepted"] == 1
    assert j["judged_relations_f1"] is None  # the judge failed on that axis: unknown, not 0
    assert any("relations not judged" in n for n in judged.notes)
    assert judged.score == strict.score  # the headline stays strict
    rows = {r["extracted"]["name"]: r for r in judged.items if r["axis"] == "entities" and r["outcome"] == "spurious"}
    assert rows["U.S."]["judged"] == "accepted" and "judge" in rows["U.S."]["reason"]
    assert {r["judged"] for r in judged.items if r["axis"] == "summary"} == {None}
    # corpus: judged micro figures only when every member was judged
    assert corpus_metrics([judged])["judged_entities_f1"] == 1.0
    assert corpus_metrics([judged, strict])["judged_entities_f1"] is None
    assert corpus_metrics([strict])["judged_relations_f1"] is None


# -- the judge phase in a run --------------------------------------------------------------------------

def test_judged_metrics_are_null_without_a_judge(tmp_path):
    result = run_graph(tmp_path / "runs" / "plain", two_cassettes(tmp_path))
    assert result.exit_code == 0
    for (member, backend), m in metrics_of(result).items():
        judged = {k: v for k, v in m.items() if k.startswith("judged_")}
        assert judged and all(v is None for v in judged.values()), (member, backend, judged)
    assert not list((tmp_path / "runs").rglob(JUDGMENTS))
    assert "judge" not in json.loads((tmp_path / "runs" / "plain" / "run.json").read_text())


def test_scripted_judge_fills_judged_metrics_and_replays_from_its_cassette(tmp_path):
    backends = two_cassettes(tmp_path)
    first = run_graph(tmp_path / "runs" / "one", backends, judge=python_judge(tmp_path))
    m = metrics_of(first)
    alpha, beta = m[("orla-fenwick", "alpha")], m[("orla-fenwick", "beta")]
    assert alpha["entities_f1"] < 1.0 and alpha["judged_entities_f1"] == 1.0  # the alias was accepted
    assert alpha["relations_f1"] < 1.0 and alpha["judged_relations_f1"] == 1.0
    assert beta["judged_relations_f1"] == beta["relations_f1"]  # nothing spurious: nothing to judge
    j = json.loads((tmp_path / "runs" / "one" / "encyclopedia" / "orla-fenwick" / "beta" / JUDGMENTS).read_text())
    assert {a: v["status"] for a, v in j["axes"].items()} == {"entities": "nothing_to_judge",
                                                               "relations": "nothing_to_judge"}
    cache = tmp_path / "runs" / "judge-cache.jsonl"  # the default: beside the run folder
    records = load_records(cache)
    assert records and {r["call_type"] for r in records} == {REFERENCE}
    assert len({r["key"] for r in records}) == len(records)

    # The recorded judge cache is a cassette: replaying it is a scripted judge that never calls anything.
    second = run_graph(tmp_path / "runs" / "two", backends, judge=f"cassette:path={cache}")
    assert metrics_of(second) == m
    for member in TWO:
        for b in ("alpha", "beta"):
            one = tmp_path / "runs" / "one" / "encyclopedia" / member / b / JUDGMENTS
            two = tmp_path / "runs" / "two" / "encyclopedia" / member / b / JUDGMENTS
            assert json.loads(one.read_text())["axes"] == json.loads(two.read_text())["axes"]
    summary = json.loads((tmp_path / "runs" / "two" / "judge.json").read_text())
    assert summary["calls"] == 0 and summary["replayed"] == summary["requests"] > 0


def test_judge_cache_second_run_makes_zero_judge_calls(tmp_path, ant):
    ant.answer = anthropic_answer
    backends = two_cassettes(tmp_path)
    first = run_graph(tmp_path / "runs" / "one", backends, judge="anthropic:model=claude-judge", judge_mode="both")
    calls = ant.count
    assert calls > 0
    summary = json.loads((tmp_path / "runs" / "one" / "judge.json").read_text())
    assert summary["calls"] == calls == summary["requests"]
    second = run_graph(tmp_path / "runs" / "two", backends, judge="anthropic:model=claude-judge", judge_mode="both")
    assert ant.count == calls  # every judge request came from the cache
    assert metrics_of(second) == metrics_of(first)
    assert json.loads((tmp_path / "runs" / "two" / "judge.json").read_text())["calls"] == 0
    # reference and pairwise entries share the cache and never collide: call type is part of the key
    records = load_records(tmp_path / "runs" / "judge-cache.jsonl")
    assert {r["call_type"] for r in records} == {"judge.reference", "judge.pairwise"}
    assert len({r["key"] for r in records}) == len(records)
    # an explicit --judge-cache elsewhere starts empty: the judge is called again
    run_graph(tmp_path / "runs" / "three", backends, judge="anthropic:model=claude-judge", judge_mode="both",
              judge_cache=tmp_path / "other-cache.jsonl")
    assert ant.count == 2 * calls


def test_a_judge_error_leaves_that_axis_null(tmp_path, ant, capsys):
    ant.answer = anthropic_answer
    ant.script += [{"status": 400, "message": "bad request"}] * 20  # not retried: every judge call fails
    result = run_graph(tmp_path / "runs" / "err", two_cassettes(tmp_path), judge="anthropic:model=claude-judge")
    alpha = metrics_of(result)[("orla-fenwick", "alpha")]
    assert alpha["judged_entities_f1"] is None and alpha["entities_f1"] is not None
    assert not load_records(tmp_path / "runs" / "judge-cache.jsonl")  # errors are never cached
    assert "judgment(s) failed" in capsys.readouterr().err


def test_a_judge_without_its_key_is_skipped_with_one_note(tmp_path, ant, monkeypatch, capsys):
    """No ANTHROPIC_API_KEY: the run is not aborted (exit 5 before); strict figures are reported, judged ones
    stay null, one note says why, run.json records the skip, nothing is called — a dry run shows no guard."""
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    backends = two_cassettes(tmp_path)
    plain = run_graph(tmp_path / "runs" / "plain", backends)
    capsys.readouterr()
    dry = run_graph(tmp_path / "runs" / "dry", backends, judge="anthropic:model=claude-judge", dry_run=True)
    assert dry.exit_code == 0 and dry.plan.guards == []
    assert "judge skipped" in capsys.readouterr().err
    result = run_graph(tmp_path / "runs" / "nokey", backends, judge="anthropic:model=claude-judge")
    assert result.exit_code == plain.exit_code == 0 and ant.count == 0
    assert metrics_of(result) == metrics_of(plain)  # the strict figures, judged ones null
    assert all(v is None for m in metrics_of(result).values() for k, v in m.items() if k.startswith("judged_"))
    err = capsys.readouterr().err
    assert err.count("judge skipped: backend judge: ANTHROPIC_API_KEY is not set") == 1
    judge = json.loads((tmp_path / "runs" / "nokey" / "run.json").read_text())["judge"]
    assert judge["spec"] == "anthropic:model=claude-judge" and "ANTHROPIC_API_KEY" in judge["skipped"]
    assert not list((tmp_path / "runs" / "nokey").rglob(JUDGMENTS))


def test_verdicts_of_an_earlier_run_are_not_inherited(tmp_path):
    backends = two_cassettes(tmp_path)
    out = tmp_path / "runs" / "same"
    run_graph(out, backends, judge=python_judge(tmp_path))
    assert list(out.rglob(JUDGMENTS))
    again = run_graph(out, backends)  # same folder, no judge
    assert all(v is None for m in metrics_of(again).values() for k, v in m.items() if k.startswith("judged_"))
    assert not list(out.rglob(JUDGMENTS))


def test_read_judgments_only_for_the_extraction_it_judged(tmp_path):
    ext = ExtractionRecord({"record": {"entities": []}})
    (tmp_path / JUDGMENTS).write_text(json.dumps({"extraction_sha256": canonical_sha(ext.record), "axes": {}}))
    assert read_judgments(tmp_path, ext) is not None
    assert read_judgments(tmp_path, ExtractionRecord({"record": {"entities": [{"name": "x"}]}})) is None


@pytest.mark.parametrize("args, message", [
    (["--judge-mode", "pairwise"], "--judge-mode needs --judge"),
    (["--judge", "fake"], "a judge must be a model"),
    (["--judge", "python:x.py:f", "--judge-mode", "pairwise"], "needs at least two --backend"),
    (["--judge-cache", "c.jsonl"], "--judge-cache needs --judge"),
])
def test_judge_usage_errors_exit_2(tmp_path, args, message):
    res = cli("run", "--task", "encyclopedia", "--only", "copper-wolves", "--backend", "fake",
              "--out", tmp_path / "run", *args)
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not (tmp_path / "run").exists()


def test_the_judge_takes_a_scorer_by_its_declared_shape_not_its_name():
    """`--judge` judges the tasks whose scorer declares the graph shape (`Scorer.judged`): a third-party scorer
    under any name that declares it is judged; one named "graph" that declares nothing is not."""
    from dataclasses import replace
    from types import SimpleNamespace

    from evalkit.scoring.base import JUDGED_GRAPH
    from evalkit.scoring.fields import SCORER as FIELDS
    from evalkit.stages.judge import _is_graph

    def member(scorer):
        return SimpleNamespace(task=SimpleNamespace(scorer=scorer))

    assert SCORER.judged == JUDGED_GRAPH and FIELDS.judged is None
    assert _is_graph(member(replace(SCORER, name="acme-kg")))  # an installed scorer declaring the shape
    assert not _is_graph(member(replace(SCORER, judged=None)))  # the name alone is not enough
    assert not _is_graph(member(FIELDS))
