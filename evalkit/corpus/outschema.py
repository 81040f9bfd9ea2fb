"""A task's output schema (task.yaml `schema:`, JSON Schema Draft 2020-12) and the records that break it.

The one checker of extractions (parse outcome ``schema_invalid``, `pipeline.extraction_record`) and of
truth (`evalkit validate`, through the scorer's `expected_extraction`). A violation is
``{"path": JSON path, "keyword": the schema keyword broken, "message": what is wrong}``; the path is jsonschema's (``$.conditions[0].rate``).
"""

from __future__ import annotations

import datetime as _dt
import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

MESSAGE_LIMIT = 160  # a message quotes the offending value; a long one would swamp the item table
SIZE_CAPS = frozenset({"maxItems", "maxLength", "maxProperties"})


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` is not a valid Draft 2020-12 schema (None when it is)."""
    return _schema_problem(_canonical(schema))


@lru_cache(maxsize=64)  # every load of a task checks its schema: once per schema and process
def _schema_problem(canonical: str) -> str | None:
    try:
        Draft202012Validator.check_schema(json.loads(canonical))
    except SchemaError as e:
        return f"{'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
    return None


@lru_cache(maxsize=64)
def _validator(canonical: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(canonical))


def _json_default(v: Any) -> Any:
    if isinstance(v, (_dt.date, _dt.datetime)):
        return v.isoformat()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return str(v)


def _canonical(schema: dict[str, Any]) -> str:
    """A schema as one string: the key of its cached check and validator."""
    return json.dumps(schema, sort_keys=True, default=_json_default)


def _plain(value: Any) -> Any:
    """The record as JSON would carry it (YAML dates in truth become ISO strings)."""
    return json.loads(json.dumps(value, default=_json_default))


def _message(e: Any) -> str:
    """jsonschema's message, or — when it quotes a long value — the keyword broken and its value."""
    message: str = e.message
    if len(message) <= MESSAGE_LIMIT:
        return message
    size = f" (has {len(e.instance)})" if isinstance(e.instance, (list, str, dict)) else ""
    return f"breaks {e.validator}: {json.dumps(e.validator_value)[:MESSAGE_LIMIT // 2]}{size}"


def violations(record: Any, schema: dict[str, Any], *, caps: bool = True) -> list[dict[str, Any]]:
    """Every place `record` breaks `schema`, sorted by path then message (empty when it conforms).

    ``caps=False`` leaves out the size caps (`SIZE_CAPS`): they bound what a model may write, not what a
    document may hold, so truth larger than a cap is not wrong (see docs/corpus-format.md)."""
    v = _validator(_canonical(schema))
    found = {(e.json_path, e.validator, _message(e)) for e in v.iter_errors(_plain(record))}
    return [{"path": p, "keyword": k, "message": m} for p, k, m in sorted(found) if caps or k not in SIZE_CAPS]


def top_key(path: str) -> str | None:
    """The record's top-level key a JSON path is under (``$.conditions[0].rate`` → ``conditions``)."""
    rest = path[2:] if path.startswith("$.") else ""
    return rest.split(".")[0].split("[")[0] or None


def keypath(path: str) -> tuple[Any, ...]:
    """A JSON path as a key path (``$.conditions[0].rate`` → ("conditions", 0, "rate")), for a YAML line."""
    out: list[Any] = []
    for part in path.removeprefix("$").split("."):
        name, *indices = part.split("[")
        if name:
            out.append(name)
        out.extend(int(i.rstrip("]")) for i in indices if i.rstrip("]").isdigit())
    return tuple(out)
