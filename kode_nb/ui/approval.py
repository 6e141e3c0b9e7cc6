"""Approve / Deny / Always-allow buttons that answer an :class:`~kode_nb.ApprovalRequest`.

The prompt never blocks the kernel: the executor awaits :meth:`ApprovalPrompt.wait` inside a
background task, the cell that started the call has already returned, and a click resolves an
``asyncio.Future``. Clicks are handled on whatever thread the kernel runs comm handlers on (the
main thread, or a subshell thread on ipykernel 7.0-7.3 / JupyterLab 4.4+), so the handler only
hands the decision to the loop with ``call_soon_threadsafe``; every widget change happens on
the loop thread. The first decision wins; the prompt then collapses to one line ("Approved", "Denied: reason",
"Always allowed"), its buttons gone.

A prompt goes into its call's view (a ``%tool`` call, a run's tool row, a call a framework run
started, a call awaited in a cell: the session gives each of those a view,
:class:`~kode_nb.ui.call_view.AskedCalls`), which ends as the call's record. Only a question
with no call of kode_nb's behind it (another framework's own approval request,
``kode_nb.interop``) is displayed on its own; it is then a view like the others: shown in the
cell that asked, kept by the session's :class:`~kode_nb.ui._finals.FinalRelay`, and replaced in
place by its record (:func:`~kode_nb.ui.records.approval_record`) once decided, so no saved
notebook keeps its buttons (a widget) or a "waiting for a decision" that is over.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W  # type: ignore[import-untyped]

from kode_nb.policy._approval import ApprovalDecision, ApprovalRequest, approve, deny
from kode_nb.ui.html import BOX, approval_html, approval_text, esc
from kode_nb.ui.records import LIVE_MIME, approval_record, live_marker

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

    from kode_nb.ui.call_view import CallView

__all__ = ["DECIDED_BY", "ApprovalPrompt", "WidgetApprover"]

DECIDED_BY = "notebook"
"""``decided_by`` of a decision made with the buttons."""


class ApprovalPrompt(W.VBox):  # type: ignore[misc]
    """The buttons for one request; :meth:`wait` returns the decision."""

    def __init__(
        self,
        request: ApprovalRequest,
        *,
        timeout: float | None = None,
        timeout_reason: str | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        show_arguments: bool = True,
    ) -> None:
        self.request = request
        self.timeout_reason = timeout_reason
        """The denial's reason when the timeout passes (default: "No decision within N s")."""
        self.show_arguments = show_arguments
        """False inside a call view, which shows the (validated) arguments itself."""
        self.timeout = timeout if timeout and timeout > 0 else None
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.future: asyncio.Future[ApprovalDecision] = self.loop.create_future()
        self.decision: ApprovalDecision | None = None
        self.display_handle: DisplayHandle | None = None
        """Set when the prompt is displayed on its own (no call view around it)."""
        self._note: str | None = None
        self.approve_button = W.Button(description="Approve", button_style="success", icon="check")
        self.deny_button = W.Button(description="Deny", button_style="danger", icon="times")
        self.always_button = W.Button(
            description="Always allow this tool",
            tooltip=f"Approve, and run {request.tool} without asking for the rest of this session",
            layout=W.Layout(width="auto"),
        )
        self.reason = W.Text(
            placeholder="reason for denying (optional, the model sees it)",
            layout=W.Layout(width="26em"),
        )
        self.status = W.HTML(self._waiting_html())
        self.approve_button.on_click(lambda _b: self._clicked(approve(by=DECIDED_BY)))
        self.always_button.on_click(lambda _b: self._clicked(approve(always=True, by=DECIDED_BY)))
        self.deny_button.on_click(
            lambda _b: self._clicked(deny(self.reason.value.strip() or None, by=DECIDED_BY))
        )
        row = W.HBox(
            [self.approve_button, self.deny_button, self.reason, self.always_button],
            layout=W.Layout(flex_flow="row wrap"),  # narrow cells wrap rather than clip
        )
        info = W.HTML(approval_html(request, arguments=show_arguments))
        super().__init__([info, row, self.status])

    def _waiting_html(self) -> str:
        limit = f" (denied after {self.timeout:g} s without a decision)" if self.timeout else ""
        return f"<i>Waiting for your decision{limit}…</i>"

    # ------------------------------------------------------------------ decisions

    def _clicked(self, decision: ApprovalDecision) -> None:
        """Runs in the comm handler's thread: hand the decision to the loop."""
        with contextlib.suppress(RuntimeError):  # loop closed: the kernel is shutting down
            self.loop.call_soon_threadsafe(self.decide, decision)

    def decide(self, decision: ApprovalDecision) -> bool:
        """Record ``decision`` (loop thread); False if one was already made."""
        if self.future.done():
            return False
        self.decision = decision
        self.future.set_result(decision)
        self._close(decision_label(decision))
        return True

    def _close(self, label: str) -> None:
        for widget in (self.approve_button, self.deny_button, self.always_button, self.reason):
            widget.disabled = True
        self.status.value = label
        self.children = (self.status,)  # decided: one line, the buttons gone
        if self.display_handle is not None:  # shown on its own: its record replaces it
            self.display_handle.update(self)

    @property
    def final(self) -> bool:
        """True once decided (or cancelled before a decision): it shows its last state."""
        return self.future.done()

    async def wait(self) -> ApprovalDecision:
        """The decision: a click, or a denial when the timeout passes first."""
        try:
            if self.timeout is None:
                return await asyncio.shield(self.future)
            return await asyncio.wait_for(asyncio.shield(self.future), self.timeout)
        except asyncio.TimeoutError:
            reason = self.timeout_reason or f"No decision within {self.timeout:g} s; denied."
            self.decide(deny(reason.format(timeout=self.timeout), by="timeout"))
            return self.future.result()
        except asyncio.CancelledError:
            if not self.future.done():
                self.future.cancel()
                self._note = "the call was cancelled before a decision"
                self._close("<i>Cancelled before a decision.</i>")
            raise

    # ------------------------------------------------------------------ displays

    def html(self) -> str:
        if self.future.done():
            return f"<div>{self.status.value}</div>"
        state = self._waiting_html()
        return approval_html(self.request, arguments=self.show_arguments) + f"<div>{state}</div>"

    def text(self) -> str:
        return approval_text(self.request) + "\n" + _plain(self.decision)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.final:  # decided: its record, no widget
            return approval_record(self.request, self.decision, note=self._note).bundle()
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        data["text/html"] = f'<div style="{BOX}">{self.html()}</div>'
        data["text/plain"] = self.text()
        data[LIVE_MIME] = live_marker("approval")
        return data


