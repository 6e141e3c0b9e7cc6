"""kode_nb's model as an OpenAI Agents SDK ``Model`` and ``ModelProvider`` (imports ``agents``;
loaded only when used).

:func:`openai_agents_model` wraps a kode_nb model (or a model string such as
``"openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder-0.5b"``) in :class:`KodeAgentsModel`,
a subclass of the SDK's ``Model``: ``Agent(model=openai_agents_model(...))``. :class:`KodeModelProvider`
is a ``ModelProvider`` for a whole server: ``Runner.run(agent, ..., run_config=RunConfig(
model_provider=KodeModelProvider(base_url)))`` gives every agent of the run (handoffs and agents
as tools too) kode_nb's model for its model name, one model (and HTTP client) per name.

Each request goes through kode_nb's model: its server profile (identified from ``GET /models``),
tool calls written as text read back as calls, calls that do not fit their tool asked for again,
its time limits and retries, one HTTP client per model, and its rounds of calls bounded (a
repeated call gets the answer asked for instead). The SDK's input items are mapped to Chat
Completions messages by the SDK's own converter, then to kode_nb's messages; function tools and
handoffs are offered as tools; ``temperature``, ``max_tokens`` and ``tool_choice`` of the SDK's
``ModelSettings`` apply.

Like the SDK's own models it records a ``generation`` span (the messages as sent, the answer,
the usage, and what kode_nb did under ``model_config["kode_nb"]``), so :func:`kode_nb.capture`
shows each request as a ``model_call``. Streaming (``Runner.run_streamed``) is not supported.
"""

from __future__ import annotations

import json
from typing import Any

from agents import Model, ModelProvider, ModelResponse, Usage
from agents.models.chatcmpl_converter import Converter

from kode_nb.interop._model_core import kode_details, kode_model, one_turn, settings_with, text_of
from kode_nb.interop._openai_agents import chat_item, response_items
from kode_nb.models import base as kode
from kode_nb.types import TextBlock

__all__ = ["KodeAgentsModel", "KodeModelProvider", "openai_agents_model"]


class KodeAgentsModel(Model):
    """An OpenAI Agents SDK ``Model`` whose requests go through a kode_nb model (see the module
    docstring). ``settings``: kode_nb's time limits and retries (``ModelSettings``)."""

    def __init__(
        self,
        model: kode.Model | str,
        *,
        settings: kode.ModelSettings | None = None,
        **options: Any,
    ) -> None:
        self.kode = kode_model(model, **options)
        self.kode_settings = settings
        self.name = str(getattr(self.kode, "model", None) or self.kode.name)

    def __repr__(self) -> str:
        return f"KodeAgentsModel({self.kode!r})"

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: Any = None,
        conversation_id: Any = None,
        prompt: Any = None,
    ) -> ModelResponse:
        from agents.tracing import generation_span

        request = self._request(system_instructions, input, model_settings, tools, handoffs)
        with generation_span(
            model=self.name,
            input=_neutral_messages(request),
            disabled=tracing.is_disabled(),
        ) as span:
            response = await one_turn(self.kode, request)
            details = kode_details(self.kode, response)
            calls = [(c.id, c.name, c.arguments) for c in response.tool_calls]
            items = response_items(response.text or None, calls, message_id="msg_kode_nb")
            tin, tout = response.usage.input_tokens, response.usage.output_tokens
            if tracing.include_data():
                span.span_data.output = [chat_item(i) for i in items]
                span.span_data.model_config = {"kode_nb": details}
            span.span_data.usage = {"input_tokens": tin, "output_tokens": tout}
        usage = Usage(
            requests=1,
            input_tokens=tin or 0,
            output_tokens=tout or 0,
            total_tokens=(tin or 0) + (tout or 0),
        )
        return ModelResponse(output=items, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "kode_nb's model for the OpenAI Agents SDK does not stream: use Runner.run"
        )

    def _request(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        handoffs: Any,
    ) -> kode.ModelRequest:
        chat: list[Any] = list(Converter.items_to_messages(input))
        system = [system_instructions] if system_instructions else []
        messages: list[kode.Message] = []
        names: dict[str, str] = {}
        for m in chat:
            role = m.get("role")
            if role in ("system", "developer"):
                (messages.append(kode.UserMessage(content=text_of(m.get("content"))))
                 if messages else system.append(text_of(m.get("content"))))  # fmt: skip
            elif role == "user":
                messages.append(kode.UserMessage(content=text_of(m.get("content"))))
            elif role == "assistant":
                calls = []
                for c in m.get("tool_calls") or []:
                    fn = c.get("function") or {}
                    names[str(c.get("id"))] = str(fn.get("name"))
                    calls.append(
                        kode.ToolCallRequest(
                            id=str(c.get("id")),
                            name=str(fn.get("name")),
                            arguments=str(fn.get("arguments") or "{}"),
                        )
                    )
                messages.append(
                    kode.AssistantMessage(text=text_of(m.get("content")), tool_calls=tuple(calls))
                )
            elif role == "tool":
                cid = str(m.get("tool_call_id"))
                messages.append(
                    kode.ToolResultMessage(
                        call_id=cid,
                        name=names.get(cid, "tool"),
                        content=(TextBlock(text=text_of(m.get("content"))),),
                    )
                )
        specs = [
            kode.ToolSpec(
                name=t.name,
                description=t.description or "",
                parameters=dict(t.params_json_schema),
            )
            for t in tools or []
            if hasattr(t, "params_json_schema")
        ]
        specs += [
            kode.ToolSpec(
                name=h.tool_name,
                description=h.tool_description or "",
                parameters=dict(h.input_json_schema),
            )
            for h in handoffs or []
        ]
        choice = getattr(model_settings, "tool_choice", None)
        chosen = settings_with(
            self.kode_settings,
            temperature=getattr(model_settings, "temperature", None),
            max_tokens=getattr(model_settings, "max_tokens", None),
            tool_choice=choice if isinstance(choice, str) and specs else None,
        )
        return kode.ModelRequest(
            system="\n\n".join(system), messages=tuple(messages), tools=tuple(specs),
            settings=chosen,
        )  # fmt: skip


