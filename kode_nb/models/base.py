"""The provider-neutral model protocol: messages in, a stream of events out.

A :class:`Model` turns a :class:`ModelRequest` (system prompt, neutral messages, tool specs and
settings) into an async stream of :data:`ModelEvent`: :class:`TextChunk` pieces of the answer,
complete :class:`ToolCallPart` calls (adapters assemble the provider's fragments), one
:class:`UsageInfo` and a final :class:`Finish`. An adapter that talks to a server also yields a
:class:`RequestSent` with the JSON body it POSTed (after the server profile's adjustments), so
traces can show what the model was sent. :func:`collect` folds a stream into a
:class:`ModelResponse`.

Adapters (``openai_compat``, ``anthropic``) convert the neutral messages to their provider's
format; the offline models (``scripted``, ``test_model``) need no conversion at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, Union, runtime_checkable

from kode_nb.errors import ConfigurationError
from kode_nb.types import ContentBlock

if TYPE_CHECKING:
    from kode_nb.tools._model import ArgumentValidator, Tool

__all__ = [
    "AssistantMessage",
    "Finish",
    "Message",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Notice",
    "RequestSent",
    "TOOL_CHOICES",
    "TextCallsRecovered",
    "TextChunk",
    "ToolCallPart",
    "ToolCallRequest",
    "ToolResultMessage",
    "ToolSpec",
    "UsageInfo",
    "UserMessage",
    "collect",
]

# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallRequest:
    """A tool call the model asked for, as it appears in the conversation history."""

    id: str
    """The provider's call id (``call_…``, ``toolu_…``); tool results refer to it."""
    name: str
    """The tool name the model used."""
    arguments: str
    """The arguments as the raw JSON text the model sent (may be invalid JSON)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UserMessage:
    """A user turn."""

    content: str
    """The user's text."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantMessage:
    """A model turn: its text and the tool calls it made."""

    text: str = ""
    """The answer text (may be empty when the turn only calls tools)."""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    """The tool calls of this turn, in the order the model made them."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultMessage:
    """The result of one tool call, sent back to the model."""

    call_id: str
    """The :attr:`ToolCallRequest.id` this answers."""
    name: str
    """The tool's name."""
    content: tuple[ContentBlock, ...]
    """``ToolResult.content``: what the model sees (details never go to the model)."""
    is_error: bool = False
    """The call failed; ``content`` says why."""


Message: TypeAlias = Union[UserMessage, AssistantMessage, ToolResultMessage]
"""One message of the provider-neutral conversation."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """A tool as offered to a model: adapters convert it to the provider's format."""

    name: str
    """The tool name the model sees."""
    description: str
    """What the tool does."""
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""
    validator: ArgumentValidator | None = field(default=None, compare=False, repr=False)
    """Optional: the tool's own validator (offline models check scripted arguments with it;
    without it they validate against ``parameters``)."""

    @classmethod
    def from_tool(cls, tool: Tool) -> ToolSpec:
        """The spec of a registered :class:`~kode_nb.tools._model.Tool` (keeps its validator)."""
        return cls(
            name=tool.name,
            description=tool.description,
            parameters=tool.validator.schema,
            validator=tool.validator,
        )

    def validate(
        self, arguments: str | bytes | Mapping[str, Any] | None, *, strict: bool = False
    ) -> dict[str, Any]:
        """``arguments`` checked by the tool's own validator, or against ``parameters`` when
        there is none. Raises :class:`~kode_nb.errors.ToolValidationError` naming each bad
        field, or :class:`~kode_nb.errors.ToolDefinitionError` when ``parameters`` is no usable
        schema. A validator that hands invalid arguments on instead of raising (a subagent's,
        whose call then answers with the problems) is checked through its ``strict`` one when
        ``strict`` is true."""
        validator = self.validator
        if strict:
            validator = getattr(validator, "strict", None) or validator
        if validator is None:
            from kode_nb.tools._raw_schema import schema_validator

            validator = schema_validator(self.parameters)
        return validator.validate(arguments, tool=self.name)


