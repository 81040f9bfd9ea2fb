"""THE usable stat block: an armour class plus a hit-dice line or a class-level notation.

Shared by the truth model (a truth encounter's `stat_block` must be usable) and the custom-emission rule
(`families.is_bespoke_emission`)."""

from __future__ import annotations

import re
from typing import Any

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
