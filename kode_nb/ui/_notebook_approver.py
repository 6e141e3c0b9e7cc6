"""The notebook session's approver: it asks the way the front end can.

:class:`NotebookApprover` is the approver of a notebook session's executor (``%tool``,
``%%ask``, ``kode_nb.Executor()`` in a cell, framework runs, ``%mcp serve``): Approve/Deny
buttons in the call's view (or a view made for the call), a prompt in terminal IPython, and
elsewhere a denial that says why. Under a notebook runner (nbclient, nbconvert, papermill: cells
sent with ``allow_stdin`` false, :func:`front_end_takes_input`) nobody can click: a request
waits at most the runner limit (a later cell can still approve in code), then is denied with a
reason naming the runner; the same call asked again in the same run is denied at once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kode_nb.policy._approval import ApprovalDecision, ApprovalRequest

__all__ = ["ApprovingSession", "NotebookApprover", "front_end_takes_input"]


class ApprovingSession(Protocol):
    """What the approver reads of its session."""

    @property
    def style(self) -> str:
        """``widget``, ``html`` or ``text``."""

    @property
    def shell(self) -> Any: ...

    @property
    def views(self) -> dict[str, Any]:
        """Live views of calls in flight, by call id (a prompt goes into its call's view)."""

    def approval_timeout(self) -> float | None: ...


class NotebookApprover:
    """Asks the way the session's front end can: buttons, the terminal, or denial with a note."""

    def __init__(self, session: ApprovingSession) -> None:
        self.session = session
        self._widgets: Any = None
        self._unanswered: set[str] = set()
        """Calls (run, tool and arguments) denied under a runner because nobody answered."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        style = self.session.style
        if style == "widget":
            if self._widgets is None:
                from kode_nb.ui.approval import WidgetApprover

                self._widgets = WidgetApprover(
                    find_view=self.session.views.get,
                    timeout=self._timeout,
                    timeout_reason=self._timeout_reason,
                )
            runner = not front_end_takes_input(self.session.shell)
            key = _call_key(request)
            if runner and key is not None and key in self._unanswered:
                # nobody answered this very call a moment ago: asking again only waits again
                from kode_nb.policy._approval import deny
                from kode_nb.ui.terminal import RUNNER_REPEAT_REASON

                return deny(RUNNER_REPEAT_REASON.format(tool=request.tool), by="timeout")
            decision: ApprovalDecision = await self._widgets(request)
            if runner and key is not None and decision.decided_by == "timeout":
                self._unanswered.add(key)
            return decision
        from kode_nb.ui.terminal import TerminalApprover, headless_denial

        if _is_terminal(self.session.shell):
            return await TerminalApprover()(request)
        return headless_denial(request)

    def _timeout(self) -> float | None:
        """The session's approval timeout; under a runner (nobody to click) at most
        :data:`~kode_nb.ui.terminal.RUNNER_APPROVAL_TIMEOUT`, so a cell awaiting the call never
        hangs, while a later cell can still approve in code (``h.approve()``)."""
        from kode_nb.ui.terminal import RUNNER_APPROVAL_TIMEOUT

        timeout = self.session.approval_timeout()
        if front_end_takes_input(self.session.shell):
            return timeout
        return min(timeout, RUNNER_APPROVAL_TIMEOUT) if timeout else RUNNER_APPROVAL_TIMEOUT

    def _timeout_reason(self) -> str | None:
        from kode_nb.ui.terminal import RUNNER_REASON

        return None if front_end_takes_input(self.session.shell) else RUNNER_REASON

    def waiting_prompt(self, run_id: str) -> Any:
        """The first prompt asked with ``run_id`` (outside any call view) still waiting."""
        widgets = self._widgets
        if widgets is None:
            return None
        for prompt in list(widgets.prompts.values()):
            if prompt.request.run_id == run_id and not prompt.future.done():
                return prompt
        return None

    def unanswered(self) -> tuple[float | None, str | None]:
        """``(seconds, reason)`` for an approval asked elsewhere than a view (a batch's inbox):
        under a notebook runner, the runner limit and its reason; else ``(None, None)`` (it
        waits for an answer)."""
        from kode_nb.ui.terminal import RUNNER_INBOX_REASON

        if front_end_takes_input(self.session.shell):
            return None, None
        timeout = self._timeout()
        return timeout, RUNNER_INBOX_REASON.format(timeout=timeout)

    def __repr__(self) -> str:
        return f"NotebookApprover(style={self.session.style!r})"


def front_end_takes_input(shell: Any) -> bool:
    """Whether the cell being run came from a front end a person answers in.

    JupyterLab, Notebook 7 and VS Code send ``allow_stdin: true`` with every cell; nbclient
    (``jupyter nbconvert --execute``, papermill) sends ``false``: nobody will click a button
    there, so an approval asked of it would wait forever. Outside a kernel this is True.
    """
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return True
    return bool(getattr(kernel, "_allow_stdin", True))


def _call_key(request: ApprovalRequest) -> str | None:
    """The run, the tool and its arguments, as one comparable string: the same call asked for
    again within one run (a model repeating it); None outside a run."""
    if request.run_id is None:
        return None
    arguments = json.dumps(request.arguments, sort_keys=True, default=repr)
    return f"{request.run_id}\0{request.tool}\0{arguments}"


def _is_terminal(shell: Any) -> bool:
    return type(shell).__name__ == "TerminalInteractiveShell"
