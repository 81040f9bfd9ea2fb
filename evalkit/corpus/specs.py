"""Typed shapes of the corpus files, validated strictly (unknown keys are errors)."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from evalkit._util.strict import Strict
from evalkit.errors import UsageError

SHA256 = re.compile(r"^[0-9a-f]{64}$")


def relative(path: str) -> str:
    """A path a manifest names: relative, and never climbing out of its folder with ``..``."""
    if path.startswith(("/", "\\")) or ".." in path.replace("\\", "/").split("/"):
        raise ValueError(f"{path!r} must be a relative path inside its folder")
    return path


class Prompt(Strict):
    system: str
    user: str  # must contain "{document}"

    @field_validator("user")
    @classmethod
    def _has_document(cls, v: str) -> str:
        if "{document}" not in v:
            raise ValueError("the user prompt must contain the placeholder {document}")
        return v


InputMode = Literal["text", "pdf", "images"]
INPUT_MODES: tuple[str, ...] = ("text", "pdf", "images")


class Settings(Strict):
    """Sampling settings sent to live backends (and part of a cassette key). A task's ``settings:`` sets
    them; ``--set KEY=VALUE`` overrides them for one run or sweep (`with_overrides`).

    ``input``: how the document reaches the model — ``text`` (its text in the prompt), ``pdf`` (the original
    PDF as a document part), ``images`` (its pages rendered to PNG at ``dpi``: `evalkit.corpus.rasterize`)."""

    max_tokens: int = Field(1024, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    input: InputMode = "text"
    dpi: int = Field(100, ge=36, le=300)

    def non_default(self) -> dict[str, Any]:
        """Only what differs from evalkit's defaults: what a run block and a scoreboard entry record."""
        default = Settings().model_dump()
        return {k: v for k, v in self.model_dump().items() if v != default[k]}

    def with_overrides(self, overrides: dict[str, Any] | None) -> Settings:
        return Settings.model_validate({**self.model_dump(), **check_overrides(overrides)}) if overrides else self


