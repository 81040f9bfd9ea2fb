"""The families' rules: the shared predicates (a usable stat block, a fixed count, treasure, door and
transition kinds) and the functions that write each family's rows of the item table."""

from __future__ import annotations

import re
from typing import Any

from evalkit.scoring.sets import match_sets
from evalkit.scoring.text import fold, normalize
from evalkit.scoring.tree import edge, edge_label, norm_key

from .catalog import Catalog
from .models import Area, Door, Dungeon, Options, Transition, XArea, XDungeon, XEncounter
from .statblock import usable_stat_block

# ==================================================== shared predicates


def is_bespoke_emission(enc: XEncounter, require_stat_block: bool = True) -> tuple[bool, str]:
    """Does an extracted encounter emit a bespoke creature? (custom-emission accuracy's match signal)

    It must say `custom: true`, name no template, and carry a usable stat block
    (`usable_stat_block`): the source rule, and the default. Only a task that sets
    `custom_requires_stat_block: false` takes a `custom: true` with no stat block at its word.
    """
    if enc.custom is not True:
        return False, "not marked custom"
    if enc.template and enc.template.strip():
        return False, f"resolved to template {enc.template!r} instead of bespoke"
    if enc.stat_block is None:
        if require_stat_block:
            return False, "custom: true with no stat block (a bespoke creature needs a usable one)"
        return True, "custom, no stat block transcribed (accepted: custom_requires_stat_block is false)"
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
    return "door" if k in ("door", "doors", "") or k.endswith((" door", " doors")) else k.replace(" ", "_")


_NOT_A_DOOR = {"none", "no door", "no", "open", "opening", "archway", "passage", "false"}


def transition_kind(kind: str | None) -> str | None:
    return fold(norm_key(kind)) if kind and str(kind).strip() else None



# ============================================================== the item table


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



# ============================================================== families


def _score_encounters(R: _Rows, site: str, level: int, a: Area, xa: XArea, catalog: Catalog, options: Options) -> None:
    groups: dict[str, list[XEncounter]] = {}
    for e in xa.encounters or []:
        if e.name.strip():
            groups.setdefault(fold(e.name), []).append(e)
    if a.encounters is None:
        for g in groups.values():
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
