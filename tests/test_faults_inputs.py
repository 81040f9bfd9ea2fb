"""Faults in a corpus's inputs (issue 23): every bound of `evalkit.limits` enforced on what a corpus, a
predictions folder or a disk hands evalkit — one line, a documented exit code, never a traceback, the
other members going on, and a run that resumes."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from pathlib import Path

import pytest
import yaml
from corpus_factory import add_member, cli, make_corpus, specs, write_yaml

from evalkit._util import jsonio
from evalkit.backends.parse import parse_record
from evalkit.corpus.sources import SIDECAR
from evalkit.errors import EXIT_DISK, EXIT_INVALID, DiskFull
from evalkit.stages.runner import RunOptions, run
from evalkit.status import ERROR, INVALID_INPUT, LIMIT_EXCEEDED, REFUSED, SCORED

BOMB = "".join([  # billion laughs: 9^9 strings from a few hundred bytes
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n',
    *(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")),
])


def one_line(res, *needles: str) -> str:
    """The command's message: one line (after evalkit's prefix), no traceback, holding each needle."""
    out = res.output.strip()
    assert "Traceback" not in out and res.exception is None or isinstance(res.exception, SystemExit), out
    assert len(out.splitlines()) == 1, out
    for n in needles:
        assert n in out, out
    return out


def validate(corpus: Path, *needles: str) -> str:
    res = cli("validate", "--corpus", corpus)
    assert res.exit_code == EXIT_INVALID, res.output
    assert "Traceback" not in res.output
    for n in needles:
        assert n in res.output, res.output
    return res.output


def run_cli(corpus: Path, out: Path, *extra):
    """`evalkit run` (notebooks and all: use it where the run stops before them, or once)."""
    return cli("run", "--corpus", corpus, "--backend", "fake", "--no-html", "--out", out, *extra)


def run_api(corpus: Path, tmp_path: Path, backend: str = "fake"):
    return run(RunOptions(corpus=corpus, backends=specs(backend), out=tmp_path / "run", notebooks=False, html=False))


def statuses(result) -> dict[str, tuple[str, str]]:
    return {o.member: (o.status, o.cause) for o in result.outcomes}


# --------------------------------------------------------------------------- YAML: alias bombs, depth, size


def test_an_alias_bomb_in_a_truth_is_refused_at_once_by_validate_and_run(tmp_path):
    corpus = make_corpus(tmp_path)
    truth = corpus / "memos" / "m0" / "truth.yaml"
    truth.write_text(BOMB + "record: {account_id: ACC-000, rate: 0.5}\n")
    t = time.perf_counter()
    out = validate(corpus, f"{truth}:", "yaml_nodes", "EVALKIT_LIMIT_YAML_NODES")
    res = run_cli(corpus, tmp_path / "run")
    elapsed = time.perf_counter() - t
    assert res.exit_code == EXIT_INVALID
    one_line(res, str(truth), "EVALKIT_LIMIT_YAML_NODES")
    assert elapsed < 2, elapsed  # main: validate passed 4.7 GB, run a SystemError
    assert "m1" not in out  # the sibling is fine


def test_an_alias_bomb_in_task_yaml_is_refused(tmp_path):
    corpus = make_corpus(tmp_path)
    spec = corpus / "memos" / "task.yaml"
    spec.write_text(BOMB + spec.read_text())
    t = time.perf_counter()
    validate(corpus, f"{spec}:", "EVALKIT_LIMIT_YAML_NODES")
    one_line(run_cli(corpus, tmp_path / "run"), str(spec), "yaml_nodes")
    assert time.perf_counter() - t < 2


def test_a_recursive_alias_and_a_deep_yaml_are_refused_with_their_line(tmp_path):
    corpus = make_corpus(tmp_path)
    truth = corpus / "memos" / "m0" / "truth.yaml"
    truth.write_text("record: {account_id: ACC-000, rate: 0.5}\nnotes:\n" + "".join(
        "  " * (i + 1) + f"k{i}:\n" for i in range(300)) + "  " * 301 + "v: 1\n")
    validate(corpus, f"{truth}:", "nested deeper than 200 levels", "EVALKIT_LIMIT_NESTING_DEPTH")
    truth.write_text("record: {account_id: ACC-000, rate: 0.5}\nloop: &x [1, *x]\n")
    validate(corpus, f"{truth}:2:", "contains it", "EVALKIT_LIMIT_YAML_NODES")


def test_an_oversized_yaml_is_refused_before_it_is_read(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path)
    truth = corpus / "memos" / "m1" / "truth.yaml"
    truth.write_text(truth.read_text() + "# " + "x" * 5000 + "\n")
    monkeypatch.setenv("EVALKIT_LIMIT_YAML_BYTES", "4096")
    validate(corpus, str(truth), "yaml_bytes = 4096 bytes", "EVALKIT_LIMIT_YAML_BYTES")
    one_line(run_cli(corpus, tmp_path / "run"), str(truth), "EVALKIT_LIMIT_YAML_BYTES")
    monkeypatch.setenv("EVALKIT_LIMIT_YAML_BYTES", "8192")  # raised as the message says: clean
    assert cli("validate", "--corpus", corpus).exit_code == 0


# --------------------------------------------------------------------------- source documents


def big_member(corpus: Path) -> Path:
    text = "Account ACC-009 pays a rate of 0.9.\n" + "filler line\n" * 200
    return add_member(corpus / "memos", "m9", text, {"account_id": "ACC-009", "rate": 0.9})


def test_an_oversized_document_is_a_validate_problem(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path)
    d = big_member(corpus)
    monkeypatch.setenv("EVALKIT_LIMIT_DOCUMENT_BYTES", "1000")
    validate(corpus, f"{d / 'doc.md'}: source document of", "document_bytes = 1000 bytes",
             "EVALKIT_LIMIT_DOCUMENT_BYTES")


def test_an_oversized_document_refuses_its_member_in_a_run_and_the_others_go_on(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path)
    d = big_member(corpus)
    monkeypatch.setenv("EVALKIT_LIMIT_DOCUMENT_BYTES", "1000")
    result = run_api(corpus, tmp_path)
    assert statuses(result) == {"m0": (SCORED, ""), "m1": (SCORED, ""), "m9": (REFUSED, INVALID_INPUT)}
    refused = next(o for o in result.outcomes if o.member == "m9")
    assert str(d / "doc.md") in refused.message and "EVALKIT_LIMIT_DOCUMENT_BYTES" in refused.message
    assert result.exit_code == EXIT_INVALID


def pdf_member(corpus: Path, data: bytes) -> Path:
    d = add_member(corpus / "memos", "m9", "unused", {"account_id": "ACC-009", "rate": 0.9})
    (d / "doc.md").unlink()
    (d / "doc.pdf").write_bytes(data)
    manifest = yaml.safe_load((d / "manifest.yaml").read_text())
    manifest.update(source={"file": "doc.pdf"}, sha256=hashlib.sha256(data).hexdigest())
    write_yaml(d / "manifest.yaml", manifest)
    return d / "doc.pdf"


CORRUPT_PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n%% truncated here"


def test_a_corrupt_pdf_is_a_validate_problem(tmp_path):
    corpus = make_corpus(tmp_path)
    pdf = pdf_member(corpus, CORRUPT_PDF)
    validate(corpus, f"{pdf}: not a readable PDF", "intact copy", "1 problem(s)")  # only m9's


def test_a_corrupt_pdf_refuses_its_member_in_a_run(tmp_path):
    corpus = make_corpus(tmp_path)
    pdf = pdf_member(corpus, CORRUPT_PDF)
    result = run_api(corpus, tmp_path)
    assert statuses(result) == {"m0": (SCORED, ""), "m1": (SCORED, ""), "m9": (REFUSED, INVALID_INPUT)}
    assert f"{pdf}: not a readable PDF" in next(o.message for o in result.outcomes if o.member == "m9")
    assert result.exit_code == EXIT_INVALID


def test_a_corrupt_byom_sidecar_is_one_line_naming_it_and_the_fix(tmp_path):
    corpus = make_corpus(tmp_path, members=1)
    d = corpus / "memos" / "m0"
    manifest = yaml.safe_load((d / "manifest.yaml").read_text())
    del manifest["sha256"]  # a private member: the first run seeds the sidecar
    write_yaml(d / "manifest.yaml", manifest)
    assert run_api(corpus, tmp_path / "seed").exit_code == 0
    sidecar = d / SIDECAR
    assert sidecar.is_file()
    sidecar.write_text("garbage-not-a-hash\n")
    res = run_cli(corpus, tmp_path / "run")
    assert res.exit_code == EXIT_INVALID
    one_line(res, f"{sidecar}:1: not a sha256 sidecar line", f"delete {sidecar}")
    sidecar.write_bytes(b"\xff\xfe\x00")
    one_line(run_cli(corpus, tmp_path / "run2"), str(sidecar), "not UTF-8")
    sidecar.unlink()  # as the message says: the next run seeds it again
    assert run_api(corpus, tmp_path / "run3").exit_code == 0 and sidecar.is_file()


# --------------------------------------------------------------------------- predictions and answers


def predictions(tmp_path: Path, m0: str) -> Path:
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "m0.json").write_text(m0)
    (preds / "m1.json").write_text(json.dumps({"account_id": "ACC-001", "rate": 0.6}))
    return preds


def test_a_10k_deep_prediction_is_that_members_error_and_the_others_are_scored(tmp_path):
    corpus = make_corpus(tmp_path)
    preds = predictions(tmp_path, '{"account_id": ' + "[" * 10_000 + "]" * 10_000 + "}")
    result = run_api(corpus, tmp_path, f"p=predictions:dir={preds}")
    assert statuses(result) == {"m0": (ERROR, LIMIT_EXCEEDED), "m1": (SCORED, "")}
    assert "nested deeper than 200 levels" in result.outcomes[0].message
    assert result.exit_code == 5


def test_an_oversized_prediction_is_an_error_not_read(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path)
    preds = predictions(tmp_path, json.dumps({"account_id": "ACC-000", "rate": 0.5, "pad": "x" * 5000}))
    monkeypatch.setenv("EVALKIT_LIMIT_JSON_FILE_BYTES", "1000")
    result = run_api(corpus, tmp_path, f"p=predictions:dir={preds}")
    assert statuses(result) == {"m0": (ERROR, LIMIT_EXCEEDED), "m1": (SCORED, "")}
    assert "EVALKIT_LIMIT_JSON_FILE_BYTES" in result.outcomes[0].message


def test_a_deep_answer_text_is_malformed_not_a_record():
    deep = '{"a": ' * 300 + "1" + "}" * 300
    assert parse_record(deep) == (None, "malformed")
    assert parse_record("```json\n" + deep + "\n```") == (None, "malformed")
    assert parse_record('{"a": ' * 10_000 + "1" + "}" * 10_000) == (None, "malformed")
    assert parse_record('{"a": {"b": 1}}') == ({"a": {"b": 1}}, "clean")


# --------------------------------------------------------------------------- a full disk


def no_space_for(tail: str):
    """`os.replace` as on a full disk for the file whose path ends in `tail`: the atomic writer's last step."""
    real = os.replace

    def replace(src, dst, *a, **k):
        if str(dst).endswith(tail):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst, *a, **k)

    return replace


