"""Built-in ``notebook`` tools (``group:notebook``): the notebook's cells and the kernel's variables.

============== ======= ========================================================================
list_cells     read    the cells: index, id, type, first line, execution count (bounded)
read_cell      read    one cell's source and text outputs (bounded)
list_variables read    the kernel's user variables: name, type, short repr
read_variable  read    one variable: type, shape, dtypes, a bounded head (never the whole object)
insert_cell    edit    insert a cell (asks by default)
run_cell       execute run a cell (asks by default)
============== ======= ========================================================================

The cell tools talk to the notebook's front end (the kode_nb JupyterLab extension in
``labextension/``) over the ``kode_nb.notebook`` comm (protocol in ``docs/RECORDS.md``); the
kernel side of that comm (``kode_nb/ui/notebook_comm.py``) sets :data:`LINK`'s ``front_end`` and
``namespace`` to the user namespace (by default the running IPython shell's). Without a front end the cell tools fail with a clear error.
Variables are read through their own methods (``head``, ``shape``, ``dtypes``, ``repr``) and cut
to a bound; nothing is pickled or copied whole.
"""

from __future__ import annotations

import contextlib
import reprlib
import sys
import types as pytypes
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import Field

from kode_nb.builtins._common import make_tool
from kode_nb.errors import ToolError
from kode_nb.tools._model import Tool
from kode_nb.types import ToolContext

__all__ = ["LINK", "FrontEnd", "NotebookLink", "notebook_tools"]

NO_FRONT_END = (
    "the notebook tools need the kode_nb JupyterLab extension; this kernel has no connected "
    "notebook front end"
)
MAX_CELLS = 200
MAX_CHARS = 20_000
MAX_ROWS = 50
MAX_VARIABLES = 200
REQUEST_TIMEOUT = 30.0
_REPR_CHARS = 80


class FrontEnd(Protocol):
    """What the cell tools need from a connected notebook front end."""

    def request(self, op: str, payload: dict[str, Any], timeout: float) -> Awaitable[Any]:
        """Send ``op`` to the front end; the awaitable gives its result or raises its error."""
        ...


@dataclass
class NotebookLink:
    """Where the notebook tools find the front end and the user namespace."""

    front_end: FrontEnd | None = None
    namespace: MutableMapping[str, Any] | None = None
    timeout: float = REQUEST_TIMEOUT
    """How long a request to the front end may take, in seconds."""


LINK = NotebookLink()
"""The kernel's link (set by the kode_nb IPython extension and its comm)."""


async def _ask(tool: str, op: str, payload: dict[str, Any]) -> Any:
    front = LINK.front_end
    if front is None:
        raise ToolError(tool, NO_FRONT_END)
    try:
        return await front.request(op, payload, LINK.timeout)
    except TimeoutError:
        raise ToolError(
            tool, f"the notebook front end did not answer {op} within {LINK.timeout:g} s"
        ) from None
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(tool, f"the notebook front end could not {op}: {exc}") from None


def _target(tool: str, index: int | None, cell_id: str | None) -> dict[str, Any]:
    if (index is None) == (cell_id is None):
        raise ToolError(tool, "give the cell's index or its id (one of them)")
    return {"index": index} if index is not None else {"id": cell_id}


async def list_cells(
    ctx: ToolContext,
    start: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=MAX_CELLS)] = 50,
) -> dict[str, Any]:
    """List the notebook's cells: index, id, type, first line and execution count.

    Args:
        start: The first cell index to list.
        limit: How many cells to list at most (1 to 200).
    """
    return dict(await _ask(ctx.tool, "list_cells", {"start": start, "limit": limit}))


async def read_cell(
    ctx: ToolContext,
    index: Annotated[int, Field(ge=0)] | None = None,
    id: str | None = None,
    max_chars: Annotated[int, Field(ge=1, le=MAX_CHARS)] = 4000,
) -> dict[str, Any]:
    """Read one cell: its source and its text outputs, cut to max_chars each.

    Args:
        index: The cell's index (from list_cells).
        id: The cell's id (instead of index).
        max_chars: At most this many characters of source and of outputs (up to 20000).
    """
    payload = {**_target(ctx.tool, index, id), "max_chars": max_chars}
    return dict(await _ask(ctx.tool, "read_cell", payload))


async def insert_cell(
    ctx: ToolContext,
    source: Annotated[str, Field(max_length=100_000)],
    cell_type: Annotated[str, Field(pattern="^(code|markdown)$")] = "code",
    after: Annotated[int, Field(ge=-1)] | None = None,
) -> dict[str, Any]:
    """Insert a new cell into the notebook (it is not run).

    Args:
        source: The cell's text.
        cell_type: "code" or "markdown".
        after: Insert below the cell with this index (-1: at the top); default: below the active cell.
    """
    payload = {"source": source, "cell_type": cell_type, "after": after}
    return dict(await _ask(ctx.tool, "insert_cell", payload))


async def run_cell(
    ctx: ToolContext,
    index: Annotated[int, Field(ge=0)] | None = None,
    id: str | None = None,
) -> dict[str, Any]:
    """Run one cell of the notebook; returns when it has finished, with its execution count.

    Args:
        index: The cell's index (from list_cells).
        id: The cell's id (instead of index).
    """
    return dict(await _ask(ctx.tool, "run_cell", _target(ctx.tool, index, id)))


def _namespace(tool: str) -> MutableMapping[str, Any]:
    if LINK.namespace is not None:
        return LINK.namespace
    ipython = sys.modules.get("IPython")  # only if IPython runs this process: never imported here
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        raise ToolError(
            tool, "no kernel namespace: the variable tools run inside an IPython kernel"
        )
    namespace: MutableMapping[str, Any] = shell.user_ns
    return namespace


