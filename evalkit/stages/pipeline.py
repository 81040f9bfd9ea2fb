"""One member through extraction and scoring: the functions notebooks call.

A member × backend leaves extraction.json (the record and its run block) and score.json (the
ScoreResult with its item table) in its folder of the run (`evalkit.results.runfolder`). Both carry its
status (`evalkit.status`): an extraction that failed is never scored; its score.json says ``error``
with the cause, and has no score, verdict or metrics.

`score_home` is the one scoring path: score.ipynb calls it (through `score_member`), and so does
``--no-notebooks`` (`evalkit.stages.runner`); both write the same score.json.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evalkit import __version__
from evalkit._util.jsonio import canonical_sha, nonfinite_path
from evalkit.backends import Backend, BackendContext, BackendSpec, Completion, Request
from evalkit.backends.fake import FakeBackend
from evalkit.backends.live import call_budgets
from evalkit.backends.providers import declared
from evalkit.backends.redact import console, scrub
from evalkit.corpus.outschema import top_key, violations
from evalkit.corpus.sources import Document, check_integrity, document_parts, read_document
from evalkit.corpus.specs import Settings
from evalkit.corpus.tasks import DEFAULT_CORPUS, Member, Task, find_task, sources_dir
from evalkit.errors import EvalkitError
from evalkit.results import runfolder
from evalkit.results.records import ExtractionRecord, RunBlock
from evalkit.scoring import ScoreContext, ScoreResult
from evalkit.scoring.ontology import Ontology, inject
from evalkit.status import REFERENCE_FAILED, SCORING_CRASH, Failed, extraction_status

SCHEMA_INVALID = "schema_invalid"  # the parse outcome of a record that breaks the task's output schema


def render_request(task: Task, member: Member, document: Document, ontology: Any = None,
                   settings: Settings | None = None) -> Request:
    """The extraction request. `ontology` (`evalkit.scoring.ontology.Ontology`, --ontology) appends its
    vocabulary to the user prompt; without one the prompt is the task's, byte for byte. `settings`: the
    sampling settings sent (default: the task's; ``--set`` gives `Settings.with_overrides` of them)."""
    prompt = task.spec.prompt
    settings = settings or task.spec.settings
    parts, digests = document_parts(document, settings.input, settings.dpi)
    text = document.text if settings.input == "text" else attached(settings.input, len(parts))
    return Request(
        member=member.key,
        call_type="extract",
        system=prompt.system,
        # Only {document} is substituted: documents may contain braces of their own.
        user=inject(prompt.user.replace("{document}", text), ontology),
        schema=task.spec.output_schema,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        withheld=document.text if member.manifest.source.is_pointer and settings.input == "text" else "",
        input=settings.input, dpi=settings.dpi, parts=parts, sources_sha256=digests,
    )


def attached(mode: str, count: int) -> str:
    """What stands for {document} in the prompt when the document is sent as parts (they come before the text)."""
    if mode == "pdf":
        return "[the document is attached above as a PDF file]" if count == 1 else \
            f"[the document is attached above as {count} PDF files, in order]"
    return f"[the document is attached above as {count} page image(s), in page order]"


def request_settings(request: Request) -> Settings:
    """The settings a request carries (the render resolution only where pages are rendered)."""
    return Settings(max_tokens=request.max_tokens, temperature=request.temperature, input=request.input,
                    **({"dpi": request.dpi} if request.input == "images" else {}))


def request_sha(request: Request) -> str:
    what = {"system": request.system, "user": request.user, "schema": request.schema,
            "max_tokens": request.max_tokens, "temperature": request.temperature, "call_type": request.call_type}
    input_key = request.input_key()
    return canonical_sha(what | ({"input": input_key} if input_key else {}))


def is_current(extraction: ExtractionRecord, request: Request, spec: str) -> bool:
    """Whether an extraction.json answers `request` with the backend `spec` (so it need not be made again)."""
    return extraction.request_sha256 == request_sha(request) and extraction.backend.spec == spec


def backend_context(members: list[Member], sources: Path | None,
                    documents: dict[str, Document] | None = None) -> BackendContext:
    by_key = {m.key: m for m in members}
    documents = documents or {}

    def expected(key: str) -> dict[str, Any]:
        m = by_key[key]
        return m.task.scorer.expected_extraction(m.load_truth(sources))

    def document(key: str) -> str:
        if key not in documents:
            documents[key] = read_document(check_integrity(by_key[key], sources))
        return documents[key].text

    def task(key: str) -> dict[str, Any]:
        spec = by_key[key].task.spec
        return {"id": spec.id, "description": spec.description, "schema": spec.output_schema,
                "system": spec.prompt.system, "user": spec.prompt.user}

    return BackendContext(expected=expected, member_ids={k: m.id for k, m in by_key.items()},
                          documents=document, tasks=task)


def extraction_record(member: Member, backend: Backend, request: Request, completion: Completion,
                      ontology: Any = None) -> dict[str, Any]:
    """What extraction.json holds: the record plus the run block behind it, its status (a failed
    call is classified here, once: `evalkit.status.classify`) and, under --ontology, the ontology
    its prompt carried, so the notebooks render the same request."""
    run = completion.to_json()
    run["settings"] = request_settings(request).non_default()  # what the call was sent, beyond the defaults
    record = run.pop("record")
    raw = run.pop("raw")
    # A record that breaks the task's output schema is still scored as extracted; the run block says so. The
    # fake backend's record is the truth itself, which (as `evalkit validate` holds it) the size caps do not bind.
    caps = getattr(backend, "model", None) != FakeBackend.model
    broken = violations(record, request.schema, caps=caps) if record is not None and request.schema else []
    if broken:
        run |= {"parse": SCHEMA_INVALID, "schema_violations": broken}
    extra = {"ontology": ontology.to_json()} if ontology is not None else {}
    return {
        **extra,
        "member": member.key,
        **({"sample": request.sample} if request.sample else {}),  # --samples: which one (0: the home's own)
        "backend": {"label": backend.label, "spec": backend.spec, "model": completion.model or backend.model},
        "request_sha256": request_sha(request),
        "evalkit_version": __version__,
        "record": record,
        "raw": raw,
        "run": run,
        **extraction_status(completion, failure_declared(backend)),
    }


def failure_declared(backend: Any) -> str | None:
    """What an empty completion of `backend` is, as its provider declares it (`Provider.failure`; a wrapper such
    as a recording cassette carries its inner backend's ``provider``)."""
    return getattr(declared(getattr(backend, "provider", None)), "failure", None)


def run_sync(coro):
    """asyncio.run, also from inside a running loop (a Jupyter kernel has one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def locate(task_id: str, member_id: str, corpus: str | Path | None) -> Member:
    return find_task(Path(corpus or DEFAULT_CORPUS), task_id).member(member_id)


def extract_member(task: str, member: str, backend: BackendSpec, corpus: str | Path | None = None,
                   sources: str | Path | None = None, out: str | Path = ".") -> ExtractionRecord:
    """Extraction for one member and backend; reuses ``out/extraction.json`` when current.

    The harness fills extraction.json for many members in one concurrent pool
    before notebooks run; run on its own (e.g. in JupyterLab) this calls the
    backend itself.
    """
    m = locate(task, member, corpus)
    src = sources_dir(sources)
    document = read_document(check_integrity(m, src))
    request = render_request(m.task, m, document)
    ontology = None
    if (Path(out) / runfolder.EXTRACTION).exists():
        existing = runfolder.read_extraction(out)
        settings = existing.run.settings  # None: recorded before settings were
        settings = None if settings is None else Settings.model_validate(settings)
        if existing.ontology:  # extracted under --ontology: its prompt carried the vocabulary
            from evalkit.scoring.ontology import Ontology

            ontology = Ontology.from_json(existing.ontology)
        if ontology is not None or settings is not None:  # render what the run sent (--ontology, --set)
            request = render_request(m.task, m, document, ontology, settings)
        if is_current(existing, request, backend.spec):
            return existing
    from evalkit.backends.resolve import build_backends  # lazy: read per call: tests patch resolve.build_backends

    b = build_backends([backend], ctx=backend_context([m], src, {m.key: document}))[0]

    async def once() -> Completion:
        try:
            return await b.complete(request)
        finally:
            await b.aclose()

    return runfolder.write_extraction(out, extraction_record(m, b, request, run_sync(once()), ontology))


def member_request(task: str, member: str, corpus: str | Path | None = None, sources: str | Path | None = None,
                   out: str | Path = ".") -> tuple[Document, Request]:
    """(document, request) of one member's extraction in `out`: what the member page shows the backend
    received (the request rendered again, under the ontology extraction.json records, if any)."""
    m = locate(task, member, corpus)
    document = read_document(check_integrity(m, sources_dir(sources)))
    ontology = settings = None
    if (Path(out) / runfolder.EXTRACTION).exists():
        existing = runfolder.read_extraction(out)
        if existing.ontology:
            ontology = Ontology.from_json(existing.ontology)
        sent = existing.run.settings  # --set input=..., say: the parts it was sent
        settings = None if sent is None else Settings.model_validate(sent)
    return document, render_request(m.task, m, document, ontology, settings)


def score_member(task: str, member: str, corpus: str | Path | None = None,
                 sources: str | Path | None = None, out: str | Path = ".",
                 threshold: float | None = None, reference: str | None = None) -> ScoreResult | Failed:
    """score.ipynb's call: `score_home` for the member named by ids and paths (relative to the notebook). Under
    --samples K > 1 the result carries every sample's score.json as ``samples`` (the member page lists them;
    not part of score.json)."""
    result = score_home(locate(task, member, corpus), out, sources_dir(sources), threshold, reference=reference)
    if (Path(out) / runfolder.SAMPLES).is_dir():
        object.__setattr__(result, "samples", runfolder.read_sample_scores(out))  # a Failed is frozen
    return result


def score_home(member: Member, home: str | Path, sources: Path | None, threshold: float | None = None,
               document: Document | None = None, reference: str | None = None) -> ScoreResult | Failed:
    """Score ``home/extraction.json`` against the member's truth and write ``home/score.json``: what
    score.ipynb and ``--no-notebooks`` both do. `threshold` overrides the task's pass threshold
    (``evalkit run --threshold``); `document`: the member's source, when already read (and checked);
    `reference`: a backend label whose record of this member is the truth instead (``--reference``: the
    figures are then a similarity to it). A failed extraction or a crashing scorer gives a `Failed` (see
    `score_extraction`)."""
    if document is None:
        document = read_document(check_integrity(member, sources))
    extraction = runfolder.read_extraction(home)
    truth = None if reference is None else reference_truth(member, runfolder.sibling(home, reference), reference)
    result = score_extraction(member, extraction, home, document, sources, threshold, truth)
    runfolder.write_score(home, member.key, extraction, result, reference)
    return result


def reference_truth(member: Member, home: str | Path, label: str) -> Any:
    """The truth a ``--reference LABEL`` run scores against: LABEL's record of the member (in `home`), as its
    scorer's truth (`Scorer.truth_from_record`); a `Failed` when LABEL has no usable record of it."""
    try:
        extraction = runfolder.read_extraction(home)
    except Exception as e:  # noqa: BLE001 - missing or unreadable: this member cannot be compared
        return Failed(REFERENCE_FAILED, f"the reference {label!r} has no extraction of {member.key}: {e}")
    failed = extraction.failure
    if failed is not None:
        return Failed(REFERENCE_FAILED, f"the reference {label!r} failed on {member.key} ({failed})")
    make = member.task.scorer.truth_from_record
    if make is None:
        return Failed(REFERENCE_FAILED, f"scorer {member.task.scorer.name!r} cannot take a record as truth")
    try:
        return make(extraction.record, member.task.options)
    except Exception as e:  # noqa: BLE001 - the reference's answer does not fit the truth's shape
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return Failed(REFERENCE_FAILED, f"the reference {label!r}'s record of {member.key} is not a usable truth: "
                                        f"{first}")


