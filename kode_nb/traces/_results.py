"""Tool results kept in a trace: a preview and the size (internal).

A tool can return far more than anyone reads in a trace (a 500 MB file); a trace keeps the first
:data:`RESULT_PREVIEW_CHARS` characters of a result's text and, when it cut there, the whole
length in ``text_chars``. The whole result stays in the call's
:class:`~kode_nb.types.ToolResult` (``AgentRunResult``'s ``tool_results`` and the executor's
answers); what the *model* got back is recorded apart from it, whole (``model_text`` on the
tool-call span when ``max_result_chars`` cut the text, and the tool message of the next model
call), so a replay gives the model the same text.

``details`` (the structured data kept out of the model's view) is bounded the same way: when its
JSON is longer than the preview it is kept as the start of that JSON text, with
``details_chars``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kode_nb._redact import known_secrets, redact

__all__ = ["RESULT_PREVIEW_CHARS", "bounded_result", "preview_text"]

RESULT_PREVIEW_CHARS = 65_536
"""How much of a tool result's text a trace keeps (64 Ki characters: about 16,000 tokens, what
the trace viewer shows at once)."""

_MARGIN = 4096
"""Characters past the preview that are redacted with it, so a secret the cut runs through is
found whole (and replaced) before the cut, not left half visible."""


def preview_text(text: str, limit: int = RESULT_PREVIEW_CHARS) -> str:
    """The first ``limit`` characters of ``text``, redacted as if the text were whole."""
    if len(text) <= limit:
        return str(redact(text))
    longest = max((len(s) for s in known_secrets()), default=0)
    window = text[: limit + _MARGIN + longest]
    return str(redact(window))[:limit]


def bounded_result(
    result: Mapping[str, Any], *, chars: int | None = None, limit: int = RESULT_PREVIEW_CHARS
) -> dict[str, Any]:
    """A tool result's trace form (``{status, is_error, text, error_type, duration, details}``)
    with ``text`` cut to ``limit`` characters (``text_chars``: its whole length) and ``details``
    to ``limit`` characters of JSON (``details_chars``). ``chars``: the whole text's length when
    ``text`` is already only its start (a replayed result)."""
    out = dict(result)
    text = out.get("text")
    if isinstance(text, str):
        whole = max(len(text), chars or 0)
        if whole > limit or whole > len(text):
            out["text"] = preview_text(text, limit)
            out["text_chars"] = whole
    details = out.get("details")
    if details is not None and not isinstance(details, (bool, int, float)):
        dumped = details if isinstance(details, str) else _dumps(details)
        if len(dumped) > limit:
            out["details"] = preview_text(dumped, limit)
            out["details_chars"] = len(dumped)
    return out


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # a cycle, or nested too deep to write
        return f"<{type(value).__name__} that cannot be written as JSON>"
