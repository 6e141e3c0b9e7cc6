"""``%expand_trace VAR``: a recorded run's cells, inserted below the cell or written to a file.

The cells come from :func:`kode_nb.expand_trace` (see ``kode_nb/agents/_expand.py``). When the
JupyterLab extension is connected over the ``kode_nb.notebook`` comm (``kode_nb/magics/notebook_comm.py``,
protocol in docs/RECORDS.md), its ``insert_cells`` request puts them below the cell. Without it (VS Code, nbconvert, classic) or with
``--path``, they go into a new ``.ipynb`` beside the notebook
(``<notebook>-<var>-<trace id>.ipynb``), and the output links to it. Notes say what cannot be
reproduced.

The trace viewer's "Expand into cells" and "Fork from here" buttons ask for the same over the comm
(ops ``expand`` and ``fork``): :func:`expand_request` and :func:`fork_request` make the answers.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import HTML, display

from kode_nb.agents.trace import READABLE_SCHEMAS
from kode_nb.errors import ConfigurationError

__all__ = ["FORKABLE", "expand_command", "expand_request", "fork_request", "notebook_dir"]


FORKABLE = ("turn", "model_call", "tool_call")
"""The span kinds a run can be forked at."""

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
    from kode_nb.agents import expand_trace

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
    display(HTML(
        f'Expanded into <a href="{html.escape(link)}" target="_blank">{html.escape(link)}</a> '
        f"({len(expansion.cells)} cells; run them top to bottom to reproduce the run offline)"
        + (f"<ul>{notes}</ul>" if notes else "")
    ))  # fmt: skip
    return expansion


def _insert(expansion: Any) -> Any:
    """Ask the front end to insert the cells below this cell (a background task: its answer
    arrives on the kernel's event loop); the output says when they are in, or why not."""
    import asyncio

    from kode_nb.magics.notebook_comm import insert_cells

    notes = "".join(f"<li>{html.escape(n)}</li>" for n in expansion.notes)
    tail = f"<ul>{notes}</ul>" if notes else ""
    handle = display(HTML(f"Inserting {len(expansion.cells)} cells below this cell…{tail}"),
                     display_id=True)  # fmt: skip

    async def insert() -> None:
        try:
            await insert_cells(expansion.cells)
            text = (f"Inserted {len(expansion.cells)} cells below this cell (headings collapsed; "
                    "run them top to bottom to reproduce the run offline)")  # fmt: skip
        except Exception as exc:
            text = (f"The cells could not be inserted ({html.escape(str(exc))}); use "
                    "<code>%expand_trace VAR --path FILE.ipynb</code> to write them to a file")  # fmt: skip
        if handle is not None:
            handle.update(HTML(text + tail))

    task = asyncio.get_event_loop().create_task(insert())
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
    return expansion


MAX_DEPTH = 200
"""JSON nesting a trace sent by the front end may have (a span and its attribute objects are a
few levels each: a run nested this deep is not a real run)."""
MAX_ITEMS = 5_000_000
"""JSON values (objects, arrays, strings, numbers) a trace sent by the front end may hold."""


def _check_shape(value: Any) -> None:
    """Refuse, with a clear answer, JSON too deep or too large to expand or fork (walked without
    recursion, stopping at the first limit passed)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    items = 0
    while stack:
        node, depth = stack.pop()
        items += 1
        if depth > MAX_DEPTH:
            raise ConfigurationError(
                f"the trace is nested more than {MAX_DEPTH} levels deep: too deep to expand or "
                "fork (a recorded run is a few levels per span)"
            )
        if items > MAX_ITEMS:
            raise ConfigurationError(
                f"the trace holds more than {MAX_ITEMS:,} JSON values: too large to expand or "
                "fork here; load its JSON in the kernel (kode_nb.agents.Trace.from_dict) and work on it in code"
            )
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _trace_json(data: Mapping[str, Any]) -> Mapping[str, Any]:
    trace = data.get("trace")
    if not isinstance(trace, Mapping):
        raise ConfigurationError(
            f"the request has no trace: expected the trace record's JSON object under 'trace', "
            f"got {type(trace).__name__}"
        )
    _check_shape(trace)
    schema = trace.get("schema")
    if not (isinstance(schema, str) and schema.startswith("kode_nb.trace/")):
        raise ConfigurationError(
            f"not a kode_nb trace: its schema is {schema!r}, expected kode_nb.trace/v1 or /v2"
        )
    return trace


def expand_request(data: Mapping[str, Any], registered: set[str]) -> dict[str, Any]:
    """The ``expand`` op: remember the trace (so cells and forks can name it by id) and expand it;
    ``{"trace_id", "cells", "notes"}``. A newer trace format is expanded from the fields this
    version knows, with a note, but not remembered."""
    from kode_nb.agents import expand_trace, remember_trace

    trace = _trace_json(data)
    notes: list[str] = []
    try:
        trace_id = remember_trace(trace).trace_id
    except ConfigurationError as exc:
        if trace.get("schema") in READABLE_SCHEMAS:
            raise
        trace_id = str(trace.get("trace_id", ""))
        notes.append(f"kode_nb.known_trace({trace_id[:8]!r}) will not find it: {exc}")
    expansion = expand_trace(trace, registered=registered)
    return {"trace_id": trace_id, "cells": expansion.cells, "notes": expansion.notes + notes}


def fork_request(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``fork`` op: remember the trace and return the source of a cell that forks the run at
    span ``span_id`` (a turn, model call or tool call): ``{"trace_id", "span_id", "source"}``."""
    from kode_nb.agents import remember_trace

    trace = remember_trace(_trace_json(data))
    span_id = data.get("span_id")
    span = next((s for s in trace.spans() if s.span_id == span_id), None)
    if span is None:
        raise ConfigurationError(f"the trace has no span {span_id!r} to fork at")
    if span.kind not in FORKABLE:
        raise ConfigurationError(
            f"a run forks at a turn, model call or tool call; {span.name!r} is a {span.kind} span"
        )
    agent = trace.root.attributes.get("agent") or trace.root.name
    about = " ".join(
        f"Fork of run {agent} (trace {trace.trace_id[:8]}) at {span.name}".splitlines()
    )
    source = (
        f"# {about}: change what should "
        "differ, then run.\n"
        "import kode_nb\n\n"
        f"forked = await kode_nb.fork({json.dumps(trace.trace_id)}, at={json.dumps(span.span_id)}, "
        "edit=None)\n"
        "forked"
    )
    return {"trace_id": trace.trace_id, "span_id": span.span_id, "source": source}
