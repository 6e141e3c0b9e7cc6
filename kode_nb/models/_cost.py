"""Token prices, what a model call costs, and the roll-up of a trace's costs (internal).

:data:`prices` is a small, editable table: model name -> :class:`Price` (US dollars per million
input and output tokens). It starts with a few well-known models at the prices their providers
list; add or correct yours with :func:`set_price`. A model is looked up by its full name
(``"openai:gpt-4.1-mini"``), then by the id after the first ``:`` (``"gpt-4.1-mini"``).

A cost is ``None`` — unknown, never 0 — when the model has no price or the server did not report
a token count. Totals (:func:`rollup`) are unknown as soon as one model call in them is.

Token estimate of a request (:func:`estimate_tokens`): the length of its compact JSON text
divided by 4, rounded up. A deterministic rule of thumb with no tokenizer: English text and JSON
run at about four characters a token; it is a size hint, not a bill.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kode_nb.errors import ConfigurationError

__all__ = [
    "Price", "cost_of", "estimate_tokens", "format_cost", "price_for", "prices", "rollup",
    "set_price",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float
    """Per million prompt (input) tokens."""
    output: float
    """Per million completion (output) tokens."""


prices: dict[str, Price] = {
    # OpenAI API pricing page (standard tier, per 1M tokens)
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    # Anthropic pricing page (per 1M tokens)
    "claude-sonnet-4-20250514": Price(3.00, 15.00),
    "claude-opus-4-20250514": Price(15.00, 75.00),
    "claude-3-5-haiku-20241022": Price(0.80, 4.00),
}
"""Model name -> :class:`Price`; edit it freely or use :func:`set_price`."""


def _rate(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"set_price: {what} must be a number (USD per 1M tokens), "
                                 f"got {value!r}")  # fmt: skip
    if value < 0:
        raise ConfigurationError(f"set_price: {what} must be >= 0, got {value!r}")
    return float(value)


def set_price(model: str, *, input: float, output: float) -> Price:
    """Set (or replace) ``model``'s price in US dollars per million input/output tokens."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(f"set_price: model must be a non-empty string, got {model!r}")
    price = Price(_rate(input, "input"), _rate(output, "output"))
    prices[model.strip()] = price
    return price


def price_for(model: str | None) -> Price | None:
    """The price of ``model``: by its full name, else by the id after its first ``:``."""
    if not model:
        return None
    found = prices.get(model)
    if found is None and ":" in model:
        found = prices.get(model.split(":", 1)[1])
    return found


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def cost_of(model: str | None, usage: Mapping[str, Any] | None) -> float | None:
    """US dollars of one model call; ``None`` when the price or either token count is unknown."""
    price = price_for(model)
    usage = usage or {}
    tin, tout = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if price is None or tin is None or tout is None:
        return None
    return (tin * price.input + tout * price.output) / 1_000_000


def format_cost(cost: Any) -> str:
    """``$0.0021``; ``cost unknown`` for ``None`` (an unknown price is never shown as $0)."""
    if cost is None or isinstance(cost, bool) or not isinstance(cost, (int, float)):
        return "cost unknown"
    if cost >= 0.01 or cost == 0:
        return f"${cost:,.2f}"
    text = f"{cost:.6f}".rstrip("0")
    return f"${text}" if len(text.split(".")[1]) >= 2 else f"${cost:.2f}"


def estimate_tokens(value: Any) -> int:
    """About how many tokens ``value`` is: its compact JSON text's length / 4, rounded up."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    )
    return math.ceil(len(text) / 4)


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def rollup(model_calls: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals of model-call span attributes: ``{"usage": {input_tokens, output_tokens},
    "cost": float|None, "requests": int}``. Tokens add up where known (``None`` only when no
    call reported any); the cost is ``None`` when any call's cost is unknown."""
    tin: int | None = None
    tout: int | None = None
    cost: float | None = 0.0
    requests = 0
    for attrs in model_calls:
        requests += 1
        usage = attrs.get("usage") or {}
        tin = _add(tin, _count(usage.get("input_tokens")))
        tout = _add(tout, _count(usage.get("output_tokens")))
        one = attrs.get("cost")
        cost = None if cost is None or not isinstance(one, (int, float)) else cost + one
    return {"usage": {"input_tokens": tin, "output_tokens": tout}, "cost": cost,
            "requests": requests}  # fmt: skip
