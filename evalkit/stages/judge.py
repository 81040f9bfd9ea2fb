"""The judge phase: an LLM judge over a run's extractions, between extraction and scoring.

``evalkit run --judge SPEC [--judge-mode reference|pairwise|both] [--judge-cache PATH]``.

Reference mode (``judge.reference`` calls)
    For each member × backend of a graph task, the strict pass's leftovers —
    true items it missed and extracted items it found spurious — go to the
    judge, one call per axis (entities, relations) that has both: "which
    extracted item is the same as which true item?". The verdicts are written
    to ``judgments.json`` beside extraction.json; the graph scorer reads them
    (through `pipeline.score_record`'s ``ctx.extra``) and computes the judged
    precision / recall / F1 from the strict matches plus the accepted pairs.
    An axis with nothing on one side needs no call: its judged figures equal
    the strict ones. Without a judge, judged metrics stay null.
Pairwise mode (``judge.pairwise`` calls)
    See `evalkit.stages.pairwise`; results go to ``<run>/<task>/pairwise.json``.

The judge cache **is a cassette** (`evalkit.backends.cassette`) in record mode: a
live judge (anthropic, openai, python) is wrapped in a `RecordingBackend` on
``--judge-cache`` (default ``<run folder's parent>/judge-cache.jsonl``, so
runs beside each other share it), keyed like every cassette by the canonical
request — system and user prompt (the rendered judge prompt), schema, model,
settings and call type (so reference and pairwise entries never collide). A
re-run against the same cache makes no judge call. A ``cassette:path=P``
judge replays P and never calls anything (the cache is not used). Identical
judge requests within one phase are sent once.

`judge_phase` is what the runner calls; everything else here is pure.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit._util.jsonio import canonical_sha
from evalkit.backends import BackendSpec, provider, providers
from evalkit.backends.base import Request
from evalkit.backends.cassette import CASSETTE, RECORD_ENV, REPLAY_ENV
from evalkit.backends.resolve import _same_file, resolve_backends
from evalkit.errors import UsageError
from evalkit.execution.pool import Job, run_pool
from evalkit.results import runfolder
from evalkit.results.calls import summarize_calls
from evalkit.results.runfolder import Home
from evalkit.scoring.base import JUDGED_GRAPH
from evalkit.stages import pairwise
from evalkit.stages.pipeline import reference_truth, request_sha, score_record
from evalkit.status import Failed

REFERENCE = "judge.reference"
PAIRWISE = pairwise.CALL_TYPE
MODES = ("reference", "pairwise", "both")
CACHE_NAME = "judge-cache.jsonl"
SET_AXES = ("entities", "relations")
MAX_TOKENS = 1024

REFERENCE_SYSTEM = ("You are a careful judge of knowledge-graph extractions. You decide which extracted items "
                    "denote the same thing as items of a verified truth, using the source text. Answer with exactly "
                    "one JSON object that follows the given schema and nothing else.")

REFERENCE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["matches"],
    "properties": {
        "matches": {
            "type": "array",
            "description": "pairs of a true item and the extracted item that denotes the same thing",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["truth", "extracted", "reason"],
                "properties": {
                    "truth": {"type": "string", "description": "a true item's id, such as T1"},
                    "extracted": {"type": "string", "description": "an extracted item's id, such as X1"},
                    "reason": {"type": "string", "maxLength": 300},
                },
            },
        },
    },
}

CRITERIA = {
    "entities": ("Two items match when they denote the same entity of this text under a different name — an alias, "
                 "abbreviation, acronym, spelling or transliteration variant, or a fuller or shorter form of the same "
                 "name — and their types agree. A different entity with a similar name is not a match: a part is not "
                 "the whole, a person is not a relative or namesake, a group is not one of its members."),
    "relations": ("Two items match when they state the same fact: the head and the tail denote the same entities as "
                  "the true item's (under any of their names) and the relation label means the same property (a "
                  "synonym or rewording of it), in the same direction. A different or vaguer property, a swapped "
                  "head and tail, or a fact the text does not state is not a match."),
}

WHAT = {"entities": "the named entities (name and type)", "relations": "the relations (head, relation, tail)"}


# ----------------------------------------------------------------------------- reference: pure parts

def _fields(axis: str, item: Any) -> dict[str, Any]:
    item = item if isinstance(item, dict) else {}
    return {k: item.get(k) for k in pairwise.FIELDS[axis]}


def candidates(items: Iterable[dict[str, Any]], axis: str) -> tuple[list[dict], list[dict]]:
    """(missed rows, spurious rows) of one axis of a strict item table, in table order."""
    rows = [r for r in items if r.get("axis") == axis]
    return [r for r in rows if r["outcome"] == "missed"], [r for r in rows if r["outcome"] == "spurious"]


def reference_request(member_key: str, axis: str, document: str, missed: Sequence[dict], spurious: Sequence[dict],
                      symmetric: Sequence[str] = ()) -> Request:
    """The judge request for one member × backend × axis (the backend is never named)."""
    truth = "\n".join(f"T{i}: {json.dumps(_fields(axis, r['expected']), ensure_ascii=False)}"
                      for i, r in enumerate(missed, 1))
    extracted = "\n".join(f"X{i}: {json.dumps(_fields(axis, r['extracted']), ensure_ascii=False)}"
                          for i, r in enumerate(spurious, 1))
    criteria = CRITERIA[axis]
    if axis == "relations" and symmetric:
        criteria += f" These relations are undirected (head and tail may be swapped): {', '.join(symmetric)}."
    user = (f"Source text:\n<<<\n{document}\n>>>\n\n"
            f"An extraction of {WHAT[axis]} of this text was compared with the verified truth by exact comparison "
            "of normalized names. The items below were left unmatched: true items the extraction seems to miss, "
            "and extracted items that are not in the truth. Some may be the same thing written differently.\n\n"
            f"{criteria}\n\n"
            f"True items:\n{truth}\n\n"
            f"Extracted items:\n{extracted}\n\n"
            "Pair each extracted item with the true item it denotes, if any. Each true item and each extracted item "
            "may be used in at most one pair. List only pairs you are sure of. Answer with one JSON object: "
            '{"matches": [{"truth": "T1", "extracted": "X1", "reason": "..."}]}, with an empty list when '
            "nothing matches.")
    return Request(member=member_key, call_type=REFERENCE, system=REFERENCE_SYSTEM, user=user,
                   schema=REFERENCE_SCHEMA, max_tokens=MAX_TOKENS, temperature=0.0)


def parse_matches(record: Any, missed: Sequence[dict], spurious: Sequence[dict]
                  ) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """(accepted pairs, problems) from the judge's record; None when the answer has no match list.

    Unknown ids and a second use of an item are problems and are left out (one-to-one, first wins).
    """
    if not isinstance(record, dict) or not isinstance(record.get("matches"), list):
        return None, ["the judge's answer has no 'matches' list"]
    accepted, problems, used_t, used_x = [], [], set(), set()
    for n, m in enumerate(record["matches"]):
        if not isinstance(m, dict):
            problems.append(f"matches[{n}]: not an object")
            continue
        t, x = str(m.get("truth", "")).strip().upper(), str(m.get("extracted", "")).strip().upper()
        ti = int(t[1:]) if t[:1] == "T" and t[1:].isdigit() else 0
        xi = int(x[1:]) if x[:1] == "X" and x[1:].isdigit() else 0
        if not (1 <= ti <= len(missed)) or not (1 <= xi <= len(spurious)):
            problems.append(f"matches[{n}]: unknown id {m.get('truth')!r} / {m.get('extracted')!r}")
            continue
        if ti in used_t or xi in used_x:
            problems.append(f"matches[{n}]: T{ti} or X{xi} already paired; ignored")
            continue
        used_t.add(ti)
        used_x.add(xi)
        mr, sr = missed[ti - 1], spurious[xi - 1]
        accepted.append({"expected_key": mr["key"], "extracted_key": sr["key"], "expected": mr["expected"],
                         "extracted": sr["extracted"],
                         "reason": m.get("reason") if isinstance(m.get("reason"), str) else ""})
    return accepted, problems


# ----------------------------------------------------------------------------- resolving the judge

@dataclass
class JudgeConfig:
    spec: BackendSpec  # --judge SPEC, labelled "judge"
    mode: str = "reference"
    cache: Path | None = None  # None: <run folder's parent>/judge-cache.jsonl


def check_mode(mode: str | None, judge: BackendSpec | None) -> str:
    if judge is None:
        if mode is not None:
            raise UsageError("--judge-mode needs --judge SPEC (the model that judges)")
        return "reference"
    mode = mode or "reference"
    if mode not in MODES:
        raise UsageError(f"--judge-mode {mode!r}: expected one of {', '.join(MODES)}")
    return mode


def resolve_judge(config: JudgeConfig, run_dir: Path, extraction: Sequence[Any] = (),
                  env: dict[str, str] | None = None) -> Any:
    """The judge as a `resolve.Resolved` (label ``judge``): guards collected, nothing called or written.

    Live kinds record into the judge cache; ``cassette:`` replays. EVALKIT_RECORD_LLM /
    EVALKIT_REPLAY_LLM do not apply to the judge (its cache is always its own cassette).
    """
    spec = config.spec
    try:  # a live provider (a model, or a pipeline that asks one), or a cassette of one
        judges = provider(spec.kind).live or spec.kind == CASSETTE
    except UsageError:
        judges = False
    if not judges:
        usages = [p.usage for p in providers() if p.live or p.kind == CASSETTE]
        raise UsageError(f"--judge {spec.spec}: a judge must be a model: {', '.join(usages[:-1])} or {usages[-1]} "
                         f"(not {spec.kind!r})")
    env = dict(os.environ if env is None else env)
    env.pop(RECORD_ENV, None)
    env.pop(REPLAY_ENV, None)
    if spec.kind == CASSETTE:
        return resolve_backends([spec], env=env)[0]
    cache = Path(config.cache) if config.cache else Path(run_dir).resolve().parent / CACHE_NAME
    for r in extraction:
        if r.cassette is not None and _same_file(cache, Path(r.cassette)):
            raise UsageError(f"--judge-cache {cache} is backend {r.label}'s cassette: give the judge its own cache")
    return resolve_backends([spec], [f"{spec.label}={cache}"], env=env)[0]


def missing_key(judge: Any) -> str | None:
    """Why a resolved judge is skipped: its key is not set (a note, not an abort: the strict figures stand
    and judged metrics stay null, as in the harness it follows). None when it can judge."""
    keys = [g.message for g in (judge.guards if judge is not None else ()) if g.kind == "missing_api_key"]
    if not keys:
        return None
    return f"judge skipped: {'; '.join(keys)}; judged metrics stay null, strict figures are reported"


# ----------------------------------------------------------------------------- the phase

@dataclass
class PhaseResult:
    calls: int = 0  # judge calls made (provider calls: a cache hit is none)
    requests: int = 0  # distinct judge requests
    replayed: int = 0
    errors: int = 0
    usd: float = 0.0
    messages: list[str] = field(default_factory=list)  # stderr lines (notes, warnings)
    summary: dict[str, Any] = field(default_factory=dict)


def _is_graph(member: Any) -> bool:
    return getattr(member.task.scorer, "judged", None) == JUDGED_GRAPH  # the scorer declares it (`Scorer.judged`)


@dataclass(frozen=True)
class JudgeRun:
    """What `judge_phase` judges, and with what: the run's extractions and the opened judge (the runner's `_judge`)."""

    run_dir: Path
    homes: Sequence[Home]  # sample 0 of each member × backend the run extracted
    documents: dict[str, Any]  # member key → its `corpus.sources.Document`
    backend: Any  # the opened judge backend
    mode: str  # reference | pairwise | both (`check_mode`)
    labels: Sequence[str]  # the run's backends, in --backend order: the pairs are drawn from them
    sources: Path | None = None
    threshold: float | None = None
    max_concurrency: int = 8  # judge calls in flight
    max_usd: float | None = None  # what is left of --max-usd after the extractions
    progress: Any = None  # progress(phase, total) → tick(), as the runner's
    cache: Path | None = None  # the judge cache (a cassette): recorded in judge.json
    reference: str | None = None  # --reference LABEL: its records are the truth the others' are compared with


def judge_phase(run: JudgeRun) -> PhaseResult:
    """Build every judge request, send the distinct ones through one pool, write the verdicts.

    With `run.reference` (``--reference LABEL``), reference judging compares each other backend's leftovers with
    LABEL's record instead of the truth (LABEL itself is not judged).

    Writes judgments.json per member × backend (reference), pairwise.json per task (pairwise) and
    judge.json in the run folder. Returns counts and the stderr messages (the runner prints them).
    """

    result = PhaseResult()
    judge_meta = {"spec": run.backend.spec, "model": run.backend.model}
    graph_homes = [h for h in run.homes if _is_graph(h.member)]
    skipped_tasks = sorted({h.member.task.id for h in run.homes if not _is_graph(h.member)})
    if skipped_tasks:
        result.messages.append(f"note: judge: task(s) {', '.join(skipped_tasks)} are not graph tasks: not judged")
    extractions = {(h.member.key, h.label): runfolder.read_extraction(h.dir) for h in graph_homes}
    requests: dict[str, Request] = {}  # sha → request: each distinct one is sent once, in the order first wanted
    ref_plan = (_reference_plan(run, graph_homes, extractions, requests) if run.mode in ("reference", "both")
                else [])
    pairs = [(a, b) for i, a in enumerate(run.labels) for b in run.labels[i + 1:]]
    pair_items = (_pairwise_plan(run, graph_homes, extractions, pairs, requests) if run.mode in ("pairwise", "both")
                  else {})
    completions, summary = _send(run, requests, result)
    _reference_verdicts(ref_plan, extractions, completions, judge_meta, result)
    _pairwise_verdicts(run, pair_items, pairs, completions, judge_meta, result)
    if result.errors:
        result.messages.append(f"warning: judge: {result.errors} judgment(s) failed (provider error, budget or an "
                               f"unreadable answer): those axes keep null judged figures, those pairwise items count "
                               f"as errors (see {runfolder.JUDGMENTS} / {runfolder.PAIRWISE})")
    result.summary = {"judge": judge_meta, "mode": run.mode, "cache": str(run.cache) if run.cache else None,
                      "requests": result.requests, "calls": result.calls, "replayed": result.replayed,
                      "errors": result.errors, "usd": result.usd, "calls_summary": summary}
    runfolder.write_judge_json(run.run_dir, result.summary)
    return result


def _want(requests: dict[str, Request], req: Request) -> str:
    """`req`'s sha256, the request kept under it unless an identical one is already wanted."""
    sha = request_sha(req)
    requests.setdefault(sha, req)
    return sha


