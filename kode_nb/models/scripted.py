"""ScriptedModel: the notebook states each turn of the model, for tests and teaching.

A script is a sequence of turns; each :meth:`ScriptedModel.stream` call plays the next one::

    model = ScriptedModel([
        call("add", a=1, b=2),                       # one turn, one tool call
        [call("read", path="a.txt"), call("read", path="b.txt")],   # parallel calls
        Turn(calls=[call("add", a=3, b=4)], text="Adding again."),  # text, then calls
        "The sum is 7.",                             # a final answer
        lambda request: f"You said {len(request.messages)} things.",  # decided per request
    ])

Before a turn is played its calls are checked against the request: a tool that was not offered,
or arguments that do not validate against the tool's schema, raise :class:`ScriptMismatch` (use
:func:`raw_call` to script deliberately bad arguments). Asking for a turn past the end raises
:class:`ScriptExhausted`. Text is streamed in word-sized :class:`TextChunk` pieces.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, Union

from kode_nb.errors import ToolDefinitionError, ToolValidationError
from kode_nb.models._content import content_text
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
from kode_nb.models.errors import ScriptExhausted, ScriptMismatch
from kode_nb.types import normalize_name

__all__ = ["ScriptItem", "ScriptedCall", "ScriptedModel", "Turn", "call", "raw_call"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedCall:
    """One scripted tool call."""

    name: str
    """The tool to call (as the model would name it)."""
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    """The arguments: a mapping (sent as JSON), or raw text sent as is."""
    id: str | None = None
    """The call id; ``None`` = ``scripted-<turn>-<n>``."""
    check: bool = True
    """Validate the arguments against the tool's schema before playing the turn."""

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False, default=str)


def call(name: str, /, **arguments: Any) -> ScriptedCall:
    """A scripted call of tool ``name`` with keyword ``arguments`` (checked against its schema)."""
    return ScriptedCall(name=name, arguments=arguments)


def raw_call(name: str, arguments: str, /) -> ScriptedCall:
    """A scripted call whose arguments are raw text, sent unchecked (e.g. invalid on purpose)."""
    return ScriptedCall(name=name, arguments=arguments, check=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    """One model turn: optional text, then tool calls (in parallel)."""

    calls: Sequence[ScriptedCall] = ()
    """The tool calls of this turn; none = a final answer."""
    text: str = ""
    """Text streamed before the calls (the answer, when there are no calls)."""


ScriptItem: TypeAlias = Union[
    Turn, str, ScriptedCall, Sequence[ScriptedCall], Callable[[ModelRequest], Any]
]
"""A :class:`Turn`; a ``str`` (final answer); one call; a list of calls (one turn, in parallel);
or a function of the :class:`ModelRequest` returning any of these."""


class ScriptedModel:
    """A model that plays a script, one turn per :meth:`stream` call.

    ``requests`` keeps every request it received, so a test (or a lesson) can look at exactly
    what the model was sent.
    """

    def __init__(self, script: Sequence[ScriptItem], *, name: str = "scripted") -> None:
        if isinstance(script, (str, Turn, ScriptedCall)) or not isinstance(script, Sequence):
            raise TypeError(
                "ScriptedModel(script) takes a list of turns, e.g. "
                "[call('add', a=1, b=2), 'The answer is 3.']"
            )
        self.name = name
        self.script: tuple[ScriptItem, ...] = tuple(script)
        """The turns, in order."""
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""
        self._next = 0
        for i, item in enumerate(self.script, 1):
            if not callable(item):
                _to_turn(item, i)  # fail at construction on a malformed item

    @property
    def turns_played(self) -> int:
        """How many turns have been played."""
        return self._next

    @property
    def remaining(self) -> int:
        """How many scripted turns are left."""
        return len(self.script) - self._next

    def reset(self) -> None:
        """Start the script again from the first turn (and forget the requests)."""
        self._next = 0
        self.requests.clear()

    def __repr__(self) -> str:
        return f"ScriptedModel(turns={len(self.script)}, played={self._next})"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        turn_no = self._next + 1
        if self._next >= len(self.script):
            raise ScriptExhausted(len(self.script), turn_no)
        self._next += 1
        self.requests.append(request)
        item = self.script[turn_no - 1]
        if callable(item) and not isinstance(item, (Turn, ScriptedCall)):
            item = item(request)
        turn = _to_turn(item, turn_no)
        specs = {spec.name: spec for spec in request.tools}
        for scripted in turn.calls:
            _check_call(scripted, specs, turn_no)
        for piece in split_words(turn.text):
            yield TextChunk(text=piece)
        out_words = len(turn.text.split())
        for n, scripted in enumerate(turn.calls, 1):
            arguments = scripted.arguments_json()
            out_words += 1 + len(arguments.split())
            yield ToolCallPart(
                id=scripted.id or f"scripted-{turn_no}-{n}", name=scripted.name, arguments=arguments
            )
        yield UsageInfo(input_tokens=count_words(request), output_tokens=out_words)
        yield Finish(stop_reason="tool_calls" if turn.calls else "end_turn")


def _to_turn(item: object, turn_no: int) -> Turn:
    if isinstance(item, Turn):
        turn = item
    elif isinstance(item, str):
        turn = Turn(text=item)
    elif isinstance(item, ScriptedCall):
        turn = Turn(calls=(item,))
    elif isinstance(item, Sequence) and item and all(isinstance(c, ScriptedCall) for c in item):
        turn = Turn(calls=tuple(item))
    else:
        raise TypeError(
            f"ScriptedModel turn {turn_no}: expected a str (final answer), call(...), a list of "
            f"call(...) or Turn(...), got {item!r}"
        )
    bad = [c for c in turn.calls if not isinstance(c, ScriptedCall)]
    if bad:
        raise TypeError(
            f"ScriptedModel turn {turn_no}: Turn.calls must hold call(...) items, got {bad[0]!r}"
        )
    return turn


def _check_call(scripted: ScriptedCall, specs: Mapping[str, ToolSpec], turn_no: int) -> None:
    spec = specs.get(scripted.name)
    if spec is None:
        same = [n for n in specs if normalize_name(n) == normalize_name(scripted.name)]
        offered = ", ".join(f"'{n}'" for n in specs) or "none"
        hint = f" (did you mean '{same[0]}'?)" if same else ""
        raise ScriptMismatch(
            scripted.name, turn_no, f"no such tool was offered{hint}; offered: {offered}"
        )
    if not scripted.check:
        return
    try:
        spec.validate(scripted.arguments)
    except ToolValidationError as exc:
        problems = "; ".join(issue.render() for issue in exc.issues)
        raise ScriptMismatch(scripted.name, turn_no, f"invalid arguments: {problems}") from None
    except ToolDefinitionError as exc:
        raise ScriptMismatch(
            scripted.name, turn_no, f"the tool's parameters schema is unusable: {exc}"
        ) from None


_WORD = re.compile(r"\s*\S+\s*|\s+")


def split_words(text: str) -> list[str]:
    """``text`` in word-sized pieces (with their spaces) that join back to ``text``."""
    return _WORD.findall(text)


def count_words(request: ModelRequest) -> int:
    """A rough, deterministic input-size count (words) for offline models' usage."""
    total = len(request.system.split())
    for message in request.messages:
        if isinstance(message, UserMessage):
            total += len(message.content.split())
        elif isinstance(message, AssistantMessage):
            total += len(message.text.split())
            total += sum(1 + len(c.arguments.split()) for c in message.tool_calls)
        elif isinstance(message, ToolResultMessage):
            total += len(content_text(message.content).split())
    return total
