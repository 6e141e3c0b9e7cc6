"""Cells that wait for MCP connections, so the next cell sees a server's tools.

``%mcp connect`` connects in a task on the kernel's loop (a cell never blocks that loop). For the
cell after it to find the server's tools, :func:`wait_cells` (an IPython
``input_transformers_post`` entry, installed in a kernel by ``%load_ext kode_nb``) rewrites a cell
before it runs:

* a top-level ``%mcp connect`` line is followed by ``await``-ing the connection (at most
  :data:`CONNECT_TIMEOUT` seconds; then a clear message, and the connection goes on in the
  background), and its status line is printed once connected (no "connecting…" line left behind);
* a cell run while a connection is still in progress (one from a config file at ``%load_ext``)
  first waits for it the same way (a connection that passed the timeout once is not waited
  for again).

The added lines call :func:`expect_wait` and :func:`wait_for_connections`; a cell with top-level
``await`` runs on the kernel's loop, where the connection makes progress.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

__all__ = ["CONNECT_TIMEOUT", "expect_wait", "wait_cells", "wait_for_connections"]

CONNECT_TIMEOUT = 30.0
"""Seconds a cell waits for MCP connections before it goes on without them."""

_MODULE = '__import__("kode_nb.magics.awaiting").magics.awaiting'
_CONNECT = re.compile(r"""^get_ipython\(\)\.run_line_magic\(['"]mcp['"], ['"]connect\b""")
_WAIT = f"await {_MODULE}.wait_for_connections()\n"


def _session() -> Any:
    from kode_nb.magics import get_session

    return get_session()


def _connecting() -> bool:
    from IPython import get_ipython

    magics = getattr(get_ipython(), "magics_manager", None)
    magics = magics.registry.get("KodeMagics") if magics is not None else None
    session = getattr(magics, "_session", None)
    mcp = getattr(session, "_mcp", None)
    if mcp is None:
        return False
    return any(s == "connecting" and n not in mcp.gave_up for n, s in mcp.states.items())


def wait_cells(lines: list[str]) -> list[str]:
    """The input transformer: add the waits described in the module docstring."""
    out: list[str] = []
    connects = False
    for line in lines:
        if _CONNECT.match(line):
            connects = True
            out += [f"{_MODULE}.expect_wait()\n", line if line.endswith("\n") else line + "\n"]
            out.append(_WAIT)
        else:
            out.append(line)
    if not connects and _connecting():
        out.insert(0, _WAIT)
    return out


def expect_wait() -> None:
    """The next ``%mcp connect`` of this cell is awaited: it prints its result when connected."""
    _session().mcp.awaited = True


async def wait_for_connections(timeout: float = CONNECT_TIMEOUT) -> None:
    """Wait for the MCP connections in progress (at most ``timeout`` seconds, then say so)."""
    session = _session()
    mcp = session._mcp
    if mcp is None:
        return
    mcp.awaited = False
    try:
        await asyncio.wait_for(mcp.ready(), timeout)
    except asyncio.TimeoutError:
        waiting = [name for name, state in mcp.states.items() if state == "connecting"]
        mcp.gave_up.update(waiting)
        print(
            f"kode_nb: MCP server {', '.join(map(repr, waiting))} still connecting after "
            f"{timeout:g} s; going on without its tools. The connection continues in the "
            "background (%mcp list shows its state; `await kode_nb.settle()` waits for it)."
        )
