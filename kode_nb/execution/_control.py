"""Around the body of a call: its worker thread, concurrency slots, timeout, and stopping it.

:class:`Workers` owns one executor's worker threads: it runs a sync tool in a worker thread
(handing the outcome straight to a loop future), gives a call's slots back as soon as the call
returns, and counts the threads still running after their call returned (stuck threads). The functions plan a tool's limits and timeout (:func:`make_plan`), drive
generator tools on the loop (:func:`on_loop`) and stop a call on timeout (:func:`on_timeout`).
:class:`kode_nb.execution._pipeline.CallSteps` composes them; the rules are in
:mod:`kode_nb.execution._executor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import sys
from collections.abc import Callable
from typing import Any

from kode_nb._threads import DaemonThreadPool
from kode_nb.execution._plans import Limit, LoopSlots, Plan, RegistryLike
from kode_nb.execution._running import CallState, drive_async_gen, drive_gen
from kode_nb.tools._model import Tool
from kode_nb.types import ToolCategory

__all__ = [
    "PLAIN",
    "Workers",
    "absorb",
    "make_plan",
    "on_loop",
    "on_timeout",
    "release_limits",
    "run_in_worker",
    "thread_note",
    "thread_running",
]

PLAIN = frozenset({str, int, float, bool, dict, list, tuple, type(None)})
"""Result types that are never awaitable (no ``inspect.isawaitable`` needed)."""


_REMOTE_CATEGORIES = frozenset({ToolCategory.NETWORK, ToolCategory.MCP})
"""Categories whose calls cross a network or a process boundary: they get ``network_timeout``."""


class Workers:
    """One executor's worker threads (started on first use) and the calls whose thread is stuck.

    A call that returns (timed out, cancelled) while its worker thread still runs gives its
    slots back at once; the thread is *stuck*: it is counted per tool (:attr:`stuck`) and the
    pool stops counting it (a replacement thread starts). Once ``max_stuck`` threads are stuck,
    calls of a tool that has a stuck thread are refused (:meth:`refusal`); other tools run on.
    """

    def __init__(self, max_concurrency: int | None, max_stuck: int = 32) -> None:
        self.size = max(4, max_concurrency) if max_concurrency else 32
        self.max_stuck = max_stuck
        self.pool: DaemonThreadPool | None = None
        self.stopping: dict[CallState, None] = {}
        """Calls that returned while their worker thread still runs."""
        self.stuck: dict[str, int] = {}
        """Tool name -> how many of its calls returned while their worker thread still runs."""
        self.stuck_total = 0
        self.processes: Any = None
        """The :class:`kode_nb.execution._process.ProcessRunner` (made on first use)."""

    async def in_thread(self, st: CallState, plan: Plan, kwargs: dict[str, Any]) -> Any:
        """Run a sync (or sync generator) tool in a worker thread, in a copy of the context.

        The worker hands the outcome straight to a future of the loop (one
        ``call_soon_threadsafe``), instead of chaining a ``concurrent.futures.Future`` to an
        asyncio one with ``wrap_future`` (two more callbacks per call).
        """
        pool = self.pool
        if pool is None:
            pool = self.pool = DaemonThreadPool(self.size, max_abandoned=self.max_stuck)
        loop = st.loop
        waiter: asyncio.Future[Any] = loop.create_future()
        run = contextvars.copy_context().run
        if plan.mode == "gen":
            token = st.get_token()
            args: tuple[Any, ...] = (drive_gen, plan.function, kwargs, st.update, token, plan.name)
            future = pool.submit(run_in_worker, st, waiter, run, args, {})
        else:
            future = pool.submit(run_in_worker, st, waiter, run, (plan.function,), kwargs)
        st.thread_future = future
        try:
            value = await waiter
        except asyncio.CancelledError:
            future.cancel()  # not started yet: it never will
            raise
        if type(value) not in PLAIN and inspect.isawaitable(value):
            value = await value
        return value

    async def in_process(self, st: CallState, plan: Plan, kwargs: dict[str, Any]) -> Any:
        """Run a ``isolation="process"`` tool in a worker process (killed if the call stops)."""
        runner = self.processes
        if runner is None:
            from kode_nb.execution._process import ProcessRunner

            runner = self.processes = ProcessRunner()
        return await runner.run(st, plan, kwargs)

    def refusal(self, plan: Plan) -> str | None:
        """Why a call of ``plan``'s tool must not start now (too many stuck threads), or None."""
        mine = self.stuck.get(plan.name, 0)
        if not mine or self.stuck_total < self.max_stuck:
            return None
        others = ", ".join(f"{name}: {n}" for name, n in sorted(self.stuck.items()))
        return (
            f"Tool '{plan.name}' was not run: {mine} of its earlier calls timed out or were "
            f"cancelled and their worker threads are still running (stuck), and {self.stuck_total} "
            f"threads are stuck in all ({others}), which reaches the limit "
            f"max_stuck_threads={self.max_stuck}. Calls of other tools still run. Its calls run "
            "again once its stuck threads end; a tool that must be stoppable should check "
            "ToolContext.cancel, or be declared with isolation='process' (a timeout then kills it)."
        )

    def release(self, st: CallState, taken: int) -> None:
        """Give back the ``taken`` slots of ``st`` now; note its worker thread if it still runs."""
        release_limits(st.plan.limits, taken)
        if thread_running(st):
            self.abandon(st)

    def abandon(self, st: CallState) -> None:
        """``st`` returned but its worker thread still runs: count it stuck until it ends."""
        future = st.thread_future
        assert future is not None
        st.status = "stopping"
        self.stopping[st] = None
        name = st.plan.name
        self.stuck[name] = self.stuck.get(name, 0) + 1
        self.stuck_total += 1
        if self.pool is not None:
            self.pool.abandon(future)
        loop = st.loop

        def thread_ended(_future: object) -> None:
            with contextlib.suppress(RuntimeError):  # RuntimeError: the loop is closed
                loop.call_soon_threadsafe(self._thread_ended, st)

        future.add_done_callback(thread_ended)

    def _thread_ended(self, st: CallState) -> None:
        if self.stopping.pop(st, False) is None:
            name = st.plan.name
            left = self.stuck.get(name, 0) - 1
            if left > 0:
                self.stuck[name] = left
            else:
                self.stuck.pop(name, None)
            self.stuck_total -= 1

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.processes is not None:
            self.processes.close()


