"""USD per call, from a per-model price table.

Prices are USD per million tokens, ``{"input": X, "output": Y}``. The built-in
table (`DEFAULT_PRICES`) says for each entry where the price was read and when.
A model it does not know is *unpriced*: its calls are counted at $0, and a run
that has to bound or estimate spend (``--max-usd``, ``--dry-run``) refuses to
start one unless ``--allow-unpriced`` is given (`backends.resolve.plan`).
Local models are listed at $0 on purpose. Override or extend the table with a
YAML or JSON file::

    claude-sonnet-5-5: {input: 2.0, output: 10.0}
    my-vllm-model:     {input: 0, output: 0}

given by path through ``EVALKIT_PRICES`` or the ``prices=`` argument
(``--prices FILE``). A model id matches its exact entry, or the entry it names
followed by a date or ``-latest`` (``claude-haiku-4-5-20251001`` uses
``claude-haiku-4-5``); never a mere prefix, so ``claude-opus-4`` does not price
``claude-opus-4-8`` and an unknown model is never priced by a guess.

Costs before a call are upper bounds (`PriceTable.bound`): prompt tokens as
characters / 4 — a rough rule of thumb, not a tokenizer — and every output
budget billed in full.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import UsageError

PRICES_ENV = "EVALKIT_PRICES"


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens
    source: str = ""  # where the price was read
    date: str = ""  # when (YYYY-MM-DD)


# List prices, USD per million tokens (standard tier, no caching or batch discounts).
_CLAUDE = "Anthropic's model pages, https://platform.claude.com/docs/<lang>/models/<model>/overview"
_CLAUDE_OLD = "https://www.anthropic.com/pricing (evalkit's first table, not re-checked)"
_OPENAI = "https://openai.com/api/pricing (evalkit's first table, not re-checked)"
_LOCAL = "runs locally: free"
DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic (claude-sonnet-5-5 is the default model of `anthropic` and of `--judge anthropic`)
    "claude-sonnet-5-5": Price(2.0, 10.0, _CLAUDE, "2026-12-01"),
    "claude-opus-5-5": Price(4.0, 20.0, _CLAUDE, "2026-12-01"),
    "claude-sonnet-5": Price(2.0, 10.0, _CLAUDE, "2026-12-01"),
    "claude-opus-5": Price(5.0, 25.0, _CLAUDE, "2026-12-01"),
    "claude-opus-4-5": Price(5.0, 25.0, _CLAUDE, "2026-12-01"),
    "claude-haiku-4-5": Price(1.0, 5.0, _CLAUDE, "2026-12-01"),
    "claude-opus-4-1": Price(15.0, 75.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-opus-4": Price(15.0, 75.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-sonnet-4-5": Price(3.0, 15.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-sonnet-4": Price(3.0, 15.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-3-7-sonnet": Price(3.0, 15.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-3-5-haiku": Price(0.8, 4.0, _CLAUDE_OLD, "2026-11-30"),
    # OpenAI
    "gpt-5": Price(1.25, 10.0, _OPENAI, "2026-11-30"),
    "gpt-5-mini": Price(0.25, 2.0, _OPENAI, "2026-11-30"),
    "gpt-5-nano": Price(0.05, 0.4, _OPENAI, "2026-11-30"),
    "gpt-4.1": Price(2.0, 8.0, _OPENAI, "2026-11-30"),
    "gpt-4.1-mini": Price(0.4, 1.6, _OPENAI, "2026-11-30"),
    "gpt-4.1-nano": Price(0.1, 0.4, _OPENAI, "2026-11-30"),
    "gpt-4o": Price(2.5, 10.0, _OPENAI, "2026-11-30"),
    "gpt-4o-mini": Price(0.15, 0.6, _OPENAI, "2026-11-30"),
    # Local models and offline backends: free to run.
    "gemma-3-270m": Price(0.0, 0.0, _LOCAL, "2026-11-30"),
    "fake": Price(0.0, 0.0, _LOCAL, "2026-11-30"),
    "predictions": Price(0.0, 0.0, _LOCAL, "2026-11-30"),
}
_VERSION_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")  # a dated snapshot or alias of an entry


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
            out[str(model)] = Price(float(entry["input"]), float(entry["output"]), str(p))
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
        """The model's price: its exact entry, or the entry it names with a date / ``-latest`` appended."""
        return self.prices.get(model) or self.prices.get(_VERSION_SUFFIX.sub("", model))

    def priced(self, model: str) -> bool:
        return self.lookup(model) is not None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float:
        price = self.lookup(model)
        if price is None:
            return 0.0
        return (input_tokens * price.input + output_tokens * price.output) / 1_000_000

    def bound(self, model: str, prompt_chars: int, budgets: Sequence[int], sends: int = 1) -> float:
        """Upper bound of one request's cost before it is made: one call per output budget in
        `budgets` (the first call and any retry evalkit makes), each sent up to `sends` times,
        every send billed chars/4 prompt tokens and its whole output budget."""
        prompt = estimate_tokens(prompt_chars)
        return sends * sum(self.cost(model, prompt, budget) for budget in budgets)


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
