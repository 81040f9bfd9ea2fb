"""benchmarks/bench_scale.py's synthetic corpus: a valid corpus, every member's request different, the
same corpus for the same seed (the benchmark's figures are only comparable if all that holds)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import yaml

from evalkit.corpus.tasks import load_tasks
from evalkit.stages.validate import validate_corpus

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _files(corpus: Path) -> dict[str, str]:
    return {str(p.relative_to(corpus)): p.read_text() for p in sorted(corpus.rglob("*")) if p.is_file()}


def test_synthetic_corpus_is_valid_varied_and_seeded(tmp_path):
    bench = _bench()
    corpus = bench.build_corpus(tmp_path / "a", 30, seed=3)
    assert validate_corpus(corpus) == []
    (task,) = load_tasks(corpus)
    members = task.members()
    assert len(members) == 30
    docs = {(d / "doc.md").read_text() for d in task.member_dirs()}
    records = [yaml.safe_load((d / "truth.yaml").read_text())["record"] for d in task.member_dirs()]
    assert len(docs) == 30  # every request differs
    assert len({r["account_id"] for r in records}) > 25 and len({r["lifecycle_term_start"] for r in records}) > 25
    assert any(r["conditions"] for r in records) and any(not r["conditions"] for r in records)
    assert _files(corpus) == _files(bench.build_corpus(tmp_path / "b", 30, seed=3))
    assert _files(corpus) != _files(bench.build_corpus(tmp_path / "c", 30, seed=4))
