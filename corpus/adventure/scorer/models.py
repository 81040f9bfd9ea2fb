"""The adventure task's records: the strict truth model, the lenient extraction model, the options and
a member's scope (docs/scoring-adventure.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from evalkit.scoring.text import fold, normalize
from evalkit.scoring.tree import norm_key

from .statblock import usable_stat_block

# ============================================================== truth model


def _key_is_str(v: Any) -> Any:
    if isinstance(v, bool) or isinstance(v, (int, float)):
        raise ValueError(f"printed keys are strings: quote it ({v!r} → \"{v}\")")
    return v


Key = Annotated[str, BeforeValidator(_key_is_str), Field(min_length=1)]
TRANSITION_KINDS = ("stairs", "ladder", "trapdoor", "chute", "shaft")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class StatBlock(_Strict):
    """A bespoke creature's printed combat line, in the output schema's shape: AC plus HD or a class level."""

    ac: int | str
    hd: str | None = None
    class_level: str | None = None


class Encounter(_Strict):
    """One printed creature group: singular stat-block name, a catalog template or `custom: true`, a fixed count."""

    name: str = Field(min_length=1)
    template: str | None = None
    custom: bool | None = None
    count: int | None = Field(default=None, ge=1)  # omitted when the module states none or a variable one
    stat_block: StatBlock | None = None  # a custom creature's printed block ({ac: 15, hd: "4*"}): what a perfect
    # extraction transcribes, so the truth scores itself under the default custom rule

    @model_validator(mode="after")
    def _custom_only_without_template(self) -> Encounter:
        if self.custom and self.template is not None:
            raise ValueError(
                f"{self.name!r}: `custom: true` is legal only with `template` omitted "
                "(custom asserts a bespoke creature with its own usable stat block)"
            )
        if self.stat_block is not None and not self.custom:
            raise ValueError(f"{self.name!r}: `stat_block` is legal only with `custom: true`")
        if self.stat_block is not None and not usable_stat_block(self.stat_block.model_dump(exclude_none=True)):
            raise ValueError(f"{self.name!r}: stat_block {self.stat_block.model_dump(exclude_none=True)} is not usable "
                             "(needs an AC plus HD or a class level)")
        return self


class Treasure(_Strict):
    present: bool
    letters: list[str] | None = None  # only when the module states treasure-type letter codes

    @field_validator("letters")
    @classmethod
    def _single_letters(cls, v: list[str] | None) -> list[str] | None:
        for letter in v or []:
            if len(letter) != 1 or not ("A" <= letter <= "Z"):
                raise ValueError(f"treasure letters are single upper-case codes, not {letter!r}")
        return v


class Door(_Strict):
    kind: Literal["door", "secret_door"]
    locked: bool | None = None  # omitted: the lock state is not asserted


class Area(_Strict):
    key: Key
    encounters: list[Encounter] | None = None  # [] asserts a verified-empty area
    connections: list[Key] | None = None  # the complete same-level neighbour set, when present
    doors: dict[Key, Door] | None = None  # complete over `connections`: an omitted neighbour is an open way
    treasure: Treasure | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Area:
        folds = [fold(e.name) for e in self.encounters or []]
        dupes = sorted({f for f in folds if folds.count(f) > 1})
        if dupes:
            raise ValueError(f"area {self.key!r}: creature {dupes[0]!r} is listed twice; "
                             "list it once with the summed count")
        if self.doors is not None:
            if self.connections is None:
                raise ValueError(f"area {self.key!r}: `doors` asserts door facts over the area's connections; "
                                 "give `connections` too")
            known = {norm_key(c) for c in self.connections}
            stray = [n for n in self.doors if norm_key(n) not in known]
            if stray:
                raise ValueError(f"area {self.key!r}: door to {stray[0]!r} is not one of its connections")
        return self


class Level(_Strict):
    number: int = Field(ge=1)
    areas: list[Area] = Field(min_length=1)


class Transition(_Strict):
    """A vertical link between two keyed areas on different printed levels (order free)."""

    from_level: int = Field(ge=1)
    from_key: Key
    to_level: int = Field(ge=1)
    to_key: Key
    kind: Literal[TRANSITION_KINDS] | None = None


class Entrance(_Strict):
    level: int = Field(ge=1)
    key: Key


class Dungeon(_Strict):
    name: str = Field(min_length=1)
    levels: list[Level] = Field(min_length=1)
    transitions: list[Transition] | None = None  # [] asserts no vertical links
    entrance: Entrance | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Dungeon:
        numbers = [lv.number for lv in self.levels]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"{self.name!r}: level numbers must be unique, got {numbers}")
        where: dict[str, tuple[int, Area]] = {}
        for lv in self.levels:
            for a in lv.areas:
                k = norm_key(a.key)
                if k in where:
                    raise ValueError(f"{self.name!r}: area key {a.key!r} appears twice (keys are unique per site, "
                                     "after normalization)")
                where[k] = (lv.number, a)
        for k, (_, a) in where.items():
            for n in a.connections or []:
                other = where.get(norm_key(n))
                if other and other[1].connections is not None and k not in {norm_key(c) for c in other[1].connections}:
                    raise ValueError(f"{self.name!r}: area {a.key!r} lists {n!r} as a neighbour but {n!r} asserts a "
                                     "complete neighbour list without it")
                if other and a.doors is not None and other[1].doors is not None \
                        and k in {norm_key(c) for c in other[1].connections or []}:
                    mine = {norm_key(x): d for x, d in a.doors.items()}.get(norm_key(n))
                    theirs = {norm_key(x): d for x, d in other[1].doors.items()}.get(k)
                    if mine != theirs:
                        raise ValueError(f"{self.name!r}: areas {a.key!r} and {n!r} both assert doors but disagree "
                                         "about the door between them")
        for t in self.transitions or []:
            for lvl, key in ((t.from_level, t.from_key), (t.to_level, t.to_key)):
                if where.get(norm_key(key), (None,))[0] != lvl:
                    raise ValueError(f"{self.name!r}: transition endpoint {key!r} is not an area of level {lvl}")
            if norm_key(t.from_key) == norm_key(t.to_key):
                raise ValueError(f"{self.name!r}: transition from {t.from_key!r} to itself")
        if self.entrance is not None and where.get(norm_key(self.entrance.key), (None,))[0] != self.entrance.level:
            raise ValueError(f"{self.name!r}: entrance {self.entrance.key!r} is not an area of "
                             f"level {self.entrance.level}")
        return self


class AdventureTruth(_Strict):
    """truth.yaml of the adventure task (the exact shape of JN1's truth file)."""

    dungeons: list[Dungeon] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> AdventureTruth:
        names = [normalize(d.name) for d in self.dungeons]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"dungeon name {dupes[0]!r} appears twice")
        return self


