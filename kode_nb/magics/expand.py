"""``%expand_trace VAR``: a recorded run's cells, inserted below the cell or written to a file.

The cells come from :func:`kode_nb.expand_trace` (see ``kode_nb/agents/_expand.py``). When the
front end has opened the comm target ``kode_nb.notebook`` (the JupyterLab extension does, per
notebook; message format in docs/RECORDS.md), the kernel sends it
``{"op": "insert_cells", "cells": [...], "below_cell_id": ..., "trace_id": ...}`` and the
front end inserts them below the cell. Without it (VS Code, nbconvert, classic) or with
``--path``, they go into a new ``.ipynb`` beside the notebook
(``<notebook>-<var>-<trace id>.ipynb``), and the output links to it. Notes say what cannot be
reproduced.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import HTML, display

__all__ = ["NOTEBOOK_TARGET", "expand_command", "notebook_dir", "register_notebook_target"]

NOTEBOOK_TARGET = "kode_nb.notebook"
"""The comm target the front end opens to receive cells (docs/RECORDS.md)."""

_OPEN: list[Any] = []
"""The notebook comms the front end opened, oldest first."""


def register_notebook_target(shell: Any) -> None:
    """Accept the front end's ``kode_nb.notebook`` comms (no-op outside a kernel)."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None:  # not in a kernel: files only
        return

    def opened(comm: Any, _msg: Any) -> None:
        _OPEN.append(comm)

        @comm.on_close
        def _closed(_msg: Any) -> None:
            if comm in _OPEN:
                _OPEN.remove(comm)

    manager.register_target(NOTEBOOK_TARGET, opened)


def _current_cell_id(shell: Any) -> str | None:
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent("shell") if kernel is not None else {}
    except Exception:
        return None
    cell_id = (parent or {}).get("metadata", {}).get("cellId")
    return cell_id if isinstance(cell_id, str) else None


def notebook_dir(ns: dict[str, Any]) -> tuple[Path, str]:
    """The notebook's folder and stem (JupyterLab sets ``__session__``; else the cwd)."""
    session = ns.get("__session__") or os.environ.get("JPY_SESSION_NAME") or ""
    if isinstance(session, str) and session.endswith(".ipynb"):
        path = Path(session)
        return (path.parent if path.is_absolute() else Path.cwd() / path.parent), path.stem
    return Path.cwd(), "trace"


def expand_command(shell: Any, registered: set[str], args: Any) -> Any:
    from kode_nb.agents import expand_trace

    if args.var not in shell.user_ns:
        raise UsageError(f"%expand_trace: no variable named {args.var!r} in the notebook")
    value = shell.user_ns[args.var]
    if not args.path and _OPEN:
        return _send(shell, _OPEN[-1], expand_trace(value, registered=registered))
    if args.path:
        target = Path(args.path)
    else:
        folder, stem = notebook_dir(shell.user_ns)
        trace = getattr(value, "trace", None)
        tag = getattr(trace, "trace_id", "")[:8] or "run"
        target = folder / f"{stem}-{args.var}-{tag}.ipynb"
        n = 2
        while target.exists():
            target = folder / f"{stem}-{args.var}-{tag}-{n}.ipynb"
            n += 1
    expansion = expand_trace(value, path=target, registered=registered)
    try:
        link = os.path.relpath(target, Path.cwd())
    except ValueError:
        link = str(target)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in expansion.notes)
    display(HTML(
        f'Expanded into <a href="{html.escape(link)}" target="_blank">{html.escape(link)}</a> '
        f"({len(expansion.cells)} cells; run them top to bottom to reproduce the run offline)"
        + (f"<ul>{notes}</ul>" if notes else "")
    ))  # fmt: skip
    return expansion


def _send(shell: Any, comm: Any, expansion: Any) -> Any:
    cell_id = _current_cell_id(shell)
    trace_id = expansion.cells[0]["metadata"]["kode_nb"]["trace_id"] if expansion.cells else ""
    comm.send({"op": "insert_cells", "cells": expansion.cells, "below_cell_id": cell_id,
               "trace_id": trace_id})  # fmt: skip
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in expansion.notes)
    display(HTML(
        f"Inserted {len(expansion.cells)} cells below this cell (headings collapsed; run them "
        "top to bottom to reproduce the run offline)" + (f"<ul>{notes}</ul>" if notes else "")
    ))  # fmt: skip
    return expansion
