"""Text normalization and the minimal morphological fold, shared by every scorer.

`normalize` is SQuAD's answer normalization (lower case, punctuation and the
articles a/an/the removed, whitespace collapsed). `fold` adds one step: the
phrase's head noun is singularized with the `inflect` dictionary, so
singular truth meets a printed plural ("kobold" ~ "kobolds", "lizard man" ~
"lizard men", "wolf" ~ "wolves") while token subsets and renames stay apart
("hobgoblin chief" is not "hobgoblin").
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # inflect is imported on first use (start-up cost)
    import inflect

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans(dict.fromkeys(string.punctuation + "“”‘’–—", " "))


def normalize(text: object) -> str:
    s = str(text).lower().translate(_PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


@lru_cache(maxsize=1)
def _inflect() -> inflect.engine:
    import inflect  # imported lazily: only scorers that fold need it

    return inflect.engine()


# Words inflect would "singularize" wrongly: pronouns and function words ("us" → "me").
_KEEP = frozenset({"us", "this", "his", "its", "is", "was", "has", "as", "yours", "ours", "theirs", "hers"})


@lru_cache(maxsize=65536)
def fold(text: object) -> str:
    """normalize(text) with its last word singularized (dictionary-correct).

    Words with digits ("1950s") and function words are left alone; when the
    text is only articles, the normalized form would be empty, so the lower-cased
    text is kept instead (distinct names must not all fold to "")."""
    s = normalize(text)
    if not s:
        return " ".join(str(text).lower().split())
    *head, last = s.split()
    if any(c.isdigit() for c in last) or last in _KEEP:
        return s
    singular = _inflect().singular_noun(last)  # False for a word that is not a plural
    return " ".join([*head, singular if isinstance(singular, str) and singular else last])


def tokens(text: object) -> list[str]:
    return normalize(text).split()


def token_f1(prediction: object, truth: object) -> float:
    """SQuAD token F1 between two texts (1.0 when both are empty)."""
    p, t = tokens(prediction or ""), tokens(truth or "")
    if not p and not t:
        return 1.0
    common = Counter(p) & Counter(t)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)
