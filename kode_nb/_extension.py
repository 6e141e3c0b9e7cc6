"""The IPython extension: ``%load_ext kode_nb``, ``%reload_ext kode_nb``, ``%unload_ext kode_nb``.

Loading registers the magics (:class:`~kode_nb.magics.KodeMagics`) and the display formatters
of the core types, and names ``kode_nb`` in the user namespace when nothing has that name (the
cells a front end inserts, such as ``forked = await kode_nb.fork(...)``, call it); nothing else:
no widgets, no pydantic, no session (that is created on first
use). Every rich display of a core object is listed in :mod:`kode_nb.ui.formatters`; they are
registered by type *name*, so a core type is imported only when first displayed. The core's
started work (``kode_nb.run_many``'s batch) is shown through :mod:`kode_nb._live`. Unloading removes exactly what loading added and closes the
session (running calls are cancelled), so ``%reload_ext`` gives a clean start; the tools in the
registry are kept.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

_MAGICS = "KodeMagics"


def _renderer(table: str, key: str) -> Callable[..., Any]:
    """A function IPython calls to render with ``kode_nb.ui.formatters.<table>[key]``; the
    module is imported on the first display."""

    def lookup() -> Callable[..., Any]:
        from kode_nb.ui import formatters

        found: Callable[..., Any] = getattr(formatters, table)[key]
        return found

    if table == "TEXT":

        def render_text(obj: Any, p: Any, cycle: bool) -> None:
            p.text(lookup()(obj))

        render: Callable[..., Any] = render_text
    else:

        def render_other(obj: Any) -> Any:
            return lookup()(obj)

        render = render_other
    render.__qualname__ = render.__name__ = f"kode_nb_{table.lower()}_{key}"
    return render


# renderer table of kode_nb.ui.formatters -> the IPython formatter it is registered with
_SLOTS = {
    "HTML": "text/html",
    "TEXT": "text/plain",
    "BUNDLE": "mimebundle",
    "LIVE": "ipython_display",
}


def _formatter(ipython: Any, slot: str) -> Any:
    display = ipython.display_formatter
    if slot == "mimebundle":
        return display.mimebundle_formatter
    if slot == "ipython_display":
        return display.ipython_display_formatter
    return display.formatters[slot]


def _show_started(obj: Any, wanted: bool | None) -> bool:
    from kode_nb.ui.formatters import show_started

    return show_started(obj, wanted)


def load_ipython_extension(ipython: Any) -> None:
    """Register the kode_nb magics and display formatters in ``ipython``."""
    from kode_nb._live import set_shower
    from kode_nb.magics import KodeMagics
    from kode_nb.ui.formatters import FORMATTED_TYPES, renderer_tables

    magics = KodeMagics(shell=ipython)
    ipython.register_magics(magics)
    installed: list[tuple[str, str, str, Any, Any]] = []
    for module, name, key in FORMATTED_TYPES:
        for table in renderer_tables(key):
            slot = _SLOTS[table]
            func = _renderer(table, key)
            previous = _formatter(ipython, slot).for_type_by_name(module, name, func)
            installed.append((slot, module, name, func, previous))
    magics.installed_formatters = installed
    set_shower(_show_started)
    ipython.user_ns.setdefault("kode_nb", sys.modules["kode_nb"])
    if getattr(ipython, "kernel", None) is not None:  # cells wait for MCP connections
        from kode_nb.magics.awaiting import wait_cells

        if wait_cells not in ipython.input_transformers_post:
            ipython.input_transformers_post.append(wait_cells)
        from kode_nb.magics._parent_guard import ParentGuard

        magics.parent_guard = ParentGuard(ipython)  # each cell's idle names its own request
        magics.parent_guard.register()
        magics.use_session_defaults()  # kode_nb.Executor() in this kernel: the session's
    from kode_nb.magics.mcp_magics import connect_configured

    connect_configured(magics)  # MCP servers of a config file: background task, never raises
    if getattr(ipython, "kernel", None) is not None:
        from kode_nb.ui.notebook_comm import register

        # last; the comm's handler imports nothing on its own thread (see register)
        register(magics)  # the tools panel and the notebook tools' front end


def unload_ipython_extension(ipython: Any) -> None:
    """Remove what :func:`load_ipython_extension` added and close the session."""
    manager = ipython.magics_manager
    magics = manager.registry.pop(_MAGICS, None)
    if magics is None:
        return
    from kode_nb.ui.notebook_comm import unregister

    unregister(magics)
    if magics.parent_guard is not None:
        magics.parent_guard.unregister()
    magics.drop_session_defaults()
    magics.close_session()
    http = sys.modules.get("kode_nb.models._http")  # models' own HTTP clients, if any were made
    if http is not None:
        http.close_models()
    from kode_nb.magics.awaiting import wait_cells

    if wait_cells in ipython.input_transformers_post:
        ipython.input_transformers_post.remove(wait_cells)
    for kind, table in magics.magics.items():
        for name, method in table.items():
            if manager.magics[kind].get(name) == method:
                del manager.magics[kind][name]
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)
    for slot, module, name, func, previous in reversed(magics.installed_formatters):
        formatter = _formatter(ipython, slot)
        _remove_printer(formatter, module, name, func)
        if previous is not None:
            formatter.for_type_by_name(module, name, previous)
    magics.installed_formatters = []
    from kode_nb._live import set_shower

    set_shower(None)


def _remove_printer(formatter: Any, module: str, name: str, func: Any) -> None:
    """Remove ``func`` for the type ``module.name`` (deferred, or resolved once the type was seen)."""
    key = (module, name)
    if formatter.deferred_printers.get(key) is func:
        del formatter.deferred_printers[key]
    for cls, printer in list(formatter.type_printers.items()):
        if printer is func and (cls.__module__, cls.__name__) == key:
            del formatter.type_printers[cls]
