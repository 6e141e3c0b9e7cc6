"""``%expand_trace VAR``: a recorded run's cells, inserted below the cell or written to a file.

The cells come from :func:`kode_nb.expand_trace` (see ``kode_nb/debug/_expand.py``). When the
JupyterLab extension is connected over the ``kode_nb.notebook`` comm (``kode_nb/ui/notebook_comm.py``,
protocol in docs/RECORDS.md), its ``insert_cells`` request puts them below the cell. Without it (VS Code, nbconvert, classic) or with
``--path``, they go into a new ``.ipynb`` beside the notebook
(``<notebook>-<var>-<trace id>.ipynb``), and the output links to it. Notes say what cannot be
reproduced.

The trace viewer's "Expand into cells" and "Fork from here" buttons ask for the same over the comm
(ops ``expand`` and ``fork``): kode_nb/ui/trace_ops.py makes those answers.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import HTML, display

__all__ = ["expand_command", "notebook_dir"]


_TASKS: set[Any] = set()
"""Insertions waiting for the front end's answer (kept referenced until done)."""


def notebook_dir(ns: dict[str, Any]) -> tuple[Path, str]:
    """The notebook's folder and stem (JupyterLab sets ``__session__``; else the cwd)."""
    session = ns.get("__session__") or os.environ.get("JPY_SESSION_NAME") or ""
    if isinstance(session, str) and session.endswith(".ipynb"):
        path = Path(session)
        return (path.parent if path.is_absolute() else Path.cwd() / path.parent), path.stem
    return Path.cwd(), "trace"


def _front_end() -> bool:
    from kode_nb.builtins.notebook import LINK

    return LINK.front_end is not None


def expand_command(shell: Any, registered: set[str], args: Any) -> Any:
    from kode_nb.debug import expand_trace

    if args.var not in shell.user_ns:
        raise UsageError(f"%expand_trace: no variable named {args.var!r} in the notebook")
    value = shell.user_ns[args.var]
    if not args.path and _front_end():
        return _insert(expand_trace(value, registered=registered))
    if args.path:
        target = Path(args.path)
    else:
        folder, stem = notebook_dir(shell.user_ns)
        trace = getattr(value, "trace", None)
        tag = re.sub(r"[^0-9A-Za-z]", "", str(getattr(trace, "trace_id", "")))[:8] or "run"
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
    display(
        HTML(
            f'Expanded into <a href="{html.escape(link)}" target="_blank">{html.escape(link)}</a> '
            f"({len(expansion.cells)} cells; run them top to bottom to reproduce the run offline)"
            + (f"<ul>{notes}</ul>" if notes else "")
        )
    )
    return expansion


def _insert(expansion: Any) -> Any:
    """Ask the front end to insert the cells below this cell (a background task: its answer
    arrives on the kernel's event loop); the output says when they are in, or why not."""
    import asyncio

    from kode_nb.ui.notebook_comm import insert_cells

    notes = "".join(f"<li>{html.escape(n)}</li>" for n in expansion.notes)
    tail = f"<ul>{notes}</ul>" if notes else ""
    handle = display(
        HTML(f"Inserting {len(expansion.cells)} cells below this cell…{tail}"), display_id=True
    )

    async def insert() -> None:
        try:
            await insert_cells(expansion.cells)
            text = (
                f"Inserted {len(expansion.cells)} cells below this cell (headings collapsed; "
                "run them top to bottom to reproduce the run offline)"
            )
        except Exception as exc:
            text = (
                f"The cells could not be inserted ({html.escape(str(exc))}); use "
                "<code>%expand_trace VAR --path FILE.ipynb</code> to write them to a file"
            )
        if handle is not None:
            handle.update(HTML(text + tail))

    task = asyncio.get_event_loop().create_task(insert())
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
    return expansion
