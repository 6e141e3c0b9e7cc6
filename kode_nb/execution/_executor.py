"""The :class:`Executor`: runs tool calls under policy, approval, limits and cancellation.

One call goes through::

    requested → lookup → policy → validate → approval → slots → run (timeout) → result

and any step can end it with a :class:`~kode_nb.ToolResult` the model can read. Its ``status``
says why: ``ok``, ``not_found``, ``denied``, ``invalid_arguments``, ``error``, ``timed_out`` or
``cancelled``. A call never raises because of a tool or its arguments. The one exception is the
*caller's* task being cancelled (or a ``KeyboardInterrupt``): then the call emits
``CallCancelled``, sets the tool's cancel token and re-raises, as asyncio code must.

**Events** (built only when the bus has subscribers): ``CallRequested``; ``ApprovalRequested``
and ``ApprovalResolved`` when asked; ``CallStarted`` when the body starts; ``CallUpdate`` per
partial output; then exactly one terminal event, chosen by the result status: ``ok`` →
``CallCompleted``, ``invalid_arguments`` → ``InvalidArguments``, ``timed_out`` →
``CallTimedOut``, ``cancelled`` → ``CallCancelled``, anything else → ``CallFailed``.

**Results.** A returned ``str`` is text; ``None`` is the text ``"(no output)"``; dicts, lists,
numbers and bools are JSON; a pydantic model or dataclass is JSON (the object itself goes to
``details``); content blocks (or a list holding them) are kept; ``bytes`` become an image block
(PNG/JPEG/GIF/WEBP) or UTF-8 text, else an error; a returned ``ToolResult`` keeps its content,
details and status. An exception becomes ``"Tool 'x' raised ValueError: ..."``; ``ToolRetry``
gives its message verbatim; ``ToolError`` subclasses keep their message and map to their status
(permission → ``denied``, validation → ``invalid_arguments``, timeout → ``timed_out``,
cancelled → ``cancelled``).

**Concurrency.** A call waiting for approval holds no slot. A running call holds one slot of
each limited group it belongs to (taken first, in name order) and one global slot. Its timeout
counts from when it queues for those slots: a call that times out still queued says which limit
was reached and which calls hold it. Sync tools run in the executor's worker threads
(``inline=True`` ones on the event loop, where a timeout cannot interrupt them;
``isolation="process"`` ones in a worker process, killed when the call times out or is
cancelled).

**Stuck threads.** Python cannot kill a thread: on timeout or cancellation the tool's
:class:`~kode_nb.CancelToken` is set and the call returns at once, giving its slots back. If
its worker thread still runs, the thread is *stuck*: :meth:`Executor.running` shows the call as
``stopping``, :meth:`Executor.stuck` counts it per tool, and it stops counting against the
thread pool (a replacement thread starts). Once ``max_stuck_threads`` threads are stuck, calls
of a tool with a stuck thread fail at once (``error``, ``ToolStuckError``) until its threads end;
other tools keep running.

**Stats.** Every call whose tool was found is recorded once with ``registry.record_call``
(duration 0 if it never ran; ``failed`` = ``is_error``). An executor serves one event loop at a
time; its limits apply per loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kode_nb._redact import redact_kernel_output
from kode_nb.errors import ConfigurationError, KodeUsageError
from kode_nb.events._events import CallRequested, EventBus
from kode_nb.execution._control import Workers, absorb, make_plan, on_timeout
from kode_nb.execution._pipeline import CallSteps
from kode_nb.execution._plans import ApproverLike, LoopSlots, PolicyLike, RegistryLike
from kode_nb.execution._running import CallState
from kode_nb.types import ToolResult, normalize_name

__all__ = ["ApproverLike", "Executor", "PolicyLike", "RegistryLike", "RunningCall", "ToolCall"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One call for :meth:`Executor.call_many`."""

    name: str
    """The tool name, as the model wrote it."""
    arguments: str | bytes | Mapping[str, Any] | None = None
    """Raw arguments: a JSON string or a mapping."""
    call_id: str | None = None
    """The model's id for the call; generated when ``None``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunningCall:
    """A call in flight, as listed by :meth:`Executor.running`."""

    call_id: str
    """The call's id."""
    run_id: str | None
    """The run it belongs to."""
    parent_call_id: str | None
    """The call that caused it."""
    tool: str
    """The tool name as requested."""
    status: str
    """``waiting_approval``, ``queued``, ``running``, or ``stopping`` (the call returned but its
    worker thread has not ended yet: a stuck thread, holding no slot)."""
    started: float
    """Wall-clock time the call arrived."""


