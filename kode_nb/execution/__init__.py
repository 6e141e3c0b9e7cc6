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

from kode_nb.execution import _executor
from kode_nb.execution._executor import *  # noqa: F403  (its __all__ is this package's API)

__all__ = [*_executor.__all__]
