"""``StreamView``: an anywidget that shows a growing text by receiving only the new part.

Setting a trait sends the whole value every time (10,000 sets of a growing string = 316 MB,
JUPYTER-NOTES §2). Here each flush is one custom message ``{"append": chunk}``; the browser
keeps the text per model (shared by every view of it, so a re-rendered output shows
everything) and shows its tail. When the model is created in a browser (first display, or a
page reload) it asks once for the text so far, answered with ``{"reset": text}`` if there is
any: chunks that arrived before the model existed are not lost. Flushes are rate-limited by :class:`~kode_nb.ui.coalesce.Coalescer`.
"""

from __future__ import annotations

import uuid
from typing import Any

import anywidget
import traitlets

__all__ = ["StreamView"]

_ESM = r"""
const STREAMS = new Map();   // key -> { text, views: Set<(chunk) => void> }
const MAX_SHOWN = 200000;

function stateOf(model) {
  const key = model.get("key");
  let st = STREAMS.get(key);
  if (!st) {
    st = { text: "", views: new Set(), fresh: true };
    STREAMS.set(key, st);
  }
  return st;
}

function show(st, pre) {
  const t = st.text;
  pre.textContent = t.length > MAX_SHOWN
    ? `[… ${t.length - MAX_SHOWN} earlier characters not shown]\n` + t.slice(-MAX_SHOWN)
    : t;
}

export default {
  initialize({ model }) {
    const st = stateOf(model);
    const onMsg = (msg) => {
      if (!msg) return;
      if (typeof msg.reset === "string") {
        st.text = msg.reset;
        for (const v of st.views) v(null);
      } else if (typeof msg.append === "string") {
        st.text += msg.append;
        for (const v of st.views) v(msg.append);
      }
    };
    model.on("msg:custom", onMsg);
    // Chunks sent before this model existed in the browser were missed: ask for the text so far.
    if (st.fresh) model.send({ event: "replay" });
    st.fresh = false;
    return () => model.off("msg:custom", onMsg);
  },
  render({ model, el }) {
    const st = stateOf(model);
    const pre = document.createElement("pre");
    pre.className = "kode-stream";
    el.appendChild(pre);
    show(st, pre);
    requestAnimationFrame(() => { pre.scrollTop = pre.scrollHeight; });  // once laid out
    const onChunk = (chunk) => {
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      if (chunk === null || st.text.length > MAX_SHOWN) show(st, pre);
      else pre.appendChild(document.createTextNode(chunk));
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    };
    st.views.add(onChunk);
    return () => st.views.delete(onChunk);
  },
};
"""

_CSS = """
.kode-stream {
  max-height: 16em; overflow: auto; margin: 2px 0; padding: 4px 6px; white-space: pre-wrap;
  font-size: 12px; background: var(--jp-layout-color2, #f5f5f5);
  color: var(--jp-content-font-color1, #222);
}
"""


class StreamView(anywidget.AnyWidget):
    """Shows appended text; :meth:`append` sends only the new chunk to the browser."""

    _esm = _ESM
    _css = _CSS
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

    @property
    def text(self) -> str:
        """Everything appended so far."""
        if len(self._chunks) > 1:
            self._chunks[:] = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "replay" and self._length:
            self.send({"reset": self.text})
