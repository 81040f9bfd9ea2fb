"""Pure value normalizers for the `fields` scorer: dates, durations, numbers, ids, parties.

Every parser returns None for a value it cannot read and never raises, so a
scorer can fall back to comparing text. Dates are parsed by hand rather than
with dateutil: dateutil fills unknown parts from a default date, but CUAD's
`[]/[]/2000` must keep its month and day *unknown* (it equals `2000`, not
`2000-01-01`).
"""

from __future__ import annotations

import calendar
import datetime as _dt
import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from evalkit.scoring.text import normalize

# ---------------------------------------------------------------- dates


@dataclass(frozen=True)
class DateValue:
    """A calendar date whose month and day may be unknown; or the value PERPETUAL."""

    year: int | None
    month: int | None = None
    day: int | None = None
    perpetual: bool = False

    def __str__(self) -> str:
        if self.perpetual:
            return "perpetual"
        parts = [f"{self.year:04d}" if self.year is not None else "????"]
        if self.month is not None or self.day is not None:
            parts.append(f"{self.month:02d}" if self.month is not None else "??")
        if self.day is not None:
            parts.append(f"{self.day:02d}")
        return "-".join(parts)


PERPETUAL = DateValue(year=None, perpetual=True)

_MONTHS = {
    name: i
    for i, full in enumerate(calendar.month_name)
    if full
    for name in {full.lower(), full[:3].lower()}
} | {"sept": 9}
_PERPETUAL_WORDS = {"perpetual", "perpetuity", "in perpetuity"}
_BLANK = r"(?:\[\s*\]|_+)"  # a redacted / unfilled part: `[]` or `____`
_ISO = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:[t ]\d.*)?$")
_ISO_MONTH = re.compile(r"^(\d{4})-(\d{1,2})$")
_SLASH = re.compile(rf"^(\d{{1,2}}|{_BLANK})([/-])(\d{{1,2}}|{_BLANK})\2(\d{{4}}|\d{{2}}|{_BLANK})$")
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b")
_FILLER = {"the", "day", "of", "this"}  # "the 10th day of September, 2015"


def _year(text: str) -> int | None:
    if not text.isdigit():
        return None
    y = int(text)
    if len(text) == 2:  # CUAD's M/D/YY: 98 → 1998, 15 → 2015
        return 1900 + y if y > 50 else 2000 + y
    return y if len(text) == 4 else None


def _make(year: int | None, month: int | None, day: int | None) -> DateValue | None:
    if year is None:
        return None  # a date without a year cannot be compared to anything useful
    if month is not None and not 1 <= month <= 12:
        return None
    last = calendar.monthrange(year, month)[1] if month is not None else 31
    if day is not None and not 1 <= day <= last:
        return None
    return DateValue(year, month, day)


def _part(text: str) -> int | None:
    return int(text) if text.isdigit() else None  # blanks (`[]`, `__`) stay unknown


def parse_date(value: object) -> DateValue | None:
    """Read a date in any of the forms contracts and models write; None if unreadable."""
    if isinstance(value, DateValue):
        return value
    if isinstance(value, _dt.datetime):
        value = value.date()
    if isinstance(value, _dt.date):
        return DateValue(value.year, value.month, value.day)
    if isinstance(value, int) and not isinstance(value, bool):
        return _make(value, None, None) if 1000 <= value <= 9999 else None
    if not isinstance(value, str):
        return None
    s = " ".join(value.split()).lower()
    if s in _PERPETUAL_WORDS:
        return PERPETUAL
    try:
        if m := _ISO.match(s):
            return _make(int(m[1]), int(m[2]), int(m[3]))
        if m := _ISO_MONTH.match(s):
            return _make(int(m[1]), int(m[2]), None)
        if m := _SLASH.match(s):  # US order: month first
            return _make(_year(m[4]), _part(m[1]), _part(m[3]))
        return _parse_words(s)
    except (ValueError, OverflowError):
        return None


def _parse_words(s: str) -> DateValue | None:
    s = _ORDINAL.sub(r"\1", s.replace(",", " ").replace(".", " "))
    toks = [t for t in s.split() if t not in _FILLER and not re.fullmatch(_BLANK, t)]
    if len(toks) == 1:
        return _make(_year(toks[0]), None, None) if len(toks[0]) == 4 else None
    if len(toks) == 2 and toks[0] in _MONTHS:  # "September 2015"
        return _make(_year(toks[1]), _MONTHS[toks[0]], None)
    if len(toks) != 3:
        return None
    if toks[0] in _MONTHS:  # "September 10 2015"
        month, day, year = toks
    elif toks[1] in _MONTHS:  # "10 September 2015"
        day, month, year = toks
    else:
        return None
    if not (day.isdigit() and len(day) <= 2):
        return None
    return _make(_year(year), _MONTHS[month], int(day))


