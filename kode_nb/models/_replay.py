"""ReplayModel: answers with the responses recorded in a trace, and checks each request.

A :class:`ReplayModel` is built from the recorded model calls of one run (the ``model_call``
spans of a ``kode_nb.trace`` record; :func:`kode_nb.replay` builds it for you). Each
:meth:`~ReplayModel.stream` call plays the next recorded response — text, tool calls, usage and
stop reason — and sends nothing anywhere. Before it answers it compares the request with the
recording: the messages added since the previous call (a tool result's content in particular)
and, on the first call, the system prompt. The first difference raises
:class:`ReplayDivergedError` naming the run, the turn and the message, with a short diff
(``strict=False`` records it in :attr:`ReplayModel.divergences` and answers anyway).

A recorded call that failed is replayed as the same failure (a :class:`ModelError`).
Subagent runs nested under a tool call are played by the :class:`ReplayModel` that
:meth:`~ReplayModel.nested` returns for that call id.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from kode_nb.models.base import (
    Finish,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallPart,
    UsageInfo,
    message_dict,
)
from kode_nb.models.errors import ModelError, ReplayDivergedError

__all__ = ["ReplayModel"]


def _render(message: Mapping[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, indent=1, sort_keys=True, default=str)


def _diff(recorded: Mapping[str, Any] | None, now: Mapping[str, Any] | None) -> str:
    a = _render(recorded).splitlines() if recorded is not None else ["(no message)"]
    b = _render(now).splitlines() if now is not None else ["(no message)"]
    lines = [
        line
        for line in difflib.unified_diff(a, b, "recorded", "now", n=0, lineterm="")
        if not line.startswith("@@")
    ]
    text = "\n".join(lines[:12])
    return text if len(lines) <= 12 else text + f"\n... ({len(lines) - 12} more diff lines)"


def _same(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    keys = set(recorded) | set(now)
    return all(recorded.get(k) == now.get(k) for k in keys)


class ReplayModel:
    """A model that answers with recorded responses, in order, and checks each request.

    ``calls`` are the recorded ``model_call`` span attributes of one run, in order (each with
    ``messages`` and ``response``; a failed call has ``error`` instead of ``response``).
    ``run`` names the run in error messages. ``system`` is the recorded system prompt (``None``:
    not checked). ``normalize`` is applied to each request message before comparing (the trace
    stores messages redacted: pass the same redaction). ``nested`` maps a tool call id to the
    :class:`ReplayModel` of the subagent run recorded under that call.
    """

    def __init__(
        self,
        calls: Sequence[Mapping[str, Any]],
        *,
        name: str = "replay",
        run: str = "main",
        system: str | None = None,
        strict: bool = True,
        normalize: Callable[[Any], Any] | None = None,
        nested: Mapping[str, ReplayModel] | None = None,
        log: list[ReplayDivergedError] | None = None,
    ) -> None:
        self.name = name
        self.run = run
        """The run's name, in error messages (``main``, ``main > researcher``)."""
        self.calls: tuple[Mapping[str, Any], ...] = tuple(calls)
        self.system = system
        self.strict = strict
        self.nested_models: dict[str, ReplayModel] = dict(nested or {})
        self.divergences: list[ReplayDivergedError] = log if log is not None else []
        """Every divergence met (shared with the nested models), first first."""
        self.requests = 0
        """How many requests were answered (every one offline)."""
        self._normalize = normalize or (lambda value: value)
        self._seen = 0

    def __repr__(self) -> str:
        return f"ReplayModel({self.run!r}, calls={len(self.calls)}, played={self.requests})"

    def nested(self, call_id: str, subagent: str = "") -> ReplayModel:
        """The model for the subagent run recorded under tool call ``call_id``.

        A call with no recorded run gets a model whose first request diverges (so a replay
        never falls through to a real model)."""
        model = self.nested_models.get(call_id)
        if model is None:
            model = ReplayModel(
                [],
                name=self.name,
                run=f"{self.run} > {subagent or call_id}",
                strict=True,
                normalize=self._normalize,
                log=self.divergences,
            )
            self.nested_models[call_id] = model
        return model

    def _diverged(self, turn: int, problem: str, diff: str = "") -> None:
        error = ReplayDivergedError(self.run, turn, problem, diff)
        self.divergences.append(error)
        if self.strict:
            raise error

    def _check(self, request: ModelRequest, turn: int, recorded: Mapping[str, Any]) -> None:
        if turn == 1 and self.system is not None:
            system = self._normalize(request.system)
            if system != self.system:
                diff = _diff({"system": self.system}, {"system": system})
                self._diverged(turn, "the system prompt differs", diff)
        expected = list(recorded.get("messages") or [])
        now = [self._normalize(message_dict(m)) for m in request.messages[self._seen :]]
        self._seen = len(request.messages)
        for i in range(max(len(expected), len(now))):
            old = expected[i] if i < len(expected) else None
            new = now[i] if i < len(now) else None
            if old is None or new is None or not _same(old, new):
                who = (new or old or {}).get("role", "?")
                where = f" for call {(new or old or {}).get('call_id')}" if who == "tool" else ""
                problem = f"new message {i + 1} ({who}{where}) differs from the recording"
                self._diverged(turn, problem, _diff(old, new))
                return

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests += 1
        turn = self.requests
        if turn > len(self.calls):
            error = ReplayDivergedError(
                self.run,
                turn,
                f"the run asked for model call {turn}, but the recording has "
                f"{len(self.calls)}" + (" (no recorded run)" if not self.calls else ""),
            )
            self.divergences.append(error)
            raise error
        recorded = self.calls[turn - 1]
        self._check(request, turn, recorded)
        response = recorded.get("response")
        if not isinstance(response, Mapping):
            raise ModelError(
                f"replayed failure of {self.run} turn {turn}: "
                f"{recorded.get('error') or 'the recorded model call has no response'}"
            )
        text = str(response.get("text") or "")
        if text:
            yield TextChunk(text=text)
        calls = list(response.get("tool_calls") or [])
        for c in calls:
            arguments = c.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            yield ToolCallPart(
                id=str(c.get("id", "")), name=str(c.get("name", "")), arguments=arguments
            )
        usage = recorded.get("usage") or {}
        yield UsageInfo(
            input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens")
        )
        stop = recorded.get("stop_reason") or ("tool_calls" if calls else "end_turn")
        yield Finish(stop_reason=str(stop))
