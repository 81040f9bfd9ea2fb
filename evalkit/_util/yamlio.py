"""Strict YAML reading that remembers where every key came from.

`load_yaml` returns the data plus a `Locator` that maps a key path such as
("fields", "term_rate", "weight") to its line, so schema errors can name
the file, the key path and the line.

Bounded (`evalkit.limits`), in time and memory linear in the file: its size is checked before it is
read (YAML_BYTES), and the composed node graph — where an alias is the anchored node itself, so
composing an alias bomb costs no more than its text — is measured before anything expands it: the
nodes it would expand to, each alias counted every time it is used (YAML_NODES), and its nesting
(NESTING_DEPTH). A refusal is a `LimitExceeded` naming the file and the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from evalkit import limits
from evalkit._util.jsonio import read_bounded
from evalkit.errors import CorpusError, LimitExceeded

KeyPath = tuple[Any, ...]


# libyaml's parser where PyYAML has it (~8x faster: every notebook loads its task), the same nodes and marks.
if TYPE_CHECKING:  # one class to check against: the stubs give CSafeLoader SafeLoader's API
    _SafeLoader = yaml.SafeLoader
else:
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML keeps the last)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
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


def _measure(root: yaml.Node, path: Path) -> None:
    """Refuse a node graph that expands past YAML_NODES or nests past NESTING_DEPTH. Each distinct node is
    visited once (sizes and depths memoized by identity), iteratively: linear in the composed graph."""
    max_nodes, max_depth = limits.YAML_NODES.value(), limits.NESTING_DEPTH.value()
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                else node.value if isinstance(node, yaml.SequenceNode) else [])
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > max_nodes:
                raise LimitExceeded(f"{path}:{node.start_mark.line + 1}: expands to more than {int(max_nodes)} "
                                    f"nodes (aliases counted each time used); limit {limits.YAML_NODES.describe()}")
            if depth[key] > max_depth:
                raise LimitExceeded(f"{path}:{node.start_mark.line + 1}: nested deeper than {int(max_depth)} "
                                    f"levels; limit {limits.NESTING_DEPTH.describe()}")
            continue
        if key in size:
            continue
        if key in open_:  # an alias inside its own anchor: it would expand forever
            raise LimitExceeded(f"{path}:{node.start_mark.line + 1}: an alias refers to a node that contains it "
                                f"(infinite expansion); limit {limits.YAML_NODES.describe()}")
        open_.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
        if len(open_) > max_depth:
            raise LimitExceeded(f"{path}:{node.start_mark.line + 1}: nested deeper than {int(max_depth)} "
                                f"levels; limit {limits.NESTING_DEPTH.describe()}")


def format_keypath(keypath: KeyPath) -> str:
    parts: list[str] = []
    for p in keypath:
        parts.append(f"[{p}]" if isinstance(p, int) else (("." if parts else "") + str(p)))
    return "".join(parts) or "(top level)"


def load_yaml(path: Path) -> tuple[Any, Locator]:
    """Read one YAML file; raise CorpusError naming file and line on any problem."""
    path = Path(path)
    raw = read_bounded(path, limits.YAML_BYTES, "YAML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        loader = _StrictLoader(text)  # one parse gives both the node tree (for line numbers) and the data
        try:
            node = loader.get_single_node()
            if node is not None:
                _measure(node, path)  # before anything expands an alias
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