def _reference_plan(run: JudgeRun, graph_homes: list[Home], extractions: dict[tuple[str, str], Any],
                    requests: dict[str, Request]) -> list[tuple[Home, dict[str, Any]]]:
    """Reference mode: the strict leftovers of every member × backend, per axis: a request (its sha and rows kept
    in ``_sha``/``_rows`` until the answer comes) where there is something on both sides, else nothing to judge."""
    ref_plan: list[tuple[Home, dict[str, Any]]] = []
    for h in graph_homes:
        ext = extractions[(h.member.key, h.label)]
        truth = None if run.reference is None else reference_truth(h.member, runfolder.sibling(h.dir, run.reference),
                                                                    run.reference)
        if h.label == run.reference or isinstance(truth, Failed):
            continue  # the reference is the truth; a member it has no record of is not compared
        strict = score_record(h.member, ext.record, run.documents[h.member.key], run.sources, run.threshold,
                              truth=truth)
        axes: dict[str, Any] = {}
        for axis in SET_AXES:
            missed, spurious = candidates(strict.items, axis)
            entry: dict[str, Any] = {"missed": len(missed), "spurious": len(spurious)}
            if missed and spurious:
                symmetric = list(getattr(h.member.task.options, "symmetric_relations", []) or [])
                req = reference_request(h.member.key, axis, run.documents[h.member.key].text, missed, spurious,
                                        symmetric)
                entry["_sha"], entry["_rows"] = _want(requests, req), (missed, spurious)
            else:
                entry.update(status="nothing_to_judge", accepted=[])
            axes[axis] = entry
        ref_plan.append((h, axes))
    return ref_plan


