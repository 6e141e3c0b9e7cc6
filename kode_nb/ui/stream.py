"""``StreamView``: an anywidget that shows a growing text by receiving only the new part.

Setting a trait sends the whole value every time (10,000 sets of a growing string sent 316 MB
in all, as measured for this widget). Here each flush is one custom message
``{"append": chunk}``; the browser keeps the text per model while the model has a view (shared
by every view of it) and shows its tail. The first view of a model in a browser (first display,
a re-rendered output, a page reload) asks for the text so far, answered with
``{"reset": text}`` if there is any: chunks that arrived before are not lost. When the last view
goes or the model closes, the browser drops its copy. Flushes are rate-limited by
:class:`~kode_nb.ui.coalesce.Coalescer`. The front end is ``static/stream.js`` and
``static/stream.css`` beside this module (``node --check`` in ``scripts/dev.sh test``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anywidget
import traitlets

__all__ = ["StreamView"]

_STATIC = Path(__file__).parent / "static"


class StreamView(anywidget.AnyWidget):
    """Shows appended text; :meth:`append` sends only the new chunk to the browser."""

    _esm = _STATIC / "stream.js"
    _css = _STATIC / "stream.css"
    key = traitlets.Unicode("").tag(sync=True)
    """Identifies this stream's text in the browser (shared by all views of the model)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(key=uuid.uuid4().hex, **kwargs)
        self._chunks: list[str] = []
        self._length = 0
        self.on_msg(self._on_front_end_msg)

    def append(self, text: str) -> None:
        """Add ``text`` (one custom message carrying just that text)."""
        if not text:
            return
        self._chunks.append(text)
        self._length += len(text)
        self.send({"append": text})

    def drop_tail(self, tail: str) -> bool:
        """Take ``tail`` off the end of the text if it ends with it (the browser is sent the
        text left); ``False`` when it does not."""
        text = self.text
        if not tail or not text.endswith(tail):
            return False
        kept = text[: len(text) - len(tail)]
        self._chunks[:] = [kept] if kept else []
        self._length = len(kept)
        self.send({"reset": kept})
        return True

    @property
    def text(self) -> str:
        """Everything appended so far."""
        if len(self._chunks) > 1:
            self._chunks[:] = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "replay" and self._length:
            self.send({"reset": self.text})
