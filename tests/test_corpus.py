"""Strict loading, `evalkit validate`, and the integrity gate."""

import subprocess
import sys

import pytest
from corpus_factory import make_corpus, write_yaml

from evalkit.corpus.sources import check_integrity
from evalkit.corpus.tasks import load_task
from evalkit.errors import CorpusError, IntegrityError, InvalidCorpus, SourceMissing
from evalkit.stages.validate import validate_corpus


def test_unknown_key_names_file_line_and_keypath(tmp_path):
    corpus = make_corpus(tmp_path)
    manifest = corpus / "memos" / "m0" / "manifest.yaml"
    manifest.write_text(manifest.read_text().replace("license:\n", "licence_typo: 1\nlicense:\n"))
    with pytest.raises(InvalidCorpus) as e:
        load_task(corpus / "memos").member("m0")
    msg = str(e.value)
    assert f"{manifest}:" in msg and "licence_typo: unknown key" in msg
    line = manifest.read_text().splitlines().index("licence_typo: 1") + 1
    assert f"{manifest}:{line}:" in msg


def test_wrong_type_and_missing_key(tmp_path):
    corpus = make_corpus(tmp_path)
    manifest = corpus / "memos" / "m0" / "manifest.yaml"
    text = manifest.read_text().replace("spdx: CC0-1.0\n", "").replace("title: m0", "title: [not, a, string]")
    manifest.write_text(text)
    with pytest.raises(InvalidCorpus) as e:
        load_task(corpus / "memos").member("m0")
    problems = e.value.problems
    assert any("license.spdx: required key is missing" in p for p in problems)
    assert any(p.startswith(f"{manifest}:1: title:") for p in problems)


def test_yaml_syntax_error_names_line(tmp_path):
    corpus = make_corpus(tmp_path)
    truth = corpus / "memos" / "m1" / "truth.yaml"
    truth.write_text("record:\n  account_id: [ACC-001\nexpected_blocking: false\n")
    with pytest.raises(CorpusError) as e:
        load_task(corpus / "memos").member("m1")
    assert str(e.value).startswith(f"{truth}:3:") and "YAML syntax error" in str(e.value)


def test_duplicate_keys_are_rejected(tmp_path):
    corpus = make_corpus(tmp_path)
    truth = corpus / "memos" / "m1" / "truth.yaml"
    truth.write_text("record: {}\nexpected_blocking: false\nexpected_blocking: true\n")
    with pytest.raises(CorpusError, match="duplicate key 'expected_blocking'"):
        load_task(corpus / "memos").member("m1")


def test_truth_is_validated_by_the_scorer(tmp_path):
    corpus = make_corpus(tmp_path)
    truth = corpus / "memos" / "m1" / "truth.yaml"
    truth.write_text("record: {}\nexpected_blocking: maybe\n")
    with pytest.raises(InvalidCorpus, match="expected_blocking"):
        load_task(corpus / "memos").member("m1")


def test_scoring_options_are_validated(tmp_path):
    corpus = make_corpus(tmp_path)
    task_yaml = corpus / "memos" / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("kind: number", "kind: nubmer"))
    with pytest.raises(InvalidCorpus, match=r"scoring\.fields\.rate\.kind"):
        load_task(corpus / "memos")


def test_task_id_must_match_folder(tmp_path):
    corpus = make_corpus(tmp_path)
    task_yaml = corpus / "memos" / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("id: memos", "id: other"))
    with pytest.raises(InvalidCorpus, match="must equal its folder name"):
        load_task(corpus / "memos")


def test_validate_reports_every_problem_at_once(tmp_path):
    corpus = make_corpus(tmp_path, members=4)
    (corpus / "memos" / "m0" / "manifest.yaml").write_text(
        (corpus / "memos" / "m0" / "manifest.yaml").read_text().replace("title: m0\n", ""))
    (corpus / "memos" / "m1" / "truth.yaml").write_text("record: {\n")
    (corpus / "memos" / "m2" / "doc.md").write_text("tampered\n")
    problems = validate_corpus(corpus)
    assert len(problems) == 3
    assert "m0/manifest.yaml:1: title: required key is missing" in problems[0]
    assert "m1/truth.yaml:2:" in problems[1] and "YAML syntax error" in problems[1]
    assert "m2/manifest.yaml: sha256:" in problems[2] and "hashes to" in problems[2]


def test_validate_cli_exits_3_without_traceback(tmp_path):
    corpus = make_corpus(tmp_path, members=3)
    (corpus / "memos" / "m1" / "truth.yaml").write_text("record: {\n")
    (corpus / "memos" / "m2" / "doc.md").write_text("tampered\n")
    proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "validate", "--corpus", str(corpus)],
                          capture_output=True, text=True)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert "m1/truth.yaml:2:" in proc.stderr and "m2/manifest.yaml: sha256:" in proc.stderr
    ok = subprocess.run([sys.executable, "-m", "evalkit.cli", "validate", "--corpus", str(make_corpus(tmp_path / "b"))],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_integrity_gate_refuses_changed_source(tmp_path):
    corpus = make_corpus(tmp_path)
    member = load_task(corpus / "memos").member("m0")
    assert check_integrity(member, None) == [corpus / "memos" / "m0" / "doc.md"]
    (corpus / "memos" / "m0" / "doc.md").write_text("Account ACC-000 pays 0.9.\n")
    with pytest.raises(IntegrityError, match="hashes to .* but the manifest pins"):
        check_integrity(member, None)


def test_pointer_source_missing_is_skipped_with_instructions(tmp_path):
    corpus = make_corpus(tmp_path)
    manifest = corpus / "memos" / "m0" / "manifest.yaml"
    write_yaml(manifest, {**__import__("yaml").safe_load(manifest.read_text()), "source": {"pointer": "x/doc.txt"}})
    member = load_task(corpus / "memos").member("m0")
    with pytest.raises(SourceMissing, match="EVALKIT_SOURCES"):
        check_integrity(member, None)
    with pytest.raises(SourceMissing, match=r"put the file at .*x/doc.txt"):
        check_integrity(member, tmp_path / "sources")
    (tmp_path / "sources" / "x").mkdir(parents=True)
    (tmp_path / "sources" / "x" / "doc.txt").write_text("Account ACC-000 pays a rate of 0.5.\n")
    assert check_integrity(member, tmp_path / "sources")


def test_private_member_seeds_and_enforces_sidecar(tmp_path):
    corpus = make_corpus(tmp_path)
    manifest = corpus / "memos" / "m0" / "manifest.yaml"
    manifest.write_text("\n".join(line for line in manifest.read_text().splitlines() if not line.startswith("sha256")) + "\n")
    member = load_task(corpus / "memos").member("m0")
    check_integrity(member, None)  # a check alone (validate, publish, sweep currency) writes nothing
    assert not (corpus / "memos" / "m0" / "source.sha256").exists()
    check_integrity(member, None, seed=True)  # the runner's gate seeds
    assert (corpus / "memos" / "m0" / "source.sha256").exists()
    check_integrity(member, None)  # unchanged: still fine
    (corpus / "memos" / "m0" / "doc.md").write_text("changed\n")
    with pytest.raises(IntegrityError, match="when first seen"):
        check_integrity(member, None)
