"""`evalkit check` refuses a partial gate: a standing entry in scope that the new sweep did not cover (or that
errored) makes it exit 7 (`errors.EXIT_PARTIAL`) with one line; --allow-partial gates on what was covered and
says so. The held-out members are standing entries too, gated apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_factory import add_member, cli, write_yaml

from evalkit.errors import EXIT_OK, EXIT_PARTIAL

TASK = {
    "id": "memos", "description": "tiny", "prompt": {"system": "Extract.", "user": "Document:\n{document}"},
    "schema": {"type": "object"}, "scorer": "fields",
    "scoring": {"fields": {"account_id": {"kind": "id", "weight": 2, "identifier": True},
                           "rate": {"kind": "number", "tolerance": 0.01}}},
}
MEMBERS = [f"m{i:02d}" for i in range(13)]
HELDOUT = "m12"
MODEL = "gemma-3-270m"


def truth(i: int) -> dict:
    return {"account_id": f"ACC-{i:03d}", "rate": 0.7}


def cassette(corpus: Path, path: Path, members: list[str]) -> Path:
    """A recording of `members`' extraction requests, each answered with its truth."""
    from evalkit.backends import Completion
    from evalkit.backends.cassette import make_record
    from evalkit.corpus.sources import check_integrity, read_document
    from evalkit.corpus.tasks import load_task
    from evalkit.stages.pipeline import render_request

    task = load_task(corpus / "memos")
    lines = []
    for m in members:
        member = task.member(m)
        request = render_request(task, member, read_document(check_integrity(member, None)))
        record = truth(MEMBERS.index(m))
        completion = Completion(record=record, raw=json.dumps(record), model=MODEL, input_tokens=100, output_tokens=20)
        lines.append(json.dumps(make_record(request, MODEL, "openai", completion), sort_keys=True))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    root = tmp_path_factory.mktemp("partial")
    corpus = root / "corpus"
    write_yaml(corpus / "memos" / "task.yaml", TASK)
    for i, m in enumerate(MEMBERS):
        d = add_member(corpus / "memos", m, f"Account ACC-{i:03d} pays a rate of 0.7.\n", truth(i))
        if m == HELDOUT:
            manifest = (d / "manifest.yaml").read_text()
            (d / "manifest.yaml").write_text(manifest + "heldout: true\n")
    full = cassette(corpus, root / "full.jsonl", MEMBERS)
    standing = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", root / "standing",
                   "--backend", f"gemma=cassette:path={full}", "--update-scoreboard")
    assert standing.exit_code == 0, standing.output
    return root, corpus, full


def test_a_cassette_covering_2_of_13_members_exits_7_with_one_line(board):
    root, corpus, _ = board
    two = cassette(corpus, root / "two.jsonl", MEMBERS[:2])
    res = cli("check", "--corpus", corpus, "--no-notebooks", "--workers", 2, "--out", root / "two",
              "--backend", f"gemma=cassette:path={two}")
    assert res.exit_code == EXIT_PARTIAL, res.output
    assert ("PARTIAL: 2 of 13 standing entries covered (held-out: 0 of 1); 11 not covered, 0 errored: the gate "
            "saw only part of the board; --allow-partial gates on what was covered") in res.output
    assert "OK:" not in res.output

    allowed = cli("check", root / "two", "--corpus", corpus, "--allow-partial")
    assert allowed.exit_code == EXIT_OK, allowed.output
    assert "note: 2 of 13 standing entries covered (held-out: 0 of 1); 11 not covered, 0 errored: gated on what " \
           "was covered (--allow-partial)" in allowed.output
    assert "OK: no unjustified regression" in allowed.output


def test_a_full_check_passes_and_gates_the_held_out_group(board):
    root, corpus, full = board
    res = cli("check", root / "standing", "--corpus", corpus)
    assert res.exit_code == EXIT_OK, res.output
    assert "PARTIAL" not in res.output and "standing entries covered" not in res.output
    from evalkit.board.regress import check
    from evalkit.stages.runner import RunOptions

    out = check(RunOptions(corpus=corpus, backends=[]), run_dir=root / "standing")
    assert out.coverage.entries == out.coverage.covered == 13 and out.coverage.heldout_covered == 1
    from evalkit.corpus.tasks import HELDOUT as HELD
    from evalkit.corpus.tasks import TUNED

    assert {c.group for c in out.comparison.changes} == {TUNED, HELD}  # the held-out group is gated


def test_only_narrows_the_scope_so_a_covered_subset_passes(board):
    root, corpus, _ = board
    res = cli("check", root / "two", "--corpus", corpus, "--only", "m00", "--only", "m01")
    assert res.exit_code == EXIT_OK, res.output
