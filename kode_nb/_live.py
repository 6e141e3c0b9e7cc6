"""How the core asks the notebook layer to show work it has started (internal).

:func:`kode_nb.run_many` returns at once; in a notebook its batch appears as a live view in the
cell. The core imports nothing of Jupyter, so it calls :func:`show_started`, and the notebook
layer draws: ``%load_ext kode_nb`` installs :func:`kode_nb.ui.formatters.show_started` here
(kode_nb/_extension.py), ``%unload_ext`` removes it. With no notebook layer nothing is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Shower", "can_show", "set_shower", "show_started"]

Shower = Callable[[Any, "bool | None"], bool]
"""``(obj, wanted) -> shown``: ``wanted`` True: show it; None: show it when running in a kernel."""

_shower: Shower | None = None


def set_shower(shower: Shower | None) -> Shower | None:
    """Install ``shower`` (``None`` removes it); returns the one it replaces."""
    global _shower
    previous, _shower = _shower, shower
    return previous


def can_show() -> bool:
    """Whether a notebook layer is there to show anything."""
    return _shower is not None


def show_started(obj: Any, wanted: bool | None) -> bool:
    """Ask the notebook layer to show ``obj`` (``wanted`` as for :data:`Shower`; ``False``: never);
    whether it was shown."""
    if wanted is False or _shower is None:
        return False
    return _shower(obj, wanted)
