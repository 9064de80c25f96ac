"""Known models: their context window and price; what a turn and a session cost.

One table (`MODELS`) of the models Synapse knows: the context window it compacts
against and the list price in USD per million tokens (input, output, cache write
— the 5-minute cache — and cache read). A model is known by its name, or its name
with a date or `-latest` (`claude-sonnet-4-5-20250929`); nothing else is guessed,
so a model not in the table has the default window and **no** price: faces show its
tokens and "cost unknown", never a wrong number. The setting `pricing` (read from
`$SYNAPSE_HOME/settings.json` only) adds models or replaces a price.

Usage is kept per model (`Spend`: model -> Usage) because one turn may use two
(a `task:* --model` sub-agent): each part is priced with its own model's price.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from synapse_lsp.config import ModelPrice, PriceOverrides
from synapse_lsp.events import Usage

DEFAULT_CONTEXT_WINDOW = 200_000
CURRENCY = "USD"
PRICES_AS_OF = "2025-11"  # the list prices below, from Anthropic's pricing page


@dataclass(frozen=True)
class ModelInfo:
    context_window: int
    price: ModelPrice | None


def _p(inp: float, out: float, write: float, read: float) -> ModelPrice:
    return ModelPrice(input=inp, output=out, cache_write=write, cache_read=read)


_OPUS_4 = _p(15.0, 75.0, 18.75, 1.50)
_OPUS_45 = _p(5.0, 25.0, 6.25, 0.50)
_SONNET = _p(3.0, 15.0, 3.75, 0.30)
_HAIKU_45 = _p(1.0, 5.0, 1.25, 0.10)
_HAIKU_35 = _p(0.80, 4.0, 1.0, 0.08)
_HAIKU_3 = _p(0.25, 1.25, 0.30, 0.03)

MODELS: dict[str, ModelInfo] = {
    # The default model (config.Settings.model): priced at the Sonnet tier.
    "claude-sonnet-5-5": ModelInfo(200_000, _SONNET),
    "claude-sonnet-4-5": ModelInfo(200_000, _SONNET),
    "claude-sonnet-4": ModelInfo(200_000, _SONNET),
    "claude-3-7-sonnet": ModelInfo(200_000, _SONNET),
    "claude-3-5-sonnet": ModelInfo(200_000, _SONNET),
    "claude-opus-4-5": ModelInfo(200_000, _OPUS_45),
    "claude-opus-4-1": ModelInfo(200_000, _OPUS_4),
    "claude-opus-4": ModelInfo(200_000, _OPUS_4),
    "claude-3-opus": ModelInfo(200_000, _OPUS_4),
    "claude-haiku-4-5": ModelInfo(200_000, _HAIKU_45),
    "claude-3-5-haiku": ModelInfo(200_000, _HAIKU_35),
    "claude-3-haiku": ModelInfo(200_000, _HAIKU_3),
    # The offline demo model (`synapse chat --demo`) costs nothing.
    "synapse-demo": ModelInfo(200_000, _p(0.0, 0.0, 0.0, 0.0)),
}

_SUFFIX = re.compile(r"-(\d{8}|latest)$")

Spend = dict[str, Usage]
"""Usage per model name ("" for tokens stored before usage was kept per model)."""
UNRECORDED = "turns stored without their model"


def known(model: str) -> ModelInfo | None:
    """The table's entry for `model` (its name, or its name with a date or `-latest`)."""
    info = MODELS.get(model)
    if info is None:
        info = MODELS.get(_SUFFIX.sub("", model))
    return info


def context_window(model: str) -> int:
    info = known(model)
    return info.context_window if info is not None else DEFAULT_CONTEXT_WINDOW


def price_of(model: str, overrides: PriceOverrides | None = None) -> ModelPrice | None:
    """The price of `model`: the `pricing` setting's, else the table's, else None."""
    if overrides is not None:
        price = overrides.get(model) or overrides.get(_SUFFIX.sub("", model))
        if price is not None:
            return price
    info = known(model)
    return info.price if info is not None else None


def usage_cost(usage: Usage, price: ModelPrice) -> float:
    """USD for `usage` at `price` (per million tokens)."""
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    ) / 1_000_000


@dataclass(frozen=True)
class Cost:
    """What a spend cost: `amount` in USD, or None when some model has no price
    (`unpriced` names them; their tokens still count in `usage`)."""

    usage: Usage
    amount: float | None
    unpriced: tuple[str, ...] = ()
    currency: str = CURRENCY

    def text(self) -> str:
        return money(self.amount) if self.amount is not None else "cost unknown"


def spend_cost(spend: Mapping[str, Usage], overrides: PriceOverrides | None = None) -> Cost:
    total = Usage()
    amount = 0.0
    unpriced: list[str] = []
    for model, usage in spend.items():
        total = total + usage
        if usage == Usage():
            continue
        price = price_of(model, overrides) if model else None
        if price is None:
            unpriced.append(model or UNRECORDED)
        else:
            amount += usage_cost(usage, price)
    return Cost(total, None if unpriced else amount, tuple(unpriced))


def add_spend(spend: Spend, model: str, usage: Usage) -> None:
    """Add `usage` under `model` (in place)."""
    spend[model] = spend.get(model, Usage()) + usage


def merged(*spends: Mapping[str, Usage]) -> Spend:
    out: Spend = {}
    for spend in spends:
        for model, usage in spend.items():
            add_spend(out, model, usage)
    return out


def money(amount: float) -> str:
    """`$0.0123`: four decimals below a dollar (a turn often costs cents), else two."""
    return f"${amount:.4f}" if amount < 1 else f"${amount:,.2f}"


def tokens_line(usage: Usage) -> str:
    parts = [f"{usage.input_tokens:,} in", f"{usage.output_tokens:,} out"]
    if usage.cache_creation_input_tokens:
        parts.append(f"{usage.cache_creation_input_tokens:,} cache write")
    if usage.cache_read_input_tokens:
        parts.append(f"{usage.cache_read_input_tokens:,} cache read")
    return ", ".join(parts)


def cost_line(label: str, cost: Cost) -> str:
    """`Session: 12,345 in, 678 out — $0.0472` (or "cost unknown (no price for X)")."""
    what = cost.text()
    if cost.unpriced:
        hint = "; set `pricing` in settings.json" if set(cost.unpriced) - {UNRECORDED} else ""
        what += f" (no price for {', '.join(cost.unpriced)}{hint})"
    return f"{label}: {tokens_line(cost.usage)} \u2014 {what}"
