"""`evalkit validate`: lint a whole corpus, every problem at once.

Above both `evalkit.corpus.tasks` (loading tasks, members and truth strictly) and `evalkit.corpus.sources`
(the integrity gate on each member's source): a problem with either is a problem of the corpus,
except a pointer member's absent source, which `run` reports as skipped. What `validate` finds
wrong with a member's inputs, `run` refuses that member for, with the same message: both ask
`input_problems`. Each member's truth is also scored against itself (`pipeline.self_test`, what
`--backend fake` does): a truth that cannot score itself 100% PASS without saying why in its manifest
(`self_test:`), a wrong such declaration, and gate expectations the gate does not compute on the truth's
record are problems.
"""

from __future__ import annotations

from pathlib import Path

from evalkit._util.yamlio import load_yaml
from evalkit.corpus.outschema import keypath, violations
from evalkit.corpus.sources import Document, check_integrity, open_document, read_document
from evalkit.corpus.tasks import Member, load_member, load_task, task_dirs
from evalkit.errors import CorpusError, IntegrityError, InvalidCorpus, SourceMissing
from evalkit.scoring.fields import FieldsOptions
from evalkit.scoring.gate import run_gate
from evalkit.stages.pipeline import self_test, self_test_check

__all__ = ["input_problems", "validate_corpus"]


def validate_corpus(corpus: Path, sources: Path | None = None) -> list[str]:
    """Lint every task and member; return every problem found (empty when clean)."""
    problems: list[str] = []
    try:
        dirs = task_dirs(corpus)
    except CorpusError as e:
        return [str(e)]
    if not dirs:
        return [f"{corpus}: no task folders (each needs a task.yaml)"]
    for tdir in dirs:
        try:
            task = load_task(tdir)
        except InvalidCorpus as e:
            problems.extend(e.problems)
            continue
        except CorpusError as e:
            problems.append(str(e))
            continue
        for mdir in task.member_dirs():
            try:
                member = load_member(task, mdir)
            except InvalidCorpus as e:
                problems.extend(e.problems)
                continue
            except CorpusError as e:
                problems.append(str(e))
                continue
            problems.extend(provenance_problems(member))
            try:
                paths = check_integrity(member, sources)
                found = input_problems(member, paths, sources)
                problems.extend(found)
                if not found:  # a document that opens and a truth that fits the schema: can it score itself?
                    problems.extend(self_test_problems(member, read_document(paths), sources))
            except SourceMissing:
                pass  # reported by `run` as skipped; not a corpus error
            except IntegrityError as e:
                problems.append(str(e))
            except InvalidCorpus as e:
                problems.extend(e.problems)
            except CorpusError as e:  # a file that escapes the corpus or sources folder
                problems.append(str(e))
    return problems


def input_problems(member: Member, paths: list[Path], sources: Path | None) -> list[str]:
    """What is wrong with a member whose files loaded and whose source passed its sha256: a source
    document that cannot be opened, a truth that breaks the task's output schema (raises `InvalidCorpus`
    for a pointer truth that does not load, `LimitExceeded` for a file over its bound)."""
    problems = []
    try:
        open_document(paths)
    except CorpusError as e:
        problems.append(str(e))
    return problems + truth_violations(member, sources)


def truth_violations(member: Member, sources: Path | None) -> list[str]:
    """Where the member's truth, as the record a perfect extraction would be (the scorer's
    `expected_extraction`), breaks the task's output schema: ``file:line: JSON path: message`` each."""
    task = member.task
    if not task.spec.truth or not task.spec.output_schema:
        return []
    truth = member.load_truth(sources)
    broken = violations(task.scorer.expected_extraction(truth), task.spec.output_schema, caps=False)
    if not broken:
        return []
    path = member.truth_path(sources)
    _, loc = load_yaml(path)
    out = []
    for v in broken:
        kp = keypath(v["path"])
        # The truth file holds the record under `record:` (the fields scorer) or as it is.
        line = next((loc.lines[k] for k in (("record", *kp), kp) if k in loc.lines), None) or loc.line(("record", *kp))
        where = f"{path}:{line}" if line else str(path)
        out.append(f"{where}: {v['path']}: {v['message']} (the task's output schema; fix the truth or the schema)")
    return out


def gate_problems(member: Member, sources: Path | None) -> list[str]:
    """The `fields` scorer's gate expectations in the truth (`expected_missing_fields`, `expected_blocking`)
    that differ from what the gate computes on the truth's own record, at their truth.yaml lines: stale
    expectations (e.g. `new-member`'s skeleton kept after the record was filled in) FAIL every perfect answer."""
    opts = member.task.options
    if not isinstance(opts, FieldsOptions) or not member.task.spec.truth:
        return []
    truth = member.load_truth(sources)
    gate = run_gate(truth.record, opts.gate)
    path = member.truth_path(sources)
    _, loc = load_yaml(path)
    out = []
    if sorted(gate.missing_fields) != sorted(truth.expected_missing_fields):
        out.append(f"{loc.where(('expected_missing_fields',))}: expected_missing_fields "
                   f"[{', '.join(truth.expected_missing_fields)}] is stale: the gate finds "
                   f"[{', '.join(gate.missing_fields)}] missing in the truth's record (set it to that, or fix the record)")
    if gate.blocking != truth.expected_blocking:
        why = f" ({'; '.join(gate.reasons)})" if gate.reasons else ""
        out.append(f"{loc.where(('expected_blocking',))}: expected_blocking {str(truth.expected_blocking).lower()} "
                   f"is stale: the gate {'blocks' if gate.blocking else 'does not block'} the truth's record{why} "
                   f"(set it to {str(gate.blocking).lower()}, or fix the record)")
    return out


def self_test_problems(member: Member, document: Document, sources: Path | None) -> list[str]:
    """Stale gate expectations (`gate_problems`); else, when the truth scored against itself is not 100% PASS,
    or not what the manifest's `self_test` declares, that line at the manifest (`pipeline.self_test_check`)."""
    if not member.task.spec.truth:
        return []
    stale = gate_problems(member, sources)
    if stale:
        return stale  # the self-test FAILs on them: fix those first
    line, to_fix = self_test_check(member, self_test(member, document, sources))
    if not to_fix:
        return []
    path = member.dir / "manifest.yaml"
    _, loc = load_yaml(path)
    return [f"{loc.where(('self_test', 'expected'))}: {member.key}: {line}"]


def provenance_problems(member: Member) -> list[str]:
    """Each leg of the member's truth_provenance that states nothing usable, at its manifest line."""
    found = member.manifest.truth_provenance.problems() if member.manifest.truth_provenance else []
    if not found:
        return []
    path = member.dir / "manifest.yaml"
    _, loc = load_yaml(path)
    return [f"{loc.where(('truth_provenance', leg))}: truth_provenance.{leg} {why} (docs/authoring.md)"
            for leg, why in found]