def score_extraction(member: Member, extraction: ExtractionRecord, home: str | Path, document: Document,
                     sources: Path | None, threshold: float | None = None, truth: Any = None) -> ScoreResult | Failed:
    """The score of one extraction.json, or why there is none: the extraction's own failure, the reference's
    (`truth` a `Failed`), or the scorer's crash (a bug in one scorer fails that member only; evalkit's own
    errors propagate). `home`: the member's run folder, where the judge's verdicts are read from; `truth`:
    what to score against instead of the member's own truth (``--reference``)."""
    failed = extraction.failure
    if failed is not None:
        return failed
    if isinstance(truth, Failed):
        return truth

    console()  # the scorer is the task's own code: what it prints is scrubbed on its way out
    try:
        judged = runfolder.read_judgments(home, extraction)  # a scorer gets the file's JSON, as it always did
        result = score_record(member, extraction.record, document, sources, threshold,
                              judgments=None if judged is None else judged.to_json(),
                              ontology=extraction.ontology, truth=truth)
        run = extraction.run
        result = mark_violations(result, run.schema_violations)
        if extraction.backend.model == FakeBackend.model and truth is None:
            line, _ = self_test_check(member, result)  # the self-test: say why it is not 100% PASS
            result.notes[:0] = [line] if line else []
        result = apply_verdict_policy(result, run, member.task.spec.verdict)
    except EvalkitError:
        raise
    except Exception as e:  # noqa: BLE001 - a scorer crash is that member's error
        return Failed(SCORING_CRASH, scrub(f"{type(e).__name__}: {e}", key_shaped=True))  # it may quote a key
    at = nonfinite_path(result.to_json())
    if at is not None:  # a NaN is not a score (and JSON cannot hold it): the scorer's bug, that member's error
        return Failed(SCORING_CRASH, f"the scorer gave {at} a NaN or infinite value (use None for an undefined figure)")
    return result


