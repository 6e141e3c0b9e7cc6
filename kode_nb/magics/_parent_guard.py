"""Each cell ends with its own request as the kernel's parent, so its ``idle`` status names it.

ipykernel 7 handles a ``comm_open``/``comm_msg`` that arrives on the main shell while a cell runs
concurrently with it: it saves the kernel's current parent (the running cell's request), handles
the message, then sets the saved parent back, in the context every shell request shares. When
that handling spans the end of one cell and the start of the next (Run All queues every cell at
once, and a front end opens its comms as soon as a cell loads the code they talk to), the next
cell runs with the previous cell's request as its parent: its ``idle`` status names the other
cell, and JupyterLab never sees that cell end (it stays ``[*]`` without its execution count).

:class:`ParentGuard` remembers the parent each cell starts with (IPython's ``pre_run_cell``, just
after the kernel set it) and sets it back at the cell's end (``post_run_cell``, after which
ipykernel publishes the status without yielding to another task) when it was replaced. It does
nothing where the kernel has no ``get_parent``/``set_parent`` (terminal IPython).
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["ParentGuard"]


def _msg_id(parent: Any) -> Any:
    return parent.get("header", {}).get("msg_id") if isinstance(parent, dict) else None


class ParentGuard:
    """Registered on ``shell.events``: ``pre_run_cell`` -> :meth:`before`, ``post_run_cell``
    -> :meth:`after` (a stack: a magic may run a nested cell)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._stack: list[tuple[dict[str, Any], Any] | None] = []
        self.repaired = 0
        """How many cells ended with another request as their parent (set back)."""

    def _kernel(self) -> Any:
        kernel = getattr(self.shell, "kernel", None)
        if callable(getattr(kernel, "get_parent", None)) and callable(
            getattr(kernel, "set_parent", None)
        ):
            return kernel
        return None

    def before(self, info: Any = None) -> None:
        kernel = self._kernel()
        saved = None
        if kernel is not None:
            parent = kernel.get_parent("shell")
            if _msg_id(parent) and parent.get("header", {}).get("msg_type") == "execute_request":
                ident = getattr(kernel, "_parent_ident", {}).get("shell")
                saved = (parent, ident)
        self._stack.append(saved)

    def after(self, result: Any = None) -> None:
        saved = self._stack.pop() if self._stack else None
        kernel = self._kernel()
        if saved is None or kernel is None:
            return
        parent, ident = saved
        if _msg_id(kernel.get_parent("shell")) != _msg_id(parent):
            kernel.set_parent(ident, parent, channel="shell")
            self.repaired += 1

    def register(self) -> None:
        self.shell.events.register("pre_run_cell", self.before)
        self.shell.events.register("post_run_cell", self.after)

    def unregister(self) -> None:
        for event, callback in (("pre_run_cell", self.before), ("post_run_cell", self.after)):
            with contextlib.suppress(ValueError):
                self.shell.events.unregister(event, callback)
