"""Approvals where there are no buttons: ``input()`` in terminal IPython, else a denial.

In a kernel without widgets nobody can answer, so the call is denied with a message that says
how to let it run (``%approval auto``) — never a hang. In a notebook executed by a runner
(``jupyter nbconvert --execute``, nbclient, papermill: their cells come with
``allow_stdin: false``) the buttons are shown but nobody clicks them: an approval not given in
code within :data:`RUNNER_APPROVAL_TIMEOUT` seconds is denied with :data:`RUNNER_REASON`.
"""

from __future__ import annotations

import builtins
from typing import Any

from kode_nb.policy._approval import ApprovalDecision, ApprovalRequest, approve, deny
from kode_nb.ui.html import approval_text

__all__ = [
    "HEADLESS_REASON",
    "RUNNER_APPROVAL_TIMEOUT",
    "RUNNER_INBOX_REASON",
    "RUNNER_REASON",
    "RUNNER_REPEAT_REASON",
    "TerminalApprover",
    "headless_denial",
]

HEADLESS_REASON = (
    "Denied: this call needs approval, but this front end shows no buttons to approve it "
    "(display_style is not 'widget'). Run `%approval auto` to let such calls run, "
    "or `%tools show` / `%policy` to review them."
)

RUNNER_APPROVAL_TIMEOUT = 30.0
"""Seconds an approval waits in a notebook executed by a runner before it is denied."""

RUNNER_REASON = (
    "Denied: nobody approved this call within {timeout:g} s, and the notebook is being executed "
    "by a runner (jupyter nbconvert --execute, nbclient or papermill send cells with "
    "allow_stdin false), where nobody can click Approve. Approve it in code from a later cell "
    "(`h.approve()`), put `%approval auto` in a cell before it, or allow the tool in the "
    "policy (`%policy`)."
)
"""The denial's reason when nobody approves a call under a runner (``{timeout}``: its seconds)."""

RUNNER_REPEAT_REASON = (
    "Denied at once: this same call to {tool}, with the same arguments, was denied a moment "
    "ago because nobody approved it (the notebook is being executed by a runner, where nobody "
    "can click Approve). Asking again would only wait again: go on without it, or answer "
    "with what you have."
)
"""The reason an identical call is denied with, under a runner, after one went unanswered."""


RUNNER_INBOX_REASON = (
    "Denied: nobody answered this request in the batch's inbox within {timeout:g} s, and the "
    "notebook is being executed by a runner (jupyter nbconvert --execute, nbclient or papermill "
    "send cells with allow_stdin false), where nobody can click Approve. Answer it in code from "
    "a later cell (`m.inbox.approve_matching('TOOL', remember=True)`), or give run_many a "
    "`policy=` that answers it."
)
"""The reason a batch's request is denied with under a runner (``{timeout}``: its seconds)."""


def headless_denial(request: ApprovalRequest) -> ApprovalDecision:
    return deny(HEADLESS_REASON, by="headless")


class TerminalApprover:
    """Asks on the terminal: ``y`` approve, ``a`` always allow, ``n [reason]`` deny."""

    def __init__(self, prompt: Any = None) -> None:
        self.input = prompt if prompt is not None else builtins.input

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        print(approval_text(request))
        while True:
            try:
                answer = self.input("Approve? [y]es / [a]lways / [n]o [reason]: ").strip()
            except EOFError:
                return deny("No answer (end of input); denied.", by="terminal")
            word, _, rest = answer.partition(" ")
            word = word.lower()
            if word in ("y", "yes"):
                return approve(by="terminal")
            if word in ("a", "always"):
                return approve(always=True, by="terminal")
            if word in ("n", "no"):
                return deny(rest.strip() or None, by="terminal")
            print("Please answer y, a, or n (optionally followed by a reason).")