def mark_violations(result: ScoreResult, broken: list[dict[str, Any]]) -> ScoreResult:
    """Put each schema violation on the item rows of the field it is under (column ``schema``: its JSON
    paths and messages, None on a conforming field); one the rows cannot hold (no row names its field)
    becomes a note. Scores and metrics are untouched: the field was scored as extracted."""
    if not broken:
        return result
    named = {f for row in result.items if (f := row.get("field")) is not None}
    for row in result.items:
        mine = [f"{v['path']}: {v['message']}" for v in broken
                if row.get("field") is not None and top_key(v["path"]) == row.get("field")]
        row["schema"] = "; ".join(mine) or None
    stray = [f"{v['path']}: {v['message']}" for v in broken if top_key(v["path"]) not in named]
    result.notes.extend(f"schema_invalid — {s}" for s in stray)
    return result


SELF_TEST_DIGITS = 3  # a self-test score is declared and compared as the CLI shows it (0.958 = 95.8%)


def self_test(member: Member, document: Document, sources: Path | None) -> ScoreResult:
    """The member's truth scored against itself: what the `fake` backend (it echoes the scorer's
    `expected_extraction` of the truth) gets, computed without a run."""
    truth = member.load_truth(sources)
    return score_record(member, member.task.scorer.expected_extraction(truth), document, sources)


