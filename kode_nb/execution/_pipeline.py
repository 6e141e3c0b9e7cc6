"""The steps of one call after lookup, composed by :class:`kode_nb.Executor`.

:class:`CallSteps` runs policy → validation → approval → slots → the tool body under its timeout,
and turns every ending into a :class:`ToolResult` (emitting the terminal event and recording
stats exactly once). It reads the executor's live settings (``policy``, ``approver``, ``bus``,
``deps``, ``user``) through :class:`Settings`, and uses :class:`kode_nb.execution._control.Workers`
for worker threads and slots. The public surface, and the rules it follows, are in
:mod:`kode_nb.execution._executor`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic_core import ValidationError

from kode_nb.errors import ToolNotFoundError, ToolTimeoutError, ToolValidationError
from kode_nb.events._events import (
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
from kode_nb.execution._control import PLAIN, Workers, on_loop, release_limits, thread_note
from kode_nb.execution._plans import ApproverLike, Limit, Plan, PolicyLike, RegistryLike
from kode_nb.execution._results import convert_value, exception_outcome
from kode_nb.execution._running import CallState, decide, preview_text
from kode_nb.policy._approval import ApprovalRequest
from kode_nb.tools._model import Tool
from kode_nb.tools._stats import SETTLE_AT
from kode_nb.types import (
    ResultStatus,
    TextBlock,
    ToolContext,
    ToolResult,
    _json_block,
    _new_result,
    _text_block,
)

__all__ = ["CallSteps", "Settings"]

_perf = time.perf_counter
_wall = time.time
_Policy: type | None = None


def _policy_class() -> type:
    """:class:`kode_nb.policy._policy.Policy` (imported on first use: the executor may get another)."""
    global _Policy
    if _Policy is None:
        from kode_nb.policy._policy import Policy

        _Policy = Policy
    return _Policy


_OVERRIDDEN = frozenset({"is_allowed", "approval_for"})
"""What a policy that is not a :class:`~kode_nb.Policy` is taken to redefine."""


class Settings(Protocol):
    """What the steps read from their executor, at each call (users may reassign them)."""

    policy: PolicyLike
    approver: ApproverLike | None
    bus: EventBus
    deps: Any
    user: str | None


class CallSteps:
    """The per-call machinery of one executor; :class:`kode_nb.Executor` adds the public API."""

    __slots__ = ("_inflight", "_settings", "_workers")

    def __init__(
        self, settings: Settings, workers: Workers, inflight: Mapping[CallState, None]
    ) -> None:
        self._settings = settings
        self._workers = workers
        self._inflight = inflight

    def context(self, st: CallState) -> ToolContext:
        """The call's :class:`~kode_nb.ToolContext` (built once, on first need)."""
        ctx = st.context
        if ctx is None:
            settings = self._settings
            ctx = st.context = ToolContext(
                tool=st.plan.name,
                call_id=st.call_id,
                run_id=st.run_id,
                parent_call_id=st.parent_call_id,
                cancel=st.get_token(),
                on_update=st.update,
                allowed_paths=tuple(settings.policy.allowed_paths),
                user=settings.user,
                deps=settings.deps,
                executor=settings,
                approver=st.approver,
            )
        return ctx

    # ----------------------------------------------------------------- steps before running

    async def ask(
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
            approver = self._settings.approver
        preview = None
        if tool.preview is not None:
            preview = await preview_text(tool.preview, json_args, self.context(st))
        kind = tool.kind.value
        ids = _ids(st)
        request = ApprovalRequest(
            tool=tool.name,
            kind=kind,
            arguments=json_args,
            call_id=st.call_id,
            run_id=st.run_id,
            parent_call_id=st.parent_call_id,
            label=tool.label,
            description=tool.description,
            reason=why,
            preview=preview,
        )
        bus = self._settings.bus
        if bus.active:
            bus.emit(ApprovalRequested(kind=kind, arguments=json_args, reason=why, **ids))
        decision, refusal = await decide(approver, request)
        if bus.active:
            bus.emit(
                ApprovalResolved(
                    approved=decision.approved,
                    reason=decision.reason,
                    always=decision.always,
                    edited=decision.arguments is not None,
                    decided_by=decision.decided_by,
                    **ids,
                )
            )
        if refusal is not None:
            return self.fail(st, "denied", refusal, "ToolPermissionError")
        if decision.always:
            self._settings.policy.always_allow(tool.name)
        if decision.arguments is None:
            return None
        plan: Plan = st.plan
        try:
            kwargs = plan.validate(decision.arguments, tool=plan.name)
            return kwargs, plan.dump(kwargs)
        except ToolValidationError as exc:
            message = "The arguments edited during approval are invalid.\n" + exc.message
            return self.fail(st, "invalid_arguments", message, exc, issues=exc.issues)
        except Exception as exc:
            message = f"The arguments edited during approval are invalid: {exc}"
            return self.fail(st, "invalid_arguments", message, exc)

    # ----------------------------------------------------------------- running

    async def run(
        self, st: CallState, tool: Tool, arguments: Any, approver: ApproverLike | None
    ) -> ToolResult:
        """Every step after lookup: policy, validation, the approval decision and asking, slots,
        the body under its timeout; every ending a result (:meth:`finish`)."""
        plan: Plan = st.plan
        policy: Any = self._settings.policy  # a Policy when ``own`` is its __dict__
        name = plan.name
        own = policy.__dict__ if type(policy) is (_Policy or _policy_class()) else _OVERRIDDEN
        if (
            "is_allowed" in own
            or policy.deny
            or policy.profile is not None
            or policy.allow is not None
        ):  # else Policy.is_allowed allows every tool: no deny list, profile or allow list
            try:
                allowed, why = policy.is_allowed(tool, st.registry)
            except Exception as exc:
                allowed, why = False, f"the policy check raised {type(exc).__name__}: {exc}"
            if not allowed:
                message = f"Tool '{name}' is not allowed by the policy: {why}"
                return self.fail(st, "denied", message, "ToolPermissionError")
        try:
            if plan.validate_json is not None and type(arguments) is str:
                try:  # the validator's own first step, without its two calls (0.15 µs)
                    kwargs = plan.validate_json(arguments)
                except ValidationError:  # its issues, as the validator words them
                    kwargs = plan.validate(arguments, tool=name)
            else:
                kwargs = plan.validate(arguments, tool=name)
        except ToolValidationError as exc:
            return self.fail(st, "invalid_arguments", exc.message, exc, issues=exc.issues)
        except Exception as exc:
            message = f"Invalid arguments for tool '{name}': {exc}"
            return self.fail(st, "invalid_arguments", message, exc)
        json_args: dict[str, Any] | None = None
        try:
            if plan.rule_free and "approval_for" not in own:
                # Policy.approval_for reads the arguments only for a predicate rule: no dump
                if (
                    tool.approval is None
                    and tool.key not in policy.overrides
                    and policy.kind_approval[tool.kind] == "auto"
                ):  # its first case, inline: the kind's default runs it (0.2 µs a call)
                    decision, why = "auto", ""
                else:
                    decision, why = policy.approval_for(tool, None)
                if decision == "ask" or self._settings.bus.active:
                    json_args = plan.dump(kwargs)
            else:
                json_args = plan.dump(kwargs)
                decision, why = policy.approval_for(tool, json_args)
        except Exception as exc:
            message = f"Tool '{name}' was not run: its approval check raised {_describe(exc)}"
            return self.fail(st, "denied", message, "ToolPermissionError")
        if decision != "auto":
            if decision != "ask":
                message = f"Tool '{name}' was denied by the policy: {why}"
                return self.fail(st, "denied", message, "ToolPermissionError")
            ask_why: str | None = why
        else:
            ask_why = None
        workers = self._workers
        if workers.stuck_total and plan.threaded:
            refused = workers.refusal(plan)
            if refused is not None:
                return self.fail(st, "error", refused, "ToolStuckError")
        if ask_why is not None:
            assert json_args is not None
            if not st.started:
                st.started = _wall()
            asked = await self.ask(st, tool, json_args, ask_why, approver)
            if isinstance(asked, ToolResult):
                return asked
            if asked is not None:
                kwargs, json_args = asked
        limits = plan.limits
        taken = 0
        st.status = "queued"
        timeout = plan.timeout
        deadline = now = 0.0
        deadlines = plan.deadlines
        if timeout and deadlines is not None:  # it counts while waiting for a slot too
            now = deadlines.clock()
            deadline = now + timeout
            deadlines.add(deadline, st)
            if deadlines.clock is not _perf:
                now = 0.0
        try:
            for limit in limits:
                # Limit.take's fast path, inline (with release_limits': 3 % of a batch of 100
                # calls through call_many, 0.6 µs a call; benchmarks/micro_opts.py, "limit")
                if limit.free > 0 and not limit.waiters:
                    limit.free -= 1
                    taken += 1
                    continue
                st.waiting = limit
                if not st.started:
                    st.started = _wall()
                now = 0.0  # the body starts later than the deadline was read
                await limit.take()
                taken += 1
                if deadline and st.loop.time() >= deadline:  # the slot came too late
                    st.reason, st.interrupt = "timed out", "timeout"
                    if st.token is not None:
                        st.token.cancel("timed out")
                    return self.interrupted(st)
            st.status = "running"
            bus = self._settings.bus
            if bus.active:
                if json_args is None:
                    json_args = plan.dump(kwargs)
                bus.emit(CallStarted(arguments=json_args, **_ids(st)))
            if plan.arguments_param is not None:
                kwargs = {plan.arguments_param: kwargs}
            if plan.context_param is not None:
                kwargs = {**kwargs, plan.context_param: self.context(st)}
            st.t0 = now or _perf()  # the deadline's reading when nothing was waited for since
            try:
                if plan.mode == "async":
                    value = await plan.function(**kwargs)
                elif plan.threaded:
                    value = await self._workers.in_thread(st, plan, kwargs)
                elif plan.mode == "sync":
                    if plan.process:
                        value = await workers.in_process(st, plan, kwargs)
                    else:  # inline
                        value = plan.function(**kwargs)
                        if type(value) not in PLAIN and inspect.isawaitable(value):
                            value = await value
                else:
                    value = await on_loop(st, plan, kwargs)
            except (Exception, SystemExit) as exc:
                if st.requests:  # we stopped it, and the tool turned that into an exception
                    raise asyncio.CancelledError from exc
                status, message = exception_outcome(plan.name, exc)
                issues, seconds = getattr(exc, "issues", ()), getattr(exc, "timeout", 0.0)
                return self.fail(st, status, message, exc, issues=issues, timeout=seconds)
            # From here on no await: a timeout can no longer fire for this call.
            if st.requests:
                raise asyncio.CancelledError  # the tool swallowed our cancellation
            if isinstance(value, ToolResult):
                status = value.status
                if value.is_error and status == "ok":
                    status = "error"
                return self.finish(
                    st,
                    value.content,
                    details=value.details,
                    status=status,
                    is_error=value.is_error,
                    error_type=value.error_type,
                )
            kind = type(value)
            if kind is str:  # convert_value's first cases, without its call
                return self.finish(st, (_text_block(value),))
            if kind is int or kind is dict or kind is float or kind is bool:
                return self.finish(st, (_json_block(value),))
            try:
                content, details = convert_value(value)
            except Exception as exc:
                status, message = exception_outcome(plan.name, exc)
                return self.fail(st, status, message, exc)
            return self.finish(st, content, details)
        finally:
            if st.thread_future is not None:
                workers.release(st, taken)
            elif taken == 1 and not limits[0].waiters:
                limits[0].free += 1  # release_limits' fast path, inline
            elif taken:
                release_limits(limits, taken)

    # ----------------------------------------------------------------- endings

    def interrupted(self, st: CallState) -> ToolResult:
        """The result of a call the executor stopped (timeout, ``cancel()``)."""
        plan: Plan = st.plan
        note = thread_note(st)
        if st.interrupt == "timeout":
            timeout = plan.timeout or 0.0
            if st.status == "queued" and st.waiting is not None:
                note = self.queued_note(st.waiting)
            message = ToolTimeoutError(plan.name, timeout, note=note).message
            return self.fail(st, "timed_out", message, "ToolTimeoutError", timeout=timeout)
        if st.interrupt is None:
            message = f"Tool '{plan.name}' was cancelled: it raised CancelledError."
        else:
            message = f"Tool '{plan.name}' was cancelled ({st.reason or 'cancelled'}).{note}"
        return self.fail(st, "cancelled", message, "ToolCancelledError")

    def queued_note(self, limit: Limit) -> str:
        """Why a call that timed out while queued never ran: the limit, and who holds it."""
        holders = [
            f"{s.tool} ({s.call_id})"
            for s in self._inflight
            if s.status == "running" and limit in s.plan.limits
        ]
        held = f" (running: {', '.join(holders)})" if holders else ""
        return (
            f" It timed out waiting for a slot and never ran: {limit.name} reached{held}. "
            "The timeout counts from when a call queues for a slot."
        )

    def stopped_from_outside(self, st: CallState, why: str) -> None:
        """The caller was cancelled or interrupted: stop the tool and report it, then re-raise."""
        st.reason = why
        if st.interrupt is None:
            st.interrupt = "cancel"
        if st.token is not None:
            st.token.cancel(why)
        message = f"Tool '{st.plan.name}' was cancelled: {why}.{thread_note(st)}"
        self.fail(st, "cancelled", message, "ToolCancelledError")

    def not_found(
        self,
        registry: RegistryLike,
        name: object,
        tool: str,
        call_id: str,
        run_id: str | None,
        parent_call_id: str | None,
    ) -> ToolResult:
        if isinstance(name, str):
            matches = registry.close_matches(name)
            message = ToolNotFoundError(
                name, close_matches=matches, available=len(registry)
            ).message
        else:
            message = f"A tool name must be a string, got {type(name).__name__} {name!r}."
        now = _wall()
        result = ToolResult(
            content=(TextBlock(text=message),),
            is_error=True,
            status="not_found",
            tool=tool,
            call_id=call_id,
            error_type="ToolNotFoundError",
            started_at=now,
            ended_at=now,
        )
        if self._settings.bus.active:
            self._settings.bus.emit(
                CallFailed(
                    tool=tool,
                    call_id=call_id,
                    run_id=run_id,
                    parent_call_id=parent_call_id,
                    result=result,
                    error_type="ToolNotFoundError",
                    message=message,
                )
            )
        return result

    def fail(
        self,
        st: CallState,
        status: ResultStatus,
        message: str,
        error: str | BaseException,
        *,
        issues: Sequence[Any] = (),
        timeout: float = 0.0,
    ) -> ToolResult:
        error_type = error if isinstance(error, str) else type(error).__name__
        return self.finish(
            st,
            (_text_block(message),),
            status=status,
            is_error=True,
            error_type=error_type,
            issues=issues,
            timeout=timeout,
        )

    def finish(
        self,
        st: CallState,
        content: tuple[Any, ...],
        details: Any = None,
        *,
        status: ResultStatus = "ok",
        is_error: bool = False,
        error_type: str | None = None,
        issues: Sequence[Any] = (),
        timeout: float = 0.0,
    ) -> ToolResult:
        """Build the result, emit the one terminal event, record the stats."""
        if st.pending is not None:
            st.drain()  # updates a worker thread queued before the end come before the result
        t0 = st.t0
        if t0:
            duration = _perf() - t0
            ended_at = _wall()
            started_at = ended_at - duration
        else:
            duration = 0.0
            started_at = ended_at = _wall()
        result = _new_result(
            content,
            details,
            is_error,
            status,
            st.tool,
            st.call_id,
            error_type,
            started_at,
            ended_at,
            duration,
        )
        if self._settings.bus.active:
            self._settings.bus.emit(_terminal_event(st, result, issues, timeout))
        counted = st.plan.counter
        if counted is not None:  # what record_call does, without looking it up or a lock
            counter, lock = counted
            inbox = counter.inbox
            inbox.append(
                duration
                if not is_error and status != "denied"
                else (duration, is_error, status == "denied")
            )
            if len(inbox) >= SETTLE_AT:
                with lock:
                    counter.settle()
        elif status == "denied":  # counted apart from failures
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