def test_a_full_disk_mid_run_keeps_nothing_half_written_and_the_same_run_resumes(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path)
    out = tmp_path / "run"
    monkeypatch.setattr(jsonio.os, "replace", no_space_for("m1/fake/score.json"))
    with pytest.raises(DiskFull, match="score.json: cannot write it: no space left on the disk") as e:
        run_api(corpus, tmp_path)
    assert e.value.exit_code == EXIT_DISK
    assert not list(out.rglob("*.tmp"))  # the temp file went with the failed write
    assert [p.parent.parent.name for p in out.rglob("score.json")] == ["m0"]  # m1's: not half of one
    monkeypatch.undo()  # space freed: the same run finishes the rest
    again = run_api(corpus, tmp_path)
    assert again.exit_code == 0 and statuses(again) == {"m0": (SCORED, ""), "m1": (SCORED, "")}
    assert again.reused == 2  # both extractions were kept, neither made twice


def test_a_full_disk_through_the_command_line_is_one_line_and_exit_8(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path)
    monkeypatch.setattr(jsonio.os, "replace", no_space_for(".evalkit.unfinished"))
    res = run_cli(corpus, tmp_path / "run")
    assert res.exit_code == EXIT_DISK, res.output
    one_line(res, ".evalkit.unfinished", "no space left on the disk", "run the same command again")
    monkeypatch.undo()

    def raw(*a, **k):  # a write outside jsonio: the command group maps it
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(tmp_path / "run2" / "lock"))

    monkeypatch.setattr("evalkit.stages.runner.runfolder.mark_unfinished", raw)
    res = run_cli(corpus, tmp_path / "run2")
    assert res.exit_code == EXIT_DISK
    one_line(res, "lock: cannot write it", "Disk quota exceeded")


