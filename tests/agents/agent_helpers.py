"""Small test doubles for the agent tests (the shipped ScriptedModel refuses calls to tools it
was not offered; these models do not, so tests can show what the loop and the executor do)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from kode_nb.models.base import (
    Finish,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallPart,
    UsageInfo,
)

Call = tuple[str, Any]


class LaxModel:
    """Plays turns: a ``str`` is a final answer, a list of ``(tool, args)`` is one turn of calls
    (args: a dict sent as JSON, or raw text). Offers are not checked."""

    def __init__(self, turns: Sequence[str | list[Call]], *, name: str = "lax") -> None:
        self.turns = list(turns)
        self.name = name
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        n = len(self.requests)
        self.requests.append(request)
        turn = self.turns[n]
        if isinstance(turn, str):
            yield TextChunk(text=turn)
            yield UsageInfo(input_tokens=10, output_tokens=2)
            yield Finish(stop_reason="end_turn")
            return
        for i, (name, args) in enumerate(turn, 1):
            raw = args if isinstance(args, str) else json.dumps(args)
            yield ToolCallPart(id=f"lax-{n + 1}-{i}", name=name, arguments=raw)
        yield UsageInfo(input_tokens=10, output_tokens=3)
        yield Finish(stop_reason="tool_calls")


class SlowModel:
    """Waits ``delay`` seconds (or until cancelled) before answering ``text``."""

    def __init__(self, delay: float, text: str = "late") -> None:
        self.name = "slow"
        self.delay = delay
        self.text = text
        self.started = asyncio.Event()
        self.cancelled = False

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.started.set()
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        yield TextChunk(text=self.text)
        yield Finish(stop_reason="end_turn")


class BrokenModel:
    """Raises ``exc`` when asked for a turn."""

    def __init__(self, exc: BaseException | None) -> None:
        self.name = "broken"
        self.exc = exc

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self.exc is not None:
            raise self.exc
        yield TextChunk(text="")  # pragma: no cover - only makes this an async generator


class Recorder:
    """An ``on_event`` callback that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def types(self, run_id: str | None = None) -> list[str]:
        return [e.type for e in self.events if run_id is None or e.run_id == run_id]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]
