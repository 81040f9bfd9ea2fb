"""What every scorer takes and returns.

A scorer is a plain function ``score(extraction, truth, ctx) -> ScoreResult``.
`extraction` is the backend's record (a dict, or None when it produced
nothing usable); `truth` is the member's truth.yaml as validated by the
scorer's `truth_model`. Every metric is an aggregate over `items`: one row per
compared item with its outcome and the reason for it; a `Scorer` declares each
metric it returns (`Metric`: name, definition, the function behind it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class ScoreContext:
    task_id: str
    member_id: str
    source_text: str  # the document, for checks such as "is this id in the source?"
    options: Any  # the task's `scoring:` block, validated by the scorer's options_model
    threshold: float
    extra: dict[str, Any] = field(default_factory=dict)  # task files a scorer may need (catalogs)


@dataclass
class ScoreResult:
    score: float | None  # the headline figure in 0..1, or None when undefined
    passed: bool | None  # the verdict, None when the task defines none
    metrics: dict[str, float | int | bool | None]
    items: list[dict[str, Any]]  # the item table: one row per compared item
    notes: list[str] = field(default_factory=list)  # one line per problem, for the CLI's ↳ lines
    details: dict[str, Any] = field(default_factory=dict)  # scorer-specific extras (e.g. gate output)

    def to_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "passed": self.passed,
            "metrics": self.metrics,
            "notes": self.notes,
            "details": self.details,
            "items": self.items,
        }


ScoreFn = Callable[[Any, Any, ScoreContext], ScoreResult]


@dataclass(frozen=True)
class Metric:
    """One metric a scorer declares: its name (a key of `ScoreResult.metrics`, written as a literal here so
    that grepping the name finds its rule), a one-line definition, and the function that computes it — for
    a figure aggregated from the item table, the function that writes those rows (`evalkit metrics TASK`)."""

    name: str
    definition: str
    function: Callable[..., Any]


# What an LLM judge can compare (`Scorer.judged`, `evalkit.stages.judge`): a graph's items, whose strict pass left
# missed and spurious items on each set axis (``axis`` entities / relations), which the judge may match up.
JUDGED_GRAPH = "graph"


def _echo(truth: Any) -> dict[str, Any]:
    """A truth that is itself the perfect record."""
    return truth.model_dump(mode="json") if isinstance(truth, BaseModel) else dict(truth)


@dataclass(frozen=True)
class Scorer:
    """A scoring function plus the models that validate its inputs at load time."""

    name: str
    score: ScoreFn
    truth_model: type[BaseModel] | None = None  # validates truth.yaml
    options_model: type[BaseModel] | None = None  # validates task.yaml's `scoring:` block
    extraction_model: type[BaseModel] | None = None  # validates predictions / extractions
    # The record a perfect extraction would be (what the `fake` backend echoes).
    expected_extraction: Callable[[Any], dict[str, Any]] = _echo
    metrics: tuple[Metric, ...] = ()  # every metric `score` can return, declared (empty: undeclared)
    # `(record, options) -> truth`: the truth a record stands for, when another backend's record is the truth
    # (`evalkit run --reference`), the inverse of `expected_extraction`. None: this scorer cannot do that.
    truth_from_record: Callable[[Any, Any], Any] | None = None
    # The shape of its items an LLM judge compares (JUDGED_GRAPH), None: `--judge` leaves its tasks unjudged.
    judged: str | None = None

    def __post_init__(self) -> None:  # a truth that is its own perfect record is also made from one
        if self.truth_from_record is None and self.expected_extraction is _echo:
            make = self.truth_model.model_validate if self.truth_model else dict
            object.__setattr__(self, "truth_from_record", lambda record, options: make(record))


def ratio(numerator: float, denominator: float) -> float | None:
    """Null-safe ratio: an empty denominator gives None, never 0 or 1."""
    return None if not denominator else numerator / denominator
