"""The noise band and the regression rule: `evalkit band` and `evalkit check`.

Sweeps are replayed from independently recorded cassettes (`cassette:path=…`, one JSONL per
recording, written here with `evalkit.backends.cassette.make_record`), through `--no-notebooks` so the
module stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_factory import add_member, cli, write_yaml

from evalkit.board.regress import compare, direction
from evalkit.results.band import README_END, README_START, Band, compute_band, render_markdown
from evalkit.scoring.stats import mean_ci, sign_flip_p

TASK = {
    "id": "memos",
    "description": "rates that must add up",
    "prompt": {"system": "Extract the fields.", "user": "Document:\n{document}"},
    "schema": {"type": "object"},
    "scorer": "fields",
    "scoring": {"fields": {"account_id": {"kind": "id", "weight": 2, "identifier": True},
                           "rate": {"kind": "number", "tolerance": 0.01},
                           "commission": {"kind": "number", "tolerance": 0.01}},
                "gate": {"required": ["account_id"],
                         "sum_equals": [{"fields": ["rate", "commission"], "total": 1.0, "tolerance": 0.001}]}},
}
MEMBERS = ("m0", "m1", "m2")



def truth(i: int) -> dict:
    return {"account_id": f"ACC-{i:03d}", "rate": 0.7, "commission": 0.3}


MODEL = "gemma-3-270m"


def cassette(corpus: Path, path: Path, changes: dict[str, dict]) -> Path:
    """A cassette as a recording session would leave it: one record per member's extraction request."""
    from evalkit.backends import Completion
    from evalkit.backends.cassette import make_record
    from evalkit.corpus.sources import check_integrity, read_document
    from evalkit.corpus.tasks import load_task
    from evalkit.stages.pipeline import render_request

    task = load_task(corpus / "memos")
    lines = []
    for i, m in enumerate(MEMBERS):
        member = task.member(m)
        request = render_request(task, member, read_document(check_integrity(member, None)))
        record = truth(i) | changes.get(m, {})
        completion = Completion(record=record, raw=json.dumps(record), model=MODEL, input_tokens=120 + i,
                                output_tokens=30, usd=0.0001, latency_s=0.5)
        lines.append(json.dumps(make_record(request, MODEL, "openai", completion), sort_keys=True))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("band")
    corpus = root / "corpus"
    write_yaml(corpus / "memos" / "task.yaml", TASK)
    for i, m in enumerate(MEMBERS):
        add_member(corpus / "memos", m, f"Account ACC-{i:03d} pays a rate of 0.7 and a commission of 0.3.\n", truth(i))
    recorded = {
        "a": cassette(corpus, root / "a.jsonl", {}),
        "b": cassette(corpus, root / "b.jsonl", {"m1": {"commission": None}}),  # the second recording differs a little
        # The planted regression: rates within the field tolerance, but rate + commission = 1.005 fails the gate.
        "c": cassette(corpus, root / "c.jsonl", {"m0": {"rate": 0.705}, "m2": {"rate": 0.705}}),
    }
    readme = root / "README.md"
    readme.write_text(f"# x\n\n{README_START}\nold table\n{README_END}\n\nafter\n")
    runs = root / "runs"
    band = cli("band", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--runs", runs, "--readme", readme,
               "--sweep-backend", f"gemma=cassette:path={recorded['a']}",
               "--sweep-backend", f"gemma=cassette:path={recorded['b']}")
    standing = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", runs / "standing",
                   "--backend", f"gemma=cassette:path={recorded['a']}", "--update-scoreboard")
    return {"root": root, "corpus": corpus, "recorded": recorded, "readme": readme, "runs": runs, "band": band,
            "standing": standing}


