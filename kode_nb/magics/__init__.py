"""The kode_nb IPython magics, loaded by ``%load_ext kode_nb``:

* ``%%tool`` defines tools from a cell; ``%tool NAME key=value ...`` calls one;
* ``%tools`` lists, shows or removes tools;
* ``%policy`` and ``%approval`` show or change what may run and what asks first;
* ``%%agent NAME`` defines a subagent; ``%agent NAME key=value ...`` runs it (``--over VAR``:
  once per row);
* ``%%ask`` runs an agent on the cell's text; ``%model`` sets the default model;
* ``%expand_trace VAR`` writes a recorded run as notebook cells;
* ``%mcp`` connects MCP servers and serves the notebook's tools over MCP.

Each magic's ``%name?`` gives its options.

:func:`get_session` returns the kernel's
:class:`~kode_nb.magics.session.KodeSession` (registry, policy, executor, event bus) for code
that wants to use it directly, e.g. ``get_session().bus.subscribe(print)``.

Magics are thin: parse the line or cell, call the core, display through :mod:`kode_nb.ui`.

May import: the core and ``ui``. Never the extension entry point (kode_nb/_extension.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kode_nb.magics.kode_magics import KodeMagics

if TYPE_CHECKING:
    from kode_nb.magics.session import KodeSession

__all__ = ["KodeMagics", "get_session", "settle"]


def get_session(shell: Any = None) -> KodeSession:
    """The session of ``shell`` (default: the running IPython); needs ``%load_ext kode_nb``."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    magics = None if shell is None else shell.magics_manager.registry.get("KodeMagics")
    if magics is None:
        from kode_nb.errors import ConfigurationError

        raise ConfigurationError(
            "kode_nb is not loaded in this IPython: run %load_ext kode_nb first"
        )
    session: KodeSession = magics.session
    return session


async def settle(timeout: float | None = 60.0) -> int:
    """Wait until every call, agent run and MCP connection started from this kernel has ended
    (see :meth:`~kode_nb.magics.session.KodeSession.settle`); ``await kode_nb.settle()`` as the
    last cell of a notebook run by ``jupyter nbconvert --execute`` saves every view final."""
    return await get_session().settle(timeout)
