"""Anthropic Messages API over httpx, streaming.

Neutral messages become Messages content blocks: the system prompt the top-level ``system``
field; assistant tool calls ``tool_use`` blocks (``input`` parsed from the call's JSON text);
tool results ``tool_result`` blocks (``is_error`` kept; images as base64 ``image`` blocks) in a
``user`` message. Consecutive messages of one role are merged, so a turn's tool results travel in
one user message, as the API requires.

The stream is named SSE events: ``message_start`` (input usage), ``content_block_start`` (a
``text`` or ``tool_use`` block with its id and name), ``content_block_delta`` (``text_delta``, or
``input_json_delta`` pieces of the tool input), ``content_block_stop`` (a tool call is complete),
``message_delta`` (stop reason, output usage), ``message_stop``; ``ping`` is ignored and ``error``
raises :class:`ModelProtocolError`.
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
    RequestSent,
    TextChunk,
    ToolCallPart,
    ToolResultMessage,
    UsageInfo,
    UserMessage,
)
from kode_nb.models.errors import ModelProtocolError
from kode_nb.types import ImageBlock

__all__ = ["AnthropicModel", "anthropic_messages", "anthropic_tools"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"

_STOP_REASONS = {"tool_use": "tool_calls"}


class AnthropicModel(HttpModel):
    """A Claude model through the Messages API; the key defaults to ``ANTHROPIC_API_KEY``."""

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = ANTHROPIC_BASE_URL,
        api_key: str | None = None,
        api_key_env: str | None = "ANTHROPIC_API_KEY",
        http_client: httpx.AsyncClient | None = None,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
        name: str | None = None,
        default_max_tokens: int = 4096,
        anthropic_version: str = ANTHROPIC_VERSION,
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
        self.default_max_tokens = default_max_tokens
        """``max_tokens`` when the settings give none (the API requires it)."""
        self.anthropic_version = anthropic_version
        """The ``anthropic-version`` header."""
        self.extra_body = dict(extra_body or {})
        """Extra fields merged into every request body."""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        settings = request.settings
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_tokens or self.default_max_tokens,
            "messages": anthropic_messages(request),
            "stream": True,
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = anthropic_tools(request)
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        body.update(self.extra_body)
        return body

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        key = self._key()
        headers = {"anthropic-version": self.anthropic_version, "Accept": "text/event-stream"}
        if key:
            headers["x-api-key"] = key
        state = _StreamState(model=self.name)
        body = self.request_body(request)
        yield RequestSent(provider=self.provider, path="/messages", model=self.model, body=body)
        sse = self._sse("/messages", body, headers, request.settings, [key or ""])
        async with aclosing(sse) as events:  # closes the response at message_stop and on errors
            async for event in events:
                if event.event == "json":  # a whole (non-streamed) answer
                    data = parse_json(event.data, "answer", self.name)
                    for out in state.feed_whole(data):
                        yield out
                    break
                data = parse_json(event.data, f"'{event.event}' event", self.name)
                for out in state.feed(data):
                    yield out
                if state.stopped:
                    break
        if not state.stopped:
            raise ModelProtocolError(
                f"{self.name}: the response stream ended before 'message_stop' "
                f"(after {state.events} event(s)); the answer is incomplete"
            )
        yield state.usage
        yield Finish(stop_reason=_STOP_REASONS.get(state.stop_reason, state.stop_reason))


@dataclass
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    model: str
    events: int = 0
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: UsageInfo = field(default_factory=UsageInfo)
    stop_reason: str = "end_turn"
    stopped: bool = False

    def feed(self, data: Any) -> list[ModelEvent]:
        self.events += 1
        if not isinstance(data, dict):
            raise ModelProtocolError(
                f"{self.model}: expected a JSON object event, got {data!r:.200}"
            )
        kind = data.get("type")
        if kind == "message_start":
            self._usage((data.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            return self._start(data)
        elif kind == "content_block_delta":
            return self._delta(data)
        elif kind == "content_block_stop":
            return self._stop(data)
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = str(reason)
            self._usage(data.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            error = data.get("error") or {}
            detail = f"{error.get('type', 'error')}: {error.get('message', '')}"
            raise ModelProtocolError(f"{self.model}: the stream reported an error: {detail}")
        return []  # ping and unknown events

    def feed_whole(self, data: Any) -> list[ModelEvent]:
        """A non-streamed Messages answer (``content`` blocks) as the same events."""
        if not isinstance(data, dict) or data.get("type") == "error":
            error = data.get("error") if isinstance(data, dict) else None
            detail = error.get("message", error) if isinstance(error, dict) else data
            raise ModelProtocolError(f"{self.model}: the server reported an error: {detail!r:.300}")
        self.events += 1
        out: list[ModelEvent] = []
        for block in data.get("content") or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                out.append(TextChunk(text=str(block["text"])))
            elif block.get("type") == "tool_use":
                arguments = json.dumps(block.get("input") or {})
                out.append(
                    ToolCallPart(
                        id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        arguments=arguments,
                    )
                )
        if data.get("stop_reason"):
            self.stop_reason = str(data["stop_reason"])
        self._usage(data.get("usage"))
        self.stopped = True
        return out

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        inputs = sum(
            int(usage.get(k) or 0)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        self.usage = UsageInfo(
            input_tokens=inputs or self.usage.input_tokens,
            output_tokens=int(usage.get("output_tokens") or 0) or self.usage.output_tokens,
        )

    def _start(self, data: dict[str, Any]) -> list[ModelEvent]:
        block = data.get("content_block") or {}
        index = int(data.get("index", len(self.blocks)))
        entry = _Block(kind=str(block.get("type", "")), id=str(block.get("id", "")))
        entry.name = str(block.get("name", ""))
        self.blocks[index] = entry
        if entry.kind == "text" and block.get("text"):
            return [TextChunk(text=str(block["text"]))]
        if entry.kind == "tool_use" and block.get("input"):
            entry.parts.append(json.dumps(block["input"]))
        return []

    def _delta(self, data: dict[str, Any]) -> list[ModelEvent]:
        delta = data.get("delta") or {}
        entry = self.blocks.get(int(data.get("index", -1)))
        if delta.get("type") == "text_delta" and delta.get("text"):
            return [TextChunk(text=str(delta["text"]))]
        if delta.get("type") == "input_json_delta":
            if entry is None:
                raise ModelProtocolError(
                    f"{self.model}: input_json_delta for block {data.get('index')!r}, "
                    "which was never started"
                )
            entry.parts.append(str(delta.get("partial_json", "")))
        return []  # thinking and signature deltas are not shown

    def _stop(self, data: dict[str, Any]) -> list[ModelEvent]:
        entry = self.blocks.get(int(data.get("index", -1)))
        if entry is None or entry.kind != "tool_use":
            return []
        return [ToolCallPart(id=entry.id, name=entry.name, arguments="".join(entry.parts) or "{}")]


# --------------------------------------------------------------------------- conversion


def anthropic_tools(request: ModelRequest) -> list[dict[str, Any]]:
    """``request.tools`` as Messages API tool definitions."""
    return [
        {"name": s.name, "description": s.description, "input_schema": s.parameters}
        for s in request.tools
    ]


def anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Neutral messages as Messages API messages (same-role neighbours merged)."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            role, blocks = "user", [{"type": "text", "text": message.content}]
            if not message.content:  # the API rejects empty text blocks
                blocks = []
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        else:
            role, blocks = "user", [_tool_result(message)]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for c in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)}
        )
    return blocks


def _input(arguments: str) -> dict[str, Any]:
    """The call's arguments as the object ``tool_use.input`` needs (``{}`` if not an object)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ImageBlock):
            content.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
                }
            )
        elif text := block_text(block):  # the API rejects empty text blocks
            content.append({"type": "text", "text": text})
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id}
    if content:
        result["content"] = content
    if message.is_error:
        result["is_error"] = True
    return result