def self_test_check(member: Member, result: ScoreResult) -> tuple[str | None, bool]:
    """(a line saying why the truth's self-test `result` is not 100% PASS, whether it names something to fix):
    the manifest's ``self_test`` reason when its expected score holds (nothing to fix); what to fix when the
    declaration is wrong or missing; (None, False) when the truth scores itself 100% PASS and declares nothing.
    The fake run prints the line (a ↳ note); `evalkit validate` reports a line to fix as a problem."""
    declared = member.manifest.self_test
    got = None if result.score is None else round(result.score, SELF_TEST_DIGITS)
    shown = ("n/a" if got is None else f"{100 * got:.1f}%") + (" FAIL" if result.passed is False else "")
    if declared is not None and got == round(declared.expected, SELF_TEST_DIGITS) and result.passed is not False:
        return f"self-test: the truth scores itself {shown}, as its manifest declares: {declared.reason}", False
    if declared is not None and result.passed is False:
        return (f"self-test: the truth scores itself {shown}: a declared self_test must still PASS (fix the truth, "
                "or the task's threshold or gate)"), True
    if declared is not None:
        return (f"self-test: the truth scores itself {shown}, but its manifest declares self_test.expected "
                f"{declared.expected} (fix the declaration or the truth)"), True
    if got == 1.0 and result.passed is not False:
        return None, False
    return (f"self-test: the truth scores itself {shown}, not 100% PASS: fix the truth, or declare why in "
            "manifest.yaml (self_test: {expected, reason})"), True


