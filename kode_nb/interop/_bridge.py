"""The shared half of every framework adapter: which kode_nb tools, and running one call.

:class:`KodeTools` resolves an allowlist (names, ``group:NAME``, ``kind:KIND``,
``category:CAT``, ``profile:NAME``, ``*``) against the executor's registry once, and runs each
call from a framework through kode_nb's :class:`~kode_nb.Executor` — lookup, policy,
validation, approval, limits, timeout, cancellation, events. In a kernel with kode_nb loaded
the call goes through the notebook session instead (:mod:`kode_nb.interop._host`): the same
executor, plus a live view with its Approve/Deny buttons in the cell that started the run.

A call returns a :class:`~kode_nb.ToolResult` and never raises because of the tool; each
adapter turns the result into what its framework expects (:func:`outcome`).
"""

from __future__ import annotations

import contextvars
import itertools
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kode_nb.errors import ConfigurationError

if TYPE_CHECKING:
    from kode_nb.execution._executor import Executor
    from kode_nb.policy._approval import ApprovalDecision
    from kode_nb.tools._model import Tool
    from kode_nb.types import ToolResult

__all__ = [
    "APPROVER",
    "CURRENT_RUN",
    "KodeTools",
    "Outcome",
    "outcome",
    "relay",
    "relayed_decision",
]

CURRENT_RUN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kode_nb_interop_run", default=None
)
"""The id of the framework run (:func:`kode_nb.interop.start`) the current task belongs to;
tool calls carry it as their ``run_id``."""

APPROVER: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "kode_nb_interop_approver", default=None
)
"""An approver for the kode_nb tool calls of the current context (``run_many``'s inbox for a
framework agent's rows); ``None``: the executor's."""

_RELAYED: dict[str, ApprovalDecision] = {}
"""Approvals kode_nb's approver gave a framework's approval request (pydantic-ai's deferred
tools, the Agents SDK's ``needs_approval``: :func:`kode_nb.interop._approvals.ask`), by the
framework's call id, until the call runs: its record then names who decided (``notebook``, a
rule), not only the framework that relayed the answer."""

_RELAYED_MAX = 4096
"""Approvals kept for calls that never ran (a run that stopped after asking) before the oldest
are dropped."""


def relay(call_id: str, decision: ApprovalDecision) -> ApprovalDecision:
    """Keep an approval for ``call_id`` until the call runs (a denial drops any kept one)."""
    if decision.approved:
        while len(_RELAYED) >= _RELAYED_MAX:
            _RELAYED.pop(next(iter(_RELAYED)))
        _RELAYED[call_id] = decision
    else:
        _RELAYED.pop(call_id, None)
    return decision


def relayed_decision(call_id: str | None) -> ApprovalDecision | None:
    """The approval kept for ``call_id``, taken: a decision serves one call, once."""
    if call_id is None:
        return None
    return _RELAYED.pop(call_id, None)


