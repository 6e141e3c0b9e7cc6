"""What an executor made without a registry, policy, approver or bus uses instead of today's
defaults, when a notebook session provides them.

The core knows no notebook: ``kode_nb.magics`` installs a provider when ``%load_ext kode_nb``
creates its session (and removes it on unload). With one installed, ``kode_nb.Executor()`` (and
so ``kode_nb.Agent``, ``fork``, ``replay`` and expanded cells, which make one when given none)
runs calls under the session: its registry, policy, approvals and event bus (the notebook's
views and tools panel follow that bus). Scripts outside a kernel install nothing and keep the
defaults: the default registry, an empty policy, no approver (a call that must ask is denied),
a bus of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["SessionParts", "install", "session_parts", "uninstall"]


@dataclass(frozen=True)
class SessionParts:
    """A session's registry, policy, approver and event bus."""

    registry: Any
    policy: Any
    approver: Any
    bus: Any


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
