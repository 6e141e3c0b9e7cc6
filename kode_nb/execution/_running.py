"""The pieces of one running tool call, used by :mod:`kode_nb.execution._executor`.

* :class:`CallState` — the record of one in-flight call: ids, status, task, cancel token, why
  the executor stopped it, and the thread-safe, in-order delivery of its updates.
* :class:`Deadlines` — every running call's timeout, on one timer per event loop.
* :func:`drive_gen` / :func:`drive_async_gen` — generator tools: each item is an update.
* :func:`decide` / :func:`preview_text` — asking an approver, with every failure turned into a
  denial the model can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import inspect
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from kode_nb.errors import ToolCancelledError
from kode_nb.events._events import CallUpdate
from kode_nb.policy._approval import ApprovalDecision, ApprovalRequest, _coerce
from kode_nb.types import CancelToken, ToolContext

if TYPE_CHECKING:
    from kode_nb.events._events import EventBus

__all__ = ["CallState", "Deadlines", "decide", "drive_async_gen", "drive_gen", "preview_text"]

log = logging.getLogger("kode_nb.execution._executor")


_PENDING_LOCK = threading.Lock()
"""Guards every CallState.pending (held only to swap or append to a list)."""


class CallState:
    """One in-flight call. Created on the loop thread; :meth:`update` may be called from any."""

    __slots__ = (
        "approver",
        "bus",
        "call_id",
        "context",
        "done",
        "interrupt",
        "loop",
        "loop_thread",
        "on_update",
        "parent_call_id",
        "pending",
        "pid",
        "plan",
        "reason",
        "registry",
        "requests",
        "run_id",
        "sequence",
        "started",
        "status",
        "t0",
        "task",
        "thread_done",
        "thread_future",
        "token",
        "tool",
        "waiting",
    )

    def __init__(
        self,
        tool: str,
        call_id: str,
        run_id: str | None,
        parent_call_id: str | None,
        bus: EventBus,
        on_update: Callable[[Any], object] | None,
        loop: asyncio.AbstractEventLoop,
        loop_thread: int,
        task: asyncio.Task[Any] | None,
        plan: Any,
        registry: Any,
    ) -> None:
        self.tool = tool
        self.call_id = call_id
        self.run_id = run_id
        self.parent_call_id = parent_call_id
        self.bus = bus
        self.on_update = on_update
        self.loop = loop
        self.loop_thread = loop_thread
        """The id of the thread running ``loop``."""
        self.task = task
        self.started = 0.0
        """Wall-clock time the call arrived, stamped when it first waits (for an approval or a
        slot); 0 while it has not waited (see :meth:`arrived`)."""
        self.plan = plan
        """The executor's precomputed data for the tool."""
        self.registry = registry
        """The registry the tool was found in (stats are recorded there)."""
        self.status = "queued"
        self.approver: Any = None
        """The approver given to this call (``None``: the executor's)."""
        self.token: CancelToken | None = None
        self.context: ToolContext | None = None
        self.thread_future: Future[Any] | None = None
        self.pid: int | None = None
        """The worker process of an ``isolation="process"`` call, once started."""
        self.thread_done = False
        """The worker thread has handed the tool's outcome to the loop."""
        self.interrupt: str | None = None
        """``"cancel"`` or ``"timeout"`` once the executor decided to stop the call."""
        self.reason = ""
        self.requests = 0
        """How many times the executor called ``task.cancel()`` for this call."""
        self.sequence = 0
        self.pending: list[Any] | None = None
        """Updates from worker threads not yet delivered; a drain is scheduled while not None."""
        self.done = False
        self.waiting: Any = None
        """The :class:`~kode_nb.execution._plans.Limit` the call last queued for, if any."""
        self.t0 = 0.0
        """``perf_counter()`` when the body started (0: it never ran)."""

    def arrived(self) -> float:
        """Wall-clock time the call arrived. A call that never waited is stamped by its body's
        start, microseconds after it arrived (no clock is read for it before)."""
        if self.started:
            return self.started
        now = time.time()
        return now - (time.perf_counter() - self.t0) if self.t0 else now

    def get_token(self) -> CancelToken:
        """The call's cancel token, created on first use (already set if the call was stopped)."""
        token = self.token
        if token is None:
            token = self.token = CancelToken()
            if self.interrupt is not None:
                token.cancel(self.reason)
        return token

    def update(self, data: Any) -> None:
        """Deliver a partial output: at once on the loop thread, else in order via the loop.

        Updates from a worker thread are batched: the first one schedules a single drain on the
        loop and the rest are appended to its list, so a tool streaming thousands of updates
        costs one loop wake-up per batch instead of one per update.
        """
        if threading.get_ident() == self.loop_thread:
            if self.pending is not None:
                self.drain()
            self.deliver(data)
            return
        with _PENDING_LOCK:
            pending = self.pending
            if pending is not None:
                pending.append(data)
                return
            self.pending = [data]
        with contextlib.suppress(RuntimeError):  # RuntimeError: the loop is closed
            self.loop.call_soon_threadsafe(self.drain)

    def drain(self) -> None:
        """On the loop thread: deliver every update the worker thread queued, in order."""
        with _PENDING_LOCK:
            pending, self.pending = self.pending, None
        for data in pending or ():
            self.deliver(data)

    def deliver(self, data: Any) -> None:
        """On the loop thread: number the update, emit ``CallUpdate``, call the caller's callback."""
        if self.done:
            return  # a worker thread kept going after the call ended
        self.sequence += 1
        bus = self.bus
        if bus.wants_updates:
            bus.emit(
                CallUpdate(
                    tool=self.tool,
                    call_id=self.call_id,
                    run_id=self.run_id,
                    parent_call_id=self.parent_call_id,
                    data=data,
                    sequence=self.sequence,
                )
            )
        callback = self.on_update
        if callback is not None:
            try:
                callback(data)
            except Exception:
                log.exception("on_update callback %r failed for call %s", callback, self.call_id)

    def request_task_cancel(self) -> None:
        """On the loop thread: cancel the task running the call, if the call is still running."""
        task = self.task
        if self.done or task is None or task.done():
            return
        self.requests += 1
        task.cancel()