def test_an_unwritable_folder_is_disk_full_too(tmp_path):
    target = tmp_path / "x.json"

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    real = jsonio._temp_beside
    try:
        jsonio._temp_beside = denied
        with pytest.raises(jsonio.DiskFull, match="not writable"):
            jsonio.write_json(target, {"a": 1})
    finally:
        jsonio._temp_beside = real
    assert not target.exists()


# --------------------------------------------------------------------------- one truth check


def test_run_refuses_a_truth_validate_rejects_with_the_same_message(tmp_path):
    corpus = make_corpus(tmp_path)
    truth = corpus / "memos" / "m1" / "truth.yaml"
    data = yaml.safe_load(truth.read_text())
    data["record"]["rate"] = "not a number"  # the schema says number or null
    write_yaml(truth, data)
    problems = validate(corpus, str(truth), "record.rate" if False else "rate")
    result = run_api(corpus, tmp_path)
    assert statuses(result) == {"m0": (SCORED, ""), "m1": (REFUSED, INVALID_INPUT)}
    refused = next(o for o in result.outcomes if o.member == "m1")
    assert refused.message == problems.strip().removeprefix("evalkit: ").strip() or refused.message in problems
    assert result.exit_code == EXIT_INVALID


# --------------------------------------------------------------------------- member ids