TRUNCATED = "truncated"  # an answer cut off at the token budget even after its one retry (run block `truncated`)


def answer_faults(run: RunBlock) -> dict[str, str]:
    """What is wrong with an answer as an answer, whatever it scores: ``schema_invalid`` (each violation's
    JSON path) and ``truncated`` (the budget it was cut off at), each with a sentence naming the cause."""
    faults: dict[str, str] = {}
    if run.parse == SCHEMA_INVALID:
        paths = list(dict.fromkeys(v["path"] for v in run.schema_violations))
        where = f" at {', '.join(paths)}" if paths else ""
        faults[SCHEMA_INVALID] = f"the record breaks the task's output schema{where}"
    if run.truncated == "exhausted":
        first, retry = call_budgets(Settings.model_validate(run.settings or {}).max_tokens)
        faults[TRUNCATED] = (f"the answer was cut off at the {retry}-token output budget (the retry after the "
                             f"{first}-token call; task.yaml settings.max_tokens)")
    return faults


def apply_verdict_policy(result: ScoreResult, run: RunBlock, policy: Any) -> ScoreResult:
    """An answer's faults (`answer_faults`) as ↳ notes first, and, where the task's ``verdict:`` policy
    (`models.VerdictPolicy`) says ``fail`` for one, a FAIL whatever the score: the score and metrics stay as
    computed. ``details["answer_faults"]`` lists the faults, each with whether it decided the verdict."""
    faults = answer_faults(run)
    if not faults:
        return result
    # a task without a verdict (passed None) keeps none: there is nothing to fail
    failing = [f for f in faults if getattr(policy, f) == "fail"] if result.passed is not None else []
    if failing:
        result.passed = False

    def note(f: str, why: str) -> str:
        if result.passed is None:
            return f"{f} — {why}"
        return f"{f} — {why}; " + (f"verdict FAIL (task.yaml verdict.{f}: fail)" if f in failing
                                    else f"the score decides the verdict (task.yaml verdict.{f}: score)")

    result.notes[:0] = [note(f, why) for f, why in faults.items()]
    result.details["answer_faults"] = {f: {"fails_verdict": f in failing} for f in faults}
    return result


def score_record(member: Member, record: dict[str, Any] | None, document: Document,
                 sources: Path | None, threshold: float | None = None, judgments: dict[str, Any] | None = None,
                 ontology: dict[str, Any] | None = None, truth: Any = None) -> ScoreResult:
    """`judgments`: the judge's verdicts on this extraction (judgments.json, `evalkit.stages.judge`), for the
    judged metrics; `ontology`: the ontology its prompt carried (extraction.json's ``ontology``).
    Each reaches the scorer through ``ctx.extra`` only when given. `truth`: instead of the member's own."""
    task = member.task
    # schema: the fields' declared patterns, for the invention rule (`scoring.normalize.unstated`)
    extra: dict[str, Any] = {"task_dir": str(task.dir), "scope": member.manifest.scope,
                             "schema": task.spec.output_schema}
    if judgments is not None:
        extra["judgments"] = judgments
    if ontology is not None:
        extra["ontology"] = ontology
    ctx = ScoreContext(
        task_id=task.id, member_id=member.id, source_text=document.text, options=task.options,
        threshold=task.spec.threshold if threshold is None else threshold, extra=extra,
    )
    return task.scorer.score(record, member.load_truth(sources) if truth is None else truth, ctx)