def _pairwise_plan(run: JudgeRun, graph_homes: list[Home], extractions: dict[tuple[str, str], Any],
                   pairs: list[tuple[str, str]], requests: dict[str, Request]) -> dict[str, list[dict[str, Any]]]:
    """Pairwise mode: every unordered pair of backends, every member, every axis, both orders: the items per task,
    each ``pending`` (its orders' request shas in ``_sha``), ``identical`` or ``skipped``."""
    pair_items: dict[str, list[dict[str, Any]]] = {}
    by_member: dict[str, dict[str, Home]] = {}
    for h in graph_homes:
        by_member.setdefault(h.member.key, {})[h.label] = h
    for key in sorted(by_member):
        homes_of = by_member[key]
        member = next(iter(homes_of.values())).member
        for a, b in pairs:
            recs = {x: extractions[(key, x)].record if x in homes_of else None for x in (a, b)}
            for axis in pairwise.AXES:
                item: dict[str, Any] = {"member": member.id, "axis": axis, "a": a, "b": b, "orders": [],
                                        "outcome": None, "inconsistent": False}
                missing = [x for x in (a, b) if not isinstance(recs[x], dict)]
                if missing:
                    item.update(status="skipped", why=f"no record from {', '.join(missing)}")
                else:
                    content = {x: pairwise.render_content(pairwise.axis_content(recs[x], axis), axis) for x in (a, b)}
                    first = pairwise.first_order(key, a, b)
                    if content[a] == content[b]:
                        item.update(status="identical", outcome="tie")
                        item["orders"] = [{"slot_a": first[0], "slot_b": first[1]}]
                    else:
                        for sa, sb in (first, first[::-1]):
                            req = pairwise.request(key, axis, run.documents[key].text, content[sa], content[sb])
                            item["orders"].append({"slot_a": sa, "slot_b": sb, "_sha": _want(requests, req)})
                        item["status"] = "pending"
                pair_items.setdefault(member.task.id, []).append(item)
    return pair_items


