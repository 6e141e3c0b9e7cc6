"""Approvals where there are no buttons: ``input()`` in terminal IPython, else a denial.

In a kernel without widgets nobody can answer, and neither can anybody in a notebook executed
by a runner (``jupyter nbconvert --execute``, nbclient, papermill: their cells come with
``allow_stdin: false``), so the call is denied with a message that says how to let it run
(``%approval auto``, or a policy that allows the tool) — never a hang.
"""

from __future__ import annotations

import builtins
from typing import Any

from kode_nb.policy._approval import ApprovalDecision, ApprovalRequest, approve, deny
from kode_nb.ui.html import approval_text

__all__ = [
    "HEADLESS_REASON",
    "RUNNER_REASON",
    "TerminalApprover",
    "headless_denial",
    "runner_denial",
]

HEADLESS_REASON = (
    "Denied: this call needs approval, but this front end shows no buttons to approve it "
    "(display_style is not 'widget'). Run `%approval auto` to let such calls run, "
    "or `%tools show` / `%policy` to review them."
)

RUNNER_REASON = (
    "Denied: this call needs approval, but the notebook is being executed by a runner "
    "(jupyter nbconvert --execute, nbclient or papermill send cells with allow_stdin false), "
    "so nobody can click Approve. To let such calls run there, put `%approval auto` in a cell "
    "before them, or allow the tool in the policy (`%policy`)."
)


def runner_denial(request: ApprovalRequest) -> ApprovalDecision:
    return deny(RUNNER_REASON, by="runner")


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
