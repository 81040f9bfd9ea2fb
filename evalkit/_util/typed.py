"""Typed records of evalkit's own files (summary.json, the scoreboard, sweep.json, band.json, history lines).

Each file has one pydantic model beside the module that writes it, read with `Record.from_json` and written with
`Record.to_json`: the JSON a model gives back is the JSON it was read from, key for key and value for value
(keys it does not name are kept, `extra="allow"`; keys the file did not have are not added, ``exclude_unset``;
numbers keep their type: ``Num`` is a strict int-or-float, never a bool, never 1 → 1.0), so a file read and
written again through `evalkit._util.jsonio` has the same bytes.

A value of the wrong type is one `RecordError` (exit 3) naming the file and the key path
(``summary.json: tasks.memos.backends[0].errors: expected a whole number, got 'x'``), never a traceback.
A file without ``schema_version`` is version 1 (every file evalkit wrote before the key existed); a version
the model does not know is refused (`check_version`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from evalkit.errors import RecordError

__all__ = ["Record", "RecordError", "Num", "Int", "Str", "Bool", "key_path", "check_version"]

# Strict scalars: what was read is what is written (a lax int would turn True into 1, a float field 1 into 1.0).
Num = Annotated[StrictInt | StrictFloat, Field(union_mode="left_to_right")]
Int = StrictInt
Str = StrictStr
Bool = StrictBool

R = TypeVar("R", bound="Record")


def key_path(loc: tuple[Any, ...]) -> str:
    """pydantic's error location as the key path a reader finds in the file: ``tasks.memos.backends[0].errors``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "float", "str", "bool") or str(part).startswith(("function-", "union[")):
            continue  # which branch of a union pydantic tried, not a key of the file
        else:
            out += f".{part}" if out else str(part)
    return out or "(the whole file)"


_EXPECTED = {"int_type": "a whole number", "float_type": "a number", "string_type": "a string",
             "bool_type": "true or false", "dict_type": "an object", "list_type": "a list",
             "model_type": "an object", "missing": "a value (the key is missing)"}


def _one_line(err: ValidationError, where: str | Path) -> str:
    errors = err.errors()
    at = key_path(errors[0]["loc"])
    mine = [e for e in errors if key_path(e["loc"]) == at]  # a union's branches fail at one key: one complaint
    kinds = {e["type"] for e in mine}
    what = "a number" if kinds == {"int_type", "float_type"} else _EXPECTED.get(mine[0]["type"], mine[0]["msg"])
    got = "" if "missing" in kinds else f", got {mine[0].get('input')!r:.60}"
    others = len({key_path(e["loc"]) for e in errors}) - 1
    more = f" (and {others} more)" if others else ""
    return f"{where}: {at}: expected {what}{got}{more}; fix or remove the file"


def check_version(data: Any, known: int, where: str | Path) -> None:
    """Refuse a file written by a newer evalkit (a ``schema_version`` this one does not know); absent is 1."""
    version = data.get("schema_version", 1) if isinstance(data, Mapping) else 1
    if version != known:
        raise RecordError(f"{where}: schema_version {version!r} is not {known}, the version this evalkit reads "
                          "(a file from another evalkit version: rewrite it with this one)")


class Record(BaseModel):
    """A typed view of one JSON object evalkit writes; `from_json` reads, `to_json` writes, losslessly."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    @classmethod
    def from_json(cls: type[R], data: Any, where: str | Path) -> R:
        """`data` (parsed JSON) as this model; `RecordError` naming `where` and the key path when a value is wrong."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise RecordError(_one_line(e, where)) from None

    def to_json(self) -> dict[str, Any]:
        """The JSON object this record was read or built from: the same keys, the same values."""
        return self.model_dump(exclude_unset=True, by_alias=True)

    def extra(self, key: str, default: Any = None) -> Any:
        """A key the model does not name (kept as read)."""
        return (self.model_extra or {}).get(key, default)
