"""What an executor made without a registry, policy, approver or bus uses instead of today's
defaults, when a notebook session provides them.

The core knows no notebook: ``kode_nb.magics`` installs a provider when ``%load_ext kode_nb``
creates its session (and removes it on unload). With one installed, ``kode_nb.Executor()`` (and
so ``kode_nb.Agent``, ``fork``, ``replay`` and expanded cells, which make one when given none)
runs calls under the session: its registry, policy, approvals and event bus (the notebook's
views and tools panel follow that bus). Scripts outside a kernel install nothing and keep the
defaults: the default registry, an empty policy, no approver (a call that must ask is denied),
a bus of its own.

A session may also watch the agent runs made on its executor (:func:`run_watchers`): an
``Agent`` run from Python in a cell then shows a live view there, as ``%%ask`` does. A run on
an executor of its own (``Executor(registry)``, a batch of ``run_many``) is not the session's
and shows none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RunWatch",
    "approval_deadline",
    "SessionParts",
    "install",
    "refresh_run",
    "run_watchers",
    "session_parts",
    "uninstall",
]

RunWatch = Callable[[Any, str], "Callable[[Any], None] | None"]
"""``(agent, run_id) -> on_event`` for a top-level run on the session's executor: the callback
that feeds the run's live view its events (``None``: the session shows no view of it, e.g. a
``%%ask`` run, which has its own)."""


@dataclass(frozen=True)
class SessionParts:
    """A session's registry, policy, approver and event bus."""

    registry: Any
    policy: Any
    approver: Any
    bus: Any
    watch_run: RunWatch | None = None
    """Shows the runs made on an executor with this bus (:func:`run_watchers`)."""
    unanswered: Callable[[], tuple[float | None, str | None]] | None = None
    """``(seconds, reason)``: how long an approval nobody answers may wait where the cell now
    running came from, and the reason it is then denied with (``(None, None)``: it waits).
    Under a notebook runner nobody can click, so a batch's inbox (:func:`approval_deadline`)
    denies what waits longer."""


_provider: Callable[[], SessionParts | None] | None = None


def install(provider: Callable[[], SessionParts | None]) -> None:
    """Use ``provider`` for executors made bare (the last installed wins)."""
    global _provider
    _provider = provider


def uninstall(provider: Callable[[], SessionParts | None]) -> None:
    """Remove ``provider`` if it is the one installed."""
    global _provider
    if _provider == provider:
        _provider = None


def session_parts() -> SessionParts | None:
    """The installed session's parts, or None (no session, or it has closed)."""
    provider = _provider
    return provider() if provider is not None else None


def run_watchers(agent: Any, run_id: str, executor: Any) -> tuple[Callable[[Any], None], ...]:
    """The session's callbacks for a top-level run of ``agent`` on ``executor``: its live view's,
    when the run is the session's (its executor sends events to the session's bus); none
    outside a session."""
    parts = session_parts()
    if parts is None or parts.watch_run is None or getattr(executor, "bus", None) is not parts.bus:
        return ()
    watch = parts.watch_run(agent, run_id)
    return () if watch is None else (watch,)


def approval_deadline() -> tuple[float | None, str | None]:
    """The session's :attr:`SessionParts.unanswered` now; ``(None, None)`` outside a session."""
    parts = session_parts()
    if parts is None or parts.unanswered is None:
        return None, None
    return parts.unanswered()


def refresh_run(result: Any) -> None:
    """``result``'s run ended earlier and the result was completed since (a fork links it to
    its parent): the run's live view, if the session shows one, shows the result as it is now
    (``watch_run.refresh``)."""
    parts = session_parts()
    refresh = getattr(parts.watch_run, "refresh", None) if parts is not None else None
    if callable(refresh):
        refresh(result)
