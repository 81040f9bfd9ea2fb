"""The `adventure` task scorer: seven metric families over sites → levels → areas.

Loaded by evalkit through task.yaml's ``scorer: scorer.py:SCORER`` (the
plugin entry point); nothing in evalkit knows this vocabulary. The rules are
documented in docs/scoring-adventure.md; in brief:

* The truth (truth.yaml) and the extraction have one shape: ``dungeons[]``
  of ``levels[]`` of keyed ``areas[]`` with ``encounters``, ``connections``,
  ``doors``, ``treasure``; per dungeon ``transitions`` and ``entrance``.
* Asserted-empty convention: a present list/map (``[]``/``{}`` included)
  asserts the complete fact set; an omitted key asserts nothing and keeps
  the area (or site) out of that family's denominators.
* Alignment first: sites by maximal shared area keys (normalized name breaks
  ties), truth levels many-to-one onto extracted levels by area-key overlap,
  areas by normalized printed key.
* Every metric is an aggregate of the item table (one row per compared
  fact, with a `family` and `metric` column); a per-site view is the same
  aggregation over that site's rows.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalkit.errors import CorpusError, InvalidCorpus
from evalkit.scoring import Scorer, ScoreContext, ScoreResult
from evalkit.scoring.sets import match_sets
from evalkit.scoring.text import fold, normalize
from evalkit.scoring.tree import (
    ACCURACY, COUNT, SET, aggregate_rows, align_many_to_one, align_one_to_one, display, edge, edge_label,
    norm_key,
)

HERE = Path(__file__).resolve().parent

# ============================================================== truth model


def _key_is_str(v: Any) -> Any:
    if isinstance(v, bool) or isinstance(v, (int, float)):
        raise ValueError(f"printed keys are strings: quote it ({v!r} → \"{v}\")")
    return v


Key = Annotated[str, BeforeValidator(_key_is_str), Field(min_length=1)]
TRANSITION_KINDS = ("stairs", "ladder", "trapdoor", "chute", "shaft")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Encounter(_Strict):
    """One printed creature group: singular stat-block name, a catalog template or `custom: true`, a fixed count."""

    name: str = Field(min_length=1)
    template: str | None = None
    custom: bool | None = None
    count: int | None = Field(default=None, ge=1)  # omitted when the module states none or a variable one

    @model_validator(mode="after")
    def _custom_only_without_template(self) -> "Encounter":
        if self.custom and self.template is not None:
            raise ValueError(
                f"{self.name!r}: `custom: true` is legal only with `template` omitted "
                "(custom asserts a bespoke creature with its own usable stat block)"
            )
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
    def _consistent(self) -> "Area":
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
    def _consistent(self) -> "Dungeon":
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
    def _unique_names(self) -> "AdventureTruth":
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
    # When true, a bespoke creature counts only with a transcribed usable stat block;
    # by default an extraction that transcribes none is taken at its `custom: true` word.
    custom_requires_stat_block: bool = False


class ScopeSite(_Strict):
    name: str
    areas: list[Key] | None = None  # omitted: the whole site


class Scope(_Strict):
    """A manifest's `scope:` — the part of the truth the member's source covers."""

    sites: list[ScopeSite] | None = None  # omitted: every site
    unaligned_sites: Literal["count", "ignore"] = "count"


# ============================================================== catalog


class CatalogEntry(_Strict):
    name: str
    aliases: list[str] = Field(default_factory=list)


class CatalogFile(_Strict):
    creatures: dict[str, CatalogEntry]


class Catalog:
    """Template ids with names and aliases; resolves an extracted template string to an id."""

    def __init__(self, entries: dict[str, CatalogEntry], source: str = "catalog"):
        self.ids = set(entries)
        self._lookup: dict[str, str] = {}
        for cid, e in entries.items():
            for label in (cid, e.name, *e.aliases):
                f = fold(label.replace("_", " "))
                prior = self._lookup.setdefault(f, cid)
                if prior != cid:
                    raise CorpusError(f"{source}: {label!r} names both {prior!r} and {cid!r}")

    def resolve(self, text: str | None) -> str | None:
        if not text or not str(text).strip():
            return None
        if text in self.ids:
            return text
        return self._lookup.get(fold(str(text).replace("_", " ")))


@lru_cache(maxsize=8)
def _catalog_at(path: str, mtime: float) -> Catalog:
    from evalkit.corpus import parse

    model, _ = parse(CatalogFile, Path(path))
    return Catalog(model.creatures, source=path)


def load_catalog(task_dir: Path, options: Options) -> Catalog:
    path = Path(task_dir) / options.catalog
    if not path.is_file():
        raise CorpusError(f"{path}: creature catalog not found (task.yaml scoring.catalog)")
    return _catalog_at(str(path), path.stat().st_mtime)


# ==================================================== shared predicates

_AC = re.compile(r"\b(?:AC|armou?r\s+class)\s*[:=]?\s*(-?\d+)", re.I)
_HD = re.compile(r"\b(?:HD|hit\s+dice)\s*[:=]?\s*(\d+|½|¼|1/2|1/4)", re.I)
_HD_VALUE = re.compile(r"^\s*(\d+|½|¼|1/2|1/4)")
_CLASS_LEVEL = re.compile(
    r"\b(?:(?:MU|F|C|T|E|D|H)\s*-?\s*[1-9]\d*"
    r"|(?:fighter|cleric|thief|magic[- ]?user|elf|dwarf|halfling)\s*(?:level\s*)?[1-9]\d*"
    r"|[1-9]\d*(?:st|nd|rd|th)?[- ]level\s+(?:fighter|cleric|thief|magic[- ]?user|elf|dwarf|halfling))\b",
    re.I,
)


def _first(block: dict[str, Any], *names: str) -> Any:
    lower = {str(k).lower().replace(" ", "_"): v for k, v in block.items()}
    for n in names:
        if lower.get(n) not in (None, ""):
            return lower[n]
    return None


def usable_stat_block(block: dict[str, Any] | str | None) -> bool:
    """THE definition of a usable stat block: an armour class plus a hit-dice line or a class-level notation.

    A mapping is read by its `ac` (or `armor_class`) and `hd` (or `hit_dice`) /
    `class_level` entries; a string by its printed ``AC 14`` and ``HD 2`` (or
    ``F3``, ``MU 4``, ``fighter 2``, ``3rd-level cleric``) notations. Without
    both halves there is no combat math to run the creature with.
    """
    if isinstance(block, str):
        return bool(_AC.search(block)) and bool(_HD.search(block) or _CLASS_LEVEL.search(block))
    if not isinstance(block, dict):
        return False
    ac = _first(block, "ac", "armor_class", "armour_class")
    if ac is None or isinstance(ac, bool) or not re.search(r"-?\d+", str(ac)):
        return False
    hd = _first(block, "hd", "hit_dice")
    if hd is not None and not isinstance(hd, bool) and _HD_VALUE.match(str(hd)):
        return True
    cl = _first(block, "class_level", "class")
    return cl is not None and bool(_CLASS_LEVEL.search(str(cl)))


def is_bespoke_emission(enc: XEncounter, require_stat_block: bool = False) -> tuple[bool, str]:
    """Does an extracted encounter emit a bespoke creature? (custom-emission accuracy's match signal)

    It must say `custom: true`, name no template, and carry a usable stat block
    (`usable_stat_block`). An encounter that transcribes no stat block at all
    is the truth file's own shape and is taken at its word unless the task sets
    `custom_requires_stat_block`.
    """
    if enc.custom is not True:
        return False, "not marked custom"
    if enc.template and enc.template.strip():
        return False, f"resolved to template {enc.template!r} instead of bespoke"
    if enc.stat_block is None:
        if require_stat_block:
            return False, "no stat block transcribed"
        return True, "custom, no stat block transcribed (accepted: the truth's own shape)"
    if usable_stat_block(enc.stat_block):
        return True, "custom with a usable stat block"
    return False, "stat block is not usable (needs an AC plus HD or a class level)"


_DICE = re.compile(r"\d*\s*d\s*\d+", re.I)


def parse_count(value: int | str | None) -> tuple[int | None, str]:
    """An extracted count: (fixed count, '') or (None, why it is not one)."""
    if value is None:
        return None, "no count"
    if isinstance(value, bool):
        return None, f"count {value!r} is not a number"
    if isinstance(value, int):
        return value, ""
    s = str(value).strip()
    if re.fullmatch(r"\d+", s):
        return int(s), ""
    if _DICE.search(s):
        return None, f"dice count {s!r}"
    return None, f"count {s!r} is not a fixed number"


_NO_TREASURE = {"", "none", "no treasure", "nothing", "no", "n a", "null"}
_TREASURE_TYPE = re.compile(r"\btreasure\s+types?\s*:?\s*([A-V](?:\s*(?:,|and|&|/)\s*[A-V])*)\b", re.I)


def read_treasure(value: Any) -> tuple[bool, set[str]]:
    """An extracted treasure as (seen, letters). Any unparsed treasure string counts as seen."""
    if value is None:
        return False, set()
    if isinstance(value, bool):
        return value, set()
    if isinstance(value, (int, float)):
        return value > 0, set()
    if isinstance(value, str):
        letters = {x.upper() for m in _TREASURE_TYPE.finditer(value) for x in re.findall(r"[A-Va-v]\b", m.group(1))}
        return normalize(value) not in _NO_TREASURE, letters
    if isinstance(value, list):
        parts = [read_treasure(v) for v in value]
        return any(s for s, _ in parts), set().union(*(ls for _, ls in parts)) if parts else set()
    if isinstance(value, dict):
        letters = {str(x).strip().upper() for x in value.get("letters") or [] if str(x).strip()}
        rest = {k: v for k, v in value.items() if k not in ("present", "letters")}
        seen_rest, more = read_treasure(list(rest.values())) if rest else (False, set())
        present = value.get("present")
        seen = present if isinstance(present, bool) else (seen_rest or bool(letters))
        return seen, letters | more
    return bool(value), set()


def door_kind(kind: str | None) -> str:
    """An extracted door kind in the truth's vocabulary; an omitted kind is a plain door."""
    k = norm_key(kind or "door")
    if "secret" in k or "hidden" in k:
        return "secret_door"
    return "door" if k in ("door", "doors", "") or k.endswith(" door") or k.endswith(" doors") else k.replace(" ", "_")


_NOT_A_DOOR = {"none", "no door", "no", "open", "opening", "archway", "passage", "false"}


def transition_kind(kind: str | None) -> str | None:
    return fold(norm_key(kind)) if kind and str(kind).strip() else None


# ============================================================== scoring

KINDS = {
    ("areas", "dungeon"): SET,
    ("areas", "area"): SET,
    ("encounters", "name"): SET,
    ("encounters", "count"): ACCURACY,
    ("encounters", "resolution"): ACCURACY,
    ("encounters", "custom"): ACCURACY,
    ("encounters", "non_srd"): COUNT,
    ("connections", "edge"): SET,
    ("treasure", "presence"): ACCURACY,
    ("treasure", "letters"): ACCURACY,
    ("doors", "door"): SET,
    ("doors", "kind"): ACCURACY,
    ("doors", "locked"): ACCURACY,
    ("transitions", "link"): SET,
    ("transitions", "kind"): ACCURACY,
    ("entrance", "key"): ACCURACY,
}
PREFIX = {
    ("areas", "dungeon"): "areas_dungeons",
    ("areas", "area"): "areas",
    ("encounters", "non_srd"): "encounters_non_srd",
    ("connections", "edge"): "connections",
    ("doors", "door"): "doors",
    ("transitions", "link"): "transitions",
    ("entrance", "key"): "entrance",
}
FAMILIES = ("areas", "encounters", "connections", "treasure", "doors", "transitions", "entrance")
# Each family's headline figure is the mean of these (non-null) figures; the
# member's score is the mean of the non-null family headlines.
HEADLINE = {
    "areas": ("areas_f1",),
    "encounters": ("encounters_name_f1", "encounters_count_accuracy", "encounters_resolution_accuracy",
                   "encounters_custom_accuracy"),
    "connections": ("connections_f1",),
    "treasure": ("treasure_presence_accuracy", "treasure_letters_accuracy"),
    "doors": ("doors_f1", "doors_kind_accuracy", "doors_locked_accuracy"),
    "transitions": ("transitions_f1", "transitions_kind_accuracy"),
    "entrance": ("entrance_accuracy",),
}
COLUMNS = ("family", "metric", "site", "level", "area", "expected", "extracted", "outcome", "reason")


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def compute_metrics(rows: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """All flat metrics of an item table (the member's, or one site's rows)."""
    m = aggregate_rows(rows, KINDS, PREFIX)
    m["areas_truth_dungeons"] = m["areas_dungeons_tp"] + m["areas_dungeons_fn"]
    m["areas_extracted_dungeons"] = m["areas_dungeons_tp"] + m["areas_dungeons_fp"]
    m["areas_matched_dungeons"] = m["areas_dungeons_tp"]
    m["areas_truth"] = m["areas_tp"] + m["areas_fn"]
    m["areas_extracted"] = m["areas_tp"] + m["areas_fp"]
    m["areas_matched"] = m["areas_tp"]
    for fam in FAMILIES:
        m[f"{fam}_score"] = _mean([m[k] for k in HEADLINE[fam]])
    m["score"] = _mean([m[f"{fam}_score"] for fam in FAMILIES])
    return m


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []  # the scored graph, for charts

    def edge(self, family: str, site: str, pair: tuple, t_area: dict, t_level_of: dict, outcome: str) -> None:
        a, b = (t_area[k].key if k in t_area else k for k in pair)
        self.edges.append({"family": family, "site": site, "a": a, "b": b, "a_level": t_level_of.get(pair[0]),
                           "b_level": t_level_of.get(pair[1]), "outcome": outcome})

    def add(self, family: str, metric: str, site: str | None, level: int | None, area: str | None,
            expected: Any, extracted: Any, outcome: str, reason: str) -> None:
        self.rows.append({"family": family, "metric": metric, "site": site, "level": level, "area": area,
                          "expected": expected, "extracted": extracted, "outcome": outcome, "reason": reason})


def _parse_scope(raw: Any, truth: AdventureTruth, member: str) -> Scope:
    if not raw:
        return Scope()
    try:
        scope = Scope.model_validate(raw)
    except ValidationError as e:
        raise InvalidCorpus([f"{member}: manifest scope: {err['loc']}: {err['msg']}" for err in e.errors()]) from None
    by_name = {normalize(d.name): d for d in truth.dungeons}
    problems = []
    for s in scope.sites or []:
        d = by_name.get(normalize(s.name))
        if d is None:
            problems.append(f"{member}: manifest scope: no truth dungeon named {s.name!r}")
            continue
        keys = {norm_key(a.key) for lv in d.levels for a in lv.areas}
        problems += [f"{member}: manifest scope: {s.name!r} has no area {k!r}" for k in s.areas or []
                     if norm_key(k) not in keys]
    if problems:
        raise InvalidCorpus(problems)
    return scope


def _x_entrance_key(e: XEntrance | str | None) -> str | None:
    if e is None:
        return None
    return e if isinstance(e, str) else e.key


def score(extraction: dict[str, Any] | None, truth: AdventureTruth, ctx: ScoreContext) -> ScoreResult:
    options = ctx.options if isinstance(ctx.options, Options) else Options.model_validate(ctx.options or {})
    task_dir = Path(ctx.extra.get("task_dir") or HERE)
    catalog = load_catalog(task_dir, options)
    scope = _parse_scope(ctx.extra.get("scope"), truth, ctx.member_id)
    notes: list[str] = []

    if extraction is None:
        x = AdventureExtraction()
        notes.append("no extraction: scored as an empty record")
    else:
        try:
            x = AdventureExtraction.model_validate(extraction)
        except ValidationError as e:
            x = AdventureExtraction()
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            notes.append(f"extraction does not follow the schema ({e.error_count()} problems; first at {where}: "
                         f"{first['msg']}): scored as an empty record")

    for d in truth.dungeons:
        for lv in d.levels:
            for a in lv.areas:
                for enc in a.encounters or []:
                    if enc.template and enc.template not in catalog.ids:
                        notes.append(f"truth template {enc.template!r} ({d.name} / {a.key}) is not in the catalog")

    R = _Rows()

    # ---- scope: which truth sites and areas are asserted for this member
    in_scope_site: dict[int, bool] = {}
    in_scope_area: dict[tuple[int, str], bool] = {}
    scoped = {normalize(s.name): s for s in scope.sites} if scope.sites is not None else None
    for ti, d in enumerate(truth.dungeons):
        s = None if scoped is None else scoped.get(normalize(d.name))
        in_scope_site[ti] = scoped is None or s is not None
        only = None if s is None or s.areas is None else {norm_key(k) for k in s.areas}
        for lv in d.levels:
            for a in lv.areas:
                in_scope_area[(ti, norm_key(a.key))] = in_scope_site[ti] and (only is None or norm_key(a.key) in only)

    # ---- site alignment (on the full truth, so out-of-scope content finds its counterpart)
    t_keys = [{norm_key(a.key) for lv in d.levels for a in lv.areas} for d in truth.dungeons]
    x_keys = [{norm_key(a.key) for lv in xd.levels for a in lv.areas} for xd in x.dungeons]
    site_map = align_one_to_one(t_keys, x_keys, [d.name for d in truth.dungeons], [xd.name for xd in x.dungeons])
    x_to_t = {xj: ti for ti, (xj, _) in site_map.items()}
    alignment: list[dict[str, Any]] = []

    for xj, xd in enumerate(x.dungeons):
        n_areas = sum(len(lv.areas) for lv in xd.levels)
        label = xd.name or f"(extracted site {xj + 1})"
        if xj in x_to_t:
            ti = x_to_t[xj]
            if not in_scope_site[ti]:
                R.add("areas", "dungeon", truth.dungeons[ti].name, None, None, None, label, "ignored",
                      "aligned to a truth site outside this member's scope: the site and its "
                      f"{n_areas} areas are left out of every family")
            continue
        if scope.unaligned_sites == "ignore":
            R.add("areas", "dungeon", label, None, None, None, label, "ignored",
                  f"aligns to no truth site; this member's scope does not assert the complete site list "
                  f"({n_areas} areas left out)")
            continue
        R.add("areas", "dungeon", label, None, None, None, label, "spurious", "aligns to no truth site (no shared "
              "area key, no equal name)")
        for lv in xd.levels:
            for a in lv.areas:
                R.add("areas", "area", label, None, a.key, None, a.key, "spurious",
                      "area of an extracted site that aligns to no truth site")

    for ti, d in enumerate(truth.dungeons):
        if not in_scope_site[ti]:
            continue
        if ti not in site_map:
            R.add("areas", "dungeon", d.name, None, None, d.name, None, "missed",
                  "no extracted site shares an area key or its name")
            _score_missed_site(R, ti, d, in_scope_area)
            alignment.append({"site": d.name, "extracted_site": None, "shared_keys": 0, "levels": []})
            continue
        xj, shared = site_map[ti]
        xd = x.dungeons[xj]
        R.add("areas", "dungeon", d.name, None, None, d.name, xd.name, "matched",
              f"aligned by {shared} shared area keys" if shared else "aligned by equal name")
        alignment.append(_score_site(R, ti, d, xd, shared, in_scope_area, catalog, options))

    metrics = compute_metrics(R.rows)
    headline = metrics["score"]
    sites = sorted({r["site"] for r in R.rows if r["site"] is not None and r["outcome"] != "ignored"}, key=str)
    per_site = {s: compute_metrics([r for r in R.rows if r["site"] == s]) for s in sites}
    notes += _notes(R.rows)
    passed = None if headline is None else headline >= ctx.threshold
    return ScoreResult(
        score=headline,
        passed=passed,
        metrics=metrics,
        items=R.rows,
        notes=notes,
        details={
            "columns": list(COLUMNS),
            "families": {f: {"score": metrics[f"{f}_score"], "display": display(metrics[f"{f}_score"]),
                             "headline_figures": list(HEADLINE[f])} for f in FAMILIES},
            "headline_rule": "mean of the non-null family scores; a family's score is the mean of its non-null "
                             "headline figures",
            "sites": per_site,
            "alignment": alignment,
            "edges": R.edges,
            "scope": scope.model_dump(mode="json") if ctx.extra.get("scope") else None,
        },
    )


def _score_missed_site(R: _Rows, ti: int, d: Dungeon, in_scope_area: dict) -> None:
    """A truth site no extracted site aligns to: its areas, names and links are all misses."""
    keys = {norm_key(a.key) for lv in d.levels for a in lv.areas if in_scope_area[(ti, norm_key(a.key))]}
    for lv in d.levels:
        for a in lv.areas:
            if not in_scope_area[(ti, norm_key(a.key))]:
                continue
            R.add("areas", "area", d.name, lv.number, a.key, a.key, None, "missed", "its site was not extracted")
            for enc in a.encounters or []:
                R.add("encounters", "name", d.name, lv.number, a.key, enc.name, None, "missed",
                      "its site was not extracted")
    for t in d.transitions or []:
        if {norm_key(t.from_key), norm_key(t.to_key)} <= keys:
            R.add("transitions", "link", d.name, None, edge_label(edge(t.from_key, t.to_key)),
                  edge_label(edge(t.from_key, t.to_key)), None, "missed", "its site was not extracted")


def _score_site(R: _Rows, ti: int, d: Dungeon, xd: XDungeon, shared: int, in_scope_area: dict,
                catalog: Catalog, options: Options) -> dict[str, Any]:
    site = d.name
    scope_of = lambda k: in_scope_area.get((ti, k), False)  # noqa: E731
    t_level_of = {norm_key(a.key): lv.number for lv in d.levels for a in lv.areas}
    t_area = {norm_key(a.key): a for lv in d.levels for a in lv.areas}

    # ---- levels: many-to-one by area-key overlap
    lmap = align_many_to_one(
        [{norm_key(a.key) for a in lv.areas} for lv in d.levels],
        [{norm_key(a.key) for a in xl.areas} for xl in xd.levels],
        [lv.number for lv in d.levels], [xl.number for xl in xd.levels],
    )
    x_first: list[dict[str, XArea]] = []
    for xl in xd.levels:
        first: dict[str, XArea] = {}
        for a in xl.areas:
            first.setdefault(norm_key(a.key), a)
        x_first.append(first)

    # ---- areas: by normalized key within aligned levels
    matched: dict[str, tuple[int, XArea]] = {}  # truth key → (extracted level index, area)
    for li, lv in enumerate(d.levels):
        xl = lmap.get(li, (None, 0))[0]
        for a in lv.areas:
            k = norm_key(a.key)
            if not scope_of(k):
                continue
            got = x_first[xl].get(k) if xl is not None else None
            if got is not None:
                matched[k] = (xl, got)
                R.add("areas", "area", site, lv.number, a.key, a.key, got.key, "matched", "same normalized key")
            else:
                why = ("its level aligned to no extracted level" if xl is None else
                       f"not on extracted level {_xlabel(xd, xl)} (aligned to printed level {lv.number})")
                R.add("areas", "area", site, lv.number, a.key, a.key, None, "missed", why)
    claimed = {(xl, id(a)) for xl, a in matched.values()}
    for xl_i, xl in enumerate(xd.levels):
        for a in xl.areas:
            if (xl_i, id(a)) in claimed:
                continue
            k = norm_key(a.key)
            if k in t_area and not scope_of(k):
                R.add("areas", "area", site, t_level_of[k], a.key, None, a.key, "ignored",
                      "a printed area outside this member's scope")
            elif k in t_area and k in matched and matched[k][1] is not a:
                R.add("areas", "area", site, t_level_of[k], a.key, None, a.key, "spurious",
                      "duplicate of an area already matched")
            elif k in t_area:
                onto = sorted(d.levels[li].number for li, (xl, _) in lmap.items() if xl == xl_i)
                R.add("areas", "area", site, t_level_of[k], a.key, None, a.key, "spurious",
                      f"printed on level {t_level_of[k]}, extracted on level {_xlabel(xd, xl_i)}, which "
                      + (f"printed level(s) {', '.join(map(str, onto))} align to" if onto
                         else "no printed level aligns to"))
            else:
                R.add("areas", "area", site, None, a.key, None, a.key, "spurious",
                      f"not a printed key of this site (extracted level {_xlabel(xd, xl_i)})")

    # ---- encounters and treasure, per in-scope truth area
    for lv in d.levels:
        for a in lv.areas:
            k = norm_key(a.key)
            if not scope_of(k):
                continue
            if k not in matched:
                for enc in a.encounters or []:
                    R.add("encounters", "name", site, lv.number, a.key, enc.name, None, "missed",
                          "its area was not extracted")
                continue
            xa = matched[k][1]
            _score_encounters(R, site, lv.number, a, xa, catalog, options)
            _score_treasure(R, site, lv.number, a, xa)

    # ---- connections and doors: same-level edges between matched areas
    for lv in d.levels:
        level_keys = {norm_key(a.key) for a in lv.areas}
        m = {k for k in level_keys if k in matched}
        _score_connections(R, site, lv, m, matched, t_area, t_level_of, scope_of)
        _score_doors(R, site, lv, m, matched, t_area, t_level_of, scope_of)

    _score_transitions(R, site, d, xd, t_area, t_level_of, scope_of)

    # ---- entrance
    if d.entrance is not None and scope_of(norm_key(d.entrance.key)):
        got = _x_entrance_key(xd.entrance)
        if got is None:
            R.add("entrance", "key", site, d.entrance.level, d.entrance.key, d.entrance.key, None, "missed",
                  "no entrance extracted")
        elif norm_key(got) == norm_key(d.entrance.key):
            R.add("entrance", "key", site, d.entrance.level, d.entrance.key, d.entrance.key, got, "matched",
                  "the printed way in")
        else:
            R.add("entrance", "key", site, d.entrance.level, d.entrance.key, d.entrance.key, got, "mismatch",
                  "a different area")

    return {
        "site": site, "extracted_site": xd.name, "shared_keys": shared,
        "levels": [{"level": d.levels[li].number, "extracted_level": _xlabel(xd, xl), "shared_keys": n}
                   for li, (xl, n) in sorted(lmap.items())],
    }


def _xlabel(xd: XDungeon, xl: int) -> Any:
    n = xd.levels[xl].number
    return n if n is not None else f"#{xl + 1}"


def _score_encounters(R: _Rows, site: str, level: int, a: Area, xa: XArea, catalog: Catalog, options: Options) -> None:
    groups: dict[str, list[XEncounter]] = {}
    for e in xa.encounters or []:
        if e.name.strip():
            groups.setdefault(fold(e.name), []).append(e)
    if a.encounters is None:
        for f, g in groups.items():
            R.add("encounters", "name", site, level, a.key, None, g[0].name, "ignored",
                  "the truth asserts nothing about this area's encounters")
        return
    truth = {fold(e.name): e for e in a.encounters}
    for f, te in truth.items():
        g = groups.get(f)
        if not g:
            R.add("encounters", "name", site, level, a.key, te.name, None, "missed", "no extracted name folds to it")
            continue
        shown = ", ".join(dict.fromkeys(e.name for e in g))
        R.add("encounters", "name", site, level, a.key, te.name, shown, "matched", f"same folded name {f!r}")
        if te.count is not None:
            counts = [parse_count(e.count) for e in g]
            bad = next((why for c, why in counts if c is None), None)
            if bad:
                R.add("encounters", "count", site, level, a.key, te.count, _show_counts(g), "mismatch",
                      f"{bad} in the group: no fixed count to compare")
            else:
                total = sum(c for c, _ in counts)
                ok = total == te.count
                R.add("encounters", "count", site, level, a.key, te.count, total, "matched" if ok else "mismatch",
                      ("equal" if ok else "differs") + (f" (sum of {len(g)} groups)" if len(g) > 1 else ""))
        if te.template is not None:
            got = [catalog.resolve(e.template) for e in g]
            raw = ", ".join(str(e.template) for e in g)
            if all(r == te.template for r in got):
                R.add("encounters", "resolution", site, level, a.key, te.template, raw, "matched",
                      "every folded name resolves to the template")
            else:
                wrong = next(e for e, r in zip(g, got) if r != te.template)
                why = ("no template" if not wrong.template else
                       f"{wrong.template!r} is not in the catalog" if catalog.resolve(wrong.template) is None else
                       f"{wrong.name!r} resolves to {catalog.resolve(wrong.template)!r}")
                R.add("encounters", "resolution", site, level, a.key, te.template, raw, "mismatch", why)
        elif te.custom:
            verdicts = [is_bespoke_emission(e, options.custom_requires_stat_block) for e in g]
            ok = all(v for v, _ in verdicts)
            why = verdicts[0][1] if ok else next(w for v, w in verdicts if not v)
            R.add("encounters", "custom", site, level, a.key, f"{te.name} (custom)", shown,
                  "matched" if ok else "mismatch", why)
        else:
            R.add("encounters", "non_srd", site, level, a.key, te.name, shown, "excluded",
                  "no template and no custom assertion: tallied as non-SRD, outside resolution and custom")
    for f, g in groups.items():
        if f not in truth:
            why = ("the truth asserts a verified-empty area" if not a.encounters
                   else "not in the area's complete encounter list")
            R.add("encounters", "name", site, level, a.key, None, g[0].name, "spurious", why)


def _show_counts(g: list[XEncounter]) -> str:
    return " + ".join(str(e.count) for e in g)


def _score_treasure(R: _Rows, site: str, level: int, a: Area, xa: XArea) -> None:
    if a.treasure is None:
        return
    seen, letters = read_treasure(xa.treasure)
    ok = seen == a.treasure.present
    R.add("treasure", "presence", site, level, a.key, a.treasure.present, seen, "matched" if ok else "mismatch",
          "agrees" if ok else ("treasure missed" if a.treasure.present else "treasure where the truth states none"))
    if a.treasure.letters:
        want = set(a.treasure.letters)
        ok = letters == want
        R.add("treasure", "letters", site, level, a.key, "".join(sorted(want)), "".join(sorted(letters)) or None,
              "matched" if ok else "mismatch", "same letters" if ok else "letters differ")


def _drop_reason(n: str, m: set[str], t_area: dict, t_level_of: dict, level: int, scope_of) -> str:
    k = norm_key(n)
    if k not in t_area:
        return "names no area of the site"
    if not scope_of(k):
        return "an endpoint outside this member's scope"
    if t_level_of[k] != level:
        return f"crosses printed levels ({level} → {t_level_of[k]}): not a same-level edge"
    return "an endpoint was not matched (area missed or spurious)"


def _score_connections(R, site, lv, m, matched, t_area, t_level_of, scope_of) -> None:
    asserted = {k for k in m if t_area[k].connections is not None}
    truth_pairs, ext_pairs = [], []
    for k in sorted(asserted):
        for n in t_area[k].connections:
            nk = norm_key(n)
            if nk in m and nk != k:
                truth_pairs.append(edge(k, nk))
            elif nk != k:
                R.add("connections", "edge", site, lv.number, edge_label((t_area[k].key, n)),
                      edge_label((t_area[k].key, n)), None, "ignored",
                      _drop_reason(n, m, t_area, t_level_of, lv.number, scope_of) + " (dropped from both sides)")
    for k in sorted(m):
        xa = matched[k][1]
        for n in xa.connections or []:
            nk = norm_key(n)
            if nk == k:
                continue
            if nk not in m:
                R.add("connections", "edge", site, lv.number, edge_label((xa.key, n)), None,
                      edge_label((xa.key, n)), "ignored",
                      _drop_reason(n, m, t_area, t_level_of, lv.number, scope_of) + " (dropped from both sides)")
                continue
            p = edge(k, nk)
            if k in asserted or nk in asserted:
                ext_pairs.append(p)
            else:
                R.add("connections", "edge", site, lv.number, _pair_label(p, t_area), None, _pair_label(p, t_area),
                      "ignored", "neither endpoint asserts its connections (outside the asserted universe)")
    _, rows = match_sets(truth_pairs, ext_pairs, key=lambda p: p, show=lambda p: _pair_label(p, t_area))
    for r in rows:
        R.edge("connections", site, tuple(r["key"]), t_area, t_level_of, r["outcome"])
        R.add("connections", "edge", site, lv.number, r["expected"] or r["extracted"], r["expected"],
              r["extracted"], r["outcome"], r["reason"])


def _pair_label(p: tuple, t_area: dict) -> str:
    return edge_label(t_area[k].key if k in t_area else k for k in p)


def _x_doors(xa: XArea) -> list[tuple[str, str, bool]]:
    """An extracted area's door claims as (neighbour, kind, locked)."""
    out = []
    for n, d in (xa.doors or {}).items():
        if d is None or d is False:
            continue
        if isinstance(d, str):
            if norm_key(d) in _NOT_A_DOOR:
                continue
            out.append((n, door_kind(d), "locked" in norm_key(d) and "unlocked" not in norm_key(d)))
        elif d is True:
            out.append((n, "door", False))
        else:
            if d.kind is not None and norm_key(d.kind) in _NOT_A_DOOR:
                continue
            out.append((n, door_kind(d.kind), bool(d.locked)))
    return out


def _score_doors(R, site, lv, m, matched, t_area, t_level_of, scope_of) -> None:
    asserting = {k for k in m if t_area[k].doors is not None}
    truth_doors: dict[tuple, Door] = {}
    for k in sorted(asserting):
        for n, door in t_area[k].doors.items():
            nk = norm_key(n)
            if nk in m:
                truth_doors.setdefault(edge(k, nk), door)
            else:
                R.add("doors", "door", site, lv.number, edge_label((t_area[k].key, n)),
                      edge_label((t_area[k].key, n)), None, "ignored",
                      _drop_reason(n, m, t_area, t_level_of, lv.number, scope_of) + " (dropped from both sides)")
    ext_doors: dict[tuple, list[tuple[str, bool]]] = {}
    for k in sorted(m):
        xa = matched[k][1]
        for n, kind, locked in _x_doors(xa):
            nk = norm_key(n)
            if nk == k:
                continue
            if nk not in m:
                R.add("doors", "door", site, lv.number, edge_label((xa.key, n)), None, edge_label((xa.key, n)),
                      "ignored", _drop_reason(n, m, t_area, t_level_of, lv.number, scope_of)
                      + " (dropped from both sides)")
                continue
            p = edge(k, nk)
            if k in asserting or nk in asserting:
                ext_doors.setdefault(p, []).append((kind, locked))
            else:
                R.add("doors", "door", site, lv.number, _pair_label(p, t_area), None, _pair_label(p, t_area),
                      "ignored", "neither endpoint asserts doors (outside the asserted universe)")
    _, rows = match_sets(list(truth_doors), list(ext_doors), key=lambda p: p, show=lambda p: _pair_label(p, t_area))
    for r in rows:
        label = r["expected"] or r["extracted"]
        reason = r["reason"]
        if r["outcome"] == "spurious":
            reason = "a door where the asserting area's complete door set has none"
        R.add("doors", "door", site, lv.number, label, r["expected"], r["extracted"], r["outcome"], reason)
        R.edge("doors", site, tuple(r["key"]), t_area, t_level_of, r["outcome"])
        if r["outcome"] != "matched":
            continue
        p = tuple(r["key"])
        want, got = truth_doors[p], ext_doors[p]
        kinds = sorted({g[0] for g in got})
        ok = kinds == [want.kind]
        R.add("doors", "kind", site, lv.number, label, want.kind, "/".join(kinds), "matched" if ok else "mismatch",
              "same kind" if ok else ("the two ends disagree" if len(kinds) > 1 else "different kind"))
        if want.locked is not None:
            locks = sorted({g[1] for g in got})
            ok = locks == [want.locked]
            R.add("doors", "locked", site, lv.number, label, want.locked, locks[0] if len(locks) == 1 else "conflict",
                  "matched" if ok else "mismatch",
                  "same lock state" if ok else ("the two ends disagree" if len(locks) > 1 else "different lock state"))


def _score_transitions(R, site, d: Dungeon, xd: XDungeon, t_area, t_level_of, scope_of) -> None:
    if d.transitions is None:
        for t in xd.transitions or []:
            R.add("transitions", "link", site, None, edge_label((t.from_key, t.to_key)), None,
                  edge_label((t.from_key, t.to_key)), "ignored", "the truth asserts no transitions for this site")
        return
    truth: dict[tuple, Transition] = {}
    for t in d.transitions:
        a, b = norm_key(t.from_key), norm_key(t.to_key)
        if scope_of(a) and scope_of(b):
            truth.setdefault(edge(a, b), t)
        else:
            R.add("transitions", "link", site, None, edge_label((t.from_key, t.to_key)),
                  edge_label((t.from_key, t.to_key)), None, "ignored", "an endpoint outside this member's scope")
    ext: dict[tuple, list[str | None]] = {}
    for t in xd.transitions or []:
        a, b = norm_key(t.from_key), norm_key(t.to_key)
        label = edge_label((t.from_key, t.to_key))
        if a == b:
            R.add("transitions", "link", site, None, label, None, label, "ignored", "both ends are one area")
        elif a not in t_area or b not in t_area:
            R.add("transitions", "link", site, None, label, None, label, "ignored",
                  "names no area of the site (dropped from both sides)")
        elif not (scope_of(a) and scope_of(b)):
            R.add("transitions", "link", site, None, label, None, label, "ignored",
                  "an endpoint outside this member's scope")
        else:
            ext.setdefault(edge(a, b), []).append(transition_kind(t.kind))
    _, rows = match_sets(list(truth), list(ext), key=lambda p: p, show=lambda p: _pair_label(p, t_area))
    for r in rows:
        label = r["expected"] or r["extracted"]
        reason = r["reason"] if r["outcome"] != "matched" else "same endpoint pair (undirected; levels are peers)"
        R.add("transitions", "link", site, None, label, r["expected"], r["extracted"], r["outcome"], reason)
        R.edge("transitions", site, tuple(r["key"]), t_area, t_level_of, r["outcome"])
        if r["outcome"] != "matched":
            continue
        p = tuple(r["key"])
        want = truth[p].kind
        if want is None:
            continue
        kinds = sorted({k or "" for k in ext[p]})
        ok = kinds == [transition_kind(want)]
        R.add("transitions", "kind", site, None, label, want, "/".join(k or "(none)" for k in kinds),
              "matched" if ok else "mismatch",
              "same kind" if ok else ("recorded ends disagree" if len(kinds) > 1 else "different kind"))


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    """One line per (family, metric) with problems, naming up to three items."""
    out = []
    for fam, metric in KINDS:
        bad = [r for r in rows if r["family"] == fam and r["metric"] == metric
               and r["outcome"] in ("missed", "spurious", "mismatch")]
        if not bad:
            continue
        counts = {o: sum(r["outcome"] == o for r in bad) for o in ("missed", "spurious", "mismatch")}
        summary = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
        examples = "; ".join(
            f"{r['site']}/{r['area']}: {r['expected']!s} vs {r['extracted']!s} ({r['reason']})"
            if r["area"] else f"{r['site']}: {r['reason']}" for r in bad[:3])
        out.append(f"{fam}.{metric}: {summary} — {examples}{' …' if len(bad) > 3 else ''}")
    return out


def expected_extraction(truth: AdventureTruth) -> dict[str, Any]:
    """The perfect extraction: the truth itself, in the truth's own shape (omitted keys stay omitted)."""
    return truth.model_dump(mode="json", exclude_none=True)


SCORER = Scorer(
    name="adventure",
    score=score,
    truth_model=AdventureTruth,
    options_model=Options,
    extraction_model=AdventureExtraction,
    expected_extraction=expected_extraction,
)
