"""Price table for cost estimates: US$ per 1M tokens, per model.

Source: OpenAI API pricing page (https://platform.openai.com/docs/pricing), standard tier, no
batch discount; checked 2025-04 (GPT-4.1 launch prices) and unchanged in third-party trackers through
2026-03. Azure OpenAI global-standard deployments list the same rates.

Cached input (``cached_input_per_m``): the rate of the prompt tokens a reply reports as served from the
provider's prompt cache (``usage.prompt_tokens_details.cached_tokens``), the same pricing page's "Cached
input" column, as dated copies of it give them: GPT-4.1 $0.50 and GPT-4o $1.25 (margindash.com, "GPT-4o vs GPT-4.1", data of 2026-03-05),
GPT-4.1 mini $0.10 (oreate.ai, "GPT-4.1 Mini Pricing Explained", 2026-04), GPT-4.1 nano $0.025
(llmpricing.site, from LiteLLM's cost map, synced 2026-05-27), GPT-4o mini $0.075 (oreate.ai, "How
GPT-4o mini pricing ..."; cloudprice.net, 2026-06-20): a quarter of the input rate for the GPT-4.1
family, half for the GPT-4o family. OpenAI caches a prompt's longest prefix, in steps of 128 tokens,
that an earlier request sent identically, for prompts of 1,024 tokens or more (OpenAI Cookbook, "Prompt
Caching 201", github.com/openai/openai-cookbook, 2026): `CACHE_MIN_TOKENS`, `CACHE_STEP_TOKENS`.
Batch prices (`Price.batch`): OpenAI's Batch API bills every rate of a model, input, cached input and
output, at half the standard price for work it may take up to 24 hours to return (the pricing page's
"Batch" column, https://platform.openai.com/docs/pricing, and the Batch API guide,
https://platform.openai.com/docs/guides/batch: "50% cost discount"; checked `BATCH_PRICES_AS_OF`);
Azure OpenAI's global batch deployments are billed at 50% of global standard the same way (Azure
OpenAI batch documentation, "50% less cost than global standard"). A backbone with ``batch: true``
(`ark.llm.batch`) is priced at `Price.batch` everywhere: its replies, its cap's reservations, its forecast.
Self-hosted backends (vLLM, local llama.cpp) cost 0 here: their cost is GPU time, not tokens.
A paid model (provider openai or azure) that this table does not know is refused before a run starts
(`ark.config.checks`) unless the backbone names its price (``backbone.price.input_per_m``,
``backbone.price.output_per_m``, and optionally ``backbone.price.cached_input_per_m``; without it,
cached input is billed at the input rate, the upper bound).

    from ark.cost.prices import estimate_cost
    estimate_cost("gpt-4.1", prompt_tokens=12_000, completion_tokens=800)   # -> 0.0304
    estimate_cost("gpt-4.1", 12_000, 800, cached_tokens=10_240)             # -> 0.01504
    PRICES["gpt-4.1"].batch()                                               # -> Price(1.0, 4.0, 0.25)

Every amount of US$ ARK prints is written by `money`: cents, and as many more digits as an amount under
a dollar needs to show two significant ones, so a cap of $0.0001 does not print as $0.00.

    money(1234.5), money(0.41), money(0.0001), money(0.000123)   # '1,234.50' '0.41' '0.0001' '0.00012'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PRICES_AS_OF = "2025-04-14"
PRICES_SOURCE = "https://platform.openai.com/docs/pricing (standard tier)"
CACHED_PRICES_AS_OF = "2026-05-27"   # the cached-input rates: dated copies of the pricing page, 2026-03 to 2026-06
BATCH_DISCOUNT = 0.5      # the batch APIs bill each rate at this share of the standard price
BATCH_PRICES_AS_OF = "2026-12-05"
CACHE_MIN_TOKENS = 1024   # OpenAI's prompt cache serves prompts of this many tokens or more
CACHE_STEP_TOKENS = 128   # ... and caches their prefixes in steps of this many tokens

FREE_PROVIDERS = ("vllm", "local", "rules")


def money(amount: float | None) -> str:
    """An amount of US$ without its sign: two decimals, more for an amount below 0.10 (two significant
    digits, trailing zeros past the cents dropped); "0.00" for zero."""
    if amount is None:
        return "-"
    x = float(amount)
    if x == 0 or abs(x) >= 0.1:
        return f"{x:,.2f}"
    digits = min(12, max(2, 1 - math.floor(math.log10(abs(x)))))
    text = f"{x:,.{digits}f}".rstrip("0")
    return text if len(text.split(".")[1]) >= 2 else f"{x:,.2f}"


@dataclass(frozen=True)
class Price:
    input_per_m: float  # US$ per 1M prompt tokens
    output_per_m: float  # US$ per 1M completion tokens
    cached_input_per_m: float | None = None  # US$ per 1M prompt tokens served from the prompt cache
                                             # (None: billed at input_per_m)

    @property
    def cached_rate(self) -> float:
        """The rate of a cached prompt token (the input rate when the table names none)."""
        return self.input_per_m if self.cached_input_per_m is None else self.cached_input_per_m

    def batch(self) -> "Price":
        """The price of the same model through the batch APIs: every rate at `BATCH_DISCOUNT` of it."""
        cached = None if self.cached_input_per_m is None else self.cached_input_per_m * BATCH_DISCOUNT
        return Price(self.input_per_m * BATCH_DISCOUNT, self.output_per_m * BATCH_DISCOUNT, cached)

    def cost(self, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0) -> float:
        """US$ of one call (or of totals): ``cached_tokens`` of the ``prompt_tokens`` at the cached rate."""
        cached = min(cached_tokens, prompt_tokens)
        return ((prompt_tokens - cached) * self.input_per_m + cached * self.cached_rate
                + completion_tokens * self.output_per_m) / 1e6


PRICES: dict[str, Price] = {
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
}


def lookup_price(model: str) -> Price | None:
    """Price of ``model``; dated snapshots (``gpt-4o-2024-08-06``) match their family by the
    longest known prefix. ``None`` when unknown."""
    if model in PRICES:
        return PRICES[model]
    best = max((m for m in PRICES if model.startswith(m + "-")), key=len, default=None)
    return PRICES[best] if best else None


def resolve_price(provider: str, model: str, name: str | None = None,
                  override: tuple[float, ...] | None = None) -> Price:
    """The price a backbone is billed at: an explicit ``override`` (input, output[, cached input] per 1M) wins;
    vLLM/local are free; else the table entry for ``model`` or, for Azure deployments named
    differently, for the backbone ``name`` (only for Azure: elsewhere ``model`` is what is billed).
    Raises ValueError naming the model and known ones."""
    if override is not None:
        return Price(*(float(x) for x in override))
    if provider in FREE_PROVIDERS:
        return Price(0.0, 0.0)
    for candidate in (model, name) if provider == "azure" else (model,):   # Azure: model is a deployment name
        if candidate and (p := lookup_price(candidate)) is not None:
            return p
    raise ValueError(
        f"no price for model {model!r} (backbone {name!r}); known models: {sorted(PRICES)}. "
        "Set its price: backbone.price.input_per_m=... backbone.price.output_per_m=... (US$ per 1M tokens)."
    )


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int,
                  price: Price | None = None, cached_tokens: int = 0) -> float:
    """Estimated US$ for one call, ``cached_tokens`` of its prompt at the cached-input rate (0 for unknown
    models when no ``price`` is given)."""
    p = price or lookup_price(model)
    if p is None:
        return 0.0
    return p.cost(prompt_tokens, completion_tokens, cached_tokens)
