"""Parent-context compression: what a subagent learns about the conversation that called it.

A subagent starts with a fresh memory: it never sees its parent's messages. Before
each delegation a *compression hook* turns the parent's messages and the validated inputs into a
short text, which is prepended to the subagent's first user message. The default,
:func:`compress_context`, keeps only the parent's latest user request (shortened); give
``AgentDefinition(compress_context=...)`` your own ``fn(parent_messages, inputs) -> str`` (sync
or async) to summarise differently, or one returning ``""`` to pass nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias, Union

from kode_nb.models.base import Message, UserMessage

__all__ = ["CompressContext", "compress_context"]

CompressContext: TypeAlias = Callable[
    [Sequence[Message], Mapping[str, Any]], Union[str, Awaitable[str]]
]
"""``fn(parent_messages, inputs) -> str`` (or an awaitable of it)."""

_LIMIT = 500


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def compress_context(
    parent_messages: Sequence[Message], inputs: Mapping[str, Any], *, limit: int = _LIMIT
) -> str:
    """The default hook: the parent's latest user request, in at most ``limit`` characters.

    Returns ``""`` when the parent has no user message (a direct call from a notebook).
    """
    for message in reversed(parent_messages):
        if isinstance(message, UserMessage) and message.content.strip():
            return "The user's request to the calling agent: " + _shorten(message.content, limit)
    return ""
