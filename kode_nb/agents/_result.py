"""What a run returns: :class:`AgentRunResult`, with its :class:`RunUsage` and :data:`RunStatus`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from kode_nb.models.base import Message, UsageInfo, add_tokens
from kode_nb.traces._trace import Trace

__all__ = ["AgentRunResult", "RunStatus", "RunUsage"]

RunStatus: TypeAlias = Literal["completed", "max_turns", "time_limit", "cancelled", "error"]
"""How a run ended."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunUsage:
    """Totals of one run's model calls (a subagent's own usage is in its tool result).

    Token counts are ``None`` while no model call reported any (a server that sends no usage):
    unknown, not zero."""

    input_tokens: int | None = None
    """Prompt tokens, summed over the run's model calls that reported them."""
    output_tokens: int | None = None
    """Completion tokens, summed likewise."""
    requests: int = 0
    """Model calls made."""
    tool_calls: int = 0
    """Tool calls requested by the model."""

    def __add__(self, other: RunUsage) -> RunUsage:
        return RunUsage(
            input_tokens=add_tokens(self.input_tokens, other.input_tokens),
            output_tokens=add_tokens(self.output_tokens, other.output_tokens),
            requests=self.requests + other.requests,
            tool_calls=self.tool_calls + other.tool_calls,
        )

    def with_model_call(self, usage: UsageInfo, tool_calls: int) -> RunUsage:
        return RunUsage(
            input_tokens=add_tokens(self.input_tokens, usage.input_tokens),
            output_tokens=add_tokens(self.output_tokens, usage.output_tokens),
            requests=self.requests + 1,
            tool_calls=self.tool_calls + tool_calls,
        )

    def as_dict(self) -> dict[str, int | None]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "requests": self.requests,
            "tool_calls": self.tool_calls,
        }


@dataclass(frozen=True, kw_only=True)
class AgentRunResult:
    """What one run produced."""

    output: Any
    """The final answer: text, or an ``output_model`` instance; ``None`` unless completed."""
    status: RunStatus
    """``completed``, ``max_turns``, ``time_limit``, ``cancelled`` or ``error``."""
    error: str | None
    """Why the run did not complete (``None`` when it did)."""
    messages: tuple[Message, ...]
    """The whole conversation: the history given, the prompt, and every turn."""
    usage: RunUsage
    """Token and request totals of this run's own model calls."""
    turns: int
    """Model calls made."""
    run_id: str
    """The run's id (its tool calls and events carry it)."""
    agent: str
    """The agent's name."""
    trace: Trace
    """The recorded tree (redacted); export with ``to_json()`` / ``to_otel()``."""
    duration: float
    """Seconds the run took."""
    history_length: int = 0
    """How many of :attr:`messages` were given as ``message_history``."""
    warnings: tuple[str, ...] = ()
    """Doubts about the answer (empty, or a tool call written as text); also the run span's
    ``warnings`` attribute."""
    cost: float | None = None
    """US dollars of this run's model calls and every nested subagent's (the run span's
    ``cost``); ``None`` when a model's price or a token count is unknown (see
    :func:`kode_nb.models.set_price`)."""

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def total_usage(self) -> RunUsage:
        """Like :attr:`usage`, but with every nested subagent run's model calls added."""
        total = RunUsage()
        for span in self.trace.spans():
            if span.kind == "model_call":
                usage = span.attributes.get("usage") or {}
                calls = (span.attributes.get("response") or {}).get("tool_calls") or ()
                total = total + RunUsage(
                    input_tokens=_tokens(usage.get("input_tokens")),
                    output_tokens=_tokens(usage.get("output_tokens")),
                    requests=1,
                    tool_calls=len(calls),
                )
        return total

    def new_messages(self) -> tuple[Message, ...]:
        """The messages of this run (what to pass on as the next run's history, appended)."""
        return self.messages[self.history_length :]

    def __repr__(self) -> str:
        shown = (
            repr(self.output) if len(repr(self.output)) <= 60 else repr(self.output)[:57] + "..."
        )
        why = f", error={self.error!r}" if self.error else ""
        return f"AgentRunResult({self.agent!r}, status={self.status!r}, turns={self.turns}, output={shown}{why})"


def _tokens(value: object) -> int | None:
    return None if value is None or isinstance(value, bool) else int(value)  # type: ignore[call-overload]