def test_member_ids_that_differ_only_by_case_are_refused_naming_both(tmp_path):
    corpus = make_corpus(tmp_path)
    add_member(corpus / "memos", "M0", "Account ACC-000 pays a rate of 0.5.\n", {"account_id": "ACC-000", "rate": 0.5})
    out = validate(corpus, "'M0' and 'm0'", "differ only by case")
    assert "m1" not in out
    res = run_cli(corpus, tmp_path / "run")
    assert res.exit_code == EXIT_INVALID
    one_line(res, "differ only by case")


@pytest.mark.parametrize("char, name", [("\u200b", "U+200B (ZERO WIDTH SPACE)"),
                                        ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
                                        ("\ufeff", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)")])
def test_a_member_id_with_an_invisible_character_is_refused_naming_it(tmp_path, char, name):
    corpus = make_corpus(tmp_path)
    add_member(corpus / "memos", f"m{char}0", "Account ACC-000 pays a rate of 0.5.\n",
               {"account_id": "ACC-000", "rate": 0.5})
    validate(corpus, name, "rename it")
    res = run_cli(corpus, tmp_path / "run")
    assert res.exit_code == EXIT_INVALID
    one_line(res, name)
    assert run_cli(corpus, tmp_path / "r2", "--only", f"m{char}0").exit_code == EXIT_INVALID
