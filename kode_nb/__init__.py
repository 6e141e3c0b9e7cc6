"""kode_nb: build, inspect and teach LLM agent tools and subagents in Jupyter.

The public names are listed once, in the ``if TYPE_CHECKING:`` imports below: type checkers
and editors read them there, and at run time :func:`__getattr__` reads the same block (PEP 562,
like ``lazy_loader.attach_stub``) and imports a name's package on its first use. So ``import
kode_nb`` and ``%load_ext kode_nb`` stay fast: pydantic and the rest load when first needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kode_nb._version import __version__

if TYPE_CHECKING:
    from kode_nb._redact import register_secret as register_secret
    from kode_nb.agents import Agent as Agent
    from kode_nb.agents import AgentDefinition as AgentDefinition
    from kode_nb.agents import AgentRunResult as AgentRunResult
    from kode_nb.agents import register_subagent as register_subagent
    from kode_nb.debug import diverge as diverge
    from kode_nb.debug import expand_trace as expand_trace
    from kode_nb.debug import fork as fork
    from kode_nb.debug import replay as replay
    from kode_nb.errors import ConfigurationError as ConfigurationError
    from kode_nb.errors import DuplicateToolError as DuplicateToolError
    from kode_nb.errors import KodeError as KodeError
    from kode_nb.errors import KodeUsageError as KodeUsageError
    from kode_nb.errors import ToolCancelledError as ToolCancelledError
    from kode_nb.errors import ToolDefinitionError as ToolDefinitionError
    from kode_nb.errors import ToolError as ToolError
    from kode_nb.errors import ToolNotFoundError as ToolNotFoundError
    from kode_nb.errors import ToolPermissionError as ToolPermissionError
    from kode_nb.errors import ToolRetry as ToolRetry
    from kode_nb.errors import ToolTimeoutError as ToolTimeoutError
    from kode_nb.errors import ToolValidationError as ToolValidationError
    from kode_nb.evals import evaluate as evaluate
    from kode_nb.events import EventBus as EventBus
    from kode_nb.events import JsonlAuditLog as JsonlAuditLog
    from kode_nb.execution import Executor as Executor
    from kode_nb.execution import ToolCall as ToolCall
    from kode_nb.interop import capture as capture
    from kode_nb.magics import settle as settle
    from kode_nb.many import Inbox as Inbox
    from kode_nb.many import ManyRun as ManyRun
    from kode_nb.many import compare as compare
    from kode_nb.many import run_many as run_many
    from kode_nb.many import variant as variant
    from kode_nb.models import prices as prices
    from kode_nb.models import set_price as set_price
    from kode_nb.policy import ApprovalDecision as ApprovalDecision
    from kode_nb.policy import ApprovalRequest as ApprovalRequest
    from kode_nb.policy import Approver as Approver
    from kode_nb.policy import AutoApprove as AutoApprove
    from kode_nb.policy import AutoDeny as AutoDeny
    from kode_nb.policy import CallbackApprover as CallbackApprover
    from kode_nb.policy import Policy as Policy
    from kode_nb.policy import approve as approve
    from kode_nb.policy import deny as deny
    from kode_nb.tools import Tool as Tool
    from kode_nb.tools import ToolRegistry as ToolRegistry
    from kode_nb.tools import default_registry as default_registry
    from kode_nb.tools import define_tool as define_tool
    from kode_nb.tools import tool as tool
    from kode_nb.tools import use_registry as use_registry
    from kode_nb.types import NOT_GIVEN as NOT_GIVEN
    from kode_nb.types import CancelToken as CancelToken
    from kode_nb.types import ImageBlock as ImageBlock
    from kode_nb.types import JsonBlock as JsonBlock
    from kode_nb.types import TextBlock as TextBlock
    from kode_nb.types import ToolCategory as ToolCategory
    from kode_nb.types import ToolContext as ToolContext
    from kode_nb.types import ToolKind as ToolKind
    from kode_nb.types import ToolResult as ToolResult

_exported: dict[str, str] | None = None


def _exports() -> dict[str, str]:
    """Public name -> the module it comes from, read once from the ``TYPE_CHECKING`` block."""
    global _exported
    if _exported is None:
        import ast
        from pathlib import Path

        tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
        block = next(
            node
            for node in tree.body
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
        )
        _exported = {
            alias.asname or alias.name: str(node.module)
            for node in block.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
    return _exported


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext kode_nb``: register the magics and display formatters, nothing else."""
    from kode_nb._extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext kode_nb``: remove exactly what loading registered."""
    from kode_nb._extension import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt kode_nb extension (``kode_nb/labextension``)."""
    return [{"src": "labextension", "dest": "kode-nb"}]


def __getattr__(name: str) -> Any:
    if name == "__all__":  # `from kode_nb import *`, and tools that list the API
        globals()["__all__"] = names = sorted(_exports())
        return names
    module = _exports().get(name)
    if module is None:
        raise AttributeError(f"module 'kode_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_exports()})