_default_registry: Callable[[], RegistryLike] | None = None

_current_task: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = (
    asyncio.current_task
)
if sys.version_info[:2] == (3, 11):  # current_task() is Python there, reading this C table
    with contextlib.suppress(ImportError):
        from asyncio.tasks import _current_tasks  # type: ignore[attr-defined]

        _current_task = _current_tasks.get  # the same lookup, without a Python frame (0.1 µs)


def _current_registry() -> RegistryLike:
    global _default_registry
    if _default_registry is None:
        from kode_nb.tools._registry import default_registry

        _default_registry = default_registry
    return _default_registry()


class Executor:
    """Runs tool calls from a registry under a policy; the rules are in the module docstring.

    ``registry`` defaults to the current :func:`~kode_nb.default_registry` at call time and
    ``policy`` to ``Policy()``. ``approver`` answers calls that must ask (none: they are denied,
    with a message saying so). ``max_concurrency`` (``None`` = unlimited) and ``group_limits``
    (``{"fs": 1}``) cap how many calls run at once; ``default_timeout`` and ``network_timeout``
    (seconds, ``None`` = none; the latter for categories ``network`` and ``mcp``) apply to tools
    without their own ``timeout``. ``deps`` and
    ``user`` reach tools through their :class:`~kode_nb.ToolContext`. ``max_stuck_threads``
    caps the worker threads left running by calls that timed out or were cancelled (see
    "Stuck threads" in :mod:`kode_nb.execution._executor`).
    """

    policy: PolicyLike
    approver: ApproverLike | None
    bus: EventBus
    deps: Any
    user: str | None

    def __init__(
        self,
        registry: RegistryLike | None = None,
        *,
        policy: PolicyLike | None = None,
        approver: ApproverLike | None = None,
        bus: EventBus | None = None,
        max_concurrency: int | None = 3,
        group_limits: Mapping[str, int] | None = None,
        default_timeout: float | None = 30.0,
        network_timeout: float | None = 60.0,
        deps: Any = None,
        user: str | None = None,
        max_stuck_threads: int = 32,
    ) -> None:
        if registry is None and policy is None and approver is None and bus is None:
            from kode_nb.execution._session_defaults import session_parts

            parts = session_parts()  # in a notebook with kode_nb loaded: its session's
            if parts is not None:
                registry, policy = parts.registry, parts.policy
                approver, bus = parts.approver, parts.bus
        if registry is not None and not callable(getattr(registry, "get", None)):
            raise ConfigurationError(
                f"Executor(registry=...) needs a ToolRegistry, got {registry!r}"
            )
        if policy is None:
            from kode_nb.policy._policy import Policy

            policy = Policy()
        elif not callable(getattr(policy, "approval_for", None)):
            raise ConfigurationError(f"Executor(policy=...) needs a Policy, got {policy!r}")
        if approver is not None and not callable(approver):
            raise ConfigurationError(f"Executor(approver=...) must be callable, got {approver!r}")
        if bus is not None and not isinstance(bus, EventBus):
            raise ConfigurationError(f"Executor(bus=...) must be an EventBus, got {bus!r}")
        if max_concurrency is not None and not _is_count(max_concurrency):
            raise ConfigurationError(
                f"Executor(max_concurrency=...) must be an int >= 1 or None, got {max_concurrency!r}"
            )
        if not _is_count(max_stuck_threads):
            raise ConfigurationError(
                f"Executor(max_stuck_threads=...) must be an int >= 1, got {max_stuck_threads!r}"
            )
        limits: dict[str, int] = {}
        for group, n in (group_limits or {}).items():
            if not isinstance(group, str) or not _is_count(n):
                raise ConfigurationError(
                    f"Executor(group_limits=...): expected group name -> int >= 1, got {group!r}: {n!r}"
                )
            limits[normalize_name(group.removeprefix("group:"))] = n
        for what, value in (
            ("default_timeout", default_timeout),
            ("network_timeout", network_timeout),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
            ):
                raise ConfigurationError(
                    f"Executor({what}=...) must be a positive number of seconds or None, got {value!r}"
                )
        self._registry = registry
        redact_kernel_output()  # in a kernel: what tools print is redacted before IOPub
        self.policy = policy
        """The policy consulted on every call."""
        self.approver = approver
        """Answers calls that must ask; ``None`` denies them (headless: ask is deny)."""
        self.bus = bus if bus is not None else EventBus()
        """Where the call events go; subscribe to it."""
        self.deps = deps
        """Passed to tools as ``ToolContext.deps``."""
        self.user = user
        """Passed to tools as ``ToolContext.user``."""
        self._max_concurrency = max_concurrency
        self._group_limits = limits
        self._default_timeout = default_timeout
        self._network_timeout = network_timeout
        self._slots = LoopSlots(None, max_concurrency, limits, on_timeout)
        self._inflight: dict[CallState, None] = {}
        self._workers = Workers(max_concurrency, max_stuck_threads)
        self._steps = CallSteps(self, self._workers, self._inflight)
        self._closed = False
        self._ids = itertools.count(1)
        self._id_prefix = f"call_{secrets.token_hex(4)}_"

    # ----------------------------------------------------------------- settings (read-only)

    @property
    def registry(self) -> RegistryLike:
        """The registry calls are looked up in (the current default one if none was given)."""
        return self._registry if self._registry is not None else _current_registry()

    @property
    def max_concurrency(self) -> int | None:
        """How many calls may run at once (``None``: no limit)."""
        return self._max_concurrency

    @property
    def group_limits(self) -> Mapping[str, int]:
        """Per-group limits on calls running at once."""
        return dict(self._group_limits)

    @property
    def default_timeout(self) -> float | None:
        return self._default_timeout

    @property
    def network_timeout(self) -> float | None:
        return self._network_timeout

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return (
            f"Executor(max_concurrency={self._max_concurrency}, group_limits={self._group_limits}, "
            f"in_flight={len(self._inflight)}{state})"
        )

    # ----------------------------------------------------------------- calls

    async def call(
        self,
        name: str,
        arguments: str | bytes | Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        run_id: str | None = None,
        parent_call_id: str | None = None,
        on_update: Callable[[Any], object] | None = None,
        approver: ApproverLike | None = None,
    ) -> ToolResult:
        """Run one tool call and return its result; never raises because of the tool.

        ``arguments`` is the raw JSON text (or a mapping) the model produced. ``on_update`` gets
        each partial output on the event loop thread, in order. ``approver`` overrides the
        executor's for this call. Raises only :class:`~kode_nb.KodeUsageError` (the executor is
        closed) and the caller's own cancellation.
        """
        if self._closed:
            raise KodeUsageError("this Executor is closed; create a new one")
        bus = self.bus
        cid = call_id if call_id is not None else f"{self._id_prefix}{next(self._ids)}"
        tname = name if type(name) is str else str(name)
        if bus.active:
            bus.emit(
                CallRequested(
                    tool=tname,
                    call_id=cid,
                    run_id=run_id,
                    parent_call_id=parent_call_id,
                    arguments=arguments,
                )
            )
        registry = self._registry if self._registry is not None else _current_registry()
        tool = registry.get(name) if isinstance(name, str) else None
        if tool is None:
            return self._steps.not_found(registry, name, tname, cid, run_id, parent_call_id)
        loop = asyncio.get_running_loop()
        slots = self._slots
        if slots.loop is not loop:
            slots = self._slots = LoopSlots(
                loop, self._max_concurrency, self._group_limits, on_timeout
            )
        plan = slots.plans.get(tool)
        if (
            plan is None
            or plan.registry is not registry
            or plan.version != getattr(registry, "version", 0)
        ):
            plan = make_plan(tool, slots, registry, self._default_timeout, self._network_timeout)
        st = CallState(
            tname,
            cid,
            run_id,
            parent_call_id,
            bus,
            on_update,
            loop,
            slots.thread,
            _current_task(loop),
            plan,
            registry,
        )
        st.approver = approver
        inflight = self._inflight
        inflight[st] = None
        try:
            result = await self._steps.run(st, tool, arguments, approver)
        except asyncio.CancelledError:
            if not absorb(st):
                self._steps.stopped_from_outside(st, "the caller was cancelled")
                raise
            result = self._steps.interrupted(st)
        except KeyboardInterrupt:
            self._steps.stopped_from_outside(st, "interrupted (KeyboardInterrupt)")
            raise
        finally:
            st.done = True
            del inflight[st]
        return result

    async def call_many(
        self,
        calls: Sequence[ToolCall | tuple[Any, ...]],
        *,
        run_id: str | None = None,
        parent_call_id: str | None = None,
        approver: ApproverLike | None = None,
    ) -> list[ToolResult]:
        """Run calls concurrently; the results come back in the order the calls were given.

        Each item is a :class:`ToolCall` or a ``(name, arguments)`` / ``(name, arguments,
        call_id)`` tuple. One failing call does not affect the others.
        """
        items = [_as_tool_call(c, i) for i, c in enumerate(calls)]
        if not items:
            return []
        results = await asyncio.gather(
            *(
                self.call(
                    c.name,
                    c.arguments,
                    call_id=c.call_id,
                    run_id=run_id,
                    parent_call_id=parent_call_id,
                    approver=approver,
                )
                for c in items
            )
        )
        return list(results)

    # ----------------------------------------------------------------- control

    def cancel(
        self, *, run_id: str | None = None, call_id: str | None = None, reason: str = "cancelled"
    ) -> int:
        """Cancel in-flight calls: those of ``run_id`` and/or ``call_id``, or all of them.

        Thread-safe (a widget's click handler may call it). Each call's cancel token is set and
        its task is cancelled on the event loop; the calls return ``status="cancelled"`` results
        that say ``reason``. Returns how many calls were cancelled.
        """
        count = 0
        for st in list(self._inflight):  # a snapshot: the loop thread may change the dict
            if st.done or st.interrupt is not None:
                continue
            if run_id is not None and st.run_id != run_id:
                continue
            if call_id is not None and st.call_id != call_id:
                continue
            st.reason = reason
            st.interrupt = "cancel"
            token = st.token
            if token is not None:
                token.cancel(reason)
            try:
                st.loop.call_soon_threadsafe(st.request_task_cancel)
            except RuntimeError:  # its loop is closed
                continue
            count += 1
        return count

    def running(self) -> list[RunningCall]:
        """The calls in flight, oldest first, then returned calls whose thread still runs."""
        return [
            RunningCall(
                call_id=s.call_id,
                run_id=s.run_id,
                parent_call_id=s.parent_call_id,
                tool=s.tool,
                status=s.status,
                started=s.arrived(),
            )
            for s in [*self._inflight, *self._workers.stopping]
        ]

    def stuck(self) -> dict[str, int]:
        """Tool name -> worker threads still running calls that already returned (timed out or
        cancelled), most first. Such threads hold no slot; see "Stuck threads" above."""
        counts = self._workers.stuck
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    @property
    def max_stuck_threads(self) -> int:
        """How many stuck threads are tolerated before the tools stuck in them are refused."""
        return self._workers.max_stuck

    def close(self) -> None:
        """Cancel the calls in flight and shut the worker threads down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.cancel(reason="the executor was closed")
        self._workers.shutdown()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Executor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _as_tool_call(item: object, index: int) -> ToolCall:
    if isinstance(item, ToolCall):
        return item
    if isinstance(item, tuple) and len(item) in (2, 3) and isinstance(item[0], str):
        call_id = item[2] if len(item) == 3 else None
        return ToolCall(name=item[0], arguments=item[1], call_id=call_id)
    raise TypeError(
        f"call_many(): item {index} must be a ToolCall or a (name, arguments[, call_id]) tuple, "
        f"got {item!r}"
    )
