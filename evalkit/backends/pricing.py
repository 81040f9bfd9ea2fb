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

Prompt caching and batch APIs have their own rates, in the same table: ``cache_read`` (USD per
million prompt tokens served from the provider's prompt cache), ``cache_write`` (per million
written to it: Anthropic charges a premium, OpenAI nothing extra) and ``batch`` (the factor a
provider batch API bills, on everything: 0.5 for both Anthropic's Message Batches and OpenAI's
Batch API). A file entry may give them; left out, cached tokens are billed as plain input and a
batch at full price (`cost` never guesses a discount). Each built-in entry's ``terms`` says where
these rules were read.

Costs before a call are upper bounds (`PriceTable.bound`): prompt tokens as
characters / 4 — a rough rule of thumb, not a tokenizer — and every output
budget billed in full. A document sent as a PDF or as page images (input modes ``pdf``,
``images``) adds its pages' tokens by each provider's documented rule (`parts_tokens`, `PAGE_RULES`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import UsageError

PRICES_ENV = "EVALKIT_PRICES"


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens
    source: str = ""  # where the price was read
    date: str = ""  # when (YYYY-MM-DD)
    cache_read: float | None = None  # USD per million prompt tokens read from the prompt cache (None: input)
    cache_write: float | None = None  # USD per million prompt tokens written to it (None: input)
    batch: float | None = None  # the factor a provider batch API bills (None: no batch discount known)
    terms: str = ""  # where the caching and batch rules were read, and when


# List prices, USD per million tokens (standard tier, no caching or batch discounts).
_CLAUDE = "Anthropic's model pages, https://platform.claude.com/docs/<lang>/models/<model>/overview"
_CLAUDE_OLD = "https://www.anthropic.com/pricing (evalkit's first table, not re-checked)"
_OPENAI = "https://openai.com/api/pricing (evalkit's first table, not re-checked)"
_LOCAL = "runs locally: free"
# The caching and batch rules, provider-wide, as multiples of a model's input price.
_CLAUDE_TERMS = ("Anthropic's prompt-caching and batch terms as restated by third-party docs read 2026-12-01 (the "
                 "primary page not reachable here): 5-minute cache writes 1.25x input, cache reads 0.1x input; "
                 "Message Batches 50% of standard prices, stacking with caching")
_OPENAI_TERMS = ("OpenAI's pricing page (cached input per model: 0.1x input for gpt-5*, 0.25x for gpt-4.1*, 0.5x for "
                 "gpt-4o*; cache writes not charged; Batch API 50%), as recalled 2026-11-30, not re-checked")


def _claude(input: float, output: float, source: str, date: str) -> Price:
    return Price(input, output, source, date, cache_read=0.1 * input, cache_write=1.25 * input, batch=0.5,
                 terms=_CLAUDE_TERMS)


def _openai(input: float, output: float, cached: float) -> Price:
    return Price(input, output, _OPENAI, "2026-11-30", cache_read=cached * input, cache_write=input, batch=0.5,
                 terms=_OPENAI_TERMS)


DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic (claude-sonnet-5-5 is the default model of `anthropic` and of `--judge anthropic`)
    "claude-sonnet-5-5": _claude(2.0, 10.0, _CLAUDE, "2026-12-01"),
    "claude-opus-5-5": _claude(4.0, 20.0, _CLAUDE, "2026-12-01"),
    "claude-sonnet-5": _claude(2.0, 10.0, _CLAUDE, "2026-12-01"),
    "claude-opus-5": _claude(5.0, 25.0, _CLAUDE, "2026-12-01"),
    "claude-opus-4-5": _claude(5.0, 25.0, _CLAUDE, "2026-12-01"),
    "claude-haiku-4-5": _claude(1.0, 5.0, _CLAUDE, "2026-12-01"),
    "claude-opus-4-1": _claude(15.0, 75.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-opus-4": _claude(15.0, 75.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-sonnet-4-5": _claude(3.0, 15.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-sonnet-4": _claude(3.0, 15.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-3-7-sonnet": _claude(3.0, 15.0, _CLAUDE_OLD, "2026-11-30"),
    "claude-3-5-haiku": _claude(0.8, 4.0, _CLAUDE_OLD, "2026-11-30"),
    # OpenAI
    "gpt-5": _openai(1.25, 10.0, 0.1),
    "gpt-5-mini": _openai(0.25, 2.0, 0.1),
    "gpt-5-nano": _openai(0.05, 0.4, 0.1),
    "gpt-4.1": _openai(2.0, 8.0, 0.25),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.25),
    "gpt-4.1-nano": _openai(0.1, 0.4, 0.25),
    "gpt-4o": _openai(2.5, 10.0, 0.5),
    "gpt-4o-mini": _openai(0.15, 0.6, 0.5),
    # Local models: free to run (an offline backend says so itself: `Provider.free`).
    "gemma-3-270m": Price(0.0, 0.0, _LOCAL, "2026-11-30"),
}
_VERSION_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")  # a dated snapshot or alias of an entry


_OPTIONAL = ("cache_read", "cache_write", "batch")  # what a price file may add to input and output


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
            import yaml  # lazy: yaml is loaded only where it is used (import cost)

            data = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - report any parse error as a usage error
        raise UsageError(f"price table {p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'} ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"price table {p}: expected a mapping of model id -> {{input, output}}")
    out: dict[str, Price] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - {"input", "output", *_OPTIONAL} or not {"input", "output"} <= set(entry):
            raise UsageError(f"price table {p}: {model}: give input and output (USD per million tokens), and "
                             f"optionally {', '.join(_OPTIONAL)}")
        try:
            optional: dict[str, Any] = {k: float(entry[k]) for k in _OPTIONAL if entry.get(k) is not None}
            out[str(model)] = Price(float(entry["input"]), float(entry["output"]), str(p), **optional)
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

    def cost(self, model: str, input_tokens: int, output_tokens: int, *, cache_read: int = 0, cache_write: int = 0,
             batch: bool = False) -> float:
        """USD of a call: `input_tokens` is every prompt token, `cache_read` and `cache_write` the parts of it
        served from and written to the prompt cache, each at its rate; `batch`: at the batch API's factor."""
        price = self.lookup(model)
        if price is None:
            return 0.0
        read = price.input if price.cache_read is None else price.cache_read
        write = price.input if price.cache_write is None else price.cache_write
        plain = max(0, input_tokens - cache_read - cache_write)
        usd = (plain * price.input + cache_read * read + cache_write * write + output_tokens * price.output) / 1_000_000
        return usd * (price.batch if batch and price.batch is not None else 1.0)

    def cache_saving(self, model: str, prefix_tokens: int, requests: int) -> float:
        """USD that prompt caching saves on `requests` calls sharing a `prefix_tokens` prefix: the first
        writes it (at the write rate), the rest read it (at the read rate), instead of all paying input."""
        price = self.lookup(model)
        if price is None or requests < 1:
            return 0.0
        read = price.input if price.cache_read is None else price.cache_read
        write = price.input if price.cache_write is None else price.cache_write
        return prefix_tokens * ((requests - 1) * (price.input - read) - (write - price.input)) / 1_000_000

    def bound(self, model: str, prompt_chars: int, budgets: Sequence[int], sends: int = 1, batch: bool = False,
              page_tokens: int = 0) -> float:
        """Upper bound of one request's cost before it is made: one call per output budget in
        `budgets` (the first call and any retry evalkit makes), each sent up to `sends` times,
        every send billed chars/4 prompt tokens, `page_tokens` (its document's pages: `parts_tokens`)
        and its whole output budget (`batch`: the first call at the batch rate; a truncation retry is a
        live call)."""
        prompt = estimate_tokens(prompt_chars) + page_tokens
        return sends * sum(self.cost(model, prompt, budget, batch=batch and i == 0) for i, budget in enumerate(budgets))


# -- pages (input modes pdf and images) ---------------------------------------------------------------------
# Each provider's documented token rule for an image and for a PDF page, with where it is written; a `Provider`
# names the one its calls are billed by (`page_rule`). The pages cannot be re-read from here (no network): these
# are the rules as documented when evalkit's table was made.
PAGE_RULES: dict[str, str] = {
    "anthropic": ("Anthropic, 'Vision' (https://docs.anthropic.com/en/docs/build-with-claude/vision), as documented "
                  "2026-12-01: an image costs about width x height / 750 tokens, after it is scaled down to fit "
                  "1568 px on its long edge; 'PDF support' (https://docs.anthropic.com/en/docs/build-with-claude/"
                  "pdf-support), same date: each page costs its extracted text's tokens plus an image of the page"),
    "openai": ("OpenAI, 'Images and vision' (https://platform.openai.com/docs/guides/images-vision), as documented "
               "2026-12-01: detail high scales an image to fit 2048 x 2048, then its short side to 768 px, and costs "
               "85 + 170 tokens per 512-px tile; 'File inputs' (https://platform.openai.com/docs/guides/pdf-files), "
               "same date: a PDF puts each page's extracted text and an image of the page in the context"),
}
ANTHROPIC_LONG_EDGE = 1568  # px: Anthropic scales a larger image down to this long edge
OPENAI_FIT, OPENAI_SHORT, OPENAI_TILE = 2048, 768, 512  # px: detail high's resizing and tile


def image_tokens(width: float, height: float, rule: str | None) -> int:
    """Tokens of one image of `width` x `height` px by `rule` (a key of `PAGE_RULES`; None or unknown: the larger
    of them, an upper bound for a provider whose rule evalkit does not know)."""
    if rule not in PAGE_RULES:
        return max(image_tokens(width, height, r) for r in PAGE_RULES)
    if rule == "anthropic":
        scale = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height, 1))
        return math.ceil(width * scale * height * scale / 750)
    scale = min(1.0, OPENAI_FIT / max(width, height, 1))
    w, h = width * scale, height * scale
    scale = min(1.0, OPENAI_SHORT / max(min(w, h), 1))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / OPENAI_TILE) * math.ceil(h / OPENAI_TILE)


