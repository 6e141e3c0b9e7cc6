"""``CallView``: the live view of one tool call.

Shows the tool, its kind, the arguments, a status with the elapsed time, the ``on_update``
stream (coalesced: at most ``rate`` flushes a second, only new text sent, a final flush
guaranteed), the approval prompt when one is needed, then the result or error and the duration.

All widget changes happen on the event loop's thread: executor events and updates arrive there
(:meth:`on_event`, :meth:`on_update`), and :meth:`finish` is called by the task that ran the call.
While the call runs, the view's mimebundle also carries ``text/html`` and ``text/plain``
snapshots. Once final, :meth:`finish` replaces the displayed output in place
(``update_display_data``) by the call's static record (:func:`kode_nb.ui.records.call_record`,
no widget MIME type), so a notebook saved and reopened without a kernel shows the final state.

Whoever starts a call makes its view (``%tool``, a run's tool rows, a framework run's calls);
a call made straight on the session's executor (``await executor.call(...)`` in a cell, the
form expanded cells write) has none until it asks a person: :class:`AskedCalls` then gives it
one at its ``approval_requested`` event, before the approver puts the buttons in it, and ends
it with the call's record at the call's end event. So every approval prompt of a call is in a
call view, and every call view ends as a record, whichever way the call started.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import ipywidgets as W  # type: ignore[import-untyped]

from kode_nb.ui.coalesce import Coalescer, update_text
from kode_nb.ui.html import (
    call_args_html,
    call_header_html,
    call_html,
    call_text,
    result_body_html,
)
from kode_nb.ui.records import Record, approval_of, finished_call_record, mark_live

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

    from kode_nb.types import ToolResult
    from kode_nb.ui.approval import ApprovalPrompt
    from kode_nb.ui.stream import StreamView

__all__ = ["END_EVENTS", "AskedCalls", "CallView"]

END_EVENTS = ("completed", "failed", "timed_out", "cancelled")
"""The executor events that end a call; each carries its ``result``."""

TICK = 1.0
"""Seconds between elapsed-time refreshes while a call is pending."""


class CallView(W.VBox):  # type: ignore[misc]
    """The live view of one call; feed it events, updates and finally the result."""

    children: tuple[Any, ...]

    def __init__(
        self,
        *,
        tool: str,
        kind: str = "",
        arguments: Any = None,
        call_id: str = "",
        rate: float = 20.0,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.tool = tool
        self.kind = kind
        self.arguments = arguments
        self.call_id = call_id
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.state = "queued"
        """``queued``, ``approval_requested``, ``approved``, ``started``, ... then the result's status."""
        self.result: ToolResult | None = None
        self.stream: StreamView | None = None
        self.prompt: ApprovalPrompt | None = None
        self.display_handle: DisplayHandle | None = None
        self.approval: dict[str, Any] | None = None
        """The decision on the call's approval (a record's ``approval``), once made."""
        self._t0 = time.monotonic()
        self._coalescer = Coalescer(self._flush, rate=rate, loop=self.loop)
        self._last_update = ""
        self._tick: asyncio.TimerHandle | None = None
        self.header = W.HTML(self._header_html())
        self.args = W.HTML(call_args_html(arguments))
        super().__init__(
            [self.header, self.args], layout=W.Layout(border="1px solid #ccc", padding="2px 6px")
        )
        self._tick = self.loop.call_later(TICK, self._on_tick)

    # ------------------------------------------------------------------ inputs

    def on_update(self, data: Any) -> None:
        """The executor's ``on_update`` callback: O(1), any thread."""
        self._last_update = text = update_text(data)
        self._coalescer.push(text)

    def on_event(self, event: Any) -> None:
        """A (non-update) executor event for this call."""
        kind = event.type
        if kind == "approval_resolved":
            self.approval = approval_of(event)
            self._set_state("approved" if event.approved else "denied")
        elif kind in ("approval_requested", "started", "invalid_arguments"):
            self._set_state(kind)

    def show_approval(self, prompt: ApprovalPrompt) -> None:
        """Add the prompt; the arguments shown become the validated ones it is about."""
        self.prompt = prompt
        self.arguments = dict(prompt.request.arguments)
        self.args.value = call_args_html(self.arguments)
        self._set_state("approval_requested")
        self.children = (*self.children, prompt)

    def finish(self, result: ToolResult) -> None:
        """Final flush, the result, and a refreshed display (idempotent)."""
        if self.result is not None:
            return
        self._coalescer.close()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        self._drop_repeated_update(result)
        self.result = result
        self.state = result.status
        self.header.value = self._header_html()
        body = result_body_html(result, markdown=self.kind == "think")  # a subagent's answer
        self.children = (*self.children, W.HTML(body))
        if self.display_handle is not None:
            self.display_handle.update(self.record())

    @property
    def final(self) -> bool:
        """True once the view shows its last state (its static record)."""
        return self.result is not None

    def record(self) -> Record:
        """The static record of the finished call (raises while it runs)."""
        return finished_call_record(self)

    # ------------------------------------------------------------------ internals

    def _drop_repeated_update(self, result: ToolResult) -> None:
        """A streaming tool's last update that is also its result (a generator's last item)
        is shown once: as the result."""
        stream, last = self.stream, self._last_update
        if stream is None or result.status != "ok" or last.rstrip("\n") != result.text:
            return
        if stream.drop_tail(last) and not stream.text:
            self.children = tuple(c for c in self.children if c is not stream)

    def _flush(self, chunk: str) -> None:
        if self.stream is None:
            from kode_nb.ui.stream import StreamView

            self.stream = StreamView()
            self.children = (*self.children, self.stream)
        self.stream.append(chunk)

    def _set_state(self, state: str) -> None:
        if self.result is None and state != self.state:
            self.state = state
            self.header.value = self._header_html()

    def _on_tick(self) -> None:
        if self.result is None:
            self.header.value = self._header_html()
            self._tick = self.loop.call_later(TICK, self._on_tick)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    @property
    def updates(self) -> int:
        """How many updates arrived (pushed to the stream)."""
        return self._coalescer.pushes

    @property
    def text(self) -> str:
        """The streamed text so far (exactly what the browser was sent)."""
        return self.stream.text if self.stream is not None else ""

    def _header_html(self) -> str:
        return call_header_html(
            self.tool, self.kind, self.call_id, self.state, self.elapsed, self.result
        )

    # ------------------------------------------------------------------ displays

    def show(self) -> None:
        """Display the view (again: the same display id, so the final refresh reaches every copy)."""
        from IPython.display import display

        from kode_nb.ui.cell_display import display_in_cell

        if self.display_handle is None:
            self.display_handle = display_in_cell(self)
        else:
            display(self, display_id=self.display_handle.display_id)

    def html(self) -> str:
        approval = self.prompt.html() if self.prompt is not None else None
        return call_html(self._header_html(), self.arguments, self.text, approval, self.result)

    def text_summary(self) -> str:
        return call_text(self.tool, self.call_id, self.state, self.result)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.result is not None:  # final: the static record, no widget
            return self.record().bundle()
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        data["text/html"] = self.html()
        data["text/plain"] = self.text_summary()
        mark_live(data, "call")
        return data


