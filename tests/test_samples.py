"""--samples K: K independent extractions per member × backend, recorded and replayed per sample, their
figures (mean, SD, agreement, pass@k, pass^k), the pages, the band and the pilot read from them.

One K = 3 run (a python: pipeline whose answer depends on the sample index it is given in its `task` dict)
is recorded to a cassette and shared by most tests; its replay must give the same figures with no call.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from corpus_factory import make_corpus, specs

from evalkit._util.jsonio import canonical_sha, read_json
from evalkit.backends import Completion, Request
from evalkit.backends.cassette import (
    Cassette,
    ReplayBackend,
    cassette_key,
    encode_record,
    header,
    make_record,
    merge_samples,
    sample_key,
)
from evalkit.errors import EXIT_BACKEND, UsageError
from evalkit.execution.pool import run_async
from evalkit.results import runfolder
from evalkit.results.samples import backend_figures, headline, item_agreement, member_figures, unstable
from evalkit.stages.runner import RunOptions, run
from evalkit.status import ERROR, SCORED

# m0 always right; m1's rate wrong in odd samples; m2's pipeline crashes in sample 2 (an errored sample).
PIPE = '''
def extract(text, task):
    words = text.split()
    s = task.get("sample", 0)
    rate = float(words[-1].rstrip("."))
    if task["member"].endswith("/m1") and s % 2 == 1:
        rate += 0.3
    if task["member"].endswith("/m2") and s == 2:
        raise RuntimeError("boom")
    return {"account_id": words[1], "rate": rate}


def same(text, task):
    words = text.split()
    return {"account_id": words[1], "rate": float(words[-1].rstrip("."))}
'''
SET = {"temperature": 0.7}


def _opts(root: Path, out: str, backend: str, k: int, **kw) -> RunOptions:
    return RunOptions(corpus=root / "corpus", backends=specs(backend), out=root / out, notebooks=False, html=False,
                      samples=k, settings=dict(SET), **kw)


@pytest.fixture(scope="module")
def k3(tmp_path_factory):
    """(root, the recorded K = 3 run's result)."""
    root = tmp_path_factory.mktemp("samples")
    make_corpus(root, members=3)
    (root / "pipe.py").write_text(PIPE)
    old = os.getcwd()
    os.chdir(root)
    try:
        result = run(_opts(root, "rec", "py=python:pipe.py:extract", 3, record=[f"py={root / 'k3.jsonl'}"]))
    finally:
        os.chdir(old)
    return root, result


# --------------------------------------------------------------------------- the run


def test_k3_run_scores_every_sample_and_the_headline_is_their_mean(k3):
    root, result = k3
    out = {o.member: o for o in result.outcomes}
    assert {m: o.status for m, o in out.items()} == {"m0": SCORED, "m1": SCORED, "m2": SCORED}
    assert out["m0"].score == 1.0 and out["m0"].passed is True
    assert out["m1"].score == pytest.approx((1.0 + 0.5 + 1.0) / 3)  # sample 1 misses the rate (weight 2 of 4)
    assert out["m1"].passed is False  # pass^k: one sample FAILed
    assert out["m2"].score == 1.0 and "2 of 3 scored" in out["m2"].notes[0] and "pipeline_exception" in out["m2"].notes[0]
    assert result.exit_code == EXIT_BACKEND  # an errored sample is an error, even though its member is scored
    home = runfolder.member_dir(root / "rec", "memos", "m1", "py")
    assert [i for i, _ in runfolder.sample_dirs(home)] == [0, 1, 2]
    assert read_json(home / "samples" / "1" / "extraction.json")["sample"] == 1
    assert "sample" not in read_json(home / "extraction.json")  # sample 0: as without --samples
    assert read_json(home / "samples" / "1" / "score.json")["score"] == 0.5
    assert read_json(root / "rec" / "run.json")["parameters"]["samples"] == 3
    # the task's scan sees one result per member × backend, not one per sample
    assert len(runfolder.scan(root / "rec", status=None, unscored=True)) == 3


def test_summary_figures(k3):
    root, result = k3
    b = result.summary["tasks"]["memos"]["backends"][0]
    s = b["samples"]
    assert (s["k"], s["k_scored"], s["k_total"]) == (3, 8, 9)
    assert s["errors"] == {"pipeline_exception": 1}
    assert s["pass_at_k"] == 1.0 and s["pass_hat_k"] == pytest.approx(2 / 3)
    assert s["sample_means"] == pytest.approx([1.0, 2.5 / 3, 1.0])  # sample 2: m2 errored, left out
    assert s["unstable_items"] == 1  # m1's rate
    assert b["score"]["mean"] == pytest.approx((1.0 + 2.5 / 3 + 1.0) / 3)  # over the members' sample means
    assert b["scored"] == 3 and b["calls"]["calls"] == 9  # every sample's call


def test_replay_from_the_cassette_gives_the_same_figures_with_no_call(k3):
    root, recorded = k3
    records = Cassette.load(root / "k3.jsonl").records
    assert sorted(r.get("sample", 0) for r in records) == [0, 0, 0, 1, 1, 1, 2, 2]  # m2's crash was never recorded
    replayed = run(_opts(root, "replay", f"py=cassette:path={root / 'k3.jsonl'}", 3))
    got = {o.member: (o.status, o.score, o.passed) for o in replayed.outcomes}
    assert got["m0"] == (SCORED, 1.0, True) and got["m1"][1:] == (pytest.approx(2.5 / 3), False)
    # m2's sample 2 has no recording: that sample is not covered (an error of the sample), m2 scored from 0 and 1
    m2 = runfolder.read_score(runfolder.sample_dir(runfolder.member_dir(root / "replay", "memos", "m2", "py"), 2))
    assert m2.status == ERROR and m2.cause == "not_covered"
    assert got["m2"] == (SCORED, 1.0, True)
    assert replayed.summary["tasks"]["memos"]["backends"][0]["calls"]["replayed"] == 8


def test_k1_writes_what_a_run_without_samples_writes(k3, tmp_path):
    root, _ = k3
    os.chdir(root)
    a = run(replace(_opts(root, "k1", "fake=fake", 1), settings={}))  # the fake backend: no latency to differ
    b = run(replace(_opts(root, "plain", "fake=fake", 1), settings={}))
    files = lambda d: sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())  # noqa: E731
    assert files(a.run_dir) == files(b.run_dir) and not any("samples" in f for f in files(a.run_dir))
    for f in files(a.run_dir):
        if f != "run.json":  # its start time and --out differ
            assert (a.run_dir / f).read_bytes() == (b.run_dir / f).read_bytes(), f
    assert "samples" not in read_json(a.run_dir / "run.json")["parameters"]
    assert "samples" not in a.summary["tasks"]["memos"]["backends"][0]
    assert a.summary["tasks"]["memos"]["backends"][0]["score"]["mean"] == 1.0
    # a K = 1 run into a folder that held 3 samples leaves none behind
    c = run(replace(_opts(root, "rec2", "py=python:pipe.py:extract", 3), settings=dict(SET)))
    assert (runfolder.member_dir(c.run_dir, "memos", "m0", "py") / "samples").is_dir()
    run(replace(_opts(root, "rec2", "py=python:pipe.py:extract", 1), settings=dict(SET)))
    assert not (runfolder.member_dir(c.run_dir, "memos", "m0", "py") / "samples").exists()