def parts_tokens(request: Any, rule: str | None) -> int:
    """Prompt tokens of a request's document parts by `rule`: each page image's tokens; each PDF page's text
    (characters / 4) plus the image of the page as the provider draws it (the page at the largest size its image
    rule keeps: 1568 px long edge for Anthropic, 2048 for OpenAI)."""
    total = 0
    for part in getattr(request, "parts", ()):
        if part.media_type.startswith("image/"):
            total += sum(image_tokens(w, h, rule) for w, h in part.sizes)
            continue
        total += estimate_tokens(part.text_chars) + sum(pdf_page_tokens(w, h, rule) for w, h in part.sizes)
    return total


def pdf_page_tokens(width_pt: float, height_pt: float, rule: str | None) -> int:
    """The image tokens of one PDF page of `width_pt` x `height_pt` points: the page drawn as large as `rule`'s
    image resizing keeps (an upper bound of what the provider bills for it)."""
    if rule not in PAGE_RULES:
        return max(pdf_page_tokens(width_pt, height_pt, r) for r in PAGE_RULES)
    edge = ANTHROPIC_LONG_EDGE if rule == "anthropic" else OPENAI_FIT
    scale = edge / max(width_pt, height_pt, 1)
    return image_tokens(width_pt * scale, height_pt * scale, rule)


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
