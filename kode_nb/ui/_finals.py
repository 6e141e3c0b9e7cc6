"""Final records that reach every front end, including headless runners (nbclient, nbconvert,
papermill).

A live view is shown by the cell that started a call or run, and replaced in place by its final
record (``update_display_data`` on the same display id) when the work ends, usually in the
background after that cell has finished. The update names the cell that showed the view as its
parent. A live front end applies an update to every output holding its display id, whatever the
parent; nbclient (and so nbconvert ``--execute`` and papermill) only reads the messages of the
cell it is executing, so it drops that update and saves the first state.

nbclient does apply an update, from the cell it executes, to every earlier output with that
display id. :class:`FinalRelay` uses that: after each cell (IPython's ``post_run_cell``, which
runs before the cell's reply, so its output belongs to the cell), every remembered view that
became final after its own cell ended sends its final record again, from the cell that just
ran. A call or run that ends before the notebook's last cell has ended is thus saved final
everywhere it was shown; one still going when execution ends keeps its live view, whose
snapshot says it was still running.

Every live view reaches the relay the same way, whatever started the work it shows: it is
displayed with :func:`~kode_nb.ui.cell_display.display_in_cell`, which hands anything with a
``final`` attribute to the relay the notebook session installed (:func:`install`). A ``%tool``
call, a ``%%ask`` run, a call or run awaited in a cell, a framework run's calls, an approval
prompt shown on its own and ``run_many``'s inbox are thus all sent final again from a later cell.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FinalRelay", "install", "shown", "uninstall"]


def _msg_id(parent: Any) -> Any:
    """The id of a parent message (the request a view was shown for)."""
    return parent.get("header", {}).get("msg_id") if isinstance(parent, dict) else None


LIMIT = 1000
"""Views kept; past this, final views (delivered or not) are dropped first."""


class FinalRelay:
    """The views a session showed, until their final record is known to be delivered.

    A view is anything with ``display_handle`` (an IPython ``DisplayHandle``, or a
    :class:`~kode_nb.ui.cell_display.CellDisplayHandle` that remembers the cell that showed it)
    and ``final`` (True once its display shows its last state); the view itself is what the
    display shows (its ``_repr_mimebundle_`` is the final record once final).
    """

    def __init__(self, *, limit: int = LIMIT) -> None:
        self._views: list[Any] = []
        self._limit = limit

    def remember(self, view: Any) -> None:
        """Keep ``view`` until its final record is delivered (see :meth:`after_cell`); a view
        already kept is kept once."""
        if any(v is view for v in reversed(self._views)):
            return
        if len(self._views) >= self._limit:
            self._views = [v for v in self._views if not getattr(v, "final", True)]
            del self._views[: max(0, len(self._views) - self._limit + 1)]
        self._views.append(view)

    def __len__(self) -> int:
        return len(self._views)

    def after_cell(self, current: dict[str, Any] | None, *, resend: bool = True) -> int:
        """Called at the end of each cell, with the cell's request (the kernel's parent message).

        Every final view whose display was made by another request, i.e. that ended after its
        own cell, sends its final record again from this one (unless ``resend`` is False: a
        front end that applies updates by display id is connected); final views are then
        forgotten. Returns how many were sent."""
        current_id = _msg_id(current)
        keep, sent = [], 0
        for view in self._views:
            if not getattr(view, "final", False):
                keep.append(view)
                continue
            handle = getattr(view, "display_handle", None)
            shown_by = _msg_id(getattr(handle, "parent", None))
            if resend and handle is not None and (shown_by is None or shown_by != current_id):
                _send(view, handle)
                sent += 1
        self._views = keep
        return sent

    def resend_all(self) -> int:
        """Send every final view's record again from the current cell and forget them (the
        views still going are kept); returns how many were sent."""
        keep, sent = [], 0
        for view in self._views:
            handle = getattr(view, "display_handle", None)
            if not getattr(view, "final", False):
                keep.append(view)
            elif handle is not None:
                _send(view, handle)
                sent += 1
        self._views = keep
        return sent


_installed: FinalRelay | None = None


def install(relay: FinalRelay) -> None:
    """Make ``relay`` the one views displayed in a cell are handed to (the last installed wins)."""
    global _installed
    _installed = relay


def uninstall(relay: FinalRelay) -> None:
    """Remove ``relay`` if it is the one installed."""
    global _installed
    if _installed is relay:
        _installed = None


def shown(view: Any) -> None:
    """``view`` was displayed in a cell: the installed relay keeps it if it is a view (has
    ``final``) that is not final yet."""
    if _installed is not None and getattr(view, "final", True) is False:
        _installed.remember(view)


def _send(view: Any, handle: Any) -> None:
    """``update_display_data`` of ``view`` on ``handle``'s display id, with the kernel's current
    parent (never the parent the handle remembers)."""
    from IPython.display import update_display

    update_display(view, display_id=handle.display_id)