def test_temperature_zero_warns_once(k3, capsys):
    root, _ = k3
    os.chdir(root)
    run(replace(_opts(root, "t0", "py=python:pipe.py:same", 2), settings={}))
    err = capsys.readouterr().err
    assert err.count("--samples 2 at temperature 0: the samples will likely be identical") == 1


# --------------------------------------------------------------------------- cassettes


def _req(member: str = "memos/m0", **kw) -> Request:
    return Request(member=member, call_type="extract", system="s", user="u " + member, schema={}, **kw)


def test_sample_zero_keeps_todays_key_and_sample_i_derives_from_it():
    plain = canonical_sha({"system": "s", "user": "u memos/m0", "schema": {}, "model": "m", "max_tokens": 1024,
                           "temperature": 0.0, "call_type": "extract"})
    assert cassette_key(_req(), "m") == plain
    assert cassette_key(_req(sample=2), "m") == sample_key(plain, 2) != sample_key(plain, 1) != plain
    rec = make_record(_req(sample=2), "m", "openai", Completion(record={"a": 1}, raw='{"a": 1}'))
    assert rec["sample"] == 2 and rec["key"] == sample_key(plain, 2)
    assert "sample" not in make_record(_req(), "m", "openai", Completion(record={"a": 1}, raw='{"a": 1}'))


