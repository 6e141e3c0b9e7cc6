"""``StaticCallView``: the call view for front ends without widgets.

* ``html`` (a kernel with ``display_style = "html"``): one HTML output refreshed with
  ``update_display_data`` at a low rate (each refresh re-sends the view, the stream clipped to
  its tail), and a final refresh with the result.
* ``text`` (terminal IPython, plain Python): the streamed text is printed as it flushes, then
  the result.

Same interface as :class:`~kode_nb.ui.call_view.CallView`, no widget imports.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any, Literal

from kode_nb.ui.coalesce import Coalescer, update_text
from kode_nb.ui.html import (
    STATE_LABELS,
    call_header_html,
    call_html,
    call_text,
    clip_head,
    took,
)
from kode_nb.ui.records import Record, approval_of, finished_call_record

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

    from kode_nb.types import ToolResult

__all__ = ["StaticCallView"]

HTML_RATE = 2.0
"""Refreshes a second of an ``html`` view (each one re-sends the whole view)."""


class StaticCallView:
    """A call view rendered as HTML refreshes (``style="html"``) or printed text (``"text"``)."""

    def __init__(
        self,
        *,
        tool: str,
        kind: str = "",
        arguments: Any = None,
        call_id: str = "",
        style: Literal["html", "text"] = "html",
        rate: float = 20.0,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.tool = tool
        self.kind = kind
        self.arguments = arguments
        self.call_id = call_id
        self.style = style
        self.state = "queued"
        self.result: ToolResult | None = None
        self.display_handle: DisplayHandle | None = None
        self.approval: dict[str, Any] | None = None
        self._chunks: list[str] = []
        self._t0 = time.monotonic()
        sink = self._refresh_html if style == "html" else self._print
        self._coalescer = Coalescer(
            sink, rate=min(rate, HTML_RATE) if style == "html" else rate, loop=loop
        )
        self.loop = self._coalescer.loop

    def on_update(self, data: Any) -> None:
        self._coalescer.push(update_text(data))

    def on_event(self, event: Any) -> None:
        kind = event.type
        if kind == "approval_resolved":
            self.approval = approval_of(event)
            kind = "approved" if event.approved else "denied"
        elif kind not in ("approval_requested", "started", "invalid_arguments"):
            return
        if self.result is None and kind != self.state:
            self.state = kind
            if self.style == "html":
                self._refresh_html("")
            else:
                print(f"[{self.tool}: {STATE_LABELS.get(kind, kind)}]")

    def finish(self, result: ToolResult) -> None:
        if self.result is not None:
            return
        self._coalescer.close()
        self.result = result
        if self.style == "html":
            self._refresh_html("")
        else:
            if self._chunks and not self._chunks[-1].endswith("\n"):
                print()
            print(f"[{result.status}] {self.tool} ({took(result)})")
            print(clip_head(result.text))

    @property
    def text(self) -> str:
        return "".join(self._chunks)

    @property
    def updates(self) -> int:
        return self._coalescer.pushes

    def _print(self, chunk: str) -> None:
        self._chunks.append(chunk)
        sys.stdout.write(chunk)
        sys.stdout.flush()

    def _refresh_html(self, chunk: str) -> None:
        if chunk:
            self._chunks.append(chunk)
        if self.display_handle is not None:
            self.display_handle.update(self)

    def show(self) -> None:
        from IPython.display import display

        from kode_nb.ui.cell_display import display_in_cell

        if self.style == "text":
            print(f"[{self.tool}: {STATE_LABELS.get(self.state, self.state)}] call {self.call_id}")
        elif self.display_handle is None:
            self.display_handle = display_in_cell(self)
        else:
            display(self, display_id=self.display_handle.display_id)

    @property
    def final(self) -> bool:
        """True once the view shows its last state (its static record)."""
        return self.result is not None

    def record(self) -> Record:
        """The static record of the finished call (raises while it runs)."""
        return finished_call_record(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.result is not None:
            return self.record().bundle()
        header = call_header_html(
            self.tool, self.kind, self.call_id, self.state, time.monotonic() - self._t0, self.result
        )
        return {
            "text/html": call_html(header, self.arguments, self.text, None, self.result),
            "text/plain": call_text(self.tool, self.call_id, self.state, self.result),
        }
