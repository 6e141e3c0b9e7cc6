"""Models: the provider-neutral protocol, offline models for tests and teaching, real providers.

``import kode_nb`` does not import this package. The HTTP adapters (:class:`OpenAIChatModel`,
:class:`AnthropicModel`) load httpx, so they are imported on first access (or by
:func:`resolve_model`), keeping ``import kode_nb.models`` light for offline use.

Prices (:data:`prices`, :func:`set_price`, :func:`price_for`) say what a model's tokens cost;
:func:`estimate_tokens` sizes a request.

May import: ``tools``, ``types``, ``errors``, ``_redact``. Nothing here imports Jupyter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kode_nb.models._cost import Price, estimate_tokens, price_for, prices, set_price
from kode_nb.models._replay import ReplayModel
from kode_nb.models.base import (
    AssistantMessage,
    Finish,
    Message,
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Notice,
    RequestSent,
    TextCallsRecovered,
    TextChunk,
    ToolCallPart,
    ToolCallRequest,
    ToolResultMessage,
    ToolSpec,
    UsageInfo,
    UserMessage,
    collect,
)
from kode_nb.models.errors import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelProtocolError,
    ReplayDivergedError,
    ScriptExhausted,
    ScriptMismatch,
)
from kode_nb.models.resolve import resolve_model
from kode_nb.models.scripted import ScriptedCall, ScriptedModel, Turn, call, raw_call
from kode_nb.models.test_model import TestModel, generate_arguments

if TYPE_CHECKING:
    from kode_nb.models.anthropic import AnthropicModel
    from kode_nb.models.openai_compat import OpenAIChatModel

_LAZY = {
    "AnthropicModel": "kode_nb.models.anthropic",
    "OpenAIChatModel": "kode_nb.models.openai_compat",
}

__all__ = [
    "AnthropicModel",
    "AssistantMessage",
    "Finish",
    "Message",
    "Model",
    "ModelConnectionError",
    "ModelError",
    "ModelEvent",
    "ModelHTTPError",
    "ModelNotFoundError",
    "ModelProtocolError",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Notice",
    "OpenAIChatModel",
    "Price",
    "ReplayDivergedError",
    "ReplayModel",
    "RequestSent",
    "ScriptExhausted",
    "ScriptMismatch",
    "ScriptedCall",
    "ScriptedModel",
    "TestModel",
    "TextCallsRecovered",
    "TextChunk",
    "ToolCallPart",
    "ToolCallRequest",
    "ToolResultMessage",
    "ToolSpec",
    "Turn",
    "UsageInfo",
    "UserMessage",
    "call",
    "collect",
    "estimate_tokens",
    "generate_arguments",
    "price_for",
    "prices",
    "raw_call",
    "resolve_model",
    "set_price",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kode_nb.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