async def on_loop(st: CallState, plan: Plan, kwargs: dict[str, Any]) -> Any:
    """Drive a generator tool on the loop (``async_gen``, or ``gen`` declared inline)."""
    if plan.mode == "async_gen":
        return await drive_async_gen(plan.function(**kwargs), st.deliver)
    return drive_gen(plan.function, kwargs, st.deliver, st.get_token(), plan.name)


def make_plan(
    tool: Tool,
    slots: LoopSlots,
    registry: RegistryLike,
    default_timeout: float | None,
    network_timeout: float | None,
) -> Plan:
    """The tool's :class:`Plan` (timeout, limits) on this loop, cached in ``slots``."""
    timeout = tool.timeout
    if timeout is None:
        timeout = network_timeout if tool.category in _REMOTE_CATEGORIES else default_timeout
    limits: list[Limit] = []
    if slots.groups:
        members = getattr(registry, "group_members", None)
        for group, limit in slots.groups.items():  # sorted by name: no lock-order deadlock
            if group in tool.groups or (members is not None and tool.key in members(group)):
                limits.append(limit)
    if slots.global_limit is not None:
        limits.append(slots.global_limit)
    plan = Plan(tool, timeout, limits, slots.deadlines, registry)
    if len(slots.plans) > 512:  # replaced tools (re-run cells) must not pile up
        slots.plans.clear()
    slots.plans[tool] = plan
    return plan


def on_timeout(st: CallState) -> None:
    """A call's deadline passed: stop it (its result will say it timed out)."""
    if st.done or st.interrupt is not None:
        return
    st.reason = "timed out"
    st.interrupt = "timeout"
    if st.token is not None:
        st.token.cancel("timed out")
    st.request_task_cancel()


def absorb(st: CallState) -> bool:
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


def release_limits(limits: tuple[Limit, ...], taken: int) -> None:
    """Give back the first ``taken`` slots of ``limits``, last taken first (``Limit.release``'s
    fast path inline: see ``CallSteps.run``, where the take is)."""
    while taken:
        taken -= 1
        limit = limits[taken]
        if limit.waiters:
            limit.release()
        else:  # Limit.release's fast path, inline
            limit.free += 1


def thread_running(st: CallState) -> bool:
    """The call's worker thread has not finished the tool yet."""
    future = st.thread_future
    return future is not None and not st.thread_done and not future.done()


def thread_note(st: CallState) -> str:
    """What the model should know about the worker thread of a call the executor stopped."""
    future = st.thread_future
    if future is None:
        if st.pid is not None:
            return f" Its worker process (pid {st.pid}) was killed."
        return ""
    plan: Plan = st.plan
    running = thread_running(st)
    still = " and may still be finishing" if running else ""
    if plan.mode == "gen":
        return f" Its worker thread was signalled to stop at the generator's next item{still}."
    if plan.context_param is not None:
        return (
            " Its worker thread was signalled to stop cooperatively (through ToolContext.cancel)"
            f"{still}."
        )
    if not running:
        return ""
    return (
        " Its worker thread cannot be interrupted (the tool takes no ToolContext to check for "
        "cancellation) and may still be running."
    )


def run_in_worker(
    st: CallState,
    waiter: asyncio.Future[Any],
    run: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """In a worker thread: ``run(*args, **kwargs)``, then hand the outcome to ``waiter``.

    Work queued for a call that was stopped meanwhile is dropped: it would only be stuck too.
    """
    if st.interrupt is not None:
        return
    try:
        value = run(*args, **kwargs)
    except BaseException as exc:
        outcome, value = False, exc
    else:
        outcome = True
    with contextlib.suppress(RuntimeError):  # RuntimeError: the loop is closed
        st.loop.call_soon_threadsafe(_deliver, st, waiter, outcome, value)


def _deliver(st: CallState, waiter: asyncio.Future[Any], ok: bool, value: Any) -> None:
    st.thread_done = True
    if waiter.done():  # the call was cancelled meanwhile
        return
    if ok:
        waiter.set_result(value)
    elif isinstance(value, StopIteration):  # a Future refuses it (as a coroutine would)
        error = RuntimeError(f"{type(value).__name__} raised by the tool: {value}")
        error.__cause__ = value
        waiter.set_exception(error)
    else:
        waiter.set_exception(value)
