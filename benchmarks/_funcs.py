"""The functions every library is benchmarked with, and a factory of fresh copies.

Each library gets the *same* function. For the definition benchmark every iteration gets a new
function object compiled from its own source text (own name, own code object, own
``linecache`` entry so ``inspect.getsource`` works, as smolagents requires), so no library can
serve a definition from a cache keyed by the function or its code.
"""

from __future__ import annotations

import asyncio
import itertools
import linecache
from collections.abc import Callable
from typing import Any

__all__ = [
    "ARGS_BAD",
    "ARGS_JSON",
    "add",
    "add_inline",
    "add_sync",
    "fresh_forecast_functions",
    "nap",
]

ARGS_JSON = '{"a": 1, "b": 2}'
"""The arguments of every call benchmark, as the model sends them."""
ARGS_BAD = '{"a": "x", "b": "y"}'
"""Ill-typed arguments that still *run* without validation (``"x" + "y"``): a library that
returns ``"xy"`` did not validate."""


async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def add_sync(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def add_inline(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


async def nap(ms: int) -> str:
    """Sleep for a while.

    Args:
        ms: Milliseconds to sleep.
    """
    await asyncio.sleep(ms / 1000)
    return "ok"


_FORECAST_SRC = '''
def {name}(city: str, days: int = 3, units: str = "metric", include_hourly: bool = False) -> str:
    """Get the weather forecast for a city.

    Args:
        city: Name of the city, e.g. "Paris".
        days: How many days to forecast (1-14).
        units: "metric" or "imperial".
        include_hourly: Include hourly detail.
    """
    return f"{{city}}: sunny for {{days}} days ({{units}}, hourly={{include_hourly}})"
'''

_counter = itertools.count()


def _fresh_forecast() -> Callable[..., Any]:
    i = next(_counter)
    name = f"forecast_{i}"
    filename = f"<kode_nb-bench-{i}>"
    src = _FORECAST_SRC.format(name=name)
    # mtime None: linecache.checkcache keeps the entry, so inspect.getsource finds it.
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": "bench_tools"}
    exec(compile(src, filename, "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    return fn


def fresh_forecast_functions(n: int) -> list[Callable[..., Any]]:
    """``n`` new, independent 4-parameter typed, documented functions."""
    return [_fresh_forecast() for _ in range(n)]