# ========================================================= extraction model
# The same shape, read leniently: an LLM's record may add keys, give counts as
# dice strings, treasure as free text, or stat blocks for bespoke creatures.


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)


class XEncounter(_Lenient):
    name: str = ""
    template: str | None = None
    custom: bool | None = None
    count: int | str | None = None
    stat_block: dict[str, Any] | str | None = None


class XDoor(_Lenient):
    kind: str | None = None
    locked: bool | None = None


class XArea(_Lenient):
    key: str = ""
    encounters: list[XEncounter] | None = None
    connections: list[str] | None = None
    doors: dict[str, XDoor | bool | str | None] | None = None
    treasure: Any = None

    @field_validator("encounters", mode="before")
    @classmethod
    def _bare_names(cls, v: Any) -> Any:
        return [{"name": e} if isinstance(e, str) else e for e in v] if isinstance(v, list) else v


class XLevel(_Lenient):
    number: int | None = None
    areas: list[XArea] = Field(default_factory=list)


class XTransition(_Lenient):
    from_level: int | None = None
    from_key: str = ""
    to_level: int | None = None
    to_key: str = ""
    kind: str | None = None


class XEntrance(_Lenient):
    level: int | None = None
    key: str = ""


class XDungeon(_Lenient):
    name: str = ""
    levels: list[XLevel] = Field(default_factory=list)
    transitions: list[XTransition] | None = None
    entrance: XEntrance | str | None = None


class AdventureExtraction(_Lenient):
    dungeons: list[XDungeon] = Field(default_factory=list)


# ================================================================ options


class Options(_Strict):
    catalog: str = "creatures.yaml"  # the creature catalog, beside task.yaml
    # A bespoke creature counts only with a transcribed usable stat block (the source rule); false takes
    # an extraction that transcribes none at its `custom: true` word.
    custom_requires_stat_block: bool = True


class ScopeSite(_Strict):
    name: str
    areas: list[Key] | None = None  # omitted: the whole site


class Scope(_Strict):
    """A manifest's `scope:` — the part of the truth the member's source covers."""

    sites: list[ScopeSite] | None = None  # omitted: every site
    unaligned_sites: Literal["count", "ignore"] = "count"
