"""``%expand_trace VAR``: write a recorded run's cells to a new notebook next to this one.

The cells come from :func:`kode_nb.expand_trace` (see ``kode_nb/agents/_expand.py``). They go
into a new ``.ipynb`` beside the notebook (``<notebook>-<run>-<trace id>.ipynb``, or
``--path``), and the output links to it; notes say what cannot be reproduced.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import HTML, display

__all__ = ["expand_command", "notebook_dir"]


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
