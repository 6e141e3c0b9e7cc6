"""The approval protocol: a request is answered by approve (maybe with edited arguments) or deny.

An approver is any object with ``async def __call__(request) -> ApprovalDecision``. kode_nb
ships :class:`AutoApprove`, :class:`AutoDeny` and :class:`CallbackApprover`; the notebook layer
adds Approve/Deny buttons. With no approver, a call that must ask is denied, with a message
that says so.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "Approver",
    "AutoApprove",
    "AutoDeny",
    "CallbackApprover",
    "approve",
    "deny",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """What a person (or program) is asked to decide on."""

    tool: str
    """The tool's name."""
    kind: str
    """The tool's kind (``edit``, ``execute``...)."""
    arguments: Mapping[str, Any]
    """The validated arguments, JSON-shaped."""
    call_id: str
    run_id: str | None = None
    parent_call_id: str | None = None
    label: str = ""
    """The tool's display label."""
    description: str = ""
    """The tool's description."""
    reason: str = ""
    """Why approval is needed."""
    preview: str | None = None
    """A preview of the effect (a diff for edit tools), when the tool provides one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalDecision:
    """The answer to an :class:`ApprovalRequest`."""

    approved: bool
    arguments: Mapping[str, Any] | None = None
    """Edited arguments to run with instead (re-validated); ``None`` keeps the originals."""
    reason: str | None = None
    """For a denial: the reason the model sees."""
    always: bool = False
    """Approve this tool for the rest of the session ("always allow")."""
    decided_by: str = ""
    """Who decided (an approver's name), for events and traces."""


def approve(
    arguments: Mapping[str, Any] | None = None, *, always: bool = False, by: str = ""
) -> ApprovalDecision:
    """An approving decision, optionally with edited ``arguments``."""
    return ApprovalDecision(approved=True, arguments=arguments, always=always, decided_by=by)


def deny(reason: str | None = None, *, by: str = "") -> ApprovalDecision:
    """A denying decision; ``reason`` is shown to the model."""
    return ApprovalDecision(approved=False, reason=reason, decided_by=by)


@runtime_checkable
class Approver(Protocol):
    """Anything that decides approval requests asynchronously."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision: ...


class AutoApprove:
    """Approves every request."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        return approve(by="auto-approve")

    def __repr__(self) -> str:
        return "AutoApprove()"


class AutoDeny:
    """Denies every request with ``reason``."""

    def __init__(
        self, reason: str = "Denied automatically: this session does not allow it."
    ) -> None:
        self.reason = reason

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        return deny(self.reason, by="auto-deny")

    def __repr__(self) -> str:
        return f"AutoDeny({self.reason!r})"


DecisionLike = ApprovalDecision | bool | str | None
"""A callback may return a decision, True/False, or a string (= deny with that reason)."""


class CallbackApprover:
    """Wraps a sync or async function ``fn(request)`` that returns a decision.

    The function may return an :class:`ApprovalDecision`, ``True``/``False``, or a string, which
    denies with that string as the reason. ``None`` denies.
    """

    def __init__(
        self,
        fn: Callable[[ApprovalRequest], DecisionLike | Awaitable[DecisionLike]],
        *,
        name: str = "",
    ) -> None:
        candidate: object = fn  # callers without type checking may pass anything
        if not callable(candidate):
            from kode_nb.errors import ConfigurationError

            raise ConfigurationError(f"CallbackApprover needs a callable, got {fn!r}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callback")

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        out = self.fn(request)
        if inspect.isawaitable(out):
            out = await out
        return _coerce(out, self.name)

    def __repr__(self) -> str:
        return f"CallbackApprover({self.name})"


def _coerce(out: object, by: str) -> ApprovalDecision:
    if isinstance(out, ApprovalDecision):
        if not out.decided_by:
            return ApprovalDecision(
                approved=out.approved,
                arguments=out.arguments,
                reason=out.reason,
                always=out.always,
                decided_by=by,
            )
        return out
    if out is True:
        return approve(by=by)
    if out is False or out is None:
        return deny(None, by=by)
    if isinstance(out, str):
        return deny(out, by=by)
    raise TypeError(
        f"approver {by!r} returned {out!r}; return an ApprovalDecision, a bool, or a denial reason"
    )
