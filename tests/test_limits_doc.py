"""docs/limits.md holds the table of every bound in `evalkit.limits`, generated from `LIMITS`: it cannot drift."""

from __future__ import annotations

from evalkit import limits
from evalkit._util.resources import CHECKOUT

DOC = CHECKOUT / "docs" / "limits.md"


def test_the_doc_holds_the_table_generated_from_every_limit():
    text = DOC.read_text(encoding="utf-8")
    table = limits.markdown_table()
    assert table in text, ("docs/limits.md is out of step with evalkit/limits.py; paste in:\n" + table)
    for limit in limits.LIMITS:  # each named once, by its name and its variable
        assert text.count(f"| `{limit.name}` |") == 1 and limit.env in text


def test_every_limit_is_overridable_and_named_in_its_refusal(monkeypatch):
    for limit in limits.LIMITS:
        monkeypatch.setenv(limit.env, "7")
        assert limit.value() == 7 and limit.env in limit.describe()
        monkeypatch.delenv(limit.env)
        assert limit.value() == limit.default