MONOTONIC: Callable[[], float] = (
    time.perf_counter
    if time.get_clock_info("perf_counter").implementation
    == time.get_clock_info("monotonic").implementation
    else time.monotonic
)
"""``time.monotonic``, as ``time.perf_counter`` where both read the same clock (Linux:
``CLOCK_MONOTONIC``)."""


class Deadlines:
    """The timeouts of running calls, served by one loop timer instead of one per call.

    A deadline no earlier than the last one queued (the usual case: calls share a timeout) is
    appended to a FIFO queue; an earlier one is pushed on a heap. The timer is re-armed only
    for an earlier deadline. Entries of calls that ended are dropped lazily (from the front,
    and by an occasional compaction), so about as many entries are kept as calls are in flight.
    """

    __slots__ = (
        "_armed",
        "_fifo",
        "_handle",
        "_heap",
        "_limit",
        "_loop",
        "_on_expire",
        "_seq",
        "clock",
    )

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_expire: Callable[[CallState], object]
    ) -> None:
        self._loop = loop
        self.clock: Callable[[], float] = (
            MONOTONIC if type(loop).time is asyncio.BaseEventLoop.time else loop.time
        )
        """The loop's clock (``loop.time()``): asyncio's own loops read ``time.monotonic``
        (``time.perf_counter`` where that reads the same clock: a call's start is then the
        reading its deadline was set from)."""
        self._on_expire = on_expire
        self._fifo: deque[tuple[float, CallState]] = deque()
        self._heap: list[tuple[float, int, CallState]] = []
        self._seq = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._armed = 0.0
        self._limit = 256

    def add(self, when: float, call: CallState) -> None:
        """Call ``on_expire(call)`` at loop time ``when`` unless the call is done by then."""
        fifo = self._fifo
        while fifo and fifo[0][1].done:
            fifo.popleft()
        if not fifo or when >= fifo[-1][0]:
            fifo.append((when, call))
        else:
            heap = self._heap
            while heap and heap[0][2].done:
                heapq.heappop(heap)
            heapq.heappush(heap, (when, next(self._seq), call))
        if self._handle is None or when < self._armed:
            self._arm(when)
        if len(fifo) + len(self._heap) >= self._limit:  # ended calls stuck behind a long one
            live = [entry for entry in fifo if not entry[1].done]
            fifo.clear()
            fifo.extend(live)
            heap = self._heap
            heap[:] = [entry for entry in heap if not entry[2].done]
            heapq.heapify(heap)
            self._limit = max(256, 2 * (len(fifo) + len(heap)))

    def __len__(self) -> int:
        """Entries kept (calls in flight, and ended ones not dropped yet)."""
        return len(self._fifo) + len(self._heap)

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        now = self._loop.time()
        fifo, heap = self._fifo, self._heap
        while fifo or heap:  # the earlier head of the two first
            if heap and (not fifo or heap[0][0] < fifo[0][0]):
                when, _, call = heap[0]
                if not call.done and when > now:
                    self._arm(when)
                    return
                heapq.heappop(heap)
            else:
                when, call = fifo[0]
                if not call.done and when > now:
                    self._arm(when)
                    return
                fifo.popleft()
            if not call.done:
                self._on_expire(call)