OutcomeKind = Literal["ok", "retry", "error"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a framework should hand a result to its model."""

    kind: OutcomeKind
    """``ok``: a normal tool result; ``retry``: the arguments were invalid, the model should
    call again with fixed ones; ``error``: the call failed, was denied, timed out or was
    cancelled (the text says which)."""
    text: str
    """What the model reads."""


def outcome(result: ToolResult) -> Outcome:
    """The :class:`Outcome` of a kode_nb result."""
    if result.status == "invalid_arguments":
        return Outcome("retry", result.text)
    if result.is_error or result.status != "ok":
        return Outcome("error", result.text)
    return Outcome("ok", result.text)


class KodeTools:
    """Registered kode_nb tools, offered to another framework, run by a kode_nb executor.

    ``tools``: an allowlist (``["edit_note", "group:fs", "kind:read"]``), a single selector
    string, or ``"*"`` (every tool the policy allows). ``executor``: the executor that runs the
    calls; ``None`` uses the notebook session's when kode_nb is loaded in a kernel (live views,
    Approve/Deny buttons), else a new ``Executor()`` (calls that must ask are denied). Tools the
    executor's policy does not allow are left out (the model is never offered them).
    """

    def __init__(
        self,
        tools: str | Sequence[str] = "*",
        *,
        executor: Executor | None = None,
        where: str = "kode_nb.interop",
    ) -> None:
        from kode_nb.agents._toolset import resolve_tools
        from kode_nb.execution._executor import Executor
        from kode_nb.interop._host import current_host

        if executor is not None and not isinstance(executor, Executor):
            raise ConfigurationError(
                f"{where}: executor must be a kode_nb Executor, got {executor!r}"
            )
        entries = [tools] if isinstance(tools, str) else tools
        self.where = where
        self._executor = executor
        self._fallback: Executor | None = None
        host = current_host() if executor is None else None
        registry = (executor or (host.executor if host else None) or self._own()).registry
        resolved = resolve_tools(entries, registry, where=where)
        policy = (executor or (host.executor if host else None) or self._own()).policy
        self.tools: tuple[Tool, ...] = tuple(t for t in resolved if _allowed(policy, t, registry))
        """The tools offered, in allowlist order."""
        if not self.tools:
            raise ConfigurationError(
                f"{where}: no tool to offer: {list(entries)!r} matched "
                f"{[t.name for t in resolved] or 'nothing'} and the policy allows none of them"
            )
        self._ids = itertools.count(1)
        self._prefix = f"fw_{secrets.token_hex(4)}_"

    def _own(self) -> Executor:
        if self._fallback is None:
            from kode_nb.execution._executor import Executor

            self._fallback = Executor()
        return self._fallback

    @property
    def executor(self) -> Executor:
        """The executor the calls run on (see the class docstring)."""
        if self._executor is not None:
            return self._executor
        from kode_nb.interop._host import current_host

        host = current_host()
        return host.executor if host is not None else self._own()

    def get(self, name: str) -> Tool:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(name)

    async def call(
        self,
        name: str,
        arguments: Any,
        *,
        call_id: str | None = None,
        approved_by: str | None = None,
    ) -> ToolResult:
        """Run one call (raw JSON text or a mapping of arguments) and return its result.

        ``approved_by``: the framework's own approval mechanism already approved this call
        (its name, e.g. ``"pydantic-ai"``): a call the policy would ask for runs without asking
        again; a call the policy refuses is still refused."""
        from kode_nb.interop._host import current_host

        cid = call_id or f"{self._prefix}{next(self._ids)}"
        run_id = CURRENT_RUN.get()
        host = current_host() if self._executor is None else None
        approver = APPROVER.get()
        if approved_by:  # the framework approved it: by kode_nb's prompt (ask) or its own way
            relayed = relayed_decision(cid)
            approver = _Preapproved(relayed.decided_by if relayed is not None else approved_by)
        from kode_nb.interop._capture import ACTIVE

        cap = ACTIVE.get()
        events: list[Any] = []
        sub = None
        if cap is not None:  # the executor's events of this call go into the captured trace
            sub = self.executor.bus.subscribe(
                lambda e: events.append(e) if getattr(e, "call_id", None) == cid else None
            )
        try:
            if host is not None:
                result = await host.run_call(
                    name, arguments, call_id=cid, run_id=run_id, approver=approver
                )
            else:
                result = await self.executor.call(
                    name, arguments, call_id=cid, run_id=run_id, approver=approver
                )
        finally:
            if sub is not None:
                sub.close()
        if cap is not None:
            cap.note_call(name, arguments, result, events)
        return result

    def needs_approval(self, name: str, arguments: Any) -> bool:
        """Whether the executor's policy would ask before running this call (False when the
        arguments are invalid: the call then fails validation and the model fixes them)."""
        try:
            tool = self.get(name)
            validated = tool.validator.validate(arguments, tool=name)
            decision, _ = self.executor.policy.approval_for(tool, validated)
        except Exception:
            return False
        return bool(decision == "ask")

    def close(self) -> None:
        """Close the executor this object made for itself, if any."""
        if self._fallback is not None:
            self._fallback.close()

    def __repr__(self) -> str:
        return f"KodeTools({', '.join(t.name for t in self.tools)})"


class _Preapproved:
    """The approver of a call the framework's own approval mechanism already approved."""

    def __init__(self, by: str) -> None:
        self.by = by

    async def __call__(self, request: Any) -> Any:
        from kode_nb.policy._approval import approve

        return approve(by=self.by)


def _allowed(policy: Any, tool: Tool, registry: Any) -> bool:
    check = getattr(policy, "is_allowed", None)
    if check is None:
        return True
    try:
        return bool(check(tool, registry)[0])
    except TypeError:
        return bool(check(tool)[0])
