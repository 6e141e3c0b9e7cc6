"""Execution: running one tool call (or many) from lookup to result.

Lives here: :class:`Executor` and its handles (``_executor``), composed from small parts rather
than inherited: ``CallSteps`` runs the steps of one call, lookup → policy → validation →
approval → run (``_pipeline``); ``Workers`` owns the worker threads and the slots their calls
hold, beside the functions that plan a tool's limits and timeout and stop a call
(``_control``); the per-call plan and limits (``_plans``), the running-call state and its events
(``_running``), and turning return values and exceptions into
:class:`~kode_nb.types.ToolResult` (``_results``).

May import: :mod:`kode_nb.types`, :mod:`kode_nb.errors`, :mod:`kode_nb.tools`,
:mod:`kode_nb.policy`, :mod:`kode_nb.events`, ``kode_nb._threads`` and ``kode_nb._redact`` (in
a kernel, what tools print is redacted before it is sent). Never the agents or
notebook layers (they drive an :class:`Executor`, not the other way round).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use: ``%load_ext kode_nb`` imports ``_session_defaults`` from here, and the
# executor (with the tools and pydantic) waits for the first call.
__all__ = ["ApproverLike", "Executor", "PolicyLike", "RegistryLike", "RunningCall", "ToolCall"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'kode_nb.execution' has no attribute {name!r}")
    value = getattr(importlib.import_module("kode_nb.execution._executor"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from kode_nb.execution._executor import ApproverLike as ApproverLike
    from kode_nb.execution._executor import Executor as Executor
    from kode_nb.execution._executor import PolicyLike as PolicyLike
    from kode_nb.execution._executor import RegistryLike as RegistryLike
    from kode_nb.execution._executor import RunningCall as RunningCall
    from kode_nb.execution._executor import ToolCall as ToolCall
