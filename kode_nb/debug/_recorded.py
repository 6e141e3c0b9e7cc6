"""What a recorded tool call answers when a replay or a fork plays it back (internal).

A trace keeps the first characters of a long tool result (``text`` with ``text_chars``, see
:mod:`kode_nb.traces._results`). Played back, such a call must still give the model exactly the
text the model got when the run was recorded:

* the text was cut for the model (``max_result_chars``: the span has ``model_text`` and
  ``cut_chars``): the call answers with a :class:`~kode_nb.agents._run.TextStart` — the start
  the model got, counted as the whole length — which the loop cuts with the same note, so the
  model gets ``model_text`` again;
* the model got the whole text (no limit, or a limit above it): the call answers with the tool
  message the next model call of the run recorded (``messages``), which is that text;
* the run ended before a model call read it: the call answers with the kept start (counted as
  the whole length), and nothing compares it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kode_nb.agents._run import TextStart
from kode_nb.agents._tools import cut_note
from kode_nb.traces._trace import Span
from kode_nb.types import ContentBlock, TextBlock

__all__ = ["recorded_content"]


def recorded_content(run: Span, span: Span) -> tuple[ContentBlock, ...]:
    """The content tool-call ``span`` of ``run`` answers with when played back (see above)."""
    a = span.attributes
    found = a.get("result")
    result: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    text = str(result.get("text", ""))
    whole = result.get("text_chars")
    if not isinstance(whole, int) or whole <= len(text):
        return (TextBlock(text=text),)
    model_text, cut = a.get("model_text"), a.get("cut_chars")
    if isinstance(model_text, str) and isinstance(cut, int) and whole - cut > 0:
        limit = whole - cut
        note = cut_note(whole, limit)
        start = model_text[: -len(note)] if model_text.endswith(note) else model_text[:limit]
        if text[:limit] == start:  # the kept start holds it: the replay keeps as much
            start = text
        return (TextStart(text=start, chars=whole),)
    sent = _sent_text(run, str(a.get("call_id", "")))
    if sent is not None:
        return (TextBlock(text=sent),)
    return (TextStart(text=text, chars=whole),)


def _sent_text(run: Span, call_id: str) -> str | None:
    """The tool message for ``call_id`` a model call of ``run`` recorded (what the model got)."""
    for turn in run.children:
        for s in turn.children:
            if s.kind != "model_call":
                continue
            for m in s.attributes.get("messages") or ():
                if (
                    isinstance(m, Mapping)
                    and m.get("role") == "tool"
                    and m.get("call_id") == call_id
                    and isinstance(m.get("content"), str)
                ):
                    return str(m["content"])
    return None
