"""`evalkit sources`: every pointer member's expected file, present and matching its sha256 or not, with the public
data set it comes from; `--check` fails naming each missing or altered file; a run collapses missing sources."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.corpus.datasets import DATASETS, MISSING, OK, expected_files
from evalkit.corpus.tasks import DEFAULT_CORPUS
from evalkit.errors import EXIT_INTEGRITY, EXIT_INVALID, EXIT_OK

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("EVALKIT_SOURCES") or ROOT.parent / "shared" / "data")
needs_data = pytest.mark.skipif(not (DATA / "cuad").is_dir(), reason=f"no data folder at {DATA}")


def evalkit(*args, sources=None):
    env = {k: v for k, v in os.environ.items() if k != "EVALKIT_SOURCES"}
    if sources is not None:
        env["EVALKIT_SOURCES"] = str(sources)
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env)


def pointers() -> set[str]:
    return {e.pointer for e in expected_files(DEFAULT_CORPUS, None)}


def test_without_sources_check_names_every_missing_file_and_its_data_set():
    expected = expected_files(DEFAULT_CORPUS, None)
    assert expected and all(e.status == MISSING for e in expected)
    assert {e.dataset.folder for e in expected} == set(DATASETS)  # every pointer belongs to a known data set
    proc = evalkit("sources", "--check")
    assert proc.returncode == EXIT_INVALID
    lines = [line for line in proc.stderr.splitlines() if line.startswith("evalkit: missing: ")]
    assert len(lines) == len(pointers())
    for p in pointers():
        (line,) = [line for line in lines if f"/{p} (" in line]
        assert f"data set {p.split('/')[0]}" in line
    for d in DATASETS.values():  # the listing says where each data set is published, its licence and layout
        assert d.page in proc.stdout and d.licence in proc.stdout and d.layout in proc.stdout


@needs_data
def test_with_the_data_folder_every_file_matches_and_check_exits_0():
    proc = evalkit("sources", "--check", sources=DATA)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert len(re.findall(r"^  ok +\S+", proc.stdout, re.M)) == len(pointers())
    assert f"{len(pointers())} files expected: {len(pointers())} ok, 0 missing or altered" in proc.stdout


@needs_data
def test_an_altered_and_a_missing_file_are_each_named(tmp_path):
    sources = tmp_path / "data"
    shutil.copytree(DATA, sources)
    altered, gone = sources / "cuad" / "vnue-promotion-2015" / "contract.txt", sources / "jn1" / "truth.yaml"
    gone.unlink()
    proc = evalkit("sources", "--check", sources=sources)
    assert proc.returncode == EXIT_INVALID
    assert proc.stderr.count("evalkit: ") == 1 and f"missing: {gone} (data set jn1" in proc.stderr
    with open(altered, "a") as f:
        f.write(" ")
    proc = evalkit("sources", "--check", sources=sources)
    assert proc.returncode == EXIT_INTEGRITY and proc.stderr.count("evalkit: ") == 2
    assert re.search(rf"altered: {re.escape(str(altered))} hashes to [0-9a-f]{{64}}, pinned [0-9a-f]{{64}} "
                     r"\(data set cuad", proc.stderr)
    statuses = {e.pointer: e.status for e in expected_files(DEFAULT_CORPUS, sources)}
    assert statuses["jn1/truth.yaml"] == MISSING and statuses["cuad/vnue-promotion-2015/contract.txt"] == "altered"
    assert sum(s == OK for s in statuses.values()) == len(statuses) - 2


def test_a_run_collapses_missing_sources_into_one_line_per_task(tmp_path):
    proc = evalkit("run", "--task", "cuad-contracts", "--backend", "fake", "--no-html", "--out", str(tmp_path / "r"))
    assert proc.returncode == EXIT_OK, proc.stderr
    n = len([p for p in pointers() if p.startswith("cuad/")])
    assert re.findall(r"^  (\d+) members skipped: .*`evalkit sources`", proc.stdout, re.M) == [str(n)]
    assert "aig-capital-maintenance-2014" not in proc.stdout  # no line per member