def check_overrides(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Overrides of `Settings` (``--set``), validated and typed (``"0.5"`` → 0.5). An unknown key or a bad
    value is a `UsageError` naming it and what is allowed."""
    raw = raw or {}
    known = list(Settings.model_fields)
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise UsageError(f"--set {unknown[0]}: not a task setting (known: {', '.join(known)})")
    try:
        checked = Settings.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        key = str(err["loc"][0])  # a field's name: Settings has no lists
        raise UsageError(f"--set {key}={raw[key]!s}: {err['msg']}") from None
    return {k: getattr(checked, k) for k in raw}


def parse_settings(pairs: list[str] | tuple[str, ...] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs → `check_overrides` of them."""
    raw: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {pair!r}: expected KEY=VALUE (keys: {', '.join(Settings.model_fields)})")
        raw[key.strip()] = value.strip()
    return check_overrides(raw)


VerdictRule = Literal["fail", "score"]


class VerdictPolicy(Strict):
    """How a faulty answer's verdict is decided (task.yaml ``verdict:``, `pipeline.judge_verdict`): ``fail``
    (the default) fails an answer that breaks the output schema (``schema_invalid``) or was cut off at the
    token budget after its retry (``truncated``), whatever its score; ``score`` lets the score decide. The
    score is computed and shown either way."""

    schema_invalid: VerdictRule = "fail"
    truncated: VerdictRule = "fail"


class TaskSpec(Strict):
    id: str
    description: str
    prompt: Prompt
    output_schema: dict[str, Any] = Field(alias="schema")
    scorer: str = "fields"  # entry-point name, or "file.py:attr" beside task.yaml
    scoring: dict[str, Any] = Field(default_factory=dict)  # validated by the scorer
    threshold: float = Field(0.9, ge=0.0, le=1.0)
    settings: Settings = Settings()
    # false: a corpus without truth; its members are scored only against another backend (`--reference`)
    truth: bool = True
    verdict: VerdictPolicy = VerdictPolicy()

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Source(Strict):
    """Exactly one of `file` (in the member folder) or `pointer` (under the sources dir).

    Either may be a list for a document spread over several files (pages)."""

    file: str | list[str] | None = None
    pointer: str | list[str] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Source:
        if (self.file is None) == (self.pointer is None):
            raise ValueError("give exactly one of `file` or `pointer`")
        for p in self.paths:
            relative(p)
        return self

    @property
    def is_pointer(self) -> bool:
        return self.pointer is not None

    @property
    def paths(self) -> list[str]:
        v = self.file if self.file is not None else self.pointer
        return [v] if isinstance(v, str) else list(v or [])


class Licence(Strict):
    spdx: str
    verified: str


PLACEHOLDERS = frozenset({"", "todo", "tbd", "unknown", "n/a", "na", "none", "null", "-", "?", "xxx"})
NO_ADVERSARIAL_PASS = "not done"  # the one way to say no adversarial pass was made ("none" is ambiguous)
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class Provenance(Strict):
    """Who wrote a member's truth and how it was checked, leg by leg (docs/authoring.md)."""

    authored_by: str  # who or what wrote it: a person, a dataset's annotators, or a model and its session
    verified_by: str  # who checked every value against the source, and how
    adversarial_pass: str  # a fresh-context pass trying to refute it: who, how, what it found; or "not done"
    date: str  # YYYY-MM-DD the truth was written or last corrected

    @field_validator("date", mode="before")
    @classmethod
    def _unquoted(cls, v: Any) -> Any:
        return v.isoformat() if isinstance(v, _dt.date) else v  # YAML reads an unquoted date as a date

    def problems(self) -> list[tuple[str, str]]:
        """(leg, what is wrong) for each leg that states nothing usable; `evalkit validate` and `publish` ask."""
        out = [(leg, "is blank or a placeholder") for leg in ("authored_by", "verified_by")
               if getattr(self, leg).strip().casefold() in PLACEHOLDERS]
        if self.adversarial_pass.strip().casefold() in PLACEHOLDERS:
            out.append(("adversarial_pass", f"is blank or a placeholder (say what the pass found, or "
                                            f"{NO_ADVERSARIAL_PASS!r})"))
        if not _ISO_DAY.match(self.date):
            out.append(("date", f"{self.date!r} is not a date YYYY-MM-DD"))
        else:
            try:
                _dt.date.fromisoformat(self.date)
            except ValueError:
                out.append(("date", f"{self.date!r} is not a calendar date"))
        return out


class TruthPointer(Strict):
    """Truth kept outside the repo (under the sources dir), pinned by hash."""

    pointer: str
    sha256: str

    @field_validator("pointer")
    @classmethod
    def _relative(cls, v: str) -> str:
        return relative(v)


class SelfTest(Strict):
    """Why a member's truth does not score itself 100% under the `fake` backend (which echoes the truth's
    perfect record): ``expected`` is that score as the CLI shows it (3 decimals, 0.958 for 95.8%; checked by
    `evalkit validate`), ``reason`` what in the truth or the scorer keeps it there (printed by the fake run)."""

    expected: float = Field(ge=0.0, le=1.0)
    reason: str = Field(min_length=1)


class Manifest(Strict):
    title: str
    source: Source
    # One hex digest, or one per source path when the source has several files.
    # Omitted only in private (BYOM) corpora: a local sidecar is seeded then.
    sha256: str | dict[str, str] | None = None
    license: Licence
    truth_provenance: Provenance | None = None  # required when the task has truth (`corpus.load_member`)
    heldout: bool = False
    notes: str | None = None
    truth: TruthPointer | None = None  # default: truth.yaml in the member folder
    scope: dict[str, Any] | None = None  # scorer-specific restriction (e.g. the pages' coverage)
    self_test: SelfTest | None = None  # why the truth cannot score itself 100% (`pipeline.self_test_note`)

    @model_validator(mode="after")
    def _hashes(self) -> Manifest:
        digests = [self.sha256] if isinstance(self.sha256, str) else list((self.sha256 or {}).values())
        for d in digests:
            if not SHA256.match(d):
                raise ValueError(f"sha256 {d!r} is not 64 lower-case hex digits")
        if isinstance(self.sha256, dict) and sorted(self.sha256) != sorted(self.source.paths):
            raise ValueError("sha256 must have one entry per source path")
        if isinstance(self.sha256, str) and len(self.source.paths) != 1:
            raise ValueError("a source with several files needs a sha256 mapping, one per path")
        return self
