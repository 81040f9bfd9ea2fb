"""`evalkit init` and `evalkit new-member`: a researcher's own project that validates and scores out of the box."""

import hashlib
import re
import subprocess
import sys

import yaml

from evalkit.board.scaffold import EXAMPLE_TASK
from evalkit.corpus.tasks import load_tasks
from evalkit.errors import EXIT_INVALID, EXIT_USAGE


def evalkit(*args, cwd):
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_init_scaffolds_a_project_that_validates_and_scores_100_percent_with_fake(tmp_path):
    proc = evalkit("init", "proj", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proj = tmp_path / "proj"
    assert (proj / "README.md").read_text().count("evalkit ") >= 5
    task_yaml = (proj / "corpus" / EXAMPLE_TASK / "task.yaml").read_text()
    assert "# Field kinds:" in task_yaml  # commented, for people
    (member,) = load_tasks(proj / "corpus")[0].members()
    doc = member.dir / member.manifest.source.paths[0]
    assert member.manifest.sha256 == hashlib.sha256(doc.read_bytes()).hexdigest()
    # From inside the project, with no --corpus: its own corpus is the default.
    assert evalkit("validate", cwd=proj).returncode == 0
    run = evalkit("run", "--backend", "fake", "--no-html", "--out", "runs/self-test", cwd=proj)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"/{member.id} … 100.0% PASS" in run.stdout and "fake: 1/1 passed · mean score 100.0%" in run.stdout
    assert (proj / "runs" / "self-test" / EXAMPLE_TASK / member.id / "fake" / "score.ipynb").is_file()
    # A second init never overwrites a project.
    again = evalkit("init", "proj", cwd=tmp_path)
    assert again.returncode == EXIT_USAGE and "already exists" in again.stderr


def test_new_member_pins_the_sha256_and_writes_a_truth_skeleton_from_the_schema(tmp_path):
    assert evalkit("init", "proj", cwd=tmp_path).returncode == 0
    proj = tmp_path / "proj"
    doc = tmp_path / "Supplier Invoice 7.txt"
    doc.write_text("Invoice S-7 from Acme Ltd, total EUR 10.00\n")
    proc = evalkit("new-member", EXAMPLE_TASK, str(doc), cwd=proj)
    assert proc.returncode == 0, proc.stderr
    member = proj / "corpus" / EXAMPLE_TASK / "supplier-invoice-7"
    manifest = yaml.safe_load((member / "manifest.yaml").read_text())
    assert manifest["sha256"] == hashlib.sha256(doc.read_bytes()).hexdigest()
    assert (member / doc.name).read_bytes() == doc.read_bytes()
    truth_text = (member / "truth.yaml").read_text()
    truth = yaml.safe_load(truth_text)
    schema = yaml.safe_load((proj / "corpus" / EXAMPLE_TASK / "task.yaml").read_text())["schema"]
    assert list(truth["record"]) == list(schema["properties"])  # every field, in the schema's order
    assert truth["record"]["line_items"] == [] and truth["record"]["total"] is None
    assert "# kind: date" in truth_text and truth["expected_blocking"] is True  # the gate requires fields
    # Until its provenance is filled in, validate names each placeholder leg; the fake self-test scores it already.
    lint = evalkit("validate", cwd=proj)
    assert lint.returncode == EXIT_INVALID and "Traceback" not in lint.stderr
    assert set(re.findall(r"supplier-invoice-7/manifest.yaml:\d+: truth_provenance\.(\w+)", lint.stderr)) == {
        "authored_by", "verified_by", "adversarial_pass"}, lint.stderr
    run = evalkit("run", "--backend", "fake", "--no-html", "--out", "runs/r", cwd=proj)
    assert "supplier-invoice-7 … 100.0% PASS" in run.stdout, run.stdout + run.stderr
    # The same id twice, or a missing file: one message, exit 2.
    for args in ((str(doc),), (str(tmp_path / "absent.pdf"),)):
        bad = evalkit("new-member", EXAMPLE_TASK, *args, cwd=proj)
        assert bad.returncode == EXIT_USAGE and "Traceback" not in bad.stderr, bad.stderr


def test_validate_names_the_skeletons_gate_expectations_once_the_record_is_filled_in(tmp_path):
    """The skeleton's expected_missing_fields / expected_blocking describe an empty record; kept after the record
    is filled in, every perfect answer FAILs its gate. `validate` names each stale line and what the gate computes."""
    from evalkit.board.scaffold import init_project, new_member
    from evalkit.stages.validate import validate_corpus

    init_project(tmp_path / "proj")
    corpus = tmp_path / "proj" / "corpus"
    doc = tmp_path / "invoice-8.txt"
    doc.write_text("Invoice S-8 from Acme Ltd, total EUR 10.00\n")
    truth = new_member(corpus, EXAMPLE_TASK, doc) / "truth.yaml"
    text = truth.read_text().replace("invoice_number: null", "invoice_number: S-8").replace("total: null", "total: 10.0")
    truth.write_text(text)

    def line(key):
        return next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith(key + ":"))

    stale = [p for p in validate_corpus(corpus) if "truth_provenance" not in p]
    assert stale == [
        f"{truth}:{line('expected_missing_fields')}: expected_missing_fields [invoice_number, total] is stale: the "
        "gate finds [] missing in the truth's record (set it to that, or fix the record)",
        f"{truth}:{line('expected_blocking')}: expected_blocking true is stale: the gate does not block the truth's "
        "record (set it to false, or fix the record)"]
    truth.write_text(text.replace("expected_missing_fields: [invoice_number, total]", "expected_missing_fields: []")
                     .replace("expected_blocking: true", "expected_blocking: false"))
    assert [p for p in validate_corpus(corpus) if "truth_provenance" not in p] == []


def test_every_docs_page_a_project_points_to_is_shipped_and_evalkit_docs_prints_its_path(tmp_path):
    from evalkit._util.resources import DOCS_DIR

    assert evalkit("init", "proj", cwd=tmp_path).returncode == 0
    text = "\n".join(p.read_text() for p in (tmp_path / "proj").rglob("*") if p.suffix in (".md", ".yaml"))
    named = set(re.findall(r"`evalkit docs ([\w-]+)`", text))
    assert {"tutorial", "corpus-format"} <= named
    for name in named:
        proc = evalkit("docs", name, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.strip() == str(DOCS_DIR / f"{name}.md"), proc.stderr
        assert (DOCS_DIR / f"{name}.md").is_file()
    listed = evalkit("docs", cwd=tmp_path)
    assert listed.returncode == 0 and "tutorial" in listed.stdout and "authoring" in listed.stdout
    bad = evalkit("docs", "nope", cwd=tmp_path)
    assert bad.returncode == EXIT_USAGE and "no docs page 'nope'" in bad.stderr and "Traceback" not in bad.stderr
