"""Token prices, what a model call costs, and the roll-up of a trace's costs (internal).

Prices (US dollars per million input and output tokens, :class:`Price`) come from two places:

* :data:`prices`, your table, filled with :func:`set_price` (a model looked up by its full name,
  ``"openai:gpt-4.1-mini"``, then by the id after the first ``:``, ``"gpt-4.1-mini"``). It wins.
* the catalog: `genai-prices <https://pypi.org/project/genai-prices/>`_, the price list the
  pydantic project maintains, as installed (never fetched at run time; imported the first time
  a model is not in your table). A model call that went over HTTP is looked up by its wire
  model id and the URL it went to, so a local server (whose URL no provider has) stays
  unpriced; :func:`price_for` looks a name up by the provider before its ``:``. Tiered prices
  give their base tier.

A cost is ``None`` — unknown, never 0 — when the model has no price or the server did not report
a token count. Totals (:func:`rollup`) are unknown as soon as one model call in them is.

Token estimate of a request (:func:`estimate_tokens`): the length of its compact JSON text
divided by 4, rounded up. A deterministic rule of thumb with no tokenizer: English text and JSON
run at about four characters a token; it is a size hint, not a bill.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kode_nb.errors import ConfigurationError

__all__ = [
    "Price",
    "catalog_price",
    "cost_of",
    "estimate_tokens",
    "own_price",
    "price_for",
    "prices",
    "rollup",
    "set_price",
]


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float
    """Per million prompt (input) tokens."""
    output: float
    """Per million completion (output) tokens."""


prices: dict[str, Price] = {}
"""Your prices: model name -> :class:`Price` (:func:`set_price`); they win over the catalog."""


def _rate(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(
            f"set_price: {what} must be a number (USD per 1M tokens), got {value!r}"
        )
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


def own_price(model: str | None) -> Price | None:
    """Your price of ``model`` (:data:`prices`): by its full name, else by the id after its
    first ``:``."""
    if not model:
        return None
    found = prices.get(model)
    if found is None and ":" in model:
        found = prices.get(model.split(":", 1)[1])
    return found


def price_for(model: str | None) -> Price | None:
    """The price of ``model``: yours (:func:`set_price`), else the catalog's for the provider
    before its ``:`` (``"openai:gpt-4.1-mini"``); a name without a provider has only yours."""
    found = own_price(model)
    if found is None and model and ":" in model:
        provider, model_id = model.split(":", 1)
        found = catalog_price(model_id, provider=provider)
    return found


@functools.lru_cache(maxsize=512)
def catalog_price(
    model_id: str, *, provider: str | None = None, api_url: str | None = None
) -> Price | None:
    """The genai-prices catalog's price of ``model_id`` at ``provider`` (its id, ``"openai"``)
    or at the provider whose API ``api_url`` is; ``None`` when it has none (base tier of tiered
    prices). Cached per model."""
    if not model_id or (provider is None and api_url is None):
        return None
    from genai_prices import Usage, calc_price  # ~0.2 s: only once a model is not in yours

    usage = Usage(input_tokens=0, output_tokens=0)
    try:
        if provider is not None:
            found = calc_price(usage, model_id, provider_id=provider)
        else:
            found = calc_price(usage, model_id, provider_api_url=api_url)
    except LookupError:  # no such provider, or no such model at it
        return None
    rates = found.model_price
    tin, tout = _base_rate(rates.input_mtok), _base_rate(rates.output_mtok)
    return None if tin is None or tout is None else Price(tin, tout)


def _base_rate(rate: Any) -> float | None:
    """A catalog rate (a ``Decimal``, or tiered prices with a ``base``) as a float."""
    rate = getattr(rate, "base", rate)
    return None if rate is None else float(rate)


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def cost_of(price: Price | None, usage: Mapping[str, Any] | None) -> float | None:
    """US dollars of one model call; ``None`` when the price or either token count is unknown."""
    usage = usage or {}
    tin, tout = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if price is None or tin is None or tout is None:
        return None
    return (tin * price.input + tout * price.output) / 1_000_000


def estimate_tokens(value: Any) -> int:
    """About how many tokens ``value`` is: its compact JSON text's length / 4, rounded up."""
    return math.ceil((len(value) if isinstance(value, str) else json_chars(value)) / 4)


def json_chars(value: Any) -> int:
    """The length of ``value``'s compact JSON text (other objects written as their ``str``)."""
    return len(_compact_json(value))


_compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
"""``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``, without
building an encoder per call."""


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
    return {
        "usage": {"input_tokens": tin, "output_tokens": tout},
        "cost": cost,
        "requests": requests,
    }
