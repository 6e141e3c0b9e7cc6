"""Where framework tool calls run by default: the notebook's session when kode_nb is loaded.

The interop core never imports the notebook layer. ``%load_ext kode_nb`` registers a
:class:`Host` provider here (:func:`set_host`, from :class:`~kode_nb.magics.KodeMagics`); without one (plain Python, tests, a script) the
calls run on a fresh :class:`~kode_nb.Executor` with no approver, so calls that must ask are
denied with a message saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kode_nb.execution._executor import Executor
    from kode_nb.types import ToolResult

__all__ = ["Host", "current_host", "release_host", "set_host"]


class Host(Protocol):
    """What the notebook offers framework runs: its executor, live call views, run tracking."""

    @property
    def executor(self) -> Executor: ...

    async def run_call(
        self, name: str, arguments: Any, *, call_id: str, run_id: str | None, approver: Any = None
    ) -> ToolResult:
        """Run one call through :attr:`executor`, with a live view (and its Approve/Deny
        buttons) in the cell that started the run."""

    def add_run(self, run: Any) -> None:
        """Track a framework run so a kernel interrupt cancels it and ``settle`` waits for it."""

    def waiting_prompt(self, run_id: str) -> Any:
        """The first approval prompt of ``run_id``'s calls still waiting for a decision."""


_provider: Callable[[], Host | None] | None = None


def set_host(provider: Callable[[], Host | None] | None) -> None:
    """Register (or with ``None`` remove) the function that returns the current host."""
    global _provider
    _provider = provider


def release_host(provider: Callable[[], Host | None]) -> None:
    """Remove ``provider`` if it is the registered one (an unloaded extension's)."""
    global _provider
    if _provider == provider:
        _provider = None


def current_host() -> Host | None:
    """The registered host, if kode_nb is loaded in a running IPython; else ``None``."""
    if _provider is None:
        return None
    try:
        return _provider()
    except Exception:  # the IPython it belonged to is gone
        return None
