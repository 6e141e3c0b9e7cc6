"""OpenAI-compatible Chat Completions over httpx, streaming (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

Neutral messages become Chat Completions messages: the system prompt a ``system`` message,
assistant tool calls ``tool_calls`` entries (``function.name``/``function.arguments``), tool results
``role: "tool"`` messages with their ``tool_call_id``. Tool messages carry text only, so an image
in a tool result becomes a placeholder there and, when ``supports_images`` is true, is attached
in a ``user`` message (``image_url`` data URI) after the turn's tool messages.

The stream (``stream: true`` with ``stream_options.include_usage``) is ``data: {chunk}`` events
ending with ``data: [DONE]``: text from ``choices[0].delta.content``; tool calls assembled per
``delta.tool_calls[].index`` from their ``id``, ``function.name`` and ``function.arguments``
pieces; usage from the final chunk. Arguments are passed through unparsed, even when malformed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx

from kode_nb.models._content import block_text
from kode_nb.models._http import HttpModel, parse_json
from kode_nb.models.base import (
    AssistantMessage,
    Finish,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallPart,
    ToolResultMessage,
    UsageInfo,
    UserMessage,
)
from kode_nb.models.errors import ModelProtocolError
from kode_nb.types import ImageBlock

__all__ = ["OpenAIChatModel", "openai_messages", "openai_tools"]

OPENAI_BASE_URL = "https://api.openai.com/v1"

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
            body["tools"] = openai_tools(request)
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
        state = _StreamState()
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
            out.append(TextDelta(text=content))
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
            out.append(
                ToolCallPart(
                    id=buffer.id or f"call_{index}",
                    name=buffer.name,
                    arguments="".join(buffer.arguments) or "{}",
                )
            )
        return out

    def stop_reason(self) -> str:
        reason = _STOP_REASONS.get(self.finish_reason, self.finish_reason or "end_turn")
        if self.calls and reason == "end_turn":  # Ollama and others say "stop" with tool calls
            return "tool_calls"
        return reason


# --------------------------------------------------------------------------- conversion


def openai_tools(request: ModelRequest) -> list[dict[str, Any]]:
    """``request.tools`` as Chat Completions ``tools`` entries."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in request.tools
    ]


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
