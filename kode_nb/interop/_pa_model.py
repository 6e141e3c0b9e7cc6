"""kode_nb's model as a pydantic-ai ``Model`` (imports pydantic-ai; loaded only when used).

:func:`pydantic_ai_model` wraps a kode_nb model (or a model string such as
``"openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder-0.5b"``) in :class:`KodePydanticModel`,
a subclass of pydantic-ai's own ``Model``: pydantic-ai's agent loop, tools, output types, retries
and usage limits stay as they are, and each request goes through kode_nb's model — its server
profile (identified from ``GET /models``), tool calls written as text read back as calls, calls
that do not fit their tool asked for again, its time limits and retries, one HTTP client per
model, and its rounds of calls bounded (a repeated call gets the answer asked for instead).

The conversation is mapped as pydantic-ai's own chat models map it (``prepare_messages``, then
instructions first): system prompts and instructions become the system prompt, user prompts
user messages, tool returns tool results (a retry naming a tool is an error result), responses
assistant messages. pydantic-ai's ``temperature``, ``max_tokens`` and ``timeout`` settings apply;
its function and output tools are offered (output tools too: a call to one ends the run).

Captured by :func:`kode_nb.capture` like any pydantic-ai model (its instrumentation wraps it):
each request is a ``model_call`` span; what kode_nb did (notices, the text calls were read from,
the request as sent) is in the response's ``provider_details["kode_nb"]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from kode_nb.interop._model_core import (
    arguments_object,
    kode_details,
    kode_model,
    one_turn,
    settings_with,
    text_of,
)
from kode_nb.models import base as km
from kode_nb.types import TextBlock

__all__ = ["KodePydanticModel", "pydantic_ai_model"]

_FINISH = {"end_turn": "stop", "tool_calls": "tool_call", "max_tokens": "length"}


@dataclass(init=False)
class KodePydanticModel(Model):
    """A pydantic-ai ``Model`` whose requests go through a kode_nb model (see the module
    docstring). ``settings``: kode_nb's time limits and retries (``ModelSettings``);
    pydantic-ai's own ``temperature``, ``max_tokens`` and ``timeout`` win per request."""

    kode: km.Model = field(repr=False)
    kode_settings: km.ModelSettings | None = field(repr=False)

    def __init__(
        self,
        model: km.Model | str,
        *,
        settings: km.ModelSettings | None = None,
        **options: Any,
    ) -> None:
        self.kode = kode_model(model, **options)
        self.kode_settings = settings
        super().__init__()

    @property
    def model_name(self) -> str:
        return str(getattr(self.kode, "model", None) or self.kode.name)

    @property
    def system(self) -> str:
        return str(getattr(self.kode, "provider", None) or "kode_nb")

    @property
    def base_url(self) -> str | None:
        url = getattr(self.kode, "base_url", None)
        return str(url) if url else None

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        model_settings, params = self.prepare_request(model_settings, model_request_parameters)
        prepared = self.prepare_messages(messages, params)
        request = self._request(prepared, model_settings or {}, params)
        response = await one_turn(self.kode, request)
        parts: list[Any] = []
        if response.text:
            parts.append(TextPart(content=response.text))
        for call in response.tool_calls:
            parts.append(
                ToolCallPart(
                    tool_name=call.name,
                    args=arguments_object(call.arguments),
                    tool_call_id=call.id,
                )
            )
        usage = RequestUsage(
            input_tokens=response.usage.input_tokens or 0,
            output_tokens=response.usage.output_tokens or 0,
        )
        return ModelResponse(
            parts=parts,
            usage=usage,
            model_name=self.model_name,
            provider_name=self.system,
            provider_url=self.base_url,
            provider_details={"kode_nb": kode_details(self.kode, response)},
            finish_reason=_FINISH.get(response.stop_reason),  # type: ignore[arg-type]
        )

    def _request(
        self,
        messages: list[ModelMessage],
        settings: ModelSettings,
        params: ModelRequestParameters,
    ) -> km.ModelRequest:
        system: list[str] = []
        out: list[km.Message] = []
        names: dict[str, str] = {}
        for message in messages:
            if isinstance(message, ModelResponse):
                text = [p.content for p in message.parts if isinstance(p, TextPart)]
                calls = []
                for p in message.parts:
                    if isinstance(p, ToolCallPart):
                        names[p.tool_call_id] = p.tool_name
                        calls.append(
                            km.ToolCallRequest(
                                id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str()
                            )
                        )
                    elif not isinstance(p, (TextPart, ThinkingPart)):
                        continue
                out.append(km.AssistantMessage(text="\n\n".join(text), tool_calls=tuple(calls)))
                continue
            assert isinstance(message, ModelRequest)
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    if out:  # a system prompt later in the conversation: a user-side note
                        out.append(km.UserMessage(content=part.content))
                    else:
                        system.append(part.content)
                elif isinstance(part, UserPromptPart):
                    out.append(km.UserMessage(content=_user_text(part.content)))
                elif isinstance(part, ToolReturnPart):
                    out.append(
                        km.ToolResultMessage(
                            call_id=part.tool_call_id,
                            name=part.tool_name,
                            content=(TextBlock(text=part.model_response_str()),),
                            is_error=part.outcome not in ("success",),
                        )
                    )
                elif isinstance(part, RetryPromptPart):  # pragma: no cover - mapped already
                    retry = part.model_response()
                    if part.tool_name:
                        out.append(
                            km.ToolResultMessage(
                                call_id=part.tool_call_id,
                                name=part.tool_name,
                                content=(TextBlock(text=retry),),
                                is_error=True,
                            )
                        )
                    else:
                        out.append(km.UserMessage(content=retry))
        instructions = self._get_instruction_parts(messages, params)
        if instructions:
            system = [*system, *(p.content for p in instructions)]
        tools = tuple(
            km.ToolSpec(
                name=t.name,
                description=t.description or "",
                parameters=dict(t.parameters_json_schema),
            )
            for t in (*params.function_tools, *params.output_tools)
        )
        timeout = settings.get("timeout")
        chosen = settings_with(
            self.kode_settings,
            temperature=settings.get("temperature"),
            max_tokens=settings.get("max_tokens"),
            timeout=float(timeout) if isinstance(timeout, (int, float)) else None,
            tool_choice="required" if tools and not params.allow_text_output else None,
        )
        return km.ModelRequest(
            system="\n\n".join(s for s in system if s), messages=tuple(out), tools=tools,
            settings=chosen,
        )  # fmt: skip


def _user_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    out = []
    for item in content if isinstance(content, (list, tuple)) else [content]:
        if isinstance(item, str):
            out.append(item)
        else:
            text = getattr(item, "content", None) or getattr(item, "text", None)
            out.append(
                text if isinstance(text, str) else text_of(text) or f"[{type(item).__name__}]"
            )
    return "\n".join(out)


def pydantic_ai_model(
    model: km.Model | str, *, settings: km.ModelSettings | None = None, **options: Any
) -> KodePydanticModel:
    """kode_nb's model as a pydantic-ai ``Model``: ``Agent(pydantic_ai_model(...), ...)``.

    ``model``: a kode_nb model, or a model string (``"openai-compatible:URL#MODEL_ID"``)
    resolved with ``options`` (``profile=``, ``text_calls=``, ``max_tool_rounds=``...);
    ``settings``: kode_nb's time limits and retries. See :mod:`kode_nb.interop._pa_model`."""
    return KodePydanticModel(model, settings=settings, **options)
