"""The one small interface every extraction backend implements.

A backend turns a `Request` (rendered prompts, output schema, settings) into a
`Completion` (the parsed record plus accounting). New providers implement
`Backend.complete`; the harness never builds HTTP requests itself. A provider's
factory makes its backend from a `BackendSpec` and the run's `BackendContext`
(`evalkit.backends.providers`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from evalkit.corpus.parts import Part

# "schema_invalid" is set on extraction.json's run block, never by a backend (`pipeline.extraction_record`).
ParseOutcome = Literal["clean", "recovered", "malformed", "error", "schema_invalid"]


@dataclass(frozen=True)
class Request:
    member: str  # "<task>/<member>", for messages and failure records
    call_type: str  # "extract", "judge.reference", "judge.pairwise", ...
    system: str
    user: str
    schema: dict[str, Any]
    max_tokens: int = 1024
    temperature: float = 0.0
    # Text inside `user` that no artefact may store: a pointer member's document, whose licence
    # keeps it out of the repo. Cassettes keep a placeholder naming its sha256 (the key still
    # covers the full prompt).
    withheld: str = field(default="", repr=False, compare=False)
    # Which of a member's K independent extractions this is (``--samples K``): 0 is the one call a run makes
    # without it, so sample 0 is keyed, recorded and stored exactly as before samples existed.
    sample: int = 0
    # How the document is sent (`models.Settings.input`): "text" (in `user`), "pdf" or "images" (in `parts`).
    input: str = "text"
    dpi: int = 100  # the pages' rendering resolution ("images")
    parts: tuple[Part, ...] = field(default=(), repr=False)
    sources_sha256: tuple[str, ...] = ()  # the source PDFs' sha256: what a cassette key covers of `parts`

    def input_key(self) -> dict[str, Any] | None:
        """What the document parts add to a request's identity (cassette key, extraction currency): the mode, the
        render settings and the source files' sha256 — never the bytes sent (their base64 would bloat a record,
        and a PNG's bytes may differ with the renderer's version). None in text mode: keys as before."""
        if self.input == "text":
            return None
        return {"mode": self.input, "sources": list(self.sources_sha256)} | (
            {"dpi": self.dpi} if self.input == "images" else {})

    def parts_summary(self) -> list[dict[str, Any]]:
        """What a cassette record and the dry run keep of each part: type, name, size, sha256, page sizes."""
        return [p.summary() for p in self.parts]


@dataclass
class Completion:
    record: dict[str, Any] | None  # the parsed output, None when nothing usable came back
    raw: str = ""  # the text as received
    parse: ParseOutcome = "clean"
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    latency_s: float = 0.0
    finish_reason: str | None = None
    truncated: str | None = None  # None | "retry_succeeded" | "exhausted"
    error: str | None = None  # a provider error that left no record
    calls: int = 1  # provider calls made (a truncation retry makes 2)
    replayed: bool = False  # served from a cassette
    # Parts of input_tokens served from / written to the provider's prompt cache (priced apart: `pricing`),
    # and whether the call went through a provider batch API (priced at its batch rate).
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    batch: bool = False

    def to_json(self) -> dict[str, Any]:
        """The fields, the cache and batch ones only where they apply (a run without them stores what it did)."""
        out = asdict(self)
        for name in OPTIONAL_FIELDS:
            if not out[name]:
                del out[name]
        return out


OPTIONAL_FIELDS = ("cache_read_tokens", "cache_write_tokens", "batch")


@runtime_checkable
class Backend(Protocol):
    label: str  # the NAME in --backend NAME=SPEC
    spec: str  # the SPEC as its artefacts record it, without secrets (`BackendSpec.redacted`)
    model: str  # model id ("fake", "predictions", "gemma-3-270m", ...)

    async def complete(self, request: Request) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass
class BackendContext:
    """What a factory may need from the run (never secrets: those come from the environment)."""

    expected: Callable[[str], dict[str, Any]] | None = None  # member key -> perfect record (for `fake`)
    member_ids: dict[str, str] = field(default_factory=dict)  # member key -> member id
    documents: Callable[[str], str] | None = None  # member key -> document text (for `python:` pipelines)
    tasks: Callable[[str], dict[str, Any]] | None = None  # member key -> task description (for `python:`)
