"""kode_nb: build, inspect and teach LLM agent tools and subagents in Jupyter.

Public names are imported lazily (PEP 562), so ``import kode_nb`` and ``%load_ext kode_nb`` stay
fast: pydantic and the rest load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> public module (or subpackage) it comes from
_EXPORTS: dict[str, str] = {
    "Agent": "kode_nb.agents.loop",
    "AgentDefinition": "kode_nb.agents.subagent",
    "AgentRunResult": "kode_nb.agents.result",
    "ApprovalDecision": "kode_nb.policy",
    "ApprovalRequest": "kode_nb.policy",
    "Approver": "kode_nb.policy",
    "AutoApprove": "kode_nb.policy",
    "AutoDeny": "kode_nb.policy",
    "CallbackApprover": "kode_nb.policy",
    "CancelToken": "kode_nb.types",
    "ConfigurationError": "kode_nb.errors",
    "DuplicateToolError": "kode_nb.errors",
    "EventBus": "kode_nb.events",
    "Executor": "kode_nb.execution",
    "ImageBlock": "kode_nb.types",
    "Inbox": "kode_nb.many.inbox",
    "JsonBlock": "kode_nb.types",
    "JsonlAuditLog": "kode_nb.events",
    "KodeError": "kode_nb.errors",
    "KodeUsageError": "kode_nb.errors",
    "ManyRun": "kode_nb.many.core",
    "NOT_GIVEN": "kode_nb.types",
    "Policy": "kode_nb.policy",
    "TextBlock": "kode_nb.types",
    "Tool": "kode_nb.tools",
    "ToolCall": "kode_nb.execution",
    "ToolCancelledError": "kode_nb.errors",
    "ToolCategory": "kode_nb.types",
    "ToolContext": "kode_nb.types",
    "ToolDefinitionError": "kode_nb.errors",
    "ToolError": "kode_nb.errors",
    "ToolKind": "kode_nb.types",
    "ToolNotFoundError": "kode_nb.errors",
    "ToolPermissionError": "kode_nb.errors",
    "ToolRegistry": "kode_nb.tools",
    "ToolResult": "kode_nb.types",
    "ToolRetry": "kode_nb.errors",
    "ToolTimeoutError": "kode_nb.errors",
    "ToolValidationError": "kode_nb.errors",
    "approve": "kode_nb.policy",
    "compare": "kode_nb.many.compare",
    "default_registry": "kode_nb.tools",
    "define_tool": "kode_nb.tools",
    "deny": "kode_nb.policy",
    "diverge": "kode_nb.agents",
    "expand_trace": "kode_nb.agents",
    "fork": "kode_nb.agents",
    "prices": "kode_nb.agents",
    "register_secret": "kode_nb._redact",
    "register_subagent": "kode_nb.agents.subagent",
    "replay": "kode_nb.agents",
    "run_many": "kode_nb.many.core",
    "set_price": "kode_nb.agents",
    "settle": "kode_nb.magics",
    "tool": "kode_nb.tools",
    "use_registry": "kode_nb.tools",
    "variant": "kode_nb.many.compare",
}

__all__ = [
    "Agent",
    "AgentDefinition",
    "AgentRunResult",
    "ApprovalDecision",
    "ApprovalRequest",
    "Approver",
    "AutoApprove",
    "AutoDeny",
    "CallbackApprover",
    "CancelToken",
    "ConfigurationError",
    "DuplicateToolError",
    "EventBus",
    "Executor",
    "ImageBlock",
    "Inbox",
    "JsonBlock",
    "JsonlAuditLog",
    "KodeError",
    "KodeUsageError",
    "ManyRun",
    "NOT_GIVEN",
    "Policy",
    "TextBlock",
    "Tool",
    "ToolCall",
    "ToolCancelledError",
    "ToolCategory",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolKind",
    "ToolNotFoundError",
    "ToolPermissionError",
    "ToolRegistry",
    "ToolResult",
    "ToolRetry",
    "ToolTimeoutError",
    "ToolValidationError",
    "approve",
    "compare",
    "default_registry",
    "define_tool",
    "deny",
    "diverge",
    "expand_trace",
    "fork",
    "prices",
    "register_secret",
    "register_subagent",
    "replay",
    "run_many",
    "set_price",
    "settle",
    "tool",
    "use_registry",
    "variant",
]

if TYPE_CHECKING:
    from kode_nb._redact import (
        register_secret as register_secret,
    )
    from kode_nb.agents import (
        diverge as diverge,
    )
    from kode_nb.agents import (
        expand_trace as expand_trace,
    )
    from kode_nb.agents import (
        fork as fork,
    )
    from kode_nb.agents import (
        prices as prices,
    )
    from kode_nb.agents import (
        replay as replay,
    )
    from kode_nb.agents import (
        set_price as set_price,
    )
    from kode_nb.agents.loop import (
        Agent as Agent,
    )
    from kode_nb.agents.result import (
        AgentRunResult as AgentRunResult,
    )
    from kode_nb.agents.subagent import (
        AgentDefinition as AgentDefinition,
    )
    from kode_nb.agents.subagent import (
        register_subagent as register_subagent,
    )
    from kode_nb.errors import (
        ConfigurationError as ConfigurationError,
    )
    from kode_nb.errors import (
        DuplicateToolError as DuplicateToolError,
    )
    from kode_nb.errors import (
        KodeError as KodeError,
    )
    from kode_nb.errors import (
        KodeUsageError as KodeUsageError,
    )
    from kode_nb.errors import (
        ToolCancelledError as ToolCancelledError,
    )
    from kode_nb.errors import (
        ToolDefinitionError as ToolDefinitionError,
    )
    from kode_nb.errors import (
        ToolError as ToolError,
    )
    from kode_nb.errors import (
        ToolNotFoundError as ToolNotFoundError,
    )
    from kode_nb.errors import (
        ToolPermissionError as ToolPermissionError,
    )
    from kode_nb.errors import (
        ToolRetry as ToolRetry,
    )
    from kode_nb.errors import (
        ToolTimeoutError as ToolTimeoutError,
    )
    from kode_nb.errors import (
        ToolValidationError as ToolValidationError,
    )
    from kode_nb.events import (
        EventBus as EventBus,
    )
    from kode_nb.events import (
        JsonlAuditLog as JsonlAuditLog,
    )
    from kode_nb.execution import (
        Executor as Executor,
    )
    from kode_nb.execution import (
        ToolCall as ToolCall,
    )
    from kode_nb.magics import (
        settle as settle,
    )
    from kode_nb.many.compare import (
        compare as compare,
    )
    from kode_nb.many.compare import (
        variant as variant,
    )
    from kode_nb.many.core import (
        ManyRun as ManyRun,
    )
    from kode_nb.many.core import (
        run_many as run_many,
    )
    from kode_nb.many.inbox import (
        Inbox as Inbox,
    )
    from kode_nb.policy import (
        ApprovalDecision as ApprovalDecision,
    )
    from kode_nb.policy import (
        ApprovalRequest as ApprovalRequest,
    )
    from kode_nb.policy import (
        Approver as Approver,
    )
    from kode_nb.policy import (
        AutoApprove as AutoApprove,
    )
    from kode_nb.policy import (
        AutoDeny as AutoDeny,
    )
    from kode_nb.policy import (
        CallbackApprover as CallbackApprover,
    )
    from kode_nb.policy import (
        Policy as Policy,
    )
    from kode_nb.policy import (
        approve as approve,
    )
    from kode_nb.policy import (
        deny as deny,
    )
    from kode_nb.tools import (
        Tool as Tool,
    )
    from kode_nb.tools import (
        ToolRegistry as ToolRegistry,
    )
    from kode_nb.tools import (
        default_registry as default_registry,
    )
    from kode_nb.tools import (
        define_tool as define_tool,
    )
    from kode_nb.tools import (
        tool as tool,
    )
    from kode_nb.tools import (
        use_registry as use_registry,
    )
    from kode_nb.types import (
        NOT_GIVEN as NOT_GIVEN,
    )
    from kode_nb.types import (
        CancelToken as CancelToken,
    )
    from kode_nb.types import (
        ImageBlock as ImageBlock,
    )
    from kode_nb.types import (
        JsonBlock as JsonBlock,
    )
    from kode_nb.types import (
        TextBlock as TextBlock,
    )
    from kode_nb.types import (
        ToolCategory as ToolCategory,
    )
    from kode_nb.types import (
        ToolContext as ToolContext,
    )
    from kode_nb.types import (
        ToolKind as ToolKind,
    )
    from kode_nb.types import (
        ToolResult as ToolResult,
    )


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
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kode_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if "ipykernel" in __import__("sys").modules:  # in a kernel: what is printed is redacted
    from kode_nb._redact import redact_kernel_output as _redact_kernel_output

    _redact_kernel_output()
