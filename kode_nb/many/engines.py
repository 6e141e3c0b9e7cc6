"""Where rows run: one small protocol, three engines.

An :class:`Engine` is started once per batch with the target and the inbox, runs rows one
at a time through :meth:`Engine.run` (``run_many`` bounds how many are in flight), and is
closed at the end. :meth:`Engine.run` always returns a
:class:`~kode_nb.many.rows.RowResult`: a lost worker, a dead process or an exception on the
worker becomes the row's ``status``/``error``, never an exception in the notebook. Cancelling
the awaiting task cancels the row (on a cluster: its task there too).

* :class:`LocalEngine` — rows as asyncio tasks on the running loop (sync tools in the
  executor's threads).
* ``DaskEngine`` (:mod:`kode_nb.many.dask_engine`) — rows as tasks on a ``distributed``
  cluster; approvals travel through a ``distributed.Queue``/``Variable`` pair.
* ``RayEngine`` (:mod:`kode_nb.many.ray_engine`) — rows as Ray tasks with ``max_retries``;
  approvals through a Ray actor.

:func:`make_engine` turns ``engine="local" | "dask" | "ray"`` (or a ``distributed.Client``,
or an address for a Dask scheduler) into an engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from kode_nb.errors import ConfigurationError
from kode_nb.many.inbox import Inbox
from kode_nb.many.rows import RowResult
from kode_nb.many.runner import Prices, make_executor, run_row
from kode_nb.many.target import Target

__all__ = ["Engine", "LocalEngine", "make_engine"]


@runtime_checkable
class Engine(Protocol):
    """Runs rows of one target; see the module docstring."""

    name: str

    async def start(self, target: Target, inbox: Inbox, prices: Prices | None) -> None: ...

    async def run(self, index: int, row: Mapping[str, Any]) -> RowResult: ...

    async def close(self) -> None: ...


class LocalEngine:
    """Rows on this process's event loop."""

    name = "local"
    redacts = True
    """Its results are made in this process by :func:`~kode_nb.many.runner.run_row`, which
    redacts them with this process's secrets (engines without it: ``run_many`` redacts what
    arrives)."""

    def __init__(self, *, tool_concurrency: int | None = None) -> None:
        self.tool_concurrency = tool_concurrency
        """Tool calls running at once over all rows (``None``: bounded by the rows only)."""
        self._target: Target | None = None
        self._inbox: Inbox | None = None
        self._prices: Prices | None = None
        self._executor: Any = None

    async def start(self, target: Target, inbox: Inbox, prices: Prices | None) -> None:
        self._target, self._inbox, self._prices = target, inbox, prices
        # one executor for every row: tool calls run in parallel as far as the rows do
        self._executor = make_executor(target, inbox, self.tool_concurrency)

    async def run(self, index: int, row: Mapping[str, Any]) -> RowResult:
        if self._target is None:
            raise RuntimeError("LocalEngine.run before start")
        return await run_row(
            self._target,
            index,
            row,
            approver=self._inbox,
            prices=self._prices,
            max_concurrency=self.tool_concurrency,
            executor=self._executor,
        )

    async def close(self) -> None:
        self._target = None
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def __repr__(self) -> str:
        return "LocalEngine()"


def make_engine(engine: Any, *, retries: int = 1) -> Engine:
    """An engine from ``"local"``, ``"dask"``, ``"ray"``, a ``distributed.Client``, a Dask
    scheduler address (``"tcp://..."``) or an :class:`Engine`."""
    if engine is None or engine == "local":
        return LocalEngine()
    if isinstance(engine, str) and engine in ("dask", "ray"):
        if engine == "dask":
            from kode_nb.many.dask_engine import DaskEngine

            return DaskEngine(None, retries=retries)
        from kode_nb.many.ray_engine import RayEngine

        return RayEngine(retries=retries)
    if isinstance(engine, str) and "://" in engine:
        from kode_nb.many.dask_engine import DaskEngine

        return DaskEngine(engine, retries=retries)
    if type(engine).__name__ == "Client" and type(engine).__module__.startswith("distributed"):
        from kode_nb.many.dask_engine import DaskEngine

        return DaskEngine(engine, retries=retries)
    if isinstance(engine, Engine):
        return engine
    raise ConfigurationError(
        "engine must be 'local', 'dask', 'ray', a distributed.Client, a Dask scheduler "
        f"address or an Engine, got {engine!r}"
    )