class AskedCalls:
    """Views for the calls that ask a person and have no view of their own.

    Fed every executor event of the session's bus (:meth:`on_event`, before the event is routed
    to ``views``): at a viewless call's ``approval_requested`` it makes the call's view
    (``make_view(event)``: a :class:`CallView`, or None where the front end has no widgets),
    registers it in ``views`` under the call id (where the approver and the event routing find
    it) and shows it in the cell the call runs in. :meth:`after_event` ends it at the call's end
    event with the call's record, and forgets it.
    """

    def __init__(
        self,
        *,
        views: MutableMapping[str, Any],
        make_view: Callable[[Any], CallView | None],
    ) -> None:
        self.views = views
        self.make_view = make_view
        self.calls: set[str] = set()
        """Call ids whose view this made and has not ended yet."""

    def on_event(self, event: Any) -> None:
        """Before ``event`` is routed: a view for a call that asks and has none."""
        if event.type != "approval_requested" or event.call_id in self.views:
            return
        view = self.make_view(event)
        if view is None:
            return
        self.views[event.call_id] = view
        self.calls.add(event.call_id)
        view.on_event(event)  # shown waiting for approval, its buttons coming
        view.show()

    def after_event(self, event: Any) -> None:
        """After ``event`` was routed: at the end of a call whose view this made, the view
        ends with the call's record (loop thread)."""
        if event.type not in END_EVENTS or event.call_id not in self.calls:
            return
        self.calls.discard(event.call_id)
        view = self.views.pop(event.call_id, None)
        result = getattr(event, "result", None)
        if view is not None and result is not None:
            view.finish(result)