def test_two_sweeps_produce_a_band_file_and_readme_table(world):
    assert world["band"].exit_code == 0, world["band"].output
    band = json.loads((world["corpus"] / "band.json").read_text())
    assert band["schema_version"] == 1 and band["floor"] == 0.02 and len(band["sweeps"]) == 2
    for sweep, k in zip(band["sweeps"], "ab"):
        assert sweep["backend"] == "gemma" and sweep["spec"].startswith(f"cassette:path={world['recorded'][k]}")
    metrics = band["tasks"]["memos"]["metrics"]
    assert band["tasks"]["memos"]["members"] == 3
    # m1 lost its commission in the second recording: score 1 → 3/4 for one of three members.
    assert metrics["score"]["sweep_means"] == [1.0, round((1 + 0.75 + 1) / 3, 6)]
    assert metrics["score"]["band"] == metrics["score"]["spread"] == round(0.25 / 3, 6)
    assert metrics["gate_agrees"]["spread"] == 0 and metrics["gate_agrees"]["band"] == 0.02  # floored
    assert metrics["score"]["gated"] and not metrics["matched"]["gated"] and not metrics["missing"]["gated"]
    lo, hi = metrics["score"]["ci"]
    assert lo <= metrics["score"]["mean"] <= hi
    text = world["readme"].read_text()
    assert "old table" not in text and "| `memos` | `score` | 0.083 |" in text and text.endswith("after\n")
    assert "`matched`" not in text  # count metrics are not gated, so not in the README table
    # Deterministic: the same sweeps give the same band, bootstrap included.
    sweeps = sorted(p for p in world["runs"].iterdir() if "-band-" in p.name)
    assert len(sweeps) == 2
    again = compute_band(sweeps, band_dir=world["corpus"])
    assert again["tasks"] == band["tasks"]
    assert "| `memos` | `score` |" in render_markdown(again)


def test_planted_regression_fails_check_naming_the_metric_then_justify_passes(world):
    assert world["standing"].exit_code == 0, world["standing"].output
    board_file = world["corpus"] / "scoreboard.json"
    new_run = world["runs"] / "check-c"
    res = cli("check", "--corpus", world["corpus"], "--no-notebooks", "--workers", 2, "--out", new_run,
              "--backend", f"gemma=cassette:path={world['recorded']['c']}")
    assert res.exit_code == 1, res.output
    regressions = [line for line in res.output.splitlines() if "REGRESSION" in line]
    assert len(regressions) == 1 and "gate_agrees" in regressions[0], res.output
    assert "standing 1.0000 → new 0.3333" in regressions[0] and "band 0.0200" in regressions[0]
    assert "p=0.2500" in regressions[0] and "n=3" in regressions[0]  # exact sign-flip: 1 of 4 patterns
    assert "unjustified regression(s): memos/gate_agrees" in res.output
    before = json.loads(board_file.read_text())
    assert before["tasks"]["memos"]["m0"]["gemma"]["metrics"]["gate_agrees"] is True  # a failing check writes nothing
    run = before["tasks"]["memos"]["m0"]["gemma"]["run"]
    assert run["model"] == MODEL and run["replayed"] is True and run["input_tokens"] == 120 and run["usd"] == 0.0001

    res = cli("check", new_run, "--corpus", world["corpus"], "--justify", 'gate_agrees="planted for the test"')
    assert res.exit_code == 0, res.output
    assert 'justified: "planted for the test"' in res.output
    board = json.loads(board_file.read_text())
    for m in MEMBERS:
        entry = board["tasks"]["memos"][m]["gemma"]
        just = entry["justifications"]["gate_agrees"]
        assert just["reason"] == "planted for the test"
        assert just["standing"] == 1.0 and just["new"] == round(1 / 3, 6) and just["band"] == 0.02
    assert board["tasks"]["memos"]["m0"]["gemma"]["metrics"]["gate_agrees"] is False  # the new sweep now stands

    # Against the new standing, the original recording is an improvement: reported, and exit 0.
    res = cli("check", world["runs"] / "standing", "--corpus", world["corpus"])
    assert res.exit_code == 0, res.output
    assert "Improvements (1):" in res.output and "improved   memos [gemma] gate_agrees" in res.output


def test_check_usage_and_missing_board(tmp_path, world):
    res = cli("check", "--corpus", tmp_path)
    assert res.exit_code == 2 and "RUN_DIR" in res.output
    res = cli("check", world["runs"] / "standing", "--corpus", tmp_path)
    assert res.exit_code == 3 and "no scoreboard yet" in res.output
    res = cli("check", world["runs"] / "standing", "--corpus", world["corpus"], "--justify", "score")
    assert res.exit_code == 2 and "reason" in res.output


def test_band_needs_two_sweeps_and_one_mode(world):
    res = cli("band", "--corpus", world["corpus"], "--sweep-backend", "gemma=fake")
    assert res.exit_code == 2
    res = cli("band", "--corpus", world["corpus"], "--backend", "gemma=fake")
    assert res.exit_code == 2 and "--sweeps" in res.output
    res = cli("band", "--corpus", world["corpus"], "--backend", "x=fake", "--sweep-backend", "y=fake", "--sweeps", 2)
    assert res.exit_code == 2 and "exactly one" in res.output