def message_dict(message: Message) -> dict[str, Any]:
    """A message in the trace's JSON form (as ``model_call`` spans record it)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, AssistantMessage):
        return {
            "role": "assistant",
            "text": message.text,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
            ],
        }
    from kode_nb.types import ToolResult

    return {
        "role": "tool",
        "call_id": message.call_id,
        "name": message.name,
        "content": ToolResult(content=message.content).text,
        "is_error": message.is_error,
    }


TOOL_CHOICES = ("auto", "required", "none")
"""The ``tool_choice`` keywords; any other value names the one tool the model must call."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSettings:
    """Sampling and transport settings for one request.

    Time limits of one model request: ``first_byte_timeout`` seconds of silence before a streamed
    answer starts (a non-streamed answer, generated whole before the server sends a byte, gets
    ``timeout``), then ``timeout`` seconds between received chunks; ``deadline`` bounds the
    whole wait for the answer to start, across retries and backoff waits; ``total_timeout``
    bounds the whole call, streaming included. A request that got no answer in time is not
    retried (a busy server would only get busier). SSE keep-alive comments are not an answer.
    On local servers the first two grow with the prompt (a server reading a long prompt is not
    a hung one; llama-server also streams its reading progress).
    """

    temperature: float | None = None
    """Sampling temperature; ``None`` = the provider's default."""
    max_tokens: int | None = None
    """Cap on output tokens; ``None`` = the adapter's default (Anthropic requires one: 4096)."""
    timeout: float = 60.0
    """Seconds allowed for connecting and between received chunks (idle timeout)."""
    first_byte_timeout: float = 30.0
    """Seconds of silence allowed before a streamed answer's first byte."""
    deadline: float | None = 60.0
    """Seconds one model request may wait for its answer to start, across all retries."""
    total_timeout: float | None = 600.0
    """Seconds one model call may take in all, from the request to the answer's last byte."""
    max_retries: int = 3
    """Retries on HTTP 429 and 5xx and failed connections (exponential backoff, honouring
    ``Retry-After``), within ``deadline``."""
    tool_choice: str | None = None
    """``"auto"``, ``"required"``, ``"none"`` or a tool name; ``None``: the model's default
    (``"auto"`` when tools are offered)."""

    def __post_init__(self) -> None:
        for name in ("timeout", "first_byte_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(
                    f"ModelSettings.{name} must be a positive number, got {value!r}"
                )
        for name in ("deadline", "total_timeout"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
            ):
                raise ConfigurationError(
                    f"ModelSettings.{name} must be a positive number or None, got {value!r}"
                )
        if self.tool_choice is not None:
            check_tool_choice(self.tool_choice, "ModelSettings")

    def describe(self) -> dict[str, object]:
        """The settings as a plain dict (for traces and views)."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "tool_choice": self.tool_choice or "auto",
            "first_byte_timeout": self.first_byte_timeout,
            "timeout": self.timeout,
            "deadline": self.deadline,
            "total_timeout": self.total_timeout,
            "max_retries": self.max_retries,
        }


def check_tool_choice(value: object, where: str) -> str:
    """``value`` as a tool choice, or ``ConfigurationError`` saying what is allowed."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(
            f"{where}: tool_choice must be 'auto', 'required', 'none' or a tool name, got {value!r}"
        )
    return value.strip()


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    """Everything a model needs for one turn."""

    system: str
    """The system prompt (``""`` for none)."""
    messages: tuple[Message, ...]
    """The conversation so far, oldest first."""
    tools: tuple[ToolSpec, ...] = ()
    """The tools the model may call this turn."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """Sampling and transport settings."""


# --------------------------------------------------------------------------- stream events


@dataclass(frozen=True, kw_only=True, slots=True)
class TextChunk:
    """A piece of the answer text."""

    text: str
    """The new text, to append."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallPart:
    """One complete tool call (adapters assemble the provider's streamed fragments)."""

    id: str
    """The provider's call id."""
    name: str
    """The tool name."""
    arguments: str
    """The raw JSON text of the arguments (passed through even when malformed)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageInfo:
    """Token usage of one model call; ``None`` = the server did not say (never shown as 0)."""

    input_tokens: int | None = None
    """Prompt tokens (``None``: unknown)."""
    output_tokens: int | None = None
    """Completion tokens (``None``: unknown)."""

    def __add__(self, other: UsageInfo) -> UsageInfo:
        return UsageInfo(
            input_tokens=add_tokens(self.input_tokens, other.input_tokens),
            output_tokens=add_tokens(self.output_tokens, other.output_tokens),
        )


def add_tokens(a: int | None, b: int | None) -> int | None:
    """``a + b`` where known; ``None`` only when both are unknown."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


