"""The parts of a run's model requests that every model call resends, redacted once (internal).

Each model call records its whole request in its ``model_call`` span (stored as what it adds
to the previous call's, :mod:`kode_nb.traces._requests`), and a span redacts what it records.
The earlier messages and the tool schemas are the same objects at every call, so a run keeps
their redacted trace form (:class:`~kode_nb._redact.Redacted`) and records it again as it is.
A message object is never changed in place (an edit while stepping replaces it), so its form
is kept by identity; a form made against other secrets is redacted again when recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from kode_nb._redact import Redacted, redacted
from kode_nb.models.base import Message, ToolSpec, message_dict

__all__ = ["RequestParts"]


class RequestParts:
    """One run's redacted message and tool-schema forms, by object."""

    __slots__ = ("_messages", "_tools")

    def __init__(self) -> None:
        self._messages: dict[int, tuple[Message, Redacted]] = {}
        self._tools: tuple[Sequence[ToolSpec], list[Redacted]] | None = None

    def message(self, message: Message) -> Redacted:
        """``message_dict(message)``, redacted, made once per message object."""
        kept = self._messages.get(id(message))
        if kept is not None and kept[0] is message:
            return kept[1]
        form = redacted(message_dict(message))
        self._messages[id(message)] = (message, form)  # the message is held: its id stays its
        return form

    def messages(self, messages: Sequence[Message]) -> list[Redacted]:
        return [self.message(m) for m in messages]

    def tools(self, specs: Sequence[ToolSpec]) -> list[Redacted]:
        """The tool schemas as a request records them, made again when the specs change."""
        kept = self._tools
        if kept is not None and kept[0] is specs:
            return kept[1]
        forms = [
            redacted({"name": t.name, "description": t.description, "parameters": t.parameters})
            for t in specs
        ]
        self._tools = (specs, forms)
        return forms