# --------------------------------------------------------------------------- the statistics, directly


def test_direction_gates_ratios_not_counts():
    for m in ("score", "field_accuracy", "set_f1", "parties_recall", "links_precision", "gate_agrees"):
        assert direction(m) == "higher", m
    for m in ("matched", "missing", "hallucinated", "links_tp", "links_fp", "links_fn", "gate_blocking", "disagrees"):
        assert direction(m) is None, m


def test_sign_flip_is_exact_and_one_sided():
    assert sign_flip_p([-1.0, -1.0, 0.0], "less") == 0.25
    assert sign_flip_p([-1.0, -1.0, 0.0], "greater") == 1.0
    assert sign_flip_p([0.0, 0.0], "less") == 1.0
    assert sign_flip_p([], "less") is None
    big = [-0.1] * 20  # Monte Carlo branch: seeded, so the same twice
    assert sign_flip_p(big, "less", seed=1) == sign_flip_p(big, "less", seed=1) < 0.001


def test_mean_ci_is_deterministic():
    xs = [0.5, 0.9, 1.0, 0.7, 0.8]
    assert mean_ci(xs, 7) == mean_ci(xs, 7)
    lo, hi = mean_ci(xs, 7)
    assert lo < sum(xs) / len(xs) < hi
    assert mean_ci([0.4], 7) == (0.4, 0.4) and mean_ci([], 7) is None


def test_compare_pairs_members_and_uses_band():
    standing = {"t": {"b": {"x": {"score": 0.9}, "y": {"score": 0.9}, "gone": {"score": 0.0}}}}
    new = {"t": {"b": {"x": {"score": 0.8}, "y": {"score": 0.85}, "fresh": {"score": 0.0}}}}
    band = Band.from_json({"tasks": {"t": {"metrics": {"score": {"band": 0.1}}}}}, "band.json")
    cmp = compare(standing, new, band)
    (c,) = cmp.changes
    assert c.kind == "within" and c.members == 2 and c.band == 0.1  # drop 0.075 < 0.1
    assert any("gone" in n for n in cmp.notes) and any("fresh" in n for n in cmp.notes)
    cmp = compare(standing, new, None, justifications={"t/score": "known"})
    (c,) = cmp.regressions
    assert c.band == 0.02 and c.band_source == "floor" and c.justification == "known" and not cmp.unjustified


def test_check_and_band_are_library_functions_the_commands_only_print(world, tmp_path):
    """`regress.check` and `band.measure` hold what `evalkit check` and `evalkit band` do: called from
    Python they give the same verdict and the same band file, and they print nothing."""
    import io
    from contextlib import redirect_stdout

    from evalkit.backends import BackendSpec
    from evalkit.board.measure import measure
    from evalkit.board.regress import check
    from evalkit.errors import EXIT_FAILED
    from evalkit.results.scoreboard import update_scoreboard
    from evalkit.stages.runner import RunOptions

    board = tmp_path / "board.json"
    update_scoreboard(world["runs"] / "standing", board, corpus=world["corpus"])  # the recording "a" standing
    standing = board.read_text()
    planted = BackendSpec.parse(f"gemma=cassette:path={world['recorded']['c']}")
    seen, printed = [], io.StringIO()
    with redirect_stdout(printed):
        res = check(RunOptions(corpus=world["corpus"], backends=[planted], notebooks=False, workers=2,
                               out=tmp_path / "c"), board=board, on_sweep=seen.append)
        same = check(RunOptions(corpus=world["corpus"], backends=[]), run_dir=world["runs"] / "standing", board=board)
        sweeps = sorted(p for p in world["runs"].iterdir() if "-band-" in p.name)
        done = measure(RunOptions(corpus=world["corpus"], backends=[]), from_runs=sweeps, out=tmp_path / "band.json")
    assert printed.getvalue() == ""
    assert len(seen) == 1 and seen[0].run_dir == tmp_path / "c"  # the fresh sweep, told once
    assert [c.metric for c in res.comparison.regressions] == ["gate_agrees"] and res.exit_code == EXIT_FAILED
    assert res.written is None and board.read_text() == standing  # an unjustified regression writes nothing
    assert not same.comparison.regressions and same.exit_code == 0 and same.written is None
    assert json.loads(done.path.read_text())["tasks"] == json.loads((world["corpus"] / "band.json").read_text())["tasks"]
    assert done.markdown == render_markdown(done.band)
