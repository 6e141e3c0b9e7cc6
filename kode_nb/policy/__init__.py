"""Policy and approval: may this call run, and who says yes.

Lives here: :class:`Policy` (allow/deny selectors, profiles, per-kind defaults, allowed paths;
``_policy``) and the approval protocol with its ready-made approvers (``_approval``).

May import: :mod:`kode_nb.types`, :mod:`kode_nb.errors` and :mod:`kode_nb.tools` (to resolve
selectors against a registry). Never the execution, events, agents or notebook layers.
"""

from kode_nb.policy._approval import (
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    AutoApprove,
    AutoDeny,
    CallbackApprover,
    approve,
    deny,
)
from kode_nb.policy._policy import ApprovalMode, Decision, Policy, resolve_allowed_path

__all__ = [
    "ApprovalDecision",
    "ApprovalMode",
    "ApprovalRequest",
    "Approver",
    "AutoApprove",
    "AutoDeny",
    "CallbackApprover",
    "Decision",
    "Policy",
    "approve",
    "deny",
    "resolve_allowed_path",
]
