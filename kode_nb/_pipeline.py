"""The machinery behind :class:`kode_nb.Executor`: the steps of one call after lookup.

:class:`ExecutorCore` holds the executor's settings and runs policy → validation → approval →
slots → the tool body under its timeout, and turns every ending into a :class:`ToolResult`
(emitting the terminal event and recording stats exactly once); worker threads, limits and
timeouts are :class:`kode_nb._control.CallControl`'s. The public surface, and the rules it
follows, are in :mod:`kode_nb.executor`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kode_nb._builders import make_result, text_block
from kode_nb._control import PLAIN, CallControl, thread_note
from kode_nb._plans import ApproverLike, LoopSlots, Plan, PolicyLike, RegistryLike
from kode_nb._results import convert_value, exception_outcome
from kode_nb._running import CallState, decide, preview_text
from kode_nb._threads import DaemonThreadPool
from kode_nb.approval import ApprovalRequest
from kode_nb.errors import ToolNotFoundError, ToolTimeoutError, ToolValidationError
from kode_nb.events import (
    ApprovalRequested,
    ApprovalResolved,
    CallCancelled,
    CallCompleted,
    CallFailed,
    CallStarted,
    CallTimedOut,
    EventBus,
    InvalidArguments,
)
from kode_nb.tools import Tool
from kode_nb.types import ResultStatus, TextBlock, ToolResult

__all__ = ["ExecutorCore"]

_perf = time.perf_counter
_wall = time.time
_Policy: type | None = None


def _policy_class() -> type:
    """:class:`kode_nb.policy.Policy` (imported on first use: the executor may get another)."""
    global _Policy
    if _Policy is None:
        from kode_nb.policy import Policy

        _Policy = Policy
    return _Policy


class ExecutorCore(CallControl):
    """Settings and per-call machinery; :class:`kode_nb.Executor` adds the public API."""

    policy: PolicyLike
    approver: ApproverLike | None
    bus: EventBus
    deps: Any
    user: str | None
    _max_concurrency: int | None
    _group_limits: dict[str, int]
    _default_timeout: float | None
    _network_timeout: float | None
    _slots: LoopSlots
    _inflight: dict[CallState, None]
    _stopping: dict[CallState, None]
    _pool: DaemonThreadPool | None

    # ----------------------------------------------------------------- steps before running

    def _check(
        self, st: CallState, tool: Tool, arguments: Any
    ) -> ToolResult | tuple[dict[str, Any], dict[str, Any] | None, str | None]:
        """Policy, validation and the approval decision (no await): a result ends the call,
        else ``(kwargs, json_args, why)``; ``why`` (the policy's reason) only if it must ask."""
        plan: Plan = st.plan
        policy = self.policy
        name = plan.name
        try:
            allowed, why = policy.is_allowed(tool, st.registry)
        except Exception as exc:
            allowed, why = False, f"the policy check raised {type(exc).__name__}: {exc}"
        if not allowed:
            message = f"Tool '{name}' is not allowed by the policy: {why}"
            return self._fail(st, "denied", message, "ToolPermissionError")
        try:
            kwargs = plan.validate(arguments, tool=name)
        except ToolValidationError as exc:
            return self._fail(st, "invalid_arguments", exc.message, exc, issues=exc.issues)
        except Exception as exc:
            message = f"Invalid arguments for tool '{name}': {exc}"
            return self._fail(st, "invalid_arguments", message, exc)
        json_args: dict[str, Any] | None = None
        try:
            if (
                plan.rule_free
                and type(policy) is _policy_class()
                and "approval_for" not in policy.__dict__
            ):  # Policy.approval_for reads the arguments only for a predicate rule: no dump
                decision, why = policy.approval_for(tool, None)  # type: ignore[arg-type]
                if decision == "ask" or self.bus.active:
                    json_args = plan.dump(kwargs)
            else:
                json_args = plan.dump(kwargs)
                decision, why = policy.approval_for(tool, json_args)
        except Exception as exc:
            message = f"Tool '{name}' was not run: its approval check raised {_describe(exc)}"
            return self._fail(st, "denied", message, "ToolPermissionError")
        if decision == "auto":
            return kwargs, json_args, None
        if decision != "ask":
            message = f"Tool '{name}' was denied by the policy: {why}"
            return self._fail(st, "denied", message, "ToolPermissionError")
        return kwargs, json_args, why

    async def _ask(
        self,
        st: CallState,
        tool: Tool,
        json_args: Mapping[str, Any],
        why: str,
        approver: ApproverLike | None,
    ) -> ToolResult | tuple[dict[str, Any], dict[str, Any]] | None:
        """Ask for approval: a denial result, edited ``(kwargs, json_args)``, or ``None`` (go on)."""
        st.status = "waiting_approval"
        if approver is None:
            approver = self.approver
        preview = None
        if tool.preview is not None:
            preview = await preview_text(tool.preview, json_args, self._context(st))
        kind = tool.kind.value
        ids = _ids(st)
        request = ApprovalRequest(
            tool=tool.name, kind=kind, arguments=json_args, call_id=st.call_id, run_id=st.run_id,
            parent_call_id=st.parent_call_id, label=tool.label, description=tool.description,
            reason=why, preview=preview,
        )  # fmt: skip
        bus = self.bus
        if bus.active:
            bus.emit(ApprovalRequested(kind=kind, arguments=json_args, reason=why, **ids))
        decision, refusal = await decide(approver, request)
        if bus.active:
            bus.emit(
                ApprovalResolved(
                    approved=decision.approved, reason=decision.reason, always=decision.always,
                    edited=decision.arguments is not None, decided_by=decision.decided_by, **ids,
                )
            )  # fmt: skip
        if refusal is not None:
            return self._fail(st, "denied", refusal, "ToolPermissionError")
        if decision.always:
            self.policy.always_allow(tool.name)
        if decision.arguments is None:
            return None
        plan: Plan = st.plan
        try:
            kwargs = plan.validate(decision.arguments, tool=plan.name)
            return kwargs, plan.dump(kwargs)
        except ToolValidationError as exc:
            message = "The arguments edited during approval are invalid.\n" + exc.message
            return self._fail(st, "invalid_arguments", message, exc, issues=exc.issues)
        except Exception as exc:
            message = f"The arguments edited during approval are invalid: {exc}"
            return self._fail(st, "invalid_arguments", message, exc)

    # ----------------------------------------------------------------- running

    async def _pipeline(
        self, st: CallState, tool: Tool, arguments: Any, approver: ApproverLike | None
    ) -> ToolResult:
        """Every step after lookup: :meth:`_check`, asking, slots, the run under its timeout."""
        checked = self._check(st, tool, arguments)
        if isinstance(checked, ToolResult):
            return checked
        kwargs, json_args, ask_why = checked
        if ask_why is not None:
            assert json_args is not None
            asked = await self._ask(st, tool, json_args, ask_why, approver)
            if isinstance(asked, ToolResult):
                return asked
            if asked is not None:
                kwargs, json_args = asked
        plan: Plan = st.plan
        limits = plan.limits
        taken = 0
        st.status = "queued"
        try:
            for limit in limits:
                if limit.free > 0 and not limit.waiters:
                    limit.free -= 1  # a free slot: no await
                else:
                    await limit.take()
                taken += 1
            st.status = "running"
            bus = self.bus
            if bus.active:
                if json_args is None:
                    json_args = plan.dump(kwargs)
                bus.emit(CallStarted(arguments=json_args, **_ids(st)))
            if plan.arguments_param is not None:
                kwargs = {plan.arguments_param: kwargs}
            if plan.context_param is not None:
                kwargs = {**kwargs, plan.context_param: self._context(st)}
            timeout = plan.timeout
            if timeout and plan.deadlines is not None:
                plan.deadlines.add(st.loop.time() + timeout, st)
            st.wall0 = _wall()
            st.t0 = _perf()
            try:
                if plan.mode == "async":
                    value = await plan.function(**kwargs)
                elif plan.threaded:
                    value = await self._in_thread(st, plan, kwargs)
                elif plan.mode == "sync":  # inline
                    value = plan.function(**kwargs)
                    if type(value) not in PLAIN and inspect.isawaitable(value):
                        value = await value
                else:
                    value = await self._on_loop(st, plan, kwargs)
            except (Exception, SystemExit) as exc:
                if st.requests:  # we stopped it, and the tool turned that into an exception
                    raise asyncio.CancelledError from exc
                status, message = exception_outcome(plan.name, exc)
                issues, seconds = getattr(exc, "issues", ()), getattr(exc, "timeout", 0.0)
                return self._fail(st, status, message, exc, issues=issues, timeout=seconds)
            # From here on no await: a timeout can no longer fire for this call.
            if st.requests:
                raise asyncio.CancelledError  # the tool swallowed our cancellation
            if isinstance(value, ToolResult):
                status = value.status
                if value.is_error and status == "ok":
                    status = "error"
                return self._finish(
                    st, value.content, details=value.details, status=status,
                    is_error=value.is_error, error_type=value.error_type,
                )  # fmt: skip
            try:
                content, details = convert_value(value)
            except Exception as exc:
                status, message = exception_outcome(plan.name, exc)
                return self._fail(st, status, message, exc)
            return self._finish(st, content, details)
        finally:
            if taken == 1 and st.thread_future is None and not limits[0].waiters:
                limits[0].free += 1  # the usual case, inlined: one free limit, nobody waiting
            elif taken:
                self._release(st, taken)

    # ----------------------------------------------------------------- endings

    def _interrupted(self, st: CallState) -> ToolResult:
        """The result of a call the executor stopped (timeout, ``cancel()``)."""
        plan: Plan = st.plan
        note = thread_note(st)
        if st.interrupt == "timeout":
            timeout = plan.timeout or 0.0
            message = ToolTimeoutError(plan.name, timeout, note=note).message
            return self._fail(st, "timed_out", message, "ToolTimeoutError", timeout=timeout)
        if st.interrupt is None:
            message = f"Tool '{plan.name}' was cancelled: it raised CancelledError."
        else:
            message = f"Tool '{plan.name}' was cancelled ({st.reason or 'cancelled'}).{note}"
        return self._fail(st, "cancelled", message, "ToolCancelledError")

    def _stopped_from_outside(self, st: CallState, why: str) -> None:
        """The caller was cancelled or interrupted: stop the tool and report it, then re-raise."""
        st.reason = why
        if st.interrupt is None:
            st.interrupt = "cancel"
        if st.token is not None:
            st.token.cancel(why)
        message = f"Tool '{st.plan.name}' was cancelled: {why}.{thread_note(st)}"
        self._fail(st, "cancelled", message, "ToolCancelledError")

    def _not_found(
        self, registry: RegistryLike, name: object, tool: str, call_id: str,
        run_id: str | None, parent_call_id: str | None,
    ) -> ToolResult:  # fmt: skip
        if isinstance(name, str):
            matches = registry.close_matches(name)
            message = ToolNotFoundError(
                name, close_matches=matches, available=len(registry)
            ).message
        else:
            message = f"A tool name must be a string, got {type(name).__name__} {name!r}."
        now = _wall()
        result = ToolResult(
            content=(TextBlock(text=message),), is_error=True, status="not_found", tool=tool,
            call_id=call_id, error_type="ToolNotFoundError", started_at=now, ended_at=now,
        )  # fmt: skip
        if self.bus.active:
            self.bus.emit(
                CallFailed(
                    tool=tool, call_id=call_id, run_id=run_id, parent_call_id=parent_call_id,
                    result=result, error_type="ToolNotFoundError", message=message,
                )
            )  # fmt: skip
        return result

    def _fail(
        self, st: CallState, status: ResultStatus, message: str, error: str | BaseException, *,
        issues: Sequence[Any] = (), timeout: float = 0.0,
    ) -> ToolResult:  # fmt: skip
        error_type = error if isinstance(error, str) else type(error).__name__
        return self._finish(
            st, (text_block(message),), status=status, is_error=True, error_type=error_type,
            issues=issues, timeout=timeout,
        )  # fmt: skip

    def _finish(
        self, st: CallState, content: tuple[Any, ...], details: Any = None, *,
        status: ResultStatus = "ok", is_error: bool = False, error_type: str | None = None,
        issues: Sequence[Any] = (), timeout: float = 0.0,
    ) -> ToolResult:  # fmt: skip
        """Build the result, emit the one terminal event, record the stats."""
        if st.pending is not None:
            st.drain()  # updates a worker thread queued before the end come before the result
        t0 = st.t0
        if t0:
            duration = _perf() - t0
            started_at = st.wall0
            ended_at = started_at + duration
        else:
            duration = 0.0
            started_at = ended_at = _wall()
        result = make_result(
            content, details, is_error, status, st.tool, st.call_id, error_type, started_at,
            ended_at, duration,
        )  # fmt: skip
        if self.bus.active:
            self.bus.emit(_terminal_event(st, result, issues, timeout))
        if status == "denied":  # counted apart from failures
            st.registry.record_call(st.plan.name, duration, False, denied=True)
        else:
            st.registry.record_call(st.plan.name, duration, is_error)
        return result


def _ids(st: CallState) -> dict[str, Any]:
    return {
        "tool": st.tool,
        "call_id": st.call_id,
        "run_id": st.run_id,
        "parent_call_id": st.parent_call_id,
    }


def _terminal_event(
    st: CallState, result: ToolResult, issues: Sequence[Any], timeout: float
) -> Any:
    """The one event that ends a call, chosen by the result status."""
    status = result.status
    if status == "ok":
        return CallCompleted(result=result, **_ids(st))
    if status == "invalid_arguments":
        return InvalidArguments(message=result.text, issues=tuple(issues), **_ids(st))
    if status == "timed_out":
        return CallTimedOut(result=result, timeout=timeout, **_ids(st))
    if status == "cancelled":
        return CallCancelled(result=result, reason=st.reason or result.text, **_ids(st))
    error_type = result.error_type or ""
    return CallFailed(result=result, error_type=error_type, message=result.text, **_ids(st))


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
