"""``CallHandle``: what ``%tool NAME ...`` returns while the call runs in the background.

The cell that starts a call returns at once (a call may wait for a click; docs/ARCHITECTURE.md,
"Notebook execution model", says why); a later cell can ``await h``, check ``h.done()``, read
``h.result()`` or ``h.cancel()``. Displaying the handle shows the call's live view (once per cell:
the magic already shows it). No widget imports here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kode_nb._lifecycle import HandleBase
from kode_nb.types import ToolResult
from kode_nb.ui.html import clip_head

__all__ = ["CallHandle"]


class CallHandle(HandleBase):
    """A tool call started from the notebook: await it, poll it, approve in it, or cancel it
    (kode_nb's one lifecycle, :mod:`kode_nb._lifecycle`)."""

    def __init__(
        self,
        *,
        tool: str,
        call_id: str,
        view: Any = None,
        cancel: Callable[[str], object] | None = None,
        shell: Any = None,
    ) -> None:
        self.tool = tool
        """The tool's name."""
        self.call_id = call_id
        """The call's id (as in the events)."""
        self.view = view
        """The live view (a :class:`~kode_nb.ui.call_view.CallView` or a static view)."""
        self.events: list[Any] = []
        """This call's events, in order (``CallUpdate`` excluded: see ``view.updates``)."""
        self.task: asyncio.Future[ToolResult] | None = None
        """The background task running the call (``None`` when it ran synchronously)."""
        self._result: ToolResult | None = None
        self._cancel = cancel
        self._shell = shell
        self._shown_in: int | None = getattr(shell, "execution_count", None)

    # ------------------------------------------------------------------ state

    def _set_result(self, result: ToolResult) -> None:
        self._result = result

    def done(self) -> bool:
        """True once the call has a result."""
        return self._result is not None

    @property
    def status(self) -> str:
        """The result's status when done, else where the call is (``waiting for approval``...)."""
        if self._result is not None:
            return self._result.status
        state = getattr(self.view, "state", "running")
        return {
            "approval_requested": "waiting for approval",
            "queued": "starting",
            "started": "running",
        }.get(state, state)

    def result(self) -> ToolResult:
        """The :class:`~kode_nb.ToolResult`; raises ``asyncio.InvalidStateError`` while running."""
        if self._result is None:
            raise asyncio.InvalidStateError(
                f"the call to {self.tool!r} ({self.call_id}) is still {self.status}: "
                "`await` the handle in a cell, or check .done() first"
            )
        return self._result

    def _waiting_prompt(self) -> Any:
        prompt = getattr(self.view, "prompt", None)
        if prompt is None or prompt.future.done():
            return None
        return prompt

    def _stop(self, reason: str) -> bool:
        """Ask the executor to cancel the call."""
        if self._cancel is None:
            return False
        self._cancel(reason)
        return True

    # ------------------------------------------------------------------ displays

    def _ipython_display_(self) -> None:
        count = getattr(self._shell, "execution_count", None)
        if self.view is not None and count is not None and count == self._shown_in:
            return  # the magic that returned this handle has shown the view in this cell
        self._shown_in = count
        if self.view is not None and hasattr(self.view, "show"):
            self.view.show()
            return
        print(repr(self) if self._result is None else clip_head(self._result.text))

    @property
    def label(self) -> str:
        return f"the call to {self.tool} ({self.call_id})"

    def __repr__(self) -> str:
        return f"<CallHandle {self.tool} call={self.call_id} {self.status}>"