def _neutral_messages(request: kode.ModelRequest) -> list[dict[str, Any]]:
    """The request's messages in Chat Completions form (the generation span's input)."""
    from kode_nb.models.openai_compat import openai_messages

    return [json.loads(json.dumps(m, default=str)) for m in openai_messages(request)]


class KodeModelProvider(ModelProvider):
    """An OpenAI Agents SDK ``ModelProvider`` for one OpenAI-compatible server: each model name
    becomes a :class:`KodeAgentsModel` over ``base_url`` (made once per name, so one HTTP
    client per model). ``default_model``: the id used for agents without a model name;
    ``options``: for :func:`~kode_nb.models.resolve_model` (``profile=``, ``api_key=``...)."""

    def __init__(
        self,
        base_url: str,
        *,
        default_model: str | None = None,
        settings: kode.ModelSettings | None = None,
        **options: Any,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.default_model = default_model
        self.settings = settings
        self.options = options
        self.models: dict[str, KodeAgentsModel] = {}

    def get_model(self, model_name: str | None) -> Model:
        name = model_name or self.default_model
        if not name:
            raise ValueError(
                "KodeModelProvider: the agent names no model and no default_model was given"
            )
        if name not in self.models:
            self.models[name] = KodeAgentsModel(
                f"openai-compatible:{self.base_url}#{name}", settings=self.settings, **self.options
            )
        return self.models[name]

    async def aclose(self) -> None:
        for model in self.models.values():
            close = getattr(model.kode, "aclose", None)
            if callable(close):
                await close()


def openai_agents_model(
    model: kode.Model | str, *, settings: kode.ModelSettings | None = None, **options: Any
) -> KodeAgentsModel:
    """kode_nb's model as an OpenAI Agents SDK ``Model``: ``Agent(model=openai_agents_model(...))``.

    ``model``: a kode_nb model, or a model string (``"openai-compatible:URL#MODEL_ID"``)
    resolved with ``options``; ``settings``: kode_nb's time limits and retries. See
    :mod:`kode_nb.interop._sdk_model`."""
    return KodeAgentsModel(model, settings=settings, **options)
