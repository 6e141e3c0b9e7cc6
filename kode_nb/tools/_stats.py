"""Per-tool call statistics kept by the registry: counts, failures, mean and p95 duration.

An executor's finished call goes to its tool's :attr:`CallCounter.inbox` without a lock
(``deque.append`` is atomic): the duration alone for a call that succeeded, ``(duration, failed,
denied)`` otherwise. The inbox is settled into the counts under the registry's lock when stats
are read and whenever :data:`SETTLE_AT` calls have gathered (the lock taken at every call was 3 %
of a validated call: ``benchmarks/micro_opts.py``, ``stats-inbox``). The mean covers every call
that ran; the p95 (nearest rank) covers the last :data:`STATS_WINDOW` of them; denials are
counted apart and their durations left out of both.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ["SETTLE_AT", "STATS_WINDOW", "CallCounter", "RegistryStats", "ToolStats"]

STATS_WINDOW = 1024
"""How many recent durations each tool keeps for its p95."""

SETTLE_AT = 256
"""How many finished calls may wait in a counter's inbox before the one adding the last settles
them."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolStats:
    """Call statistics of one tool."""

    name: str
    """The tool's name."""
    calls: int = 0
    """Finished calls (successful or not)."""
    failures: int = 0
    """Calls that ended in an error result (denials apart)."""
    denials: int = 0
    """Calls refused (denied by the user or the policy); counted in ``calls``, not ``failures``."""
    mean: float = 0.0
    """Mean duration over the calls that ran (denials left out), in seconds."""
    p95: float = 0.0
    """95th percentile duration (nearest rank) over the last 1024 calls that ran, in seconds."""

    @property
    def failure_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0


@dataclass(frozen=True, kw_only=True)
class RegistryStats(Mapping[str, ToolStats]):
    """Registry summary; also a mapping of tool name -> ToolStats."""

    total: int
    """Number of registered tools."""
    by_category: dict[str, int]
    """Tool counts per category (only categories in use)."""
    by_kind: dict[str, int]
    """Tool counts per kind (only kinds in use)."""
    tools: dict[str, ToolStats] = field(default_factory=dict)
    """Per-tool stats, by tool name."""

    @property
    def calls(self) -> int:
        """Calls over all tools."""
        return sum(s.calls for s in self.tools.values())

    @property
    def failures(self) -> int:
        """Failed calls over all tools."""
        return sum(s.failures for s in self.tools.values())

    def __getitem__(self, name: str) -> ToolStats:
        return self.tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)


class CallCounter:
    """Counters of one tool: append finished calls to :attr:`inbox` from any thread; use the
    rest under the registry's lock."""

    __slots__ = ("calls", "denials", "failures", "inbox", "total", "window")

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self.denials = 0
        self.total = 0.0
        self.window: deque[float] = deque(maxlen=STATS_WINDOW)
        self.inbox: deque[float | tuple[float, bool, bool]] = deque()
        """Finished calls not counted yet: a duration (the call succeeded) or ``(duration,
        failed, denied)``."""

    def settle(self) -> None:
        """Count the calls waiting in :attr:`inbox` (under the registry's lock: one settler at a
        time, while others append)."""
        inbox = self.inbox
        pop = inbox.popleft
        add = self.add
        while inbox:
            item = pop()
            if isinstance(item, tuple):
                add(*item)
            else:
                add(item, False)

    def add(self, duration: float, failed: bool, denied: bool = False) -> None:
        """Count one finished call; a denial never ran, so its duration is left out."""
        self.calls += 1
        if denied:
            self.denials += 1
            return
        self.total += duration
        self.window.append(duration)
        if failed:
            self.failures += 1

    def snapshot(self, name: str) -> ToolStats:
        """The stats so far (the inbox settled first)."""
        if self.inbox:
            self.settle()
        ran = self.calls - self.denials
        if not ran:
            return ToolStats(name=name, calls=self.calls, denials=self.denials)
        ordered = sorted(self.window)
        p95 = ordered[max(math.ceil(0.95 * len(ordered)), 1) - 1]
        return ToolStats(
            name=name,
            calls=self.calls,
            failures=self.failures,
            denials=self.denials,
            mean=self.total / ran,
            p95=p95,
        )