# --------------------------------------------------------------------------- generators

_NOTHING: Any = object()


def drive_gen(
    function: Callable[..., Any],
    kwargs: Mapping[str, Any],
    emit: Callable[[Any], None],
    token: CancelToken,
    tool: str,
) -> Any:
    """Run a generator tool: each item is an update; the ``return`` value (else the last item)
    is the result. Checks ``token`` before each item and closes the generator once it is set."""
    gen = function(**kwargs)
    last = _NOTHING
    while True:
        if token.cancelled:
            gen.close()
            raise ToolCancelledError(tool, token.reason or "cancelled")
        try:
            item = next(gen)
        except StopIteration as stop:
            if stop.value is not None or last is _NOTHING:
                return stop.value
            return last
        emit(item)
        last = item


async def drive_async_gen(agen: Any, emit: Callable[[Any], None]) -> Any:
    """Run an async generator tool: each item is an update; the last one is the result."""
    last = None
    try:
        async for item in agen:
            emit(item)
            last = item
    finally:
        await agen.aclose()
    return last


# --------------------------------------------------------------------------- approval


def _approver_name(approver: object) -> str:
    name = getattr(approver, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(approver, "__name__", None) or type(approver).__name__


def no_approver_message(tool: str, reason: str) -> str:
    why = f" ({reason})" if reason else ""
    return (
        f"Tool '{tool}' needs approval{why}, but no approver is configured, so the call was "
        "denied. To allow such calls, give the executor an approver: Executor(approver=...) or "
        "call(..., approver=...), e.g. kode_nb.AutoApprove() or a CallbackApprover (in a "
        "notebook, the approval buttons)."
    )


async def decide(
    approver: Callable[[ApprovalRequest], Any] | None, request: ApprovalRequest
) -> tuple[ApprovalDecision, str | None]:
    """Ask ``approver``; returns the decision and, for a denial, the message the model sees.

    No approver, an approver that raises or returns nonsense, and a denial all come back as a
    denied decision with an explanatory message; only cancellation propagates.
    """
    if approver is None:
        message = no_approver_message(request.tool, request.reason)
        return ApprovalDecision(approved=False, reason=message, decided_by="no-approver"), message
    by = _approver_name(approver)
    try:
        out = approver(request)
        if inspect.isawaitable(out):
            out = await out
        decision = _coerce(out, by)
    except Exception as exc:
        log.warning("approver %s failed for call %s", by, request.call_id, exc_info=True)
        message = (
            f"Tool '{request.tool}' was not run: asking for approval failed because the "
            f"approver {by} raised {type(exc).__name__}: {exc}"
        )
        return ApprovalDecision(approved=False, reason=message, decided_by=by), message
    if decision.approved:
        return decision, None
    reason = decision.reason
    if decision.decided_by.endswith("timeout"):  # nobody decided: the reason says what happened
        return decision, f"This call was not run: {reason}" if reason else "Nobody approved it."
    return (
        decision,
        f"The user denied this call: {reason}" if reason else "The user denied this call.",
    )


async def preview_text(
    preview: Callable[[Mapping[str, Any], ToolContext | None], Any],
    arguments: Mapping[str, Any],
    context: ToolContext | None,
) -> str | None:
    """Render a tool's approval preview; a failing preview shows its error as the preview."""
    try:
        out = preview(arguments, context)
        if inspect.isawaitable(out):
            out = await out
    except Exception as exc:
        log.warning(
            "approval preview of %s failed", context.tool if context else "?", exc_info=True
        )
        return f"(preview failed: {type(exc).__name__}: {exc})"
    return None if out is None else str(out)
