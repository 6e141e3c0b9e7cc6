"""The machinery behind :class:`kode_nb.Executor`: the steps of one call after lookup.

:class:`ExecutorCore` holds the executor's settings and runs policy → validation → approval →
slots → the tool body under its timeout, and turns every ending into a :class:`ToolResult`
(emitting the terminal event and recording stats exactly once). The public surface, and the
rules it follows, are in :mod:`kode_nb.executor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kode_nb._plans import ApproverLike, LoopSlots, Plan, PolicyLike, RegistryLike
from kode_nb._results import convert_value, exception_outcome
from kode_nb._running import (
    CallState,
    decide,
    drive_async_gen,
    drive_gen,
    preview_text,
)
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
from kode_nb.types import ResultStatus, TextBlock, ToolCategory, ToolContext, ToolResult

__all__ = ["ExecutorCore"]

_perf = time.perf_counter
_wall = time.time


class ExecutorCore:
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

    async def _pipeline(
        self, st: CallState, tool: Tool, arguments: Any, approver: ApproverLike | None
    ) -> ToolResult:
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
        try:
            json_args = plan.dump(kwargs)
            decision, why = policy.approval_for(tool, json_args)
        except Exception as exc:
            message = f"Tool '{name}' was not run: its approval check raised {_describe(exc)}"
            return self._fail(st, "denied", message, "ToolPermissionError")
        if decision != "auto":
            if decision != "ask":
                message = f"Tool '{name}' was denied by the policy: {why}"
                return self._fail(st, "denied", message, "ToolPermissionError")
            asked = await self._ask(st, tool, json_args, why, approver)
            if isinstance(asked, ToolResult):
                return asked
            if asked is not None:
                kwargs, json_args = asked
        return await self._run(st, kwargs, json_args)

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

    async def _run(
        self, st: CallState, kwargs: dict[str, Any], json_args: Mapping[str, Any]
    ) -> ToolResult:
        plan: Plan = st.plan
        sems = plan.sems
        taken = 0
        st.status = "queued"
        try:
            for sem in sems:
                await sem.acquire()
                taken += 1
            st.status = "running"
            if self.bus.active:
                self.bus.emit(CallStarted(arguments=json_args, **_ids(st)))
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
                else:
                    value = await self._invoke(st, plan, kwargs)
            except (Exception, SystemExit) as exc:
                if st.requests:  # we stopped it, and the tool turned that into an exception
                    raise asyncio.CancelledError from exc
                status, message = exception_outcome(plan.name, exc)
                issues, limit = getattr(exc, "issues", ()), getattr(exc, "timeout", 0.0)
                return self._fail(st, status, message, exc, issues=issues, timeout=limit)
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
            return self._finish(st, content, details=details)
        finally:
            if taken:
                self._release(st, taken)

    async def _invoke(self, st: CallState, plan: Plan, kwargs: dict[str, Any]) -> Any:
        """Call a non-``async`` tool: in a worker thread, inline, or as a generator."""
        if plan.threaded:
            pool = self._pool
            if pool is None:
                n = self._max_concurrency
                pool = self._pool = DaemonThreadPool(max(4, n) if n else 32)
            run: Callable[..., Any] = contextvars.copy_context().run
            if plan.mode == "gen":
                token = st.get_token()
                future = pool.submit(
                    run, drive_gen, plan.function, kwargs, st.update, token, plan.name
                )
            else:
                future = pool.submit(run, plan.function, **kwargs)
            st.thread_future = future
            value = await asyncio.wrap_future(future, loop=st.loop)
            return await value if inspect.isawaitable(value) else value
        if plan.mode == "sync":
            value = plan.function(**kwargs)
            return await value if inspect.isawaitable(value) else value
        if plan.mode == "async_gen":
            return await drive_async_gen(plan.function(**kwargs), st.deliver)
        return drive_gen(plan.function, kwargs, st.deliver, st.get_token(), plan.name)

    def _plan(self, tool: Tool, slots: LoopSlots, registry: RegistryLike) -> Plan:
        timeout = tool.timeout
        if timeout is None:
            network = tool.category is ToolCategory.NETWORK
            timeout = self._network_timeout if network else self._default_timeout
        sems: list[asyncio.Semaphore] = []
        if slots.groups:
            members = getattr(registry, "group_members", None)
            for group, sem in slots.groups.items():  # sorted by name: no lock-order deadlock
                if group in tool.groups or (members is not None and tool.key in members(group)):
                    sems.append(sem)
        if slots.global_sem is not None:
            sems.append(slots.global_sem)
        plan = Plan(tool, timeout, sems, slots.deadlines, registry)
        if len(slots.plans) > 512:  # replaced tools (re-run cells) must not pile up
            slots.plans.clear()
        slots.plans[tool] = plan
        return plan

    def _context(self, st: CallState) -> ToolContext:
        ctx = st.context
        if ctx is None:
            ctx = st.context = ToolContext(
                tool=st.plan.name, call_id=st.call_id, run_id=st.run_id,
                parent_call_id=st.parent_call_id, cancel=st.get_token(), on_update=st.update,
                allowed_paths=tuple(self.policy.allowed_paths), user=self.user, deps=self.deps,
            )  # fmt: skip
        return ctx

    def _release(self, st: CallState, taken: int) -> None:
        future = st.thread_future
        if future is None or future.done():
            _release(st.plan.sems, taken)
            return
        # The call returned but its worker thread still runs: keep the slots until it ends.
        st.status = "stopping"
        self._stopping[st] = None
        loop = st.loop

        def thread_ended(_future: object) -> None:
            with contextlib.suppress(RuntimeError):  # RuntimeError: the loop is closed
                loop.call_soon_threadsafe(self._thread_ended, st, taken)

        future.add_done_callback(thread_ended)

    def _thread_ended(self, st: CallState, taken: int) -> None:
        self._stopping.pop(st, None)
        _release(st.plan.sems, taken)

    def _on_timeout(self, st: CallState) -> None:
        if st.done or st.interrupt is not None:
            return
        st.reason = "timed out"
        st.interrupt = "timeout"
        if st.token is not None:
            st.token.cancel("timed out")
        st.request_task_cancel()

    # ----------------------------------------------------------------- endings

    def _absorb(self, st: CallState) -> bool:
        """After a CancelledError: True if only the executor asked for it (then it is undone)."""
        n, st.requests = st.requests, 0
        task = st.task
        if sys.version_info >= (3, 11) and task is not None:
            if not n:  # nobody cancelled the task: the tool itself raised CancelledError
                return task.cancelling() == 0
            remaining = 0
            for _ in range(n):
                remaining = task.uncancel()
            return remaining == 0
        return n > 0  # 3.10 cannot tell whose cancellation it was

    def _interrupted(self, st: CallState) -> ToolResult:
        """The result of a call the executor stopped (timeout, ``cancel()``)."""
        plan: Plan = st.plan
        note = _thread_note(st)
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
        message = f"Tool '{st.plan.name}' was cancelled: {why}.{_thread_note(st)}"
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
            st, (TextBlock(text=message),), status=status, is_error=True, error_type=error_type,
            issues=issues, timeout=timeout,
        )  # fmt: skip

    def _finish(
        self, st: CallState, content: tuple[Any, ...], *, details: Any = None,
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
        result = ToolResult(
            content=content, details=details, is_error=is_error, status=status, tool=st.tool,
            call_id=st.call_id, error_type=error_type, started_at=started_at, ended_at=ended_at,
            duration=duration,
        )  # fmt: skip
        if self.bus.active:
            self.bus.emit(_terminal_event(st, result, issues, timeout))
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


def _release(sems: tuple[asyncio.Semaphore, ...], taken: int) -> None:
    for sem in reversed(sems[:taken]):
        sem.release()


def _thread_note(st: CallState) -> str:
    """What the model should know about the worker thread of a call the executor stopped."""
    future = st.thread_future
    if future is None:
        return ""
    plan: Plan = st.plan
    still = "" if future.done() else " and may still be finishing"
    if plan.mode == "gen":
        return f" Its worker thread was signalled to stop at the generator's next item{still}."
    if plan.context_param is not None:
        return (
            " Its worker thread was signalled to stop cooperatively (through ToolContext.cancel)"
            f"{still}."
        )
    if future.done():
        return ""
    return (
        " Its worker thread cannot be interrupted (the tool takes no ToolContext to check for "
        "cancellation) and may still be running."
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
