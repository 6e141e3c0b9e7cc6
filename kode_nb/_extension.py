"""The IPython extension: ``%load_ext kode_nb``, ``%reload_ext kode_nb``, ``%unload_ext kode_nb``.

Loading registers the magics (:class:`~kode_nb.magics.KodeMagics`) and the display formatters
of the core types, and names ``kode_nb`` in the user namespace when nothing has that name (the
cells a front end inserts, such as ``forked = await kode_nb.fork(...)``, call it); nothing else:
no widgets, no pydantic, no session (that is created on first
use). Formatters are registered by type *name*, and render through :mod:`kode_nb.ui.formatters`,
imported on the first display. Unloading removes exactly what loading added and closes the
session (running calls are cancelled), so ``%reload_ext`` gives a clean start; the tools in the
registry are kept.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

_MAGICS = "KodeMagics"


def _html_renderer(key: str) -> Callable[[Any], str]:
    def render(obj: Any) -> str:
        from kode_nb.ui.formatters import HTML

        return HTML[key](obj)

    render.__qualname__ = render.__name__ = f"kode_nb_html_{key}"
    return render


def _text_renderer(key: str) -> Callable[[Any, Any, bool], None]:
    def render(obj: Any, p: Any, cycle: bool) -> None:
        from kode_nb.ui.formatters import TEXT

        p.text(TEXT[key](obj))

    render.__qualname__ = render.__name__ = f"kode_nb_text_{key}"
    return render


def _formatted_types() -> tuple[tuple[str, str, str], ...]:
    # kept in kode_nb.ui.formatters; this import is cheap (no widgets, no pydantic)
    from kode_nb.ui.formatters import FORMATTED_TYPES

    return FORMATTED_TYPES


def load_ipython_extension(ipython: Any) -> None:
    """Register the kode_nb magics and display formatters in ``ipython``."""
    from kode_nb.magics import KodeMagics

    magics = KodeMagics(shell=ipython)
    ipython.register_magics(magics)
    formatters = ipython.display_formatter.formatters
    installed: list[tuple[str, str, str, Any, Any]] = []
    for module, name, key in _formatted_types():
        for mime, func in (("text/html", _html_renderer(key)), ("text/plain", _text_renderer(key))):
            previous = formatters[mime].for_type_by_name(module, name, func)
            installed.append((mime, module, name, func, previous))
    magics.installed_formatters = installed
    ipython.user_ns.setdefault("kode_nb", sys.modules["kode_nb"])
    if getattr(ipython, "kernel", None) is not None:  # cells wait for MCP connections
        from kode_nb.magics.awaiting import wait_cells

        if wait_cells not in ipython.input_transformers_post:
            ipython.input_transformers_post.append(wait_cells)
        from kode_nb.magics.notebook_comm import register

        register(magics)  # the tools panel and the notebook tools' front end
    from kode_nb.magics.mcp_magics import connect_configured

    connect_configured(magics)  # MCP servers of a config file: background task, never raises


def unload_ipython_extension(ipython: Any) -> None:
    """Remove what :func:`load_ipython_extension` added and close the session."""
    manager = ipython.magics_manager
    magics = manager.registry.pop(_MAGICS, None)
    if magics is None:
        return
    from kode_nb.magics.notebook_comm import unregister

    unregister(magics)
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
    formatters = ipython.display_formatter.formatters
    for mime, module, name, func, previous in reversed(magics.installed_formatters):
        _remove_printer(formatters[mime], module, name, func)
        if previous is not None:
            formatters[mime].for_type_by_name(module, name, previous)
    magics.installed_formatters = []


def _remove_printer(formatter: Any, module: str, name: str, func: Any) -> None:
    """Remove ``func`` for the type ``module.name`` (deferred, or resolved once the type was seen)."""
    key = (module, name)
    if formatter.deferred_printers.get(key) is func:
        del formatter.deferred_printers[key]
    for cls, printer in list(formatter.type_printers.items()):
        if printer is func and (cls.__module__, cls.__name__) == key:
            del formatter.type_printers[cls]
