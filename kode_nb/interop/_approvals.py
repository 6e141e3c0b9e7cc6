"""Answering a framework's own approval requests with kode_nb's approver.

pydantic-ai's approval-required (deferred) tools and the OpenAI Agents SDK's ``needs_approval``
interruptions stop the framework's run and wait for a yes or no. :func:`ask` puts that question
to kode_nb's approver — the notebook's Approve/Deny buttons when kode_nb is loaded in a kernel,
else the executor's approver — as an :class:`~kode_nb.ApprovalRequest`, so the same prompt, the
same "always allow" and the same events serve both. A tool that is not a kode_nb tool is asked
about with kind ``other``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kode_nb.interop._bridge import APPROVER, CURRENT_RUN, relay

if TYPE_CHECKING:
    from kode_nb.execution._executor import Executor
    from kode_nb.policy._approval import ApprovalDecision

__all__ = ["ask"]


def _executor(executor: Executor | None) -> Executor | None:
    if executor is not None:
        return executor
    from kode_nb.interop._host import current_host

    host = current_host()
    return host.executor if host is not None else None


async def ask(
    tool: str,
    arguments: Mapping[str, Any] | None,
    *,
    call_id: str | None = None,
    executor: Executor | None = None,
    run_id: str | None = None,
    framework: str = "",
) -> ApprovalDecision:
    """Ask kode_nb's approver whether the framework may run ``tool`` with ``arguments``.

    Without an approver (no notebook session and an executor without one) the answer is a
    denial that says so — as for kode_nb's own calls, headless asking is denying."""
    from kode_nb.policy._approval import ApprovalRequest, approve, deny

    ex = _executor(executor)
    found = ex.registry.get(tool) if ex is not None else None
    if found is not None and ex is not None:
        policy: Any = ex.policy
        if found.key in getattr(policy, "always_allowed", ()):
            allowed = approve(by="always allowed")
            return relay(call_id, allowed) if call_id else allowed
    request = ApprovalRequest(
        tool=tool,
        kind=found.kind.value if found is not None else "other",
        arguments=dict(arguments or {}),
        call_id=call_id or f"fw_{secrets.token_hex(6)}",
        run_id=run_id if run_id is not None else CURRENT_RUN.get(),
        label=found.label if found is not None else tool,
        description=found.description if found is not None else "",
        reason=f"{framework} asks for approval" if framework else "approval requested",
    )
    # a batch's inbox (run_many's rows) answers its rows' approvals; else the executor's
    approver = APPROVER.get() or (ex.approver if ex is not None else None)
    if approver is None:
        return deny(
            f"No one can approve {tool!r} here: kode_nb has no approver (load kode_nb in a "
            "notebook for Approve/Deny buttons, or pass an executor with an approver).",
            by="kode_nb",
        )
    decision: ApprovalDecision = await approver(request)
    if decision.approved and decision.always and found is not None and ex is not None:
        always = getattr(ex.policy, "always_allow", None)
        if callable(always):
            always(found.name)
    return relay(request.call_id, decision)
