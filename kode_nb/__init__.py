"""kode_nb: build, inspect and teach LLM agent tools and subagents in Jupyter.

Public names are imported lazily (PEP 562), so ``import kode_nb`` and ``%load_ext kode_nb`` stay
fast: pydantic and the rest load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "ApprovalDecision": "kode_nb.approval",
    "ApprovalRequest": "kode_nb.approval",
    "Approver": "kode_nb.approval",
    "AutoApprove": "kode_nb.approval",
    "AutoDeny": "kode_nb.approval",
    "CallbackApprover": "kode_nb.approval",
    "CancelToken": "kode_nb.types",
    "ConfigurationError": "kode_nb.errors",
    "DuplicateToolError": "kode_nb.errors",
    "EventBus": "kode_nb.events",
    "Executor": "kode_nb.executor",
    "ImageBlock": "kode_nb.types",
    "JsonBlock": "kode_nb.types",
    "JsonlAuditLog": "kode_nb.events",
    "KodeError": "kode_nb.errors",
    "KodeUsageError": "kode_nb.errors",
    "NOT_GIVEN": "kode_nb.types",
    "Policy": "kode_nb.policy",
    "TextBlock": "kode_nb.types",
    "Tool": "kode_nb.tools",
    "ToolCall": "kode_nb.executor",
    "ToolCancelledError": "kode_nb.errors",
    "ToolCategory": "kode_nb.types",
    "ToolContext": "kode_nb.types",
    "ToolDefinitionError": "kode_nb.errors",
    "ToolError": "kode_nb.errors",
    "ToolKind": "kode_nb.types",
    "ToolNotFoundError": "kode_nb.errors",
    "ToolPermissionError": "kode_nb.errors",
    "ToolRegistry": "kode_nb.registry",
    "ToolResult": "kode_nb.types",
    "ToolRetry": "kode_nb.errors",
    "ToolTimeoutError": "kode_nb.errors",
    "ToolValidationError": "kode_nb.errors",
    "approve": "kode_nb.approval",
    "default_registry": "kode_nb.registry",
    "define_tool": "kode_nb.define",
    "deny": "kode_nb.approval",
    "tool": "kode_nb.define",
    "use_registry": "kode_nb.registry",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from kode_nb.approval import (
        ApprovalDecision,
        ApprovalRequest,
        Approver,
        AutoApprove,
        AutoDeny,
        CallbackApprover,
        approve,
        deny,
    )
    from kode_nb.define import define_tool, tool
    from kode_nb.errors import (
        ConfigurationError,
        DuplicateToolError,
        KodeError,
        KodeUsageError,
        ToolCancelledError,
        ToolDefinitionError,
        ToolError,
        ToolNotFoundError,
        ToolPermissionError,
        ToolRetry,
        ToolTimeoutError,
        ToolValidationError,
    )
    from kode_nb.events import EventBus, JsonlAuditLog
    from kode_nb.executor import Executor, ToolCall
    from kode_nb.policy import Policy
    from kode_nb.registry import ToolRegistry, default_registry, use_registry
    from kode_nb.tools import Tool
    from kode_nb.types import (
        NOT_GIVEN,
        CancelToken,
        ImageBlock,
        JsonBlock,
        TextBlock,
        ToolCategory,
        ToolContext,
        ToolKind,
        ToolResult,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kode_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
