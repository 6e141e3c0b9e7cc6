"""A deterministic model for fork tests: it adds the numbers of the prompt with the ``add`` tool,
one call per turn, and counts every request it receives."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

from kode_nb.models._content import content_text
from kode_nb.models.base import (
    Finish,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallPart,
    ToolResultMessage,
    UsageInfo,
    UserMessage,
)


class Adder:
    """Reads the numbers of the last user message (``"2 3 4"``) and sums them left to right
    with ``add``; then answers ``"It is <sum>."`` (prefixed ``"[<system>] "`` when the system
    prompt starts with ``!``, and by ``label`` when given). Counts requests."""

    def __init__(self, name: str = "adder", label: str = "", *, blank_ids: bool = False) -> None:
        self.name = name
        self.label = label
        self.blank_ids = blank_ids
        """Send ``""`` as every call id (as some local models do): the loop makes ids up."""
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        return self._answer(request)

    async def _answer(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        messages = list(request.messages)
        user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        prompt = messages[user]
        assert isinstance(prompt, UserMessage)
        numbers = [int(n) for n in re.findall(r"-?\d+", prompt.content)]
        results = [m for m in messages[user:] if isinstance(m, ToolResultMessage)]
        total = int(content_text(results[-1].content)) if results else numbers[0]
        yield UsageInfo(input_tokens=100 * len(messages), output_tokens=10)
        if len(results) < len(numbers) - 1:
            arguments = json.dumps({"a": total, "b": numbers[len(results) + 1]})
            call_id = "" if self.blank_ids else f"call_{len(messages)}"
            yield ToolCallPart(id=call_id, name="add", arguments=arguments)
            yield Finish(stop_reason="tool_calls")
            return
        system = f"[{request.system[1:]}] " if request.system.startswith("!") else ""
        yield TextChunk(text=f"{self.label}{system}It is {total}.")
        yield Finish(stop_reason="end_turn")