# ---------------------------------------------------------------- durations


class Duration(NamedTuple):
    """A length of time in a comparable unit: `months` (years × 12) or `days` (weeks × 7)."""

    amount: float
    unit: str

    def __str__(self) -> str:
        unit = self.unit[:-1] if self.amount == 1 else self.unit
        return f"{self.amount:g} {unit}"


_UNITS = {
    **dict.fromkeys(("year", "years", "yr", "yrs"), (12, "months")),
    **dict.fromkeys(("month", "months", "mo", "mos", "mth", "mths"), (1, "months")),
    **dict.fromkeys(("week", "weeks", "wk", "wks"), (7, "days")),
    **dict.fromkeys(("day", "days"), (1, "days")),
}
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen " \
    "fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_WORD_NUMBERS = {w: i for i, w in enumerate(_ONES)} | {w: 20 + 10 * i for i, w in enumerate(_TENS)}
_WORD_NUMBERS |= {"a": 1, "an": 1, "hundred": 100}
_DURATION = re.compile(
    r"\b(?P<num>\d+(?:\.\d+)?|[a-z]+(?:-[a-z]+)?)\s*"
    r"(?:\(\s*(?P<paren>\d+(?:\.\d+)?)\s*\)\s*)?"  # "thirty (30) days": the digits win
    r"-?\s*(?P<unit>" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")\b"
)


def _word_number(word: str) -> float | None:
    if word in _WORD_NUMBERS:
        return float(_WORD_NUMBERS[word])
    tens, _, ones = word.partition("-")  # "forty-five"
    if tens in _TENS and ones in _ONES[1:10]:
        return float(_WORD_NUMBERS[tens] + _WORD_NUMBERS[ones])
    return None


def parse_duration(value: object) -> Duration | None:
    """Read `successive 1 year`, `one (1) year`, `12 months`, `thirty (30) days`…; None if unreadable.

    Several lengths in one phrase (`1 year and 6 months`) are added up when their
    units agree; otherwise the phrase is ambiguous and gives None."""
    if isinstance(value, Duration):
        return value
    if not isinstance(value, str):
        return None
    found: list[Duration] = []
    for m in _DURATION.finditer(value.lower()):
        amount = float(m["paren"]) if m["paren"] else (
            float(m["num"]) if m["num"][0].isdigit() else _word_number(m["num"])
        )
        if amount is None:
            continue  # "successive years": no number before the unit
        factor, unit = _UNITS[m["unit"]]
        found.append(Duration(amount * factor, unit))
    if not found or len({d.unit for d in found}) != 1:
        return None
    return Duration(math.fsum(d.amount for d in found), found[0].unit)


# ---------------------------------------------------------------- numbers

_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$")
_PERCENT = re.compile(r"\s*(?:%|percent|pct)$")


def parse_number(value: object) -> float | None:
    """A number from a number or a numeric string (`"70%"` → 0.7, `"1,000"` → 1000.0)."""
    if isinstance(value, bool):
        return None  # bool is an int subclass, but `true` is not a rate
    if isinstance(value, (int, float, Decimal)):
        f = float(value)
        return f if math.isfinite(f) else None
    if not isinstance(value, str):
        return None
    s = value.strip().lower().replace(",", "").lstrip("$€£").strip()
    s, percent = _PERCENT.sub("", s), bool(_PERCENT.search(s))
    if not _NUMBER.match(s):
        return None
    try:
        d = Decimal(s) / 100 if percent else Decimal(s)  # Decimal: "33.3%" is 0.333, not 0.33299…
    except InvalidOperation:
        return None
    f = float(d)
    return f if math.isfinite(f) else None


def exact(x: float) -> Decimal:
    """The decimal a float was written as (0.3 → Decimal('0.3')), for exact tolerance checks."""
    return Decimal(repr(float(x)))


def number_diff(a: float, b: float) -> Decimal:
    """|a − b| in decimal arithmetic, so 0.301 − 0.3 is exactly 0.001 (binary floats say 0.0010000…09)."""
    return abs(exact(a) - exact(b))