def _send(run: JudgeRun, requests: dict[str, Request], result: PhaseResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """One pool for every distinct request: (sha → completion, the calls' summary); `result` gets the counts."""
    shas = list(requests)
    completions: dict[str, Any] = {}
    if shas:
        jobs = [Job(run.backend, requests[s]) for s in shas]
        tick = run.progress("judging", len(jobs)) if run.progress else None
        pool = run_pool(jobs, run.max_concurrency, progress=(lambda *a: tick()) if tick else None,
                        max_usd=run.max_usd)
        completions = dict(zip(shas, pool.completions))
        summary = summarize_calls(pool.completions)
        result.calls = sum(c.calls for c in pool.completions if not c.replayed)
        result.replayed = summary["replayed"]
        result.usd = summary["usd"]
    else:
        summary = summarize_calls([])
        if run.backend is not None:
            import asyncio  # only to close a judge that was never called

            asyncio.run(run.backend.aclose())
    result.requests = len(shas)
    return completions, summary


def _answer(completions: dict[str, Any], sha: str) -> tuple[Any, str | None]:
    """The judge's record for the request `sha`, or why there is none."""
    c = completions[sha]
    if c.error:
        return None, c.error
    if c.record is None:
        return None, f"unreadable judge answer ({c.parse})"
    return c.record, None


def _reference_verdicts(ref_plan: list[tuple[Home, dict[str, Any]]], extractions: dict[tuple[str, str], Any],
                        completions: dict[str, Any], judge_meta: dict[str, Any], result: PhaseResult) -> None:
    """Reference verdicts → judgments.json per member × backend; a failed judgment counts in `result.errors`."""
    for h, axes in ref_plan:
        out_axes = {}
        for axis, entry in axes.items():
            if "_sha" in entry:
                missed, spurious = entry.pop("_rows")
                record, error = _answer(completions, entry.pop("_sha"))
                accepted, problems = (None, []) if error else parse_matches(record, missed, spurious)
                if error or accepted is None:
                    entry.update(status="error", error=error or "; ".join(problems), accepted=[])
                    result.errors += 1
                else:
                    entry.update(status="judged", accepted=accepted)
                    if problems:
                        entry["problems"] = problems
            out_axes[axis] = entry
        ext = extractions[(h.member.key, h.label)]
        runfolder.write_judgments(h.dir, {"member": h.member.key, "backend": h.label, "judge": judge_meta,
                                       "mode": "reference", "extraction_sha256": canonical_sha(ext.record),
                                       "axes": out_axes})


def _pairwise_verdicts(run: JudgeRun, pair_items: dict[str, list[dict[str, Any]]], pairs: list[tuple[str, str]],
                       completions: dict[str, Any], judge_meta: dict[str, Any], result: PhaseResult) -> None:
    """Pairwise verdicts → <task>/pairwise.json; a failed item counts in `result.errors`, its notes in messages."""
    for task_id, items in pair_items.items():
        for item in items:
            if item["status"] != "pending":
                continue
            winners, errors = [], []
            for order in item["orders"]:
                record, error = _answer(completions, order.pop("_sha"))
                verdict, reason = pairwise.parse_verdict(record)
                if error or verdict is None:
                    errors.append(error or f"no verdict A, B or tie in the judge's answer {record!r:.120}")
                order.update(verdict=verdict, winner=pairwise.winner(verdict, order["slot_a"], order["slot_b"]),
                             reason=reason)
                winners.append(order["winner"])
            if errors:
                item.update(status="error", why="; ".join(errors))
                result.errors += 1
                continue
            outcome, inconsistent = pairwise.combine(*winners)
            item.update(status="judged", outcome=outcome, inconsistent=inconsistent)
        rows = pairwise.aggregate(items, pairs)
        runfolder.write_pairwise(run.run_dir, task_id, {
            "task": task_id, "judge": judge_meta, "backends": list(run.labels), "axes": list(pairwise.AXES),
            "pairs": rows, "items": items})
        result.messages += [f"{m} [{task_id}]" for m in pairwise.notes(rows)]


def print_messages(messages: Iterable[str]) -> None:
    for m in messages:
        print(f"evalkit: {m}", file=sys.stderr)
