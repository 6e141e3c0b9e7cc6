"""Displays whose later refreshes go to the cell that showed them, on ipykernel 6 and 7.

A live view is shown by the cell that started a call and refreshed (``update_display_data``) from
a background task when the call ends. Each output message names its request (the parent header),
and front ends and nbclient file it under that request's cell. ipykernel 7 keeps the parent in a
context variable, so a task keeps the parent of the cell that created it. ipykernel 6 keeps one
global parent: the last shell message it handled, such as a later cell or the click on an
Approve button. There the refresh would be filed under that message, not under the view's cell.

:func:`display_in_cell` displays an object and returns a :class:`CellDisplayHandle`, which
remembers the parent at display time and publishes its updates with that parent. It is how
every live view is shown, so it also hands a view that is not final yet to the session's
final-record relay (:mod:`kode_nb.ui._finals`), whatever started the work it shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from IPython.display import DisplayHandle

__all__ = ["CellDisplayHandle", "display_in_cell"]


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _msg_id(parent: Any) -> Any:
    return parent.get("header", {}).get("msg_id") if isinstance(parent, dict) else None


def current_parent() -> dict[str, Any] | None:
    """The kernel's current parent message (the request being handled), or None outside a kernel."""
    get_parent = getattr(_shell(), "get_parent", None)
    parent = get_parent() if callable(get_parent) else None
    return parent if isinstance(parent, dict) and _msg_id(parent) else None


@contextmanager
def parent_set_to(parent: dict[str, Any] | None) -> Iterator[None]:
    """Publish output inside the block with ``parent`` as its parent, then restore the previous."""
    shell = _shell()
    previous = current_parent()
    if parent is None or previous is None or _msg_id(previous) == _msg_id(parent):
        yield
        return
    shell.set_parent(parent)
    try:
        yield
    finally:
        shell.set_parent(previous)


class CellDisplayHandle(DisplayHandle):
    """A display handle whose updates are attributed to the cell that made the display."""

    def __init__(self, display_id: str | None = None) -> None:
        super().__init__(display_id)  # type: ignore[no-untyped-call]
        self.parent = current_parent()
        """The parent message when the object was displayed (None outside a kernel)."""

    def update(self, obj: Any, **kwargs: Any) -> None:
        with parent_set_to(self.parent):
            super().update(obj, **kwargs)  # type: ignore[no-untyped-call]


def display_in_cell(obj: Any) -> CellDisplayHandle | None:
    """``display(obj, display_id=True)``, its handle a :class:`CellDisplayHandle` (None outside
    IPython); a live view (``final`` False) is kept by the session's relay until its final
    record is delivered (:func:`kode_nb.ui._finals.shown`)."""
    from IPython.display import display

    from kode_nb.ui._finals import shown

    handle = display(obj, display_id=True)
    if handle is None:
        return None
    shown(obj)
    return CellDisplayHandle(handle.display_id)
