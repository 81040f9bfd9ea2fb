"""The creature catalog (creatures.yaml beside task.yaml): template ids with names and aliases."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field

from evalkit.errors import CorpusError
from evalkit.scoring.text import fold

from .models import Options, _Strict


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
    from evalkit.corpus.tasks import parse

    model, _ = parse(CatalogFile, Path(path))
    return Catalog(model.creatures, source=path)


def load_catalog(task_dir: Path, options: Options) -> Catalog:
    path = Path(task_dir) / options.catalog
    if not path.is_file():
        raise CorpusError(f"{path}: creature catalog not found (task.yaml scoring.catalog)")
    return _catalog_at(str(path), path.stat().st_mtime)
