"""`evalkit rescore`: re-score standing scoreboard entries offline, from the committed archive.

For each selected entry: the record in its archive file (``<task>/records/<backend>/<member>.json`` beside
the board, `evalkit.results.scoreboard`; an entry written before the archive existed: ``<run_folder>/extraction.json``)
is scored again
(`pipeline.score_record`) against the member's *current* truth, task options and scorer. The
entry's ``metrics``, ``passed`` and ``truth_sha256`` are replaced and a ``rescored`` block
(evalkit version, task.yaml sha256) is added; its ``run`` block is carried verbatim, byte for
byte. No backend is constructed and no model is called. Neither the archive nor the run folders are
modified, and a fresh clone (no ``runs/``) re-scores every entry that has an archive file.

A member whose source no longer passes its integrity check is refused (the entry is left as it
was): the hallucination check reads the source text, so a changed source would change the scores
for the wrong reason.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit.backends import BackendContext, BackendSpec
from evalkit.corpus.sources import check_integrity, read_document, sha256_file
from evalkit.corpus.specs import Settings
from evalkit.corpus.tasks import find_task, sources_dir
from evalkit.errors import EXIT_INTEGRITY, EXIT_INVALID, EXIT_OK, EvalkitError, IntegrityError, ScoreboardError
from evalkit.results.records import ExtractionRecord, RunBlock
from evalkit.results.runfolder import read_extraction
from evalkit.results.scoreboard import BoardEntry, edit_board, read_archived, read_board, truth_sha256
from evalkit.stages.pipeline import apply_verdict_policy, render_request, request_sha, run_sync, score_record

__all__ = ["Rescored", "RescoreResult", "rescore"]


@dataclass
class Rescored:
    task: str
    member: str
    backend: str
    status: str  # rescored | refused | failed
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    @property
    def changed(self) -> list[str]:
        return sorted(k for k in set(self.before) | set(self.after) if self.before.get(k) != self.after.get(k))


@dataclass
class RescoreResult:
    board: Path
    entries: list[Rescored]

    @property
    def exit_code(self) -> int:
        statuses = {e.status for e in self.entries}
        if "refused" in statuses:
            return EXIT_INTEGRITY
        if "failed" in statuses:
            return EXIT_INVALID
        return EXIT_OK


def replayed_record(member: Any, document: Any, archived: ExtractionRecord, entry: BoardEntry,
                    board_dir: Path) -> Any:
    """The record an archive names by its cassette (``"replay": true``, a pointer member's): the same request
    rendered again and replayed from that committed cassette — no model call. A request that no longer renders
    the same (the prompt, schema or settings changed since) is refused: re-run the entry."""
    # lazy: read per call: tests patch resolve.open_backends
    from evalkit.backends.resolve import open_backends, resolve_backends

    sent = {k: v for k, v in entry.settings.items() if k in Settings.model_fields}
    request = render_request(member.task, member, document, None, Settings().with_overrides(sent))
    if request_sha(request) != archived.request_sha256:
        raise EvalkitError(f"{member.key}: its request no longer renders as when the entry was scored (the prompt, "
                           "schema or settings changed): re-run it (evalkit sweep --update-scoreboard)")
    spec = BackendSpec.parse(archived.backend.spec or "", label=archived.backend.label)
    path = Path(spec.options.get("path", ""))
    if not path.is_absolute() and not path.is_file():  # stored relative to the project: the board's parent's parent
        spec = BackendSpec(spec.label, spec.kind, {**spec.options, "path": str(board_dir.parent / path)})
    replayer = open_backends(resolve_backends([spec], []), BackendContext(), None, check=False)[0]
    try:
        return run_sync(replayer.complete(request)).record
    finally:
        run_sync(replayer.aclose())


def _rescore_one(board_dir: Path, task_id: str, member_id: str, label: str, entry: BoardEntry,
                 corpus: Path, sources: Path | None, cache: dict) -> tuple[Rescored, dict[str, Any] | None]:
    res = Rescored(task_id, member_id, label, "failed", before=dict(entry.metrics))
    folder = entry.run_folder
    if not folder and not entry.archive:
        res.message = "the entry names no archive and no run_folder: nothing to re-score from"
        return res, None
    try:
        extraction = read_archived(board_dir, entry)
        if extraction is None:
            if not folder:
                raise EvalkitError(f"{board_dir / str(entry.archive)}: archived record not found")
            extraction = read_extraction(board_dir / folder)
        if task_id not in cache:
            cache[task_id] = find_task(corpus, task_id)
        member = cache[task_id].member(member_id)
        document = read_document(check_integrity(member, sources))
        record = extraction.record
        if record is None and extraction.replay:  # a pointer member's archive names its cassette instead
            record = replayed_record(member, document, extraction, entry, board_dir)
        threshold = entry.settings.get("threshold")
        result = score_record(member, record, document, sources, threshold)
        # the task's verdict policy on a schema_invalid or truncated answer, as a run applies it
        run = RunBlock({**entry.run.to_json(), **extraction.run.to_json()})
        result = apply_verdict_policy(result, run, member.task.spec.verdict)
    except IntegrityError as e:
        res.status, res.message = "refused", str(e)
        return res, None
    except EvalkitError as e:
        res.message = str(e)
        return res, None
    new = entry.to_json()  # its run block is replaced by the board's own when written (`rescore`)
    new["metrics"] = result.metrics
    new["passed"] = result.passed
    new["truth_sha256"] = truth_sha256(member, sources)
    new["rescored"] = {"evalkit_version": __version__,
                       "task_sha256": sha256_file(member.task.dir / "task.yaml")}
    res.status, res.after = "rescored", dict(result.metrics)
    return res, new


def rescore(board_path: str | Path, *, corpus: str | Path | None = None, sources: str | Path | None = None,
            tasks: Iterable[str] | None = None, only: Iterable[str] | None = None,
            backends: Iterable[str] | None = None) -> RescoreResult:
    """Re-score the selected entries of `board_path` (see module docstring).

    `corpus` defaults to the board's folder; `only` takes member ids or ``task/member`` keys;
    `backends` takes labels.
    """
    board_path = Path(board_path)
    corpus = Path(corpus) if corpus is not None else board_path.parent
    src = sources_dir(sources)
    want_t, want_m, want_b = set(tasks or ()), set(only or ()), set(backends or ())
    snapshot = read_board(board_path, must_exist=True)
    cache: dict = {}
    results, updates = [], {}
    for task, member, label, entry in snapshot.entries():
        if (want_t and task not in want_t) or (want_m and member not in want_m and f"{task}/{member}" not in want_m) \
                or (want_b and label not in want_b):
            continue
        res, new = _rescore_one(board_path.parent, task, member, label, entry, corpus, src, cache)
        results.append(res)
        if new is not None:
            run = entry.run.to_json() if "run" in entry.model_fields_set else None  # as the board's JSON holds it
            updates[(task, member, label)] = (run, new)
    if not results:
        raise ScoreboardError(f"{board_path}: no entry matches the selection")
    if updates:
        with edit_board(board_path) as board:
            for (task, member, label), (run, new) in updates.items():
                current = board["tasks"].get(task, {}).get(member, {}).get(label)
                if current is None or current.get("run") != run:
                    # Replaced by a newer run while we were scoring: leave the newer entry alone.
                    for r in results:
                        if (r.task, r.member, r.backend) == (task, member, label):
                            r.status, r.message = "failed", "the entry changed while re-scoring; run rescore again"
                    continue
                new = copy.copy(new)
                new["run"] = current["run"]  # verbatim: the same JSON value, serialized the same way
                board["tasks"][task][member][label] = new
    return RescoreResult(board=board_path, entries=results)
