"""What the executor depends on and what it precomputes per tool.

* :class:`RegistryLike`, :class:`PolicyLike`, :data:`ApproverLike` — the parts of a registry,
  a policy and an approver the executor uses (the real classes fit; so do test doubles).
* :class:`Limit` — a concurrency limit (a first-come-first-served semaphore with a name).
* :class:`Plan` — per Tool object: its timeout, the limits it takes, how to call it.
* :class:`LoopSlots` — per event loop: the limits, the timeout timer, the plans.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kode_nb.execution._running import CallState, Deadlines
from kode_nb.policy._approval import ApprovalRequest
from kode_nb.tools._model import Tool

__all__ = ["ApproverLike", "Limit", "LoopSlots", "Plan", "PolicyLike", "RegistryLike"]


class RegistryLike(Protocol):
    """What the executor needs from a registry (:class:`~kode_nb.ToolRegistry` fits)."""

    def get(self, name: str) -> Tool | None: ...
    def close_matches(self, name: str, n: int = 3) -> list[str]: ...
    def record_call(
        self, name: str, duration: float, failed: bool = False, *, denied: bool = False
    ) -> None: ...
    def __len__(self) -> int: ...


class PolicyLike(Protocol):
    """What the executor needs from a policy (:class:`~kode_nb.Policy` fits)."""

    @property
    def allowed_paths(self) -> Sequence[Path]: ...
    def is_allowed(self, tool: Tool, registry: Any = None) -> tuple[bool, str]: ...
    def approval_for(self, tool: Tool, arguments: Mapping[str, Any]) -> tuple[str, str]: ...
    def always_allow(self, name: str) -> Any: ...


ApproverLike = Callable[[ApprovalRequest], Any]
"""An :class:`~kode_nb.policy._approval.Approver`, or any callable returning (or awaiting) an
:class:`~kode_nb.ApprovalDecision`, a bool, or a denial reason."""


class Limit:
    """A counting semaphore of one event loop, named for the messages that mention it.

    :meth:`take` waits for a slot; :meth:`release` hands it to the first waiter still waiting
    (first come, first served) or returns it to ``free``. Not ``asyncio.Semaphore``: on Python
    3.10 that one can lose a slot handed to a waiter cancelled before it resumes (gh-90155),
    and the executor's messages need the limit's name and who waits (``queued_note``).
    """

    __slots__ = ("free", "name", "waiters")

    def __init__(self, slots: int, name: str = "") -> None:
        self.name = name or f"a limit of {slots}"
        """What the limit is, as messages name it (``max_concurrency=3``)."""
        self.free = slots
        """Slots nobody holds."""
        self.waiters: deque[asyncio.Future[None]] = deque()
        """Futures of the callers queued for a slot, in arrival order."""

    async def take(self) -> None:
        """Wait for a slot (when none was free). Cancellation never leaks or loses one."""
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot, but cancelled before resuming: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self.waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Give a slot back: to the first waiter still waiting, else to ``free``."""
        waiters = self.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1

    def __repr__(self) -> str:
        return f"Limit(free={self.free}, waiting={len(self.waiters)})"


class Plan:
    """What the executor precomputes for one Tool object (per event loop and registry version)."""

    __slots__ = (
        "arguments_param",
        "context_param",
        "counter",
        "deadlines",
        "dump",
        "function",
        "limits",
        "mode",
        "name",
        "process",
        "registry",
        "rule_free",
        "threaded",
        "timeout",
        "validate",
        "validate_json",
        "version",
    )

    def __init__(
        self,
        tool: Tool,
        timeout: float | None,
        limits: Sequence[Limit],
        deadlines: Deadlines | None,
        registry: Any,
    ) -> None:
        self.name = tool.name
        self.function = _adapt(tool)
        self.mode = tool.mode
        self.process: tuple[str, str, str | None] | None = None
        """For ``isolation="process"``: the function's module, qualified name, and the
        parameter passed positionally (it runs in a worker process, killed when the call stops)."""
        if tool.isolation == "process":
            fn = tool.function
            positional = tool.arguments_param if self.function is not fn else None
            self.process = (fn.__module__, fn.__qualname__, positional)
        self.threaded = tool.mode in ("sync", "gen") and not tool.inline and not self.process
        self.timeout = timeout
        self.deadlines = deadlines
        """The loop's timeout timer (``None`` before the executor met a loop)."""
        self.limits = tuple(limits)
        """Group limits (by group name), then the global one: always taken in this order."""
        self.context_param = tool.context_param
        self.arguments_param = tool.arguments_param
        self.validate = tool.validator.validate
        self.validate_json = getattr(tool.validator, "validate_json_text", None)
        """The validator's shortcut for a JSON text (``None``: none; see ``CallSteps.run``)."""
        self.dump = tool.validator.dump
        self.rule_free = not callable(tool.approval)
        """The tool has no approval predicate (a Policy then decides without the arguments)."""
        self.registry = registry
        self.version = getattr(registry, "version", 0)
        counter = getattr(registry, "call_counter", None)
        self.counter: tuple[Any, Any] | None = counter(tool.name) if counter is not None else None
        """The registry's counter of this tool's calls and its lock (``None``: the executor
        records each call with ``registry.record_call``); valid for this plan's version."""


class LoopSlots:
    """The concurrency limits, timeout timer and plans of one event loop."""

    __slots__ = ("deadlines", "global_limit", "groups", "loop", "plans", "thread")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        limit: int | None,
        group_limits: Mapping[str, int],
        on_timeout: Callable[[CallState], object],
    ) -> None:
        self.loop = loop
        self.thread = threading.get_ident()
        """The loop's thread (this is built on it)."""
        self.deadlines = Deadlines(loop, on_timeout) if loop is not None else None
        self.global_limit = Limit(limit, f"max_concurrency={limit}") if limit is not None else None
        self.groups = {
            g: Limit(n, f"group_limits[{g!r}]={n}") for g, n in sorted(group_limits.items())
        }
        self.plans: dict[Tool, Plan] = {}


def _adapt(tool: Tool) -> Callable[..., Any]:
    """The tool's function, callable with keyword arguments only (as the executor calls it)."""
    fn, name = tool.function, tool.arguments_param
    if name is None:
        return fn
    try:
        param = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):  # no signature: keyword it is
        return fn
    if param is None or param.kind is not param.POSITIONAL_ONLY:
        return fn

    def positional(**kwargs: Any) -> Any:  # ``def fn(args, /, ctx)``
        return fn(kwargs.pop(name), **kwargs)

    return positional
