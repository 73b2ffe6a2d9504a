"""Price table for cost estimates: US$ per 1M tokens, per model.

Source: OpenAI API pricing page (https://platform.openai.com/docs/pricing), standard tier, no
batch discount, no cached-input discount; checked 2025-04 (GPT-4.1 launch prices) and unchanged in
third-party trackers through 2026-03. Azure OpenAI global-standard deployments list the same rates.
Self-hosted backends (vLLM, local llama.cpp) cost 0 here: their cost is GPU time, not tokens.
A paid model (provider openai or azure) that this table does not know is refused before a run starts
(`ark.config.checks`) unless the backbone names its price (``backbone.price.input_per_m``,
``backbone.price.output_per_m``). Costs are at the uncached input price: OpenAI bills the part of a
prompt it served from its prompt cache at a lower rate, so real bills can be lower than these figures.

    from ark.cost.prices import estimate_cost
    estimate_cost("gpt-4.1", prompt_tokens=12_000, completion_tokens=800)   # -> 0.0304

Every amount of US$ ARK prints is written by `money`: cents, and as many more digits as an amount under
a dollar needs to show two significant ones, so a cap of $0.0001 does not print as $0.00.

    money(1234.5), money(0.41), money(0.0001), money(0.000123)   # '1,234.50' '0.41' '0.0001' '0.00012'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PRICES_AS_OF = "2025-04-14"
PRICES_SOURCE = "https://platform.openai.com/docs/pricing (standard tier)"

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


PRICES: dict[str, Price] = {
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
}


def lookup_price(model: str) -> Price | None:
    """Price of ``model``; dated snapshots (``gpt-4o-2024-08-06``) match their family by the
    longest known prefix. ``None`` when unknown."""
    if model in PRICES:
        return PRICES[model]
    best = max((m for m in PRICES if model.startswith(m + "-")), key=len, default=None)
    return PRICES[best] if best else None


def resolve_price(provider: str, model: str, name: str | None = None,
                  override: tuple[float, float] | None = None) -> Price:
    """The price a backbone is billed at: an explicit ``override`` (input, output per 1M) wins;
    vLLM/local are free; else the table entry for ``model`` or, for Azure deployments named
    differently, for the backbone ``name`` (only for Azure: elsewhere ``model`` is what is billed).
    Raises ValueError naming the model and known ones."""
    if override is not None:
        return Price(float(override[0]), float(override[1]))
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
                  price: Price | None = None) -> float:
    """Estimated US$ for one call (0 for unknown models when no ``price`` is given)."""
    p = price or lookup_price(model)
    if p is None:
        return 0.0
    return (prompt_tokens * p.input_per_m + completion_tokens * p.output_per_m) / 1e6
