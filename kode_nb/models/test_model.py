"""TestModel: calls the tools it is offered with generated, schema-valid arguments.

It needs no script and no network, so it exercises a whole agent loop — validation, policy,
approval, execution, events, traces — for any set of tools::

    turn 1   call every offered tool (or those in ``tools=``) ``calls_per_tool`` times, in
             parallel, with arguments generated from each tool's JSON Schema
    turn 2   answer with a summary of the calls and their results

It is stateless: it looks at the conversation since the last user message, so one instance can
serve many runs. Arguments are deterministic for a given ``seed`` (and tool name).
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Sequence

from kode_nb.models._content import content_text
from kode_nb.models._generate import SchemaGenerationError, generate_value
from kode_nb.models.base import (
    AssistantMessage,
    Finish,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallPart,
    ToolCallRequest,
    ToolResultMessage,
    ToolSpec,
    UsageInfo,
    UserMessage,
)
from kode_nb.models.errors import ModelError
from kode_nb.models.scripted import count_words, split_words

__all__ = ["TestModel", "generate_arguments"]

_RESULT_LIMIT = 200


def generate_arguments(spec: ToolSpec, *, seed: int = 0, call: int = 0) -> dict[str, object]:
    """Arguments for ``spec`` generated from its schema (deterministic in seed, name and call)."""
    rng = random.Random(f"{seed}:{spec.name}:{call}")
    try:
        value = generate_value(spec.parameters, rng)
    except SchemaGenerationError as exc:
        raise ModelError(
            f"TestModel cannot generate arguments for tool '{spec.name}': {exc}"
        ) from None
    if not isinstance(value, dict):
        raise ModelError(
            f"TestModel cannot generate arguments for tool '{spec.name}': its parameters schema "
            f"does not describe an object (generated {value!r})"
        )
    return value


class TestModel:
    """A model that calls the offered tools with valid generated arguments, then summarizes."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        *,
        seed: int = 0,
        calls_per_tool: int = 1,
        tools: Sequence[str] | None = None,
        text: str | None = None,
        name: str = "test",
    ) -> None:
        if (
            isinstance(calls_per_tool, bool)
            or not isinstance(calls_per_tool, int)
            or calls_per_tool < 0
        ):
            raise ValueError(f"calls_per_tool must be an integer >= 0, got {calls_per_tool!r}")
        if isinstance(tools, str):
            raise TypeError(f"tools must be a list of tool names, not the string {tools!r}")
        self.name = name
        self.seed = seed
        """Seed of the argument generator."""
        self.calls_per_tool = calls_per_tool
        """How many calls each tool gets in the calling turn."""
        self.tools: tuple[str, ...] | None = None if tools is None else tuple(tools)
        """Only call these tools (when offered); ``None`` = every offered tool."""
        self.text = text
        """The final answer; ``None`` = a summary of the calls and their results."""

    def __repr__(self) -> str:
        return f"TestModel(seed={self.seed}, calls_per_tool={self.calls_per_tool})"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        exchange = _since_last_user(request)
        made_calls = any(isinstance(m, AssistantMessage) and m.tool_calls for m in exchange)
        parts: list[ToolCallPart] = []
        if not made_calls:
            parts = self._calls(request)
        if parts:
            for part in parts:
                yield part
            output = sum(1 + len(p.arguments.split()) for p in parts)
            yield UsageInfo(input_tokens=count_words(request), output_tokens=output)
            yield Finish(stop_reason="tool_calls")
            return
        answer = self.text if self.text is not None else _summary(exchange)
        for piece in split_words(answer):
            yield TextChunk(text=piece)
        yield UsageInfo(input_tokens=count_words(request), output_tokens=len(answer.split()))
        yield Finish(stop_reason="end_turn")

    def _calls(self, request: ModelRequest) -> list[ToolCallPart]:
        specs = [s for s in request.tools if self.tools is None or s.name in self.tools]
        parts: list[ToolCallPart] = []
        position = len(request.messages)
        for spec in specs:
            for k in range(self.calls_per_tool):
                args = generate_arguments(spec, seed=self.seed, call=k)
                parts.append(
                    ToolCallPart(
                        id=f"test-{position}-{len(parts) + 1}",
                        name=spec.name,
                        arguments=json.dumps(args, ensure_ascii=False),
                    )
                )
        return parts


def _since_last_user(request: ModelRequest) -> tuple[object, ...]:
    messages = request.messages
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], UserMessage):
            return messages[i + 1 :]
    return messages


def _summary(exchange: Sequence[object]) -> str:
    calls: list[ToolCallRequest] = []
    results: dict[str, ToolResultMessage] = {}
    for message in exchange:
        if isinstance(message, AssistantMessage):
            calls.extend(message.tool_calls)
        elif isinstance(message, ToolResultMessage):
            results[message.call_id] = message
    if not calls:
        return "No tools were called."
    lines = [f"Called {len(calls)} tool call(s):"]
    for c in calls:
        result = results.get(c.id)
        if result is None:
            outcome = "no result"
        else:
            text = content_text(result.content).replace("\n", " ")
            if len(text) > _RESULT_LIMIT:
                text = text[: _RESULT_LIMIT - 3] + "..."
            outcome = f"error: {text}" if result.is_error else text
        lines.append(f"- {c.name}({c.arguments}) -> {outcome}")
    return "\n".join(lines)