def _cassette(path: Path, answers: dict[str, str]) -> Path:
    lines = [encode_record(header())]
    for member, raw in answers.items():
        lines.append(encode_record(make_record(_req(member), "m", "openai", Completion(record=json.loads(raw), raw=raw))))
    path.write_bytes(b"".join(lines))
    return path


def test_merge_samples_turns_k_recordings_into_one_multi_sample_cassette(tmp_path):
    ins = [_cassette(tmp_path / f"s{i}.jsonl", {"memos/m0": f'{{"v": {i}}}', "memos/m1": f'{{"v": {10 + i}}}'})
           for i in range(3)]
    counts = merge_samples(tmp_path / "out.jsonl", ins)
    assert counts == {"sample 0": 2, "sample 1": 2, "sample 2": 2}
    backend = ReplayBackend("g", tmp_path / "out.jsonl")

    async def answers():
        return [(await backend.complete(_req(m, sample=i))).record["v"] for i in range(3) for m in ("memos/m0", "memos/m1")]

    assert run_async(answers()) == [0, 10, 1, 11, 2, 12]
    recs = Cassette.load(tmp_path / "out.jsonl").records
    assert [r.get("sample", 0) for r in recs] == [0, 0, 1, 1, 2, 2]
    assert list(recs[2])[:6] == ["key", "call_type", "provider", "model", "member", "sample"]
    with pytest.raises(UsageError, match="byte-identical"):
        merge_samples(tmp_path / "x.jsonl", [ins[0], ins[1], ins[0]])
    with pytest.raises(UsageError, match="already holds samples"):
        merge_samples(tmp_path / "y.jsonl", [ins[0], tmp_path / "out.jsonl"])
    with pytest.raises(UsageError, match="at least two"):
        merge_samples(tmp_path / "z.jsonl", [ins[0]])


