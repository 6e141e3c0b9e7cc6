"""kode_nb's side of every benchmark, written against the public API only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _funcs import ARGS_BAD, ARGS_JSON, add, add_inline, add_sync, nap
from _timing import Contender

__all__ = ["KodeBench"]

AsyncOp = Callable[[], Awaitable[Any]]


class KodeBench:
    """One registry holding the benchmark tools, and executors over it."""

    def __init__(self) -> None:
        from kode_nb import Executor, ToolRegistry, define_tool

        self.registry = ToolRegistry()
        for fn in (add, add_sync, nap):
            define_tool(fn, registry=self.registry)
        define_tool(add_inline, inline=True, registry=self.registry)
        # Default settings: events on (a bus with no subscribers), default policy, concurrency 3.
        self.executor = Executor(self.registry)
        self._Executor = Executor

    # ----------------------------------------------------------------------- call paths

    async def call_contender(self, tool: str, label: str, note: str = "") -> Contender:
        ex = self.executor
        call = ex.call

        async def op() -> str:
            return (await call(tool, ARGS_JSON)).text

        try:
            got = await op()
            if got != "3":
                result = await call(tool, ARGS_JSON)
                return Contender(
                    label,
                    None,
                    note,
                    peer=False,
                    skipped=f"wrong result {got!r} (status={result.status})",
                )
            bad = await call(tool, ARGS_BAD)
            validates = bad.is_error and bad.text != "xy"
        except Exception as exc:
            return Contender(label, None, note, peer=False, skipped=f"{type(exc).__name__}: {exc}")
        return Contender(label, op, note, validates=validates, peer=False)

    def thread_pool(self) -> Any:
        """The worker pool the executor hops sync tools to (private attribute), if it has one."""
        workers = getattr(self.executor, "_workers", None)  # kode_nb/execution/_control.py
        pool = getattr(workers, "pool", None)
        return pool if callable(getattr(pool, "submit", None)) else None

    def thread_pool_note(self) -> str:
        """Which thread pool the executor hops sync tools to."""
        pool = self.thread_pool()
        if pool is not None:
            return f"Executor._workers.pool={type(pool).__name__}"
        return "the event loop's default executor"

    # ----------------------------------------------------------------------- concurrency

    async def many_naps(self, max_concurrency: int | None, n: int, ms: int) -> float:
        """Wall time of ``call_many`` over ``n`` calls of a tool that sleeps ``ms``."""
        ex = self._Executor(self.registry, max_concurrency=max_concurrency)
        calls = [("nap", f'{{"ms": {ms}}}')] * n
        try:
            t0 = time.perf_counter()
            results = await ex.call_many(calls)
            wall = time.perf_counter() - t0
        finally:
            close = getattr(ex, "close", None)
            if close is not None:
                maybe = close()
                if asyncio.iscoroutine(maybe):
                    await maybe
        bad = [r for r in results if r.status != "ok"]
        if bad:
            raise RuntimeError(f"{len(bad)} of {n} calls failed: {bad[0].status}: {bad[0].text}")
        return wall

    # ----------------------------------------------------------------------- definition

    @staticmethod
    def define_contenders() -> list[Contender]:
        from kode_nb import ToolRegistry, define_tool

        def unregistered(fn: Callable[..., Any]) -> Any:
            return define_tool(fn, registry=None).parameters

        reg = ToolRegistry()

        def registered(fn: Callable[..., Any]) -> Any:
            return define_tool(fn, registry=reg).parameters

        return [
            Contender(
                "kode_nb: define_tool(fn, registry=None).parameters",
                unregistered,
                "builds a pydantic validator",
                validates=True,
                peer=False,
            ),
            Contender(
                "kode_nb: define_tool(fn, registry=reg).parameters",
                registered,
                validates=True,
                peer=False,
                note="also registered",
            ),
        ]
