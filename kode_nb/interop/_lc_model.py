"""kode_nb's model as a LangChain chat model (imports ``langchain_core``; loaded only when used).

:func:`langchain_model` wraps a kode_nb model (or a model string such as
``"openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder-0.5b"``) in :class:`KodeChatModel`, a
``BaseChatModel``: ``bind_tools`` works as for any chat model, and LangGraph (its prebuilt
agents, its ``ToolNode``, a graph of your own) uses it as any other.

Each request goes through kode_nb's model: its server profile (identified from ``GET /models``),
tool calls written as text read back as calls (they arrive as the ``AIMessage``'s
``tool_calls``), calls that do not fit their tool asked for again, its time limits and retries,
one HTTP client per model (and event loop), and its rounds of calls bounded (a repeated call gets
the answer asked for instead). ``SystemMessage`` becomes the system prompt, ``HumanMessage`` a
user message, ``AIMessage`` an assistant message with its calls, ``ToolMessage`` a tool result
(``status="error"`` an error result).

Captured by :func:`kode_nb.capture` through LangChain's callbacks, as any chat model: each
request is a ``model_call`` span. The answer's ``response_metadata["kode_nb"]`` says what
kode_nb did (notices, the text calls were read from, the request as sent); its
``usage_metadata`` has the tokens the server reported.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from kode_nb.interop._model_core import (
    arguments_object,
    kode_details,
    kode_model,
    one_turn,
    settings_with,
    text_of,
)
from kode_nb.models import base as kode
from kode_nb.types import TextBlock

__all__ = ["KodeChatModel", "langchain_model"]


class KodeChatModel(BaseChatModel):
    """A LangChain chat model whose requests go through a kode_nb model (see the module
    docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kode: Any = Field(exclude=True)
    """The kode_nb model."""
    kode_settings: Any = Field(default=None, exclude=True)
    """kode_nb's time limits and retries (``ModelSettings``), or ``None``: the defaults."""
    temperature: float | None = None
    max_tokens: int | None = None

    @property
    def _llm_type(self) -> str:
        return "kode_nb"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    @property
    def model_name(self) -> str:
        return str(getattr(self.kode, "model", None) or self.kode.name)

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """The model with ``tools`` offered (any form LangChain converts: tools, functions,
        pydantic models, OpenAI tool dicts); ``tool_choice``: ``"auto"``, ``"required"``
        (``"any"``), ``"none"`` or a tool name."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice == "any":
            tool_choice = "required"
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return super().bind(tools=formatted, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request = self._request(messages, kwargs)
        response = await one_turn(self.kode, request)
        calls = [
            {"name": c.name, "args": arguments_object(c.arguments), "id": c.id, "type": "tool_call"}
            for c in response.tool_calls
        ]
        usage = response.usage
        metadata: dict[str, Any] = {
            "model_name": self.model_name,
            "kode_nb": kode_details(self.kode, response),
        }
        message = AIMessage(
            content=response.text,
            tool_calls=calls,
            response_metadata=metadata,
            usage_metadata=(
                {
                    "input_tokens": usage.input_tokens or 0,
                    "output_tokens": usage.output_tokens or 0,
                    "total_tokens": (usage.input_tokens or 0) + (usage.output_tokens or 0),
                }
                if usage.input_tokens is not None or usage.output_tokens is not None
                else None
            ),
        )
        info = {"finish_reason": _FINISH.get(response.stop_reason, response.stop_reason)}
        return ChatResult(generations=[ChatGeneration(message=message, generation_info=info)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """The sync path: the turn runs on an event loop of its own, in a worker thread when
        this thread already runs one."""
        result: ChatResult = _run_sync(lambda: self._agenerate(messages, stop, None, **kwargs))
        return result

    def _request(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> kode.ModelRequest:
        system: list[str] = []
        out: list[kode.Message] = []
        names: dict[str, str] = {}
        for m in messages:
            kind = m.type
            if kind == "system":
                (out.append(kode.UserMessage(content=text_of(m.content)))
                 if out else system.append(text_of(m.content)))  # fmt: skip
            elif kind == "human":
                out.append(kode.UserMessage(content=text_of(m.content)))
            elif kind == "ai":
                calls = []
                for c in getattr(m, "tool_calls", None) or []:
                    import json

                    names[str(c.get("id"))] = str(c.get("name"))
                    calls.append(
                        kode.ToolCallRequest(
                            id=str(c.get("id")),
                            name=str(c.get("name")),
                            arguments=json.dumps(c.get("args") or {}, ensure_ascii=False),
                        )
                    )
                out.append(kode.AssistantMessage(text=text_of(m.content), tool_calls=tuple(calls)))
            elif kind == "tool":
                assert isinstance(m, ToolMessage)
                cid = str(m.tool_call_id)
                out.append(
                    kode.ToolResultMessage(
                        call_id=cid,
                        name=m.name or names.get(cid, "tool"),
                        content=(TextBlock(text=text_of(m.content)),),
                        is_error=m.status == "error",
                    )
                )
            else:
                out.append(kode.UserMessage(content=text_of(m.content)))
        tools = tuple(
            kode.ToolSpec(
                name=str(t["function"]["name"]),
                description=str(t["function"].get("description") or ""),
                parameters=dict(t["function"].get("parameters") or {"type": "object"}),
            )
            for t in kwargs.get("tools") or ()
            if isinstance(t, dict) and isinstance(t.get("function"), dict)
        )
        choice = kwargs.get("tool_choice")
        if isinstance(choice, dict):
            choice = (choice.get("function") or {}).get("name")
        chosen = settings_with(
            self.kode_settings,
            temperature=kwargs.get("temperature", self.temperature),
            max_tokens=kwargs.get("max_tokens", self.max_tokens),
            tool_choice=choice if isinstance(choice, str) and tools else None,
        )
        return kode.ModelRequest(
            system="\n\n".join(system), messages=tuple(out), tools=tools, settings=chosen
        )


_FINISH = {"end_turn": "stop", "tool_calls": "tool_calls", "max_tokens": "length"}


def _run_sync(make: Callable[[], Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = asyncio.run(make())
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="kode_nb-langchain-model", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def langchain_model(
    model: kode.Model | str,
    *,
    settings: kode.ModelSettings | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    **options: Any,
) -> KodeChatModel:
    """kode_nb's model as a LangChain chat model (LangGraph uses it too).

    ``model``: a kode_nb model, or a model string (``"openai-compatible:URL#MODEL_ID"``)
    resolved with ``options``; ``settings``: kode_nb's time limits and retries. See
    :mod:`kode_nb.interop._lc_model`."""
    return KodeChatModel(
        kode=kode_model(model, **options),
        kode_settings=settings,
        temperature=temperature,
        max_tokens=max_tokens,
    )
