"""One scoring path: score.ipynb and ``--no-notebooks`` write the same score.json, byte for byte, on
every bundled task (the committed default cassette: real model output, wrong answers and all).

Both engines call `pipeline.score_home`; what could still tell them apart is the plumbing around it
(a kernel's cwd and relative paths, the task's own scorer file, PDF and pointer sources, the threshold
passed as a notebook parameter), so each task runs its first member of each source kind: in the repo,
and a pointer read from $EVALKIT_SOURCES (when that folder is there)."""

from __future__ import annotations

import os
from pathlib import Path

from corpus_factory import specs

from evalkit.backends.spec import DEFAULT_CASSETTE
from evalkit.corpus.tasks import DEFAULT_CORPUS, load_tasks
from evalkit.results.runfolder import SCORE
from evalkit.stages.runner import RunOptions, run

ROOT = Path(__file__).resolve().parent.parent
SOURCES = Path(os.environ.get("EVALKIT_SOURCES", ROOT.parent / "shared" / "data"))
TASKS = {"deal-memos", "deal-memos-terms", "cuad-contracts", "encyclopedia", "adventure"}
# Bundled after the default cassette was recorded (text-only, earlier): it covers none of their members.
UNRECORDED = {"invoices", "deal-memos-scanned"}


def scores(run_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in sorted(run_dir.rglob(SCORE))}


def test_notebooks_and_no_notebooks_write_the_same_score_json_on_every_bundled_task(tmp_path):
    tasks = load_tasks(DEFAULT_CORPUS)
    assert {t.id for t in tasks} == TASKS | UNRECORDED
    tasks = [t for t in tasks if t.id not in UNRECORDED]
    sources = SOURCES if SOURCES.is_dir() else None
    chosen = []
    for t in tasks:
        members = t.members()
        for pointer in (False, True) if sources else (False,):
            chosen += [m.key for m in members if m.manifest.source.is_pointer == pointer][:1]
    common = {"corpus": DEFAULT_CORPUS, "backends": specs(f"gemma-3-270m=cassette:path={DEFAULT_CASSETTE}"),
                  "sources": sources, "only": chosen, "threshold": 0.25, "html": False, "report": False}
    in_notebooks = run(RunOptions(**common, out=tmp_path / "notebooks"))
    in_process = run(RunOptions(**common, out=tmp_path / "in-process", notebooks=False))

    assert {o.status for o in in_process.outcomes} == {"scored"}
    assert in_notebooks.outcomes == in_process.outcomes
    a, b = scores(tmp_path / "notebooks"), scores(tmp_path / "in-process")
    # every task with a member to run here: all of them with the sources, else those with an in-repo member
    runnable = {t.id for t in tasks if sources or any(not m.manifest.source.is_pointer for m in t.members())}
    assert {name.rsplit("/", 2)[0] for name in a} == set(chosen) and {k.split("/")[0] for k in chosen} == runnable
    assert sorted(a) == sorted(b)
    assert [name for name in a if a[name] != b[name]] == []
