"""OpenAI-compatible Chat Completions over httpx, streaming (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

Neutral messages become Chat Completions messages: the system prompt a ``system`` message,
assistant tool calls ``tool_calls`` entries (``function.name``/``function.arguments``), tool results
``role: "tool"`` messages with their ``tool_call_id``. Tool messages carry text only, so an image
in a tool result becomes a placeholder there and, when ``supports_images`` is true, is attached
in a ``user`` message (``image_url`` data URI) after the turn's tool messages.

The stream (``stream: true`` with ``stream_options.include_usage``) is ``data: {chunk}`` events
ending with ``data: [DONE]``: text from ``choices[0].delta.content``; tool calls assembled per
``delta.tool_calls[].index`` from their ``id``, ``function.name`` and ``function.arguments``
pieces; usage from the final chunk. Arguments are passed through as text, even when malformed.

Strict function calling: with ``strict`` (default: on for :data:`OPENAI_BASE_URL`, off for other
servers, which often reject or ignore it; ``OpenAIChatModel(..., strict=...)`` or
``resolve_model("openai-compatible:<url>#<model>", strict=True)`` decides) each tool is offered
with its schema rewritten by :func:`~kode_nb.tools._schema_dialects.openai_strict_schema` (every
property required, optional ones nullable) and ``strict: true``. A tool whose schema strict mode
cannot express (a free-form ``dict``, an untyped value) is offered as it is, without ``strict``
(logged at INFO on ``kode_nb.models``); the other tools stay strict. A model in strict mode sends
``null`` for each optional argument it leaves out, so the arguments of a call to a tool that was
offered strict go through :func:`~kode_nb.tools._schema_dialects.drop_strict_nulls` (against the tool's
own schema) before the call is handed on: defaults apply, a nullable argument keeps its
``null``. Arguments that are not a JSON object (malformed ones too) are left as they came.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx

from kode_nb.errors import ConfigurationError
from kode_nb.models._content import block_text
from kode_nb.models._http import HttpModel, parse_json
from kode_nb.models.base import (
    AssistantMessage,
    Finish,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UsageInfo,
    UserMessage,
)
from kode_nb.models.errors import ModelProtocolError
from kode_nb.tools._schema_dialects import drop_strict_nulls, openai_strict_schema
from kode_nb.types import ImageBlock

__all__ = ["OpenAIChatModel", "openai_messages", "openai_tools"]

OPENAI_BASE_URL = "https://api.openai.com/v1"

logger = logging.getLogger("kode_nb.models")

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
}


class OpenAIChatModel(HttpModel):
    """A Chat Completions model: OpenAI itself, or any server speaking its API.

    ``api_key`` defaults to the ``api_key_env`` variable (``OPENAI_API_KEY`` for OpenAI), read at
    the first request; ``api_key_env=None`` (local servers) sends no ``Authorization`` header.
    ``strict=None`` means strict function calling for :data:`OPENAI_BASE_URL` only.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        http_client: httpx.AsyncClient | None = None,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
        name: str | None = None,
        supports_images: bool = True,
        max_tokens_field: str = "max_completion_tokens",
        stream_usage: bool = True,
        parallel_tool_calls: bool | None = None,
        extra_body: dict[str, Any] | None = None,
        strict: bool | None = None,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            http_client=http_client,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            name=name,
        )
        self.supports_images = supports_images
        """Send images as ``image_url`` parts (else as text placeholders)."""
        self.max_tokens_field = max_tokens_field
        """``max_completion_tokens`` (OpenAI) or ``max_tokens`` (most compatible servers)."""
        self.stream_usage = stream_usage
        """Ask for usage in the final chunk (``stream_options.include_usage``)."""
        self.parallel_tool_calls = parallel_tool_calls
        """Sent as ``parallel_tool_calls`` when not ``None`` (and tools are offered)."""
        self.extra_body = dict(extra_body or {})
        """Extra fields merged into every request body."""
        if strict is not None and not isinstance(strict, bool):
            raise ConfigurationError(
                f"{self.name}: strict must be True, False or None, got {strict!r}"
            )
        self.strict = self.base_url == OPENAI_BASE_URL if strict is None else strict
        """Offer tools in OpenAI strict mode where their schema allows (see the module docstring)."""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request, images=self.supports_images),
            "stream": True,
        }
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = openai_tools(request, strict=self.strict)
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        settings = request.settings
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            body[self.max_tokens_field] = settings.max_tokens
        body.update(self.extra_body)
        return body

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        key = self._key()
        headers = {"Accept": "text/event-stream"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = self.request_body(request)
        state = _StreamState(strict=_strict_schemas(request, body))
        done = False
        sse = self._sse("/chat/completions", body, headers, request.settings, [key or ""])
        async with aclosing(sse) as events:  # closes the response at [DONE] and on errors
            async for event in events:
                if event.data.strip() == "[DONE]":
                    done = True
                    break
                chunk = parse_json(event.data, "stream chunk", self.name)
                for out in state.feed(chunk, self.name):
                    yield out
        if not done:
            raise ModelProtocolError(
                f"{self.name}: the response stream ended before 'data: [DONE]' "
                f"(after {state.chunks} chunk(s)); the answer is incomplete"
            )
        for part in state.pending_calls():
            yield part
        yield state.usage
        yield Finish(stop_reason=state.stop_reason())


@dataclass
class _ToolCallBuffer:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    emitted: bool = False


@dataclass
class _StreamState:
    chunks: int = 0
    calls: dict[int, _ToolCallBuffer] = field(default_factory=dict)
    finish_reason: str = ""
    usage: UsageInfo = field(default_factory=UsageInfo)
    strict: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """The own schema of each tool offered in strict mode, by name."""

    def feed(self, chunk: Any, model: str) -> list[ModelEvent]:
        self.chunks += 1
        if not isinstance(chunk, dict):
            raise ModelProtocolError(f"{model}: expected a JSON object chunk, got {chunk!r:.200}")
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ModelProtocolError(f"{model}: the stream reported an error: {message}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = UsageInfo(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            )
        out: list[ModelEvent] = []
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return out
        choice = choices[0]
        delta = choice.get("delta") or {}
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(TextChunk(text=content))
        for fragment in delta.get("tool_calls") or []:
            self._add_fragment(fragment)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
            out.extend(self.pending_calls())
        return out

    def _add_fragment(self, fragment: Any) -> None:
        if not isinstance(fragment, dict):
            return
        index = fragment.get("index")
        if not isinstance(index, int):  # some servers omit it: an id starts a new call
            index = len(self.calls) if fragment.get("id") or not self.calls else max(self.calls)
        buffer = self.calls.setdefault(index, _ToolCallBuffer())
        if fragment.get("id"):
            buffer.id = str(fragment["id"])
        function = fragment.get("function") or {}
        if function.get("name") and not buffer.name:
            buffer.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            buffer.arguments.append(arguments)
        elif arguments is not None:  # a few servers send an object instead of a string
            buffer.arguments.append(json.dumps(arguments))

    def pending_calls(self) -> list[ToolCallPart]:
        out = []
        for index in sorted(self.calls):
            buffer = self.calls[index]
            if buffer.emitted:
                continue
            buffer.emitted = True
            arguments = "".join(buffer.arguments) or "{}"
            schema = self.strict.get(buffer.name)
            if schema is not None:
                arguments = _drop_strict_nulls(schema, arguments)
            out.append(
                ToolCallPart(id=buffer.id or f"call_{index}", name=buffer.name, arguments=arguments)
            )
        return out

    def stop_reason(self) -> str:
        reason = _STOP_REASONS.get(self.finish_reason, self.finish_reason or "end_turn")
        if self.calls and reason == "end_turn":  # Ollama and others say "stop" with tool calls
            return "tool_calls"
        return reason


# --------------------------------------------------------------------------- conversion


def openai_tools(request: ModelRequest, *, strict: bool = False) -> list[dict[str, Any]]:
    """``request.tools`` as Chat Completions ``tools`` entries; with ``strict``, each tool whose
    schema strict mode can express is offered strict, any other as it is."""
    return [_tool(spec, strict) for spec in request.tools]


def _tool(spec: ToolSpec, strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
    }
    if strict:
        try:
            function["parameters"] = openai_strict_schema(spec.parameters, tool=spec.name)
            function["strict"] = True
        except ConfigurationError as exc:  # e.g. a free-form dict: only this tool goes loose
            logger.info("%s; offering it without strict mode", exc)
    return {"type": "function", "function": function}


def _strict_schemas(request: ModelRequest, body: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The own schema of each tool ``body`` offers in strict mode (as sent: ``extra_body`` wins)."""
    names = {
        entry["function"].get("name")
        for entry in body.get("tools") or ()
        if isinstance(entry, dict)
        and isinstance(entry.get("function"), dict)
        and entry["function"].get("strict") is True
    }
    return {spec.name: spec.parameters for spec in request.tools if spec.name in names}


def _drop_strict_nulls(schema: dict[str, Any], arguments: str) -> str:
    """``arguments`` without the ``null`` strict mode sends for an optional argument left out."""
    try:
        parsed = json.loads(arguments)
    except ValueError:  # malformed: passed on as it is, the agent loop reports it
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    cleaned = drop_strict_nulls(schema, parsed)
    return arguments if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)


def openai_messages(request: ModelRequest, *, images: bool = True) -> list[dict[str, Any]]:
    """The system prompt and neutral messages as Chat Completions messages."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    pending_images: list[dict[str, Any]] = []
    for message in request.messages:
        if not isinstance(message, ToolResultMessage) and pending_images:
            out.append({"role": "user", "content": pending_images})
            pending_images = []
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message))
        else:
            text, attached = _tool_result(message, images)
            out.append({"role": "tool", "tool_call_id": message.call_id, "content": text})
            pending_images.extend(attached)
    if pending_images:
        out.append({"role": "user", "content": pending_images})
    return out


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:
        entry["content"] = message.text or None
        entry["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in message.tool_calls
        ]
    return entry


def _tool_result(message: ToolResultMessage, images: bool) -> tuple[str, list[dict[str, Any]]]:
    texts: list[str] = []
    attached: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ImageBlock) and images:
            if not attached:
                attached.append(
                    {
                        "type": "text",
                        "text": f"Image(s) returned by tool '{message.name}' "
                        f"(call {message.call_id}):",
                    }
                )
            attached.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"},
                }
            )
            texts.append(block_text(block) + " (attached in the next message)")
        else:
            texts.append(block_text(block))
    return "\n".join(texts), attached