def decision_label(decision: ApprovalDecision) -> str:
    if decision.approved and decision.always:
        return '<span style="color:#2f855a">✔ <b>Always allowed</b></span> for this session'
    if decision.approved:
        return '<span style="color:#2f855a">✔ <b>Approved</b></span>'
    reason = f": {esc(decision.reason)}" if decision.reason else ""
    return f'<span style="color:#c53030">✘ <b>Denied</b></span>{reason}'


def _plain(decision: ApprovalDecision | None) -> str:
    if decision is None:
        return "waiting for a decision"
    if decision.approved:
        return "always allowed" if decision.always else "approved"
    return "denied" + (f": {decision.reason}" if decision.reason else "")


class WidgetApprover:
    """An approver that asks with buttons in the notebook.

    The prompt goes into the call's live view when there is one (``find_view(call_id)``),
    else it is displayed on its own where the calling task's output goes (the cell that asked)
    and replaced by its record once decided.
    """

    def __init__(
        self,
        *,
        find_view: Callable[[str], CallView | None] = lambda _call_id: None,
        timeout: Callable[[], float | None] = lambda: None,
        timeout_reason: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.find_view = find_view
        self.timeout = timeout
        self.timeout_reason = timeout_reason
        self.prompts: dict[str, ApprovalPrompt] = {}
        """Prompts waiting for a decision, by call id."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        view = self.find_view(request.call_id)
        prompt = ApprovalPrompt(
            request,
            timeout=self.timeout(),
            timeout_reason=self.timeout_reason(),
            show_arguments=view is None,
        )
        if view is not None:
            view.show_approval(prompt)
        else:
            from kode_nb.ui.cell_display import display_in_cell

            prompt.display_handle = display_in_cell(prompt)
        self.prompts[request.call_id] = prompt
        try:
            return await prompt.wait()
        finally:
            self.prompts.pop(request.call_id, None)

    def __repr__(self) -> str:
        return "WidgetApprover()"
