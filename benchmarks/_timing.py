"""Timing helpers shared by the benchmark sections.

Method (the same for kode_nb and every peer):

* micro-benchmarks run a tight loop of ``n`` awaited calls (or plain calls) timed with
  :func:`time.perf_counter`; ``n`` is calibrated so that one repeat lasts ``target`` seconds;
* every contender is warmed up first, then the repeats are taken round-robin (kode_nb, peer 1,
  peer 2, ..., kode_nb, peer 1, ...) so that drift in machine load hits all of them alike;
* the reported figure is the **minimum** over repeats (the least-disturbed run); the median is
  printed next to it for transparency;
* the garbage collector stays enabled (allocation cost is part of the real cost); ``gc.collect()``
  runs before each repeat.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Contender", "Timing", "compare_async", "compare_sync", "fmt_time", "median"]


@dataclass
class Timing:
    """Per-operation times (seconds) of one contender, one entry per repeat."""

    samples: list[float] = field(default_factory=list)
    """Seconds per operation, one value per repeat."""
    n: int = 0
    """Operations per repeat."""

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


@dataclass
class Contender:
    """One thing being measured: a name, the operation, and notes for the table."""

    name: str
    op: Callable[[], Any] | None
    """A zero-argument callable (sync sections) or coroutine function (async sections);
    ``None`` when the contender was skipped."""
    note: str = ""
    validates: bool | None = None
    """Whether it rejects ill-typed arguments (checked at run time, not assumed)."""
    skipped: str = ""
    """Why the contender was skipped (import failure, API change...)."""
    timing: Timing | None = None
    peer: bool = True
    """False for kode_nb itself and for reference floors."""
    reference: bool = False
    """A floor or baseline, not a competitor."""


def fmt_time(seconds: float | None) -> str:
    """Human units: ns / µs / ms / s with 3 significant digits."""
    if seconds is None:
        return "-"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


# --------------------------------------------------------------------------- async


async def _run_async(op: Callable[[], Awaitable[Any]], n: int) -> float:
    pc = time.perf_counter
    t0 = pc()
    for _ in range(n):
        await op()
    return pc() - t0


async def _calibrate_async(op: Callable[[], Awaitable[Any]], target: float) -> int:
    n = 1
    while True:
        elapsed = await _run_async(op, n)
        if elapsed >= target / 4 or n >= 1 << 22:
            return max(1, int(n * target / max(elapsed, 1e-9)))
        n *= 4


async def compare_async(
    contenders: Sequence[Contender], *, repeats: int, target: float, warmup: float = 0.02
) -> None:
    """Time each contender's coroutine function in this event loop, round-robin."""
    live = [c for c in contenders if c.op is not None and not c.skipped]
    for c in live:
        try:
            await _run_async(c.op, max(1, await _calibrate_async(c.op, warmup)))  # type: ignore[arg-type]
            c.timing = Timing(n=await _calibrate_async(c.op, target))  # type: ignore[arg-type]
        except Exception as exc:  # a peer broke at run time: skip it, keep the run going
            c.skipped = f"failed while running: {type(exc).__name__}: {exc}"[:200]
    live = [c for c in live if not c.skipped]
    for _ in range(repeats):
        for c in live:
            assert c.timing is not None
            gc.collect()
            elapsed = await _run_async(c.op, c.timing.n)  # type: ignore[arg-type]
            c.timing.samples.append(elapsed / c.timing.n)
        await asyncio.sleep(0)


# --------------------------------------------------------------------------- sync


def _run_sync(op: Callable[[], Any], n: int) -> float:
    pc = time.perf_counter
    t0 = pc()
    for _ in range(n):
        op()
    return pc() - t0


def compare_sync(
    contenders: Sequence[Contender],
    *,
    repeats: int,
    n: int,
    prepare: Callable[[int], Any] | None = None,
) -> None:
    """Time each contender's ``op(arg)`` over ``n`` prepared arguments, round-robin.

    ``prepare(n)`` returns a fresh list of ``n`` arguments for every contender and every
    repeat (built outside the timed region) — used to hand each definition a new function.
    """
    live = [c for c in contenders if c.op is not None and not c.skipped]
    for c in live:
        c.timing = Timing(n=n)
        try:  # warm up: imports, lazy module state
            for arg in prepare(3) if prepare else [None] * 3:
                c.op(arg)  # type: ignore[misc]
        except Exception as exc:
            c.skipped = f"failed while running: {type(exc).__name__}: {exc}"[:200]
    live = [c for c in live if not c.skipped]
    pc = time.perf_counter
    for _ in range(repeats):
        for c in live:
            assert c.timing is not None
            assert c.op is not None
            args = prepare(n) if prepare else [None] * n
            op = c.op
            gc.collect()
            t0 = pc()
            for arg in args:
                op(arg)
            c.timing.samples.append((pc() - t0) / n)
            del args
