"""Strict YAML reading that remembers where every key came from.

`load_yaml` returns the data plus a `Locator` that maps a key path such as
("fields", "term_rate", "weight") to its line, so schema errors can name
the file, the key path and the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import CorpusError

KeyPath = tuple[Any, ...]


# libyaml's parser where PyYAML has it (~8x faster: every notebook loads its task), the same nodes and marks.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML keeps the last)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@dataclass
class Locator:
    """Line numbers (1-based) of every key path in one YAML file."""

    path: Path
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line(self, keypath: KeyPath) -> int | None:
        # Walk up to the nearest ancestor we know (a missing key has no line of its own).
        kp = tuple(keypath)
        while kp:
            if kp in self.lines:
                return self.lines[kp]
            kp = kp[:-1]
        return self.lines.get((), None)

    def where(self, keypath: KeyPath) -> str:
        line = self.line(keypath)
        return f"{self.path}:{line}" if line else str(self.path)


def _index(node: yaml.Node, prefix: KeyPath, out: dict[KeyPath, int]) -> None:
    out.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            kp = prefix + (key_node.value,)
            out[kp] = key_node.start_mark.line + 1
            _index(value_node, kp, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, prefix + (i,), out)


def format_keypath(keypath: KeyPath) -> str:
    parts = []
    for p in keypath:
        parts.append(f"[{p}]" if isinstance(p, int) else (("." if parts else "") + str(p)))
    return "".join(parts) or "(top level)"


def load_yaml(path: Path) -> tuple[Any, Locator]:
    """Read one YAML file; raise CorpusError naming file and line on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        loader = _StrictLoader(text)  # one parse gives both the node tree (for line numbers) and the data
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        detail = f"{context}, {problem}" if context else problem
        raise CorpusError(f"{where}: YAML syntax error: {detail}") from None
    locator = Locator(path)
    if node is not None:
        _index(node, (), locator.lines)
    return data, locator
