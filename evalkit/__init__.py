"""evalkit: measure how well an LLM extracts structured data from documents.

The Python API (docs/api.md): `run`, `score`, `load_run` (and `RunTables`), from `evalkit.api`. They
are imported on first use, so ``import evalkit`` (every notebook kernel does) stays cheap.
"""

__version__ = "0.1.0"
__all__ = ["run", "score", "load_run", "RunTables", "__version__"]


def __getattr__(name: str):
    if name in ("run", "score", "load_run", "RunTables"):
        from evalkit import api  # lazy: keeps `evalkit --help` fast

        return getattr(api, name)
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
