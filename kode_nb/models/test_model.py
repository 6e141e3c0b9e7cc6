"""TestModel: calls the tools it is offered with generated, schema-valid arguments.

It needs no script and no network, so it exercises a whole agent loop — validation, policy,
approval, execution, events, traces — for any set of tools::

    turn 1   call every offered tool (or those in ``tools=``) ``calls_per_tool`` times, in
             parallel, with arguments generated from each tool's JSON Schema
    turn 2   answer with a summary of the calls and their results

It is stateless: it looks at the conversation since the last user message, so one instance can
serve many runs. Arguments are deterministic for a given ``seed``, tool name and prompt.

It follows the prompt where it can (:func:`prompt_hints`): a top-level argument whose ``enum``
has a value the last user message mentions gets that value; a number or integer argument gets
a number from the message that fits its bounds (a four-digit year for an argument named like
``year``); a string argument gets a quoted string from the message. So "How did the north
region do in 2024?" calls ``summarize_sales(region="north", year=2024)``. Anything the prompt
does not settle is generated from the schema.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from kode_nb.errors import ToolDefinitionError, ToolValidationError
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

__all__ = ["TestModel", "generate_arguments", "prompt_hints"]

_RESULT_LIMIT = 200


def generate_arguments(
    spec: ToolSpec, *, seed: int = 0, call: int = 0, prompt: str = ""
) -> dict[str, object]:
    """Arguments for ``spec``: what ``prompt`` settles (see :func:`prompt_hints`), the rest
    generated from its schema (deterministic in seed, name, call and prompt)."""
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
    hints = prompt_hints(spec.parameters, prompt) if prompt else {}
    if hints and _valid(spec, {**value, **hints}):
        value.update(hints)
    return value


def _valid(spec: ToolSpec, arguments: dict[str, object]) -> bool:
    """The arguments pass the tool's own validation (prompt hints never make a call invalid)."""
    try:
        spec.validate(arguments)
    except (ToolValidationError, ToolDefinitionError):
        return False
    return True


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
        prompt = next(
            (m.content for m in reversed(request.messages) if isinstance(m, UserMessage)), ""
        )
        for spec in specs:
            for k in range(self.calls_per_tool):
                args = generate_arguments(spec, seed=self.seed, call=k, prompt=prompt)
                parts.append(
                    ToolCallPart(
                        id=f"test-{position}-{len(parts) + 1}",
                        name=spec.name,
                        arguments=json.dumps(args, ensure_ascii=False),
                    )
                )
        return parts


_QUOTED = re.compile(r"\"([^\"]{1,200})\"|'([^']{1,200})'|“([^”]{1,200})”")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def prompt_hints(schema: Mapping[str, Any], prompt: str) -> dict[str, Any]:
    """Top-level arguments ``prompt`` settles: mentioned enum values, fitting numbers, quoted
    strings (each used once, in the order the properties are declared)."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return {}
    lowered = prompt.lower()
    numbers = [m.group(0) for m in _NUMBER.finditer(prompt)]
    quoted = [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(prompt)]
    used_numbers: set[int] = set()
    used_quotes: set[int] = set()
    hints: dict[str, Any] = {}
    for name, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        sub = _non_null(sub)
        enum = sub.get("enum")
        if isinstance(enum, list):
            found = [v for v in enum if isinstance(v, str) and _mentions(lowered, v.lower())]
            found += [v for v in enum if _is_number(v) and str(v) in numbers]
            if found:
                hints[name] = found[0]
            continue
        kind = sub.get("type")
        if kind in ("integer", "number"):
            value = _pick_number(name, sub, numbers, used_numbers, integer=kind == "integer")
            if value is not None:
                hints[name] = value
        elif kind == "string" and not sub.get("format") and not sub.get("pattern"):
            for i, text in enumerate(quoted):
                if i not in used_quotes and _length_fits(sub, text):
                    used_quotes.add(i)
                    hints[name] = text
                    break
    return hints


def _non_null(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``Optional[X]`` (``anyOf: [X, null]``) as ``X``."""
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        real = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
        if len(real) == 1:
            return {**schema, **real[0]}
    return schema


def _mentions(text: str, word: str) -> bool:
    return bool(word) and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _pick_number(
    name: str, schema: Mapping[str, Any], numbers: list[str], used: set[int], *, integer: bool
) -> int | float | None:
    order = list(range(len(numbers)))
    if "year" in name.lower():  # a year argument prefers a four-digit number
        order.sort(key=lambda i: len(numbers[i].lstrip("-")) != 4)
    for i in order:
        if i in used:
            continue
        text = numbers[i]
        if integer and "." in text:
            continue
        value: int | float = int(text) if "." not in text else float(text)
        if _in_bounds(schema, value):
            used.add(i)
            return value
    return None


def _in_bounds(schema: Mapping[str, Any], value: float) -> bool:
    def bound(key: str) -> float | None:
        found = schema.get(key)
        return (
            float(found)
            if isinstance(found, (int, float)) and not isinstance(found, bool)
            else None
        )

    lo, hi = bound("minimum"), bound("maximum")
    xlo, xhi = bound("exclusiveMinimum"), bound("exclusiveMaximum")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return False
    if (xlo is not None and value <= xlo) or (xhi is not None and value >= xhi):
        return False
    step = schema.get("multipleOf")
    return not (_is_number(step) and step and (value / step) % 1)


def _length_fits(schema: Mapping[str, Any], text: str) -> bool:
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if isinstance(lo, int) and len(text) < lo:
        return False
    return not (isinstance(hi, int) and len(text) > hi)


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
