"""``AgentHandle``: what ``%agent`` and ``%%ask`` return while the run goes on in the background.

The cell that starts a run returns at once (a run may wait for a click; see docs/ARCHITECTURE.md,
"Notebook execution model"); a later cell can ``await h`` (the
:class:`~kode_nb.agents.AgentRunResult`), check ``h.done()``, ``h.cancel()`` the run, read
``h.trace`` (live while it runs), answer an approval prompt with ``h.approve()`` /
``h.deny(reason)`` exactly as the buttons do (``await h.approval()`` first waits for one to
appear), and ``h.show_trace()`` for the collapsible trace. A run started with ``--step`` has
``h.step``, its :class:`~kode_nb.debug.Stepper`: ``await h.step.paused()`` for the pause
point, then ``h.step.next()``, ``.edit(...)``, ``.give_result(text)``, ``.run_to_end()`` or
``.stop(reason)``, exactly as the step buttons do. No widget imports.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kode_nb._lifecycle import HandleBase

if TYPE_CHECKING:
    from kode_nb.agents import Agent, AgentRunResult
    from kode_nb.debug import Stepper
    from kode_nb.traces import Trace
    from kode_nb.ui.trace_html import TraceDisplay

__all__ = ["AgentHandle"]


class AgentHandle(HandleBase):
    """An agent run started from the notebook: await it, poll it, approve in it, or cancel it."""

    def __init__(
        self,
        *,
        agent: Agent,
        run_id: str,
        view: Any = None,
        shell: Any = None,
        step: Stepper | None = None,
    ) -> None:
        self.agent = agent
        """The :class:`~kode_nb.agents.Agent` running."""
        self.run_id = run_id
        """The run's id (its events, tool calls and trace carry it)."""
        self.view = view
        """The live view (:class:`~kode_nb.ui.agent_view.RunView` or a static view)."""
        self.task: asyncio.Future[AgentRunResult] | None = None
        """The background task (``None`` when the run completed synchronously)."""
        self.exception: BaseException | None = None
        """What the run raised, if it could not even produce a result (a missing API key...)."""
        self.step = step
        """The run's :class:`~kode_nb.debug.Stepper` when it steps (``--step``), else ``None``."""
        self._result: AgentRunResult | None = None
        self._shell = shell
        self._shown_in: int | None = getattr(shell, "execution_count", None)

    # ------------------------------------------------------------------ state

    def _set_result(
        self, result: AgentRunResult | None, exception: BaseException | None = None
    ) -> None:
        self._result, self.exception = result, exception

    def done(self) -> bool:
        """True once the run has ended."""
        return self._result is not None or self.exception is not None

    @property
    def status(self) -> str:
        """``running``, ``waiting for approval``, ``paused (step)``, or how the run ended."""
        if self._result is not None:
            return self._result.status
        if self.exception is not None:
            return "error"
        if self.step is not None and self.step.current is not None:
            return "paused (step)"
        waiting = getattr(self.view, "waiting_prompt", lambda: None)()
        return "waiting for approval" if waiting is not None else "running"

    def result(self) -> AgentRunResult:
        """The :class:`~kode_nb.agents.AgentRunResult`; raises while the run goes on."""
        if self.exception is not None:
            raise self.exception
        if self._result is None:
            raise asyncio.InvalidStateError(
                f"the run of agent {self.agent.name!r} ({self.run_id}) is still {self.status}: "
                "`await` the handle in a cell, or check .done() first"
            )
        return self._result

    @property
    def trace(self) -> Trace | None:
        """The run's trace: complete once done, growing while it runs."""
        if self._result is not None:
            return self._result.trace
        return getattr(self.view, "trace", None)

    def show_trace(self, *, open_levels: int = 6) -> TraceDisplay:
        """The trace as a display: collapsible HTML (``open_levels`` levels open, enough to
        show a subagent's run; model calls start closed), and a text tree for plain front ends."""
        from kode_nb.ui.trace_html import TraceDisplay

        trace = self.trace
        if trace is None:
            raise asyncio.InvalidStateError(f"the run {self.run_id} has not started yet")
        return TraceDisplay(trace, open_levels=open_levels)

    # ------------------------------------------------------------------ approvals

    async def approval(self, timeout: float | None = None) -> bool:
        """Wait until an approval prompt of this run (or of a subagent it runs) waits for a
        decision: True; False if the run ended first. ``timeout`` seconds: TimeoutError."""
        if self.done():
            return False
        if getattr(self.view, "waiting_prompt", lambda: None)() is not None:
            return True
        waiters = getattr(self.view, "waiters", None)
        if waiters is None:  # a static view: nobody can click; approvals are decided elsewhere
            return False
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiters.append(future)
        return await asyncio.wait_for(future, timeout)

    def _waiting_prompt(self) -> Any:
        return getattr(self.view, "waiting_prompt", lambda: None)()

    def _stop(self, reason: str) -> bool:
        """Stop the run (it ends ``cancelled``)."""
        return self.agent.cancel(self.run_id, reason=reason) > 0

    # ------------------------------------------------------------------ displays

    def _ipython_display_(self) -> None:
        count = getattr(self._shell, "execution_count", None)
        if self.view is not None and count is not None and count == self._shown_in:
            return  # the magic that returned this handle has shown the view in this cell
        self._shown_in = count
        if self.view is not None and hasattr(self.view, "show"):
            self.view.show()
            return
        print(repr(self))

    @property
    def label(self) -> str:
        return f"the run of agent {self.agent.name!r} ({self.run_id})"

    def __repr__(self) -> str:
        return f"<AgentHandle {self.agent.name} run={self.run_id} {self.status}>"
