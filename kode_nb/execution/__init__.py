"""Execution: running one tool call (or many) from lookup to result.

Lives here: :class:`Executor` and its handles (``_executor``); the steps of one call, composed
from small parts: the per-call plan and limits (``_plans``), the pipeline lookup → policy →
validation → approval → run (``_pipeline``), concurrency, timeouts and the calling convention of
sync/async/generator tools (``_control``), the running-call state and its events (``_running``),
and turning return values and exceptions into :class:`~kode_nb.types.ToolResult` (``_results``,
``_builders``).

May import: :mod:`kode_nb.types`, :mod:`kode_nb.errors`, :mod:`kode_nb.tools`,
:mod:`kode_nb.policy`, :mod:`kode_nb.events` and ``kode_nb._threads``. Never the agents or
notebook layers (they drive an :class:`Executor`, not the other way round).
"""

from kode_nb.execution._executor import (
    ApproverLike,
    Executor,
    PolicyLike,
    RegistryLike,
    RunningCall,
    ToolCall,
)

__all__ = ["ApproverLike", "Executor", "PolicyLike", "RegistryLike", "RunningCall", "ToolCall"]
