"""The parts of a run's model requests that every model call resends, redacted once (internal).

Each model call records its whole request in its ``model_call`` span (stored as what it adds
to the previous call's, :mod:`kode_nb.traces._requests`), and a span redacts what it records.
The earlier messages and the tool schemas are the same objects at every call, so a run keeps
their redacted trace form (:class:`~kode_nb._redact.Redacted`) and records it again as it is.
A message object is never changed in place (an edit while stepping replaces it), so its form
is kept by identity; a form made against other secrets is redacted again when recorded. The
length of each form's compact JSON text is kept too, for the request's token estimate.
"""

from __future__ import annotations

from collections.abc import Sequence

from kode_nb._redact import Redacted, redacted
from kode_nb.models._cost import json_chars
from kode_nb.models.base import Message, ModelRequest, ToolSpec, message_dict

__all__ = ["RequestParts"]


class RequestParts:
    """One run's redacted message and tool-schema forms, by object, with their JSON lengths."""

    __slots__ = ("_messages", "_tools")

    def __init__(self) -> None:
        self._messages: dict[int, tuple[Message, Redacted, int]] = {}
        self._tools: tuple[Sequence[ToolSpec], list[Redacted], int] | None = None

    def _message(self, message: Message) -> tuple[Message, Redacted, int]:
        kept = self._messages.get(id(message))
        if kept is None or kept[0] is not message:
            form = redacted(message_dict(message))
            kept = self._messages[id(message)] = (message, form, json_chars(form.value))
        return kept  # the message is held: its id stays its own

    def messages(self, messages: Sequence[Message]) -> list[Redacted]:
        """``message_dict`` of each message, redacted, made once per message object."""
        return [self._message(m)[1] for m in messages]

    def _tool_forms(
        self, specs: Sequence[ToolSpec]
    ) -> tuple[Sequence[ToolSpec], list[Redacted], int]:
        kept = self._tools
        if kept is None or kept[0] is not specs:
            forms = [
                redacted({"name": t.name, "description": t.description, "parameters": t.parameters})
                for t in specs
            ]
            kept = self._tools = (specs, forms, _list_chars([json_chars(f.value) for f in forms]))
        return kept

    def tools(self, specs: Sequence[ToolSpec]) -> list[Redacted]:
        """The tool schemas as a request records them, made again when the specs change."""
        return self._tool_forms(specs)[1]

    def listed(self, request: ModelRequest) -> tuple[list[Redacted], list[Redacted], int]:
        """The request's messages and tool schemas as recorded, and how many characters the
        two lists take in compact JSON text."""
        kept = [self._message(m) for m in request.messages]
        _, tools, tool_chars = self._tool_forms(request.tools)
        chars = _list_chars([k[2] for k in kept]) + tool_chars
        return [k[1] for k in kept], tools, chars


def _list_chars(items: list[int]) -> int:
    """The length of ``[a,b,...]`` in compact JSON text, given each item's length."""
    return 2 + sum(items) + max(len(items) - 1, 0)
