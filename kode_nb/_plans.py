"""What the executor depends on and what it precomputes per tool.

* :class:`RegistryLike`, :class:`PolicyLike`, :data:`ApproverLike` — the parts of a registry,
  a policy and an approver the executor uses (the real classes fit; so do test doubles).
* :class:`Plan` — per Tool object: its timeout, the semaphores it takes, how to call it.
* :class:`LoopSlots` — per event loop: the semaphores, the timeout timer, the plans.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kode_nb._running import CallState, Deadlines
from kode_nb.approval import ApprovalRequest
from kode_nb.tools import Tool

__all__ = ["ApproverLike", "LoopSlots", "Plan", "PolicyLike", "RegistryLike"]


class RegistryLike(Protocol):
    """What the executor needs from a registry (:class:`~kode_nb.ToolRegistry` fits)."""

    def get(self, name: str) -> Tool | None: ...
    def close_matches(self, name: str, n: int = 3) -> list[str]: ...
    def record_call(self, name: str, duration: float, failed: bool = False) -> None: ...
    def __len__(self) -> int: ...


class PolicyLike(Protocol):
    """What the executor needs from a policy (:class:`~kode_nb.Policy` fits)."""

    @property
    def allowed_paths(self) -> Sequence[Path]: ...
    def is_allowed(self, tool: Tool, registry: Any = None) -> tuple[bool, str]: ...
    def approval_for(self, tool: Tool, arguments: Mapping[str, Any]) -> tuple[str, str]: ...
    def always_allow(self, name: str) -> Any: ...


ApproverLike = Callable[[ApprovalRequest], Any]
"""An :class:`~kode_nb.approval.Approver`, or any callable returning (or awaiting) an
:class:`~kode_nb.ApprovalDecision`, a bool, or a denial reason."""


class Plan:
    """What the executor precomputes for one Tool object (per event loop and registry version)."""

    __slots__ = (
        "arguments_param",
        "context_param",
        "deadlines",
        "dump",
        "function",
        "mode",
        "name",
        "registry",
        "sems",
        "threaded",
        "timeout",
        "validate",
        "version",
    )

    def __init__(
        self,
        tool: Tool,
        timeout: float | None,
        sems: Sequence[asyncio.Semaphore],
        deadlines: Deadlines | None,
        registry: Any,
    ) -> None:
        self.name = tool.name
        self.function = _adapt(tool)
        self.mode = tool.mode
        self.threaded = tool.mode in ("sync", "gen") and not tool.inline
        self.timeout = timeout
        self.deadlines = deadlines
        """The loop's timeout timer (``None`` before the executor met a loop)."""
        self.sems = tuple(sems)
        """Group semaphores (by group name), then the global one: always taken in this order."""
        self.context_param = tool.context_param
        self.arguments_param = tool.arguments_param
        self.validate = tool.validator.validate
        self.dump = tool.validator.dump
        self.registry = registry
        self.version = getattr(registry, "version", 0)


class LoopSlots:
    """The concurrency semaphores and plans of one event loop."""

    __slots__ = ("deadlines", "global_sem", "groups", "loop", "plans")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        limit: int | None,
        group_limits: Mapping[str, int],
        on_timeout: Callable[[CallState], object],
    ) -> None:
        self.loop = loop
        self.deadlines = Deadlines(loop, on_timeout) if loop is not None else None
        self.global_sem = asyncio.Semaphore(limit) if limit is not None else None
        self.groups = {g: asyncio.Semaphore(n) for g, n in sorted(group_limits.items())}
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
