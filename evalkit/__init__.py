"""evalkit: measure how well an LLM extracts structured data from documents."""

__version__ = "0.1.0"
