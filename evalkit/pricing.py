"""USD per call, from a per-model price table.

Prices are USD per million tokens, ``{"input": X, "output": Y}``. The built-in
table covers the models whose list prices were known when it was written; a
model it does not know costs $0 and is reported as *unpriced* (local models are
listed at $0 on purpose). Override or extend it with a YAML or JSON file::

    claude-sonnet-4-5: {input: 3.0, output: 15.0}
    my-vllm-model:     {input: 0, output: 0}

given by path through ``EVALKIT_PRICES`` or the ``prices=`` argument. A model id
matches its exact entry first, then the longest entry it starts with (so
``claude-sonnet-4-5-20250929`` uses ``claude-sonnet-4-5``).

Cost estimates made before a call (dry run, ``--max-usd``) count prompt tokens
as characters / 4 — a rough rule of thumb, not a tokenizer — and the full
``max_tokens`` as output.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .errors import UsageError

PRICES_ENV = "EVALKIT_PRICES"


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens


# List prices, USD per million tokens (standard tier, no caching or batch discounts).
DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    # OpenAI
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
    "gpt-5-nano": Price(0.05, 0.4),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1-nano": Price(0.1, 0.4),
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    # Local models: free to run.
    "gemma-3-270m": Price(0.0, 0.0),
    "fake": Price(0.0, 0.0),
    "predictions": Price(0.0, 0.0),
}


def _load_file(path: str | Path) -> dict[str, Price]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"price table {p}: cannot read it ({e.strerror})") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - report any parse error as a usage error
        raise UsageError(f"price table {p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'} ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"price table {p}: expected a mapping of model id -> {{input, output}}")
    out: dict[str, Price] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - {"input", "output"} or not {"input", "output"} <= set(entry):
            raise UsageError(f"price table {p}: {model}: give exactly input and output (USD per million tokens)")
        try:
            out[str(model)] = Price(float(entry["input"]), float(entry["output"]))
        except (TypeError, ValueError):
            raise UsageError(f"price table {p}: {model}: prices must be numbers") from None
    return out


class PriceTable:
    def __init__(self, prices: Mapping[str, Price] | None = None, path: str | Path | None = None,
                 env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES if prices is None else prices)
        path = path or env.get(PRICES_ENV) or None
        self.source = str(path) if path else "built-in"
        if path:
            self.prices.update(_load_file(path))

    def lookup(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        best = max((m for m in self.prices if model.startswith(m)), key=len, default=None)
        return self.prices[best] if best else None

    def priced(self, model: str) -> bool:
        return self.lookup(model) is not None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float:
        price = self.lookup(model)
        if price is None:
            return 0.0
        return (input_tokens * price.input + output_tokens * price.output) / 1_000_000

    def estimate(self, model: str, prompt_chars: int, max_tokens: int) -> float:
        """Cost of one call before it is made: chars/4 prompt tokens, max_tokens output tokens."""
        return self.cost(model, estimate_tokens(prompt_chars), max_tokens)


def estimate_tokens(chars: int) -> int:
    """Rough prompt-token estimate: characters / 4 (rounded up)."""
    return (chars + 3) // 4


_default: PriceTable | None = None


def default_table() -> PriceTable:
    """The table used when none is passed: built-in, overridden by ``EVALKIT_PRICES``."""
    global _default
    if _default is None or _default.source != (os.environ.get(PRICES_ENV) or "built-in"):
        _default = PriceTable()
    return _default


def cost(model: str, input_tokens: int, output_tokens: int, table: PriceTable | None = None) -> float:
    return (table or default_table()).cost(model, input_tokens, output_tokens)


def request_chars(request: Any) -> int:
    """Characters a request sends as prompt: system + user + the schema's JSON."""
    return len(request.system) + len(request.user) + len(json.dumps(request.schema, separators=(",", ":")))