@dataclass(frozen=True, kw_only=True, slots=True)
class Notice:
    """Something the adapter did to cope with the server (recorded in the trace, not an error)."""

    text: str
    """What happened, in one sentence (``"the server sent no events; retried without
    streaming"``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TextCallsRecovered:
    """The answer text streamed so far was tool calls written as text: it is taken back, and
    the :class:`ToolCallPart` events that follow are the calls read from it."""

    text: str
    """The raw text the calls were read from (kept in the trace)."""
    form: str = "json"
    """How the calls were written (``"json"``, ``"tool_call tags"``, ``"[TOOL_CALLS]"``...)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Finish:
    """The end of a model turn."""

    stop_reason: str
    """``"end_turn"``, ``"tool_calls"``, ``"max_tokens"``, or the provider's own reason."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestSent:
    """The request as it went on the wire (yielded before the answer's first event).

    Only the JSON body and where it went: never headers, so never an API key. When an adapter
    sends a second request for the same turn (e.g. retrying without streaming), the last one is
    the one that produced the answer."""

    provider: str
    """The adapter's provider (``"openai"``, ``"anthropic"``, an OpenAI-compatible profile)."""
    path: str
    """The endpoint path below the base URL (``"/chat/completions"``, ``"/messages"``)."""
    model: str
    """The provider's model id."""
    body: Mapping[str, Any]
    """The JSON body, exactly as sent."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "path": self.path,
            "model": self.model,
            "body": dict(self.body),
        }


ModelEvent: TypeAlias = Union[
    TextChunk, ToolCallPart, UsageInfo, Finish, Notice, RequestSent, TextCallsRecovered
]
"""One item of a model's stream."""


@runtime_checkable
class Model(Protocol):
    """Anything that streams a turn for a request: scripted, test, or a real provider."""

    name: str
    """E.g. ``"scripted"``, ``"openai:gpt-4.1-mini"``."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one turn: text deltas and tool calls, then usage, then :class:`Finish`."""
        ...


# --------------------------------------------------------------------------- collecting


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponse:
    """A whole model turn, folded from its stream by :func:`collect`."""

    text: str
    """The answer text (all deltas joined)."""
    tool_calls: tuple[ToolCallRequest, ...]
    """The tool calls, in stream order."""
    usage: UsageInfo
    """Token usage (summed if the stream reported more than once)."""
    stop_reason: str
    """The :class:`Finish` reason (``"end_turn"`` if the stream had none)."""
    notices: tuple[str, ...] = ()
    """The :class:`Notice` texts of the stream, in order."""
    request: RequestSent | None = None
    """The last :class:`RequestSent` of the stream (``None``: the model sends nothing over the
    wire, e.g. the offline models)."""
    recovered_text: str | None = None
    """The raw answer text the tool calls were read from (:class:`TextCallsRecovered`), else
    ``None``."""

    def to_message(self) -> AssistantMessage:
        """This turn as an :class:`AssistantMessage` for the conversation history."""
        return AssistantMessage(text=self.text, tool_calls=self.tool_calls)


async def collect(
    stream: AsyncIterator[ModelEvent], on_text: Callable[[str], None] | None = None
) -> ModelResponse:
    """Consume a model stream into a :class:`ModelResponse`; ``on_text`` sees each text delta."""
    text: list[str] = []
    calls: list[ToolCallRequest] = []
    usage = UsageInfo()
    stop_reason = ""
    notices: list[str] = []
    sent: RequestSent | None = None
    recovered: str | None = None
    async for event in stream:
        if isinstance(event, TextChunk):
            text.append(event.text)
            if on_text is not None:
                on_text(event.text)
        elif isinstance(event, ToolCallPart):
            calls.append(ToolCallRequest(id=event.id, name=event.name, arguments=event.arguments))
        elif isinstance(event, UsageInfo):
            usage = usage + event
        elif isinstance(event, Finish):
            stop_reason = event.stop_reason
        elif isinstance(event, Notice):
            notices.append(event.text)
        elif isinstance(event, RequestSent):
            sent = event
        elif isinstance(event, TextCallsRecovered):
            recovered = event.text
            text.clear()
    if not stop_reason:
        stop_reason = "tool_calls" if calls else "end_turn"
    return ModelResponse(
        text="".join(text),
        tool_calls=tuple(calls),
        usage=usage,
        stop_reason=stop_reason,
        notices=tuple(notices),
        request=sent,
        recovered_text=recovered,
    )