def test_merge_samples_tool(tmp_path):
    import subprocess
    import sys

    ins = [_cassette(tmp_path / f"s{i}.jsonl", {"memos/m0": f'{{"v": {i}}}'}) for i in range(2)]
    tool = Path(__file__).resolve().parent.parent / "tools" / "merge_samples.py"
    done = subprocess.run([sys.executable, str(tool), str(tmp_path / "o.jsonl"), *map(str, ins)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "sample 1: 1 record(s)" in done.stdout
    bad = subprocess.run([sys.executable, str(tool), str(tmp_path / "p.jsonl"), str(ins[0]), str(ins[0])],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "byte-identical" in bad.stderr and "Traceback" not in bad.stderr


# --------------------------------------------------------------------------- the figures (pure)


def _s(i, score, passed, outcomes=None, status=SCORED, cause=None):
    items = [{"field": f, "outcome": o} for f, o in (outcomes or {}).items()]
    return {"sample": i, "status": status, "score": score, "passed": passed, "items": items,
            "metrics": {"score": score} if score is not None else {}, **({"cause": cause} if cause else {})}


def test_member_figures_leave_errors_out_and_count_them():
    f = member_figures([_s(0, 1.0, True, {"a": "match"}), _s(1, 0.5, False, {"a": "mismatch"}),
                        _s(2, None, None, status=ERROR, cause="timeout"), _s(3, 0.0, False, {"a": "mismatch"})])
    assert (f["k"], f["k_scored"]) == (4, 3) and f["errors"] == {"timeout": 1}
    assert f["mean"] == pytest.approx(0.5) and f["sd"] == pytest.approx(0.5)
    assert f["scores"] == [1.0, 0.5, None, 0.0]
    assert (f["pass_at_k"], f["pass_hat_k"]) == (True, False)
    assert f["agreement"] == pytest.approx(2 / 3)
    h = headline([_s(0, None, None, status=ERROR, cause="timeout"), _s(1, 0.4, True), _s(2, 0.6, True)])
    assert h.status == SCORED and h.score == pytest.approx(0.5) and h.passed is True
    assert h.metrics["score"] == pytest.approx(0.5) and "errored: sample 0 (timeout)" in h.notes[0]
    assert headline([_s(0, None, None, status=ERROR, cause="timeout")]).status == ERROR  # never a number
    assert member_figures([_s(0, 1.0, None)])["pass_at_k"] is None  # no verdict, no pass@k


def test_item_agreement_and_instability_order():
    tables = [[{"field": "a", "outcome": "match"}, {"field": "b", "outcome": "match"}],
              [{"field": "a", "outcome": "mismatch"}, {"field": "b", "outcome": "match"},
               {"field": "c", "outcome": "extra"}],
              [{"field": "a", "outcome": "missing"}, {"field": "b", "outcome": "match"}]]
    got = {json.loads(i["item"])["field"]: (i["agreement"], i["modal"]) for i in item_agreement(tables)}
    assert got == {"a": (pytest.approx(1 / 3), "match"), "b": (1.0, "match"), "c": (pytest.approx(2 / 3), "absent")}
    order = unstable({"x": tables, "y": [[{"field": "a", "outcome": "match"}], [{"field": "a", "outcome": "miss"}]]})
    assert [(r["member"], json.loads(r["item"])["field"]) for r in order] == [("x", "a"), ("y", "a"), ("x", "c")]
    assert item_agreement(tables[:1]) == []  # one sample: nothing to agree with


def test_backend_figures_sample_means_skip_errored_samples():
    b = backend_figures([[_s(0, 1.0, True), _s(1, 0.0, False)], [_s(0, 0.5, True), _s(1, None, None, status=ERROR, cause="x")]])
    assert b["sample_means"] == [0.75, 0.0] and (b["k_scored"], b["k_total"]) == (3, 4)
    assert b["pass_at_k"] == 1.0 and b["pass_hat_k"] == 0.5


# --------------------------------------------------------------------------- readers


def test_report_frames_scoreboard_pilot_and_band_read_the_samples(k3, tmp_path):
    from evalkit.compare.power import pilot_samples
    from evalkit.report.frames import load_scores, unstable_items
    from evalkit.results.band import compute_band
    from evalkit.results.scoreboard import load_board, update_scoreboard

    root, result = k3
    members, items = load_scores(root / "rec", "memos")
    m1 = members.set_index("member").loc["m1"]
    assert m1["samples"] == 3 and m1["score"] == pytest.approx(2.5 / 3) and m1["verdict"] == "FAIL"
    assert m1["pass_at_k"] is True or m1["pass_at_k"] == True  # noqa: E712 - numpy bool
    assert sorted(items["sample"].unique()) == [0, 1, 2]
    flips = unstable_items(items)
    assert list(flips["item"]) == ["rate"] and list(flips["label"]) == ["m1"]
    assert flips["outcomes"][0] == "match · mismatch · match"

    board = tmp_path / "scoreboard.json"
    update_scoreboard(result, board, corpus=root / "corpus")
    entry = load_board(board)["tasks"]["memos"]["m1"]["py"]
    assert entry["samples"]["k"] == 3 and entry["passed"] is False
    assert entry["metrics"]["score"] == pytest.approx(2.5 / 3)

    label, per_member = pilot_samples(root / "rec", "memos")
    assert label == "py" and len(per_member["m1"]) == 3 and len(per_member["m2"]) == 2

    band = compute_band([root / "rec"], band_dir=tmp_path)
    score = band["tasks"]["memos"]["metrics"]["score"]
    assert len(band["sweeps"]) == 3 and [s["sample"] for s in band["sweeps"]] == [0, 1, 2]
    # the members scored in every sample (m2 errored in sample 2): m0 and m1
    assert band["tasks"]["memos"]["members"] == 2
    assert score["sweep_means"] == pytest.approx([1.0, 0.75, 1.0])


def test_band_refuses_byte_identical_samples(k3, tmp_path):
    from evalkit.results.band import compute_band

    root, _ = k3
    os.chdir(root)
    same = run(_opts(root, "same", "py=python:pipe.py:same", 2))
    with pytest.raises(UsageError, match=r"samples 0 and 1 of .* hold byte-identical answers"):
        compute_band([same.run_dir], band_dir=tmp_path)
    plain = run(replace(_opts(root, "one", "py=python:pipe.py:same", 1), settings={}))
    with pytest.raises(UsageError, match="at least 2 sweeps"):
        compute_band([plain.run_dir], band_dir=tmp_path)