def _bounded_repr(value: Any, chars: int, items: int) -> str:
    """``repr`` with each string, container and level cut (reprlib: never the whole object)."""
    shape = reprlib.Repr()
    shape.maxstring = shape.maxother = chars
    shape.maxlist = shape.maxdict = shape.maxtuple = shape.maxset = shape.maxdeque = items
    shape.maxfrozenset = shape.maxarray = items
    shape.maxlevel = 3
    return shape.repr(value)


def _short_repr(value: Any, chars: int = _REPR_CHARS) -> str:
    try:
        text = _bounded_repr(value, chars, 6)
    except Exception as exc:  # a broken __repr__ must not break the listing
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _hidden(name: str, value: Any, include_all: bool) -> bool:
    if name.startswith("_") or name in {"In", "Out", "exit", "quit", "get_ipython"}:
        return True
    if include_all:
        return False
    return isinstance(value, pytypes.ModuleType) or callable(value)


def _type_name(value: Any) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def list_variables(
    ctx: ToolContext,
    include_all: bool = False,
    limit: Annotated[int, Field(ge=1, le=MAX_VARIABLES)] = 100,
) -> dict[str, Any]:
    """List the kernel's user variables: name, type and a short repr.

    Args:
        include_all: Also list modules, functions and classes.
        limit: How many variables to list at most (1 to 200).
    """
    namespace = _namespace(ctx.tool)
    rows: list[dict[str, str]] = []
    total = 0
    for name, value in list(namespace.items()):
        if _hidden(name, value, include_all):
            continue
        total += 1
        if len(rows) < limit:
            rows.append({"name": name, "type": _type_name(value), "repr": _short_repr(value)})
    return {"variables": rows, "total": total, "truncated": total > len(rows)}


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit] + "…", True)


def _frame_info(value: Any, max_rows: int, max_chars: int) -> dict[str, Any]:
    info: dict[str, Any] = {"shape": list(value.shape)}
    dtypes = value.dtypes
    if hasattr(dtypes, "items"):  # a DataFrame: one dtype per column, bounded
        pairs = list(dtypes.items())
        info["dtypes"] = {str(k): str(v) for k, v in pairs[:MAX_ROWS]}
        info["columns_truncated"] = len(pairs) > MAX_ROWS
    else:
        info["dtype"] = str(dtypes)
    head, cut = _cut(value.head(max_rows).to_string(), max_chars)
    info.update(head=head, head_rows=min(max_rows, len(value)), truncated=cut)
    return info


def _array_info(value: Any, max_rows: int, max_chars: int) -> dict[str, Any]:
    info: dict[str, Any] = {"shape": list(value.shape), "dtype": str(value.dtype)}
    head_part = value[:max_rows] if value.ndim else value
    head, cut = _cut(repr(head_part), max_chars)
    rows = min(max_rows, value.shape[0]) if value.ndim else 1
    info.update(
        head=head, head_rows=rows, truncated=cut or (value.ndim > 0 and value.shape[0] > rows)
    )
    return info


def _is_frame(value: Any) -> bool:
    module = type(value).__module__ or ""
    return module.startswith("pandas") and all(
        hasattr(value, a) for a in ("head", "shape", "dtypes", "to_string")
    )


def _is_array(value: Any) -> bool:
    module = type(value).__module__ or ""
    return module.startswith("numpy") and all(hasattr(value, a) for a in ("shape", "dtype", "ndim"))


def read_variable(
    name: str,
    ctx: ToolContext,
    max_rows: Annotated[int, Field(ge=1, le=MAX_ROWS)] = 10,
    max_chars: Annotated[int, Field(ge=1, le=MAX_CHARS)] = 4000,
) -> dict[str, Any]:
    """Describe one kernel variable: type, shape and dtypes, and a bounded head for DataFrames,
    Series and arrays; a bounded repr otherwise.

    Args:
        name: The variable's name.
        max_rows: Rows of the head to show (1 to 50).
        max_chars: At most this many characters of head or repr (up to 20000).
    """
    namespace = _namespace(ctx.tool)
    if name not in namespace or name.startswith("_"):
        close = sorted(n for n in namespace if not n.startswith("_") and n.lower() == name.lower())
        hint = f"; did you mean {close[0]!r}?" if close else "; list_variables shows the names"
        raise ToolError(ctx.tool, f"no variable {name!r} in the kernel{hint}")
    value = namespace[name]
    out: dict[str, Any] = {"name": name, "type": _type_name(value)}
    try:
        if _is_frame(value):
            out.update(_frame_info(value, max_rows, max_chars))
        elif _is_array(value):
            out.update(_array_info(value, max_rows, max_chars))
        else:
            if hasattr(value, "__len__") and not isinstance(value, type):
                with contextlib.suppress(Exception):
                    out["length"] = len(value)
            text = _bounded_repr(value, max_chars, max_rows)
            out["repr"], out["truncated"] = _cut(text, max_chars)
    except Exception as exc:
        raise ToolError(
            ctx.tool, f"could not describe {name!r}: {type(exc).__name__}: {exc}"
        ) from None
    return out


def notebook_tools() -> list[Tool]:
    """New ``list_cells``, ``read_cell``, ``list_variables``, ``read_variable``, ``insert_cell``
    and ``run_cell`` tools (not registered)."""
    timeout = REQUEST_TIMEOUT + 5
    makers: list[tuple[Callable[..., Any], str]] = [
        (list_cells, "read"),
        (read_cell, "read"),
        (list_variables, "read"),
        (read_variable, "read"),
        (insert_cell, "edit"),
        (run_cell, "execute"),
    ]
    return [
        make_tool(fn, "notebook", kind=kind, category="code", timeout=timeout)
        for fn, kind in makers
    ]