def numbers_close(a: float, b: float, tolerance: float) -> bool:
    return number_diff(a, b) <= exact(tolerance)


def show_decimal(d: Decimal) -> str:
    return format(d.normalize(), "f") if d else "0"


# ---------------------------------------------------------------- ids and names


def normalize_id(value: object) -> str:
    """Identifiers and enum values: exact after trimming and case folding."""
    return str(value).strip().casefold()


# ---- the invention rule: is an identifier stated in the document at all?
# A document token is a run of letters and digits joined by id separators (`ACC-47003`, `SE_12`, `v1.2`);
# anything else (space, `/`, `:`, `*`, brackets, a trailing full stop) ends it. Keying a token or an id
# drops its separators and folds case, so `SE0213`, `se-0213` and `SE 0213` all key to `se0213`.
_TOKEN = re.compile(r"[^\W_]+(?:[-_.\u2010-\u2015][^\W_]+)*")


def id_key(value: object) -> str:
    """An identifier with case folded and every separator (anything not a letter or digit) dropped."""
    return "".join(c for c in str(value).casefold() if c.isalnum())


def document_keys(text: str) -> list[str]:
    """The document's tokens, keyed, in order."""
    return [id_key(m[0]) for m in _TOKEN.finditer(text)]


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str | None) -> re.Pattern[str] | None:
    try:
        return None if pattern is None else re.compile(pattern)
    except re.error:
        return None  # a pattern Python cannot read declares nothing evalkit can check


def matches_pattern(value: object, pattern: str | None) -> bool:
    """JSON Schema `pattern` semantics: a search, not a full match (anchors are the pattern's own)."""
    rx = _compiled(pattern)
    return rx is not None and rx.search(str(value)) is not None


def identifier_shaped(value: object, pattern: str | None = None) -> bool:
    """An identifier looks like one: it holds a digit and a letter (`ACC-47003`, `SE 0213`), or it matches
    the field's declared pattern. `1`, `2025` and `Halden` are words and numbers, not identifiers."""
    key = id_key(value)
    has_both = any(c.isdigit() for c in key) and any(c.isalpha() for c in key)
    return has_both or matches_pattern(value, pattern)


def states_id(keys: list[str], value: object, pattern: str | None = None) -> bool:
    """True when the document states the id (`unstated`: why not)."""
    return unstated(keys, value, pattern) is None


def unstated(keys: list[str], value: object, pattern: str | None = None) -> str | None:
    """Why the document does not state the id as an identifier, or None when it does: the id must match
    the field's declared `pattern` (when the schema has one), be identifier-shaped, and its key must equal
    a whole document token or a run of consecutive tokens.

    `ACC`, `ACC-4700` and `1` are not stated by a document whose only id is `ACC-47003`: a fragment of a
    token is not a token; `2025` and `Halden` are not stated as ids by a memo dated 2025 from Halden: they
    are not identifier-shaped. `SE0213` is stated by `SE-0213` (separators differ, the key is the same)."""
    if _compiled(pattern) is not None and not matches_pattern(value, pattern):
        return f"does not match the field's declared pattern {pattern!r}"
    if not identifier_shaped(value, pattern):
        return "not identifier-shaped (no digit and letter together, no declared pattern it matches)"
    if is_token_run(keys, id_key(value)):
        return None
    return "not a whole token or token run of the source, separators and case aside"


def is_token_run(keys: list[str], want: str) -> bool:
    """Whether the id key `want` is a run of consecutive whole document tokens (`keys`, `document_keys`)."""
    for i in range(len(keys)):
        run = ""
        for k in keys[i:]:
            run += k
            if run == want:
                return True
            if not want.startswith(run):
                break
    return False


# A trailing parenthetical that defines an alias: ("AIG"), (the "Company"),
# (hereinafter "Licensee"). A quote must open the alias so `(USA)` is kept.
_ALIAS = re.compile(r"\s*\(\s*(?:[A-Za-z,]+\s+)*[\"“”'‘’][^()]*\)[\s,;.]*$")


def normalize_party(name: object) -> str:
    """A party name: trailing alias definitions dropped, then SQuAD-normalized (suffixes like Inc kept)."""
    s = str(name)
    while (stripped := _ALIAS.sub("", s)) != s:
        s = stripped
    return normalize(s)
