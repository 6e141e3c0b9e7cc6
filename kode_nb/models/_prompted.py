"""Prompted tool calling: the tools described in the system prompt, the calls read from text.

For a server whose own tool-calling path is broken for the request at hand (llama-cpp-python's
``chatml-function-calling`` ``auto`` step, which small models fail), the request is sent with
``tool_choice: "none"`` and the tools are described in the system prompt in the Hermes form that
Qwen2.5's and many other models' chat templates use (function signatures inside ``<tools>``,
each call answered as a JSON object inside ``<tool_call>`` tags). The calls the model writes are
read back by :mod:`kode_nb.models._text_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kode_nb.models.base import ToolSpec

__all__ = ["tools_prompt", "with_tools_prompt"]

_HEAD = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
_TAIL = (
    "\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def tools_prompt(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section describing ``tools`` and how to call them."""
    lines = [
        json.dumps(
            {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                },
            },
            ensure_ascii=False,
        )
        for spec in tools
    ]
    return _HEAD + "\n".join(lines) + _TAIL


def with_tools_prompt(system: str, tools: Sequence[ToolSpec]) -> str:
    """``system`` followed by the tools' section."""
    section = tools_prompt(tools)
    return f"{system.rstrip()}\n\n{section}" if system.strip() else section
