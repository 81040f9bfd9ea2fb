"""`evalkit run` / `evalkit score` end to end on the bundled deal-memos task."""

import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from evalkit.corpus.tasks import DEFAULT_CORPUS, load_task
from evalkit.report.overview import without_run_block

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ROOT / "tests" / "fixtures" / "deal-memos-planted"


def evalkit(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *args], capture_output=True, text=True, cwd=cwd)


def member_lines(stdout: str) -> dict[str, str]:
    """member → what its verdict line says (``[n/N] task/member … 100.0% PASS``, or a skipped member's line)."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^(?:\[\d+/\d+\] [^/\s]+/|  )(\S+) … (.*)$", stdout, re.M)}


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fake") / "run"
    return out, evalkit("run", "--task", "deal-memos", "--backend", "fake", "--out", str(out))


def test_fake_backend_scores_every_member_100_percent(fake_run):
    out, proc = fake_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = member_lines(proc.stdout)
    members = [m.id for m in load_task(DEFAULT_CORPUS / "deal-memos").members()]
    assert sorted(lines) == sorted(members) and len(members) >= 10
    assert all(v == "100.0% PASS" for v in lines.values()), lines
    n = len(members)
    # percent-words is held out: counted in passed/N, its mean reported apart
    assert f"  fake: {n}/{n} passed · mean score 100.0% [100.0%, 100.0%] over {n - 1} scored · held out 1: mean 100.0%" \
        in proc.stdout
    assert (out / "index.html").is_file()
    for m in members:
        for name in ("extract.ipynb", "score.ipynb", "extract.html", "score.html", "score.json"):
            assert (out / "deal-memos" / m / "fake" / name).is_file(), (m, name)
    assert (out / "deal-memos" / "report.ipynb").is_file() and (out / "deal-memos" / "report.html").is_file()


def test_planted_predictions_get_exact_scores_and_flags(tmp_path):
    proc = evalkit("score", "--task", "deal-memos", "--predictions", str(PLANTED), "--out", str(tmp_path / "run"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    task = load_task(DEFAULT_CORPUS / "deal-memos")
    W = sum(Fraction(f.weight) for f in task.options.fields.values())
    penalty = Fraction(task.options.hallucination_penalty)
    expected = {
        "clean-single-term": (W - 2) / W,  # wrong rate: loses its weight
        "distractor-prose": (W - 2) / (W - 2 + 2 * penalty),  # hallucinated id: heavy miss
        "multi-condition": (W - 2) / W,  # missing date
    }
    lines = member_lines(proc.stdout)
    for member, score in expected.items():
        assert lines[member] == f"{100 * float(score):5.1f}% FAIL", (member, lines[member])
    others = set(lines) - set(expected)
    assert others and all(lines[m] == "100.0% PASS" for m in others)
    out = proc.stdout
    assert re.search(r"clean-single-term … .*\n\s+↳ term_rate: mismatch", out)
    assert re.search(r"distractor-prose … .*\n\s+↳ account_id: HALLUCINATED", out)
    assert re.search(r"multi-condition … .*\n\s+↳ lifecycle_term_start: missing", out)
    assert re.search(r"↳ gate: .*lifecycle_term_start", out)
    n = len(lines)
    assert f"  predictions: {n - 3}/{n} passed" in out


def test_same_inputs_give_byte_identical_notebooks_and_html(tmp_path):
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        proc = evalkit("run", "--task", "deal-memos", "--only", "hostile-markup", "--only", "clean-single-term",
                       "--backend", "fake", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        runs.append(out)
    files = sorted(p.relative_to(runs[0]) for p in runs[0].rglob("*") if p.suffix in (".ipynb", ".html", ".json")
                   and p.name != "run.json")
    assert len(files) >= 10
    for rel in files:
        a, b = ((r / rel).read_bytes() for r in runs)
        if rel.name == "index.html":  # the run block (its date and command, `evalkit.report.overview`) differs by design
            a, b = without_run_block(a), without_run_block(b)
            assert b"<!-- run:" not in a
        assert a == b, rel


def test_integrity_mismatch_refuses_member_with_exit_4_and_no_calls(tmp_path):
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(DEFAULT_CORPUS / "deal-memos", corpus / "deal-memos")
    memo = corpus / "deal-memos" / "clean-single-term" / "memo.md"
    memo.write_text(memo.read_text() + "\nP.S. tampered\n")
    proc = evalkit("run", "--corpus", str(corpus), "--only", "clean-single-term",
                   "--backend", "predictions:dir=/nonexistent", "--out", str(tmp_path / "run"))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "REFUSED" in proc.stdout and "hashes to" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "deal-memos" / "clean-single-term").exists()  # no extraction, no calls
