"""How kode_nb writes durations, token counts, costs and shortened text, in every view.

Standard library only. The JupyterLab extension has the same functions
(``labextension/src/core/format.ts``); both sides are tested against one table of cases,
``tests/format_cases.json``, so the notebook outputs and the extension never disagree.

An unknown value is never shown as zero: an unknown cost is ``cost unknown``, an unknown token
count ``?``, an unknown duration the empty string (the caller says ``running`` or ``not run``).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = [
    "format_cost",
    "format_count",
    "format_duration",
    "format_run_tokens",
    "format_tokens",
    "shorten",
]


def _number(value: Any) -> float | None:
    """``value`` as a finite number, or ``None`` (booleans, NaN and infinities are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _round(x: float) -> int:
    """Round half up (as JavaScript's ``Math.round``), not half to even."""
    return math.floor(x + 0.5)


def format_duration(seconds: Any, empty: str = "") -> str:
    """``"12 µs"``, ``"4.20 ms"``, ``"25.3 ms"``, ``"250 ms"``, ``"12.35 s"``, ``"2 min 5 s"``;
    ``empty`` for ``None``, zero, a negative or a non-finite number (a call that never started,
    a span still running: the caller says which, e.g. ``"not run"``)."""
    s = _number(seconds)
    if s is None or s <= 0:
        return empty
    if s < 0.001:
        return f"{_round(s * 1e6)} µs"
    if s < 1:
        digits = 2 if s < 0.01 else 1 if s < 0.1 else 0
        return f"{s * 1e3:.{digits}f} ms"
    if s < 60:
        return f"{s:.2f} s"
    minutes, rest = divmod(_round(s), 60)
    return f"{minutes} min {rest} s"


def _count(value: Any) -> int | None:
    n = _number(value)
    return None if n is None else int(n)


def format_tokens(input_tokens: Any, output_tokens: Any) -> str:
    """``"1,234 in / 56 out tokens"``; a count the server did not send is ``?``;
    ``"tokens unknown"`` when neither is known."""
    tin, tout = _count(input_tokens), _count(output_tokens)
    if tin is None and tout is None:
        return "tokens unknown"
    shown = ["?" if n is None else f"{n:,}" for n in (tin, tout)]
    return f"{shown[0]} in / {shown[1]} out tokens"


def format_run_tokens(
    input_tokens: Any, output_tokens: Any, all_input: Any = None, all_output: Any = None
) -> str:
    """A run's own tokens, labelled, and its subagents' included when they add any:
    ``"this run: 12 in / 7 out tokens"``, ``"this run: 12 in / 7 out tokens; with subagents:
    30 in / 9 out tokens"``. ``all_input``/``all_output`` are the whole tree's (the run span's
    ``total_usage``); both unknown, or the same as the run's own: no second part."""
    own = format_tokens(input_tokens, output_tokens)
    every = (_count(all_input), _count(all_output))
    if every == (None, None) or every == (_count(input_tokens), _count(output_tokens)):
        return f"this run: {own}"
    return f"this run: {own}; with subagents: {format_tokens(*every)}"


def format_count(value: Any) -> str:
    """A count in at most five characters: ``"9999"``, ``"12.3k"``, ``"340k"``, ``"1.2M"``;
    ``"?"`` when unknown."""
    n = _count(value)
    if n is None:
        return "?"
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.{1 if n < 100_000 else 0}f}k"
    return f"{n / 1_000_000:.1f}M"


def format_cost(cost: Any) -> str:
    """``"$0.0021"``, ``"$1,234.50"``; ``"cost unknown"`` for ``None`` or anything not a finite
    number (an unknown price is never shown as $0). Below a cent, two significant digits'
    worth of decimals are kept (at most six)."""
    c = _number(cost)
    if c is None:
        return "cost unknown"
    if c >= 0.01 or c == 0:
        return f"${c:,.2f}"
    text = f"{c:.6f}".rstrip("0")
    return f"${text}" if len(text.split(".")[1]) >= 2 else f"${c:.2f}"


def shorten(value: Any, limit: int) -> str:
    """``value`` on one line (whitespace runs become one space; ``None`` is ``""``, anything else
    but a string its JSON), cut to at most ``limit`` characters, the last one ``…`` when cut."""
    if limit < 1:
        raise ValueError(f"shorten: limit must be at least 1, got {limit}")
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1].rstrip() + "…"
