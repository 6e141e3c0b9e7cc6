"""``%%tool``: run a cell, and register the functions it defines as tools.

The cell runs in the user namespace (compiled like a normal cell, so tracebacks and
``inspect.getsource`` point at it). A function counts as *defined by the cell* when its name is
new or now bound to a different object, its code comes from this cell, and its name does not
start with ``_`` (helpers). Each becomes a tool through :func:`kode_nb.define_tool`; all are
registered or none. Re-running the cell replaces its tools (same ``module.qualname`` source),
and tools the previous run of the same cell defined but this one does not are removed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from kode_nb.magics.session import KodeSession
    from kode_nb.tools._model import Tool

__all__ = ["defined_functions", "run_tool_cell"]


def defined_functions(
    before: dict[str, int], namespace: dict[str, Any], filename: str
) -> tuple[list[Callable[..., Any]], list[str]]:
    """``(public functions, private names)`` the code compiled as ``filename`` (re)defined."""
    public: list[Callable[..., Any]] = []
    private: list[str] = []
    for name, obj in namespace.items():
        if before.get(name) == id(obj) or not inspect.isfunction(obj):
            continue
        code = getattr(inspect.unwrap(obj), "__code__", None)
        if code is None or code.co_filename != filename:
            continue
        (private.append(name) if name.startswith("_") else public.append(obj))
    public.sort(key=lambda f: inspect.unwrap(f).__code__.co_firstlineno)
    return public, private


def _check_hints(fn: Callable[..., Any]) -> None:
    missing = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.annotation is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if missing:
        params = ", ".join(f"'{m}'" for m in missing)
        raise UsageError(
            f"%%tool: {fn.__name__}() has no type hint for parameter {params}. Annotate every "
            f"parameter (e.g. `def {fn.__name__}({missing[0]}: str)`) so the tool gets a JSON schema."
        )


def run_tool_cell(shell: Any, session: KodeSession, args: Any, cell: str) -> list[Tool]:
    """Run ``cell``, define and register its tools, return them (see the module docstring)."""
    from kode_nb.errors import KodeUsageError
    from kode_nb.tools._define import define_tool

    namespace = shell.user_ns
    before = {name: id(obj) for name, obj in namespace.items()}
    code = shell.transform_cell(cell)
    filename = shell.compile.cache(code, shell.execution_count, raw_code=cell)
    exec(shell.compile(code, filename, "exec"), shell.user_global_ns, namespace)

    functions, private = defined_functions(before, namespace, filename)
    if not functions:
        hint = (
            f" (it defines only {', '.join(private)}: names starting with '_' are helpers, not tools)"
            if private
            else ""
        )
        raise UsageError(
            f"%%tool: the cell defines no function{hint}. Put a typed function with a docstring "
            'in the cell, e.g.\n  def add(a: int, b: int) -> int:\n      """Add two numbers."""'
        )
    if args.name and len(functions) > 1:
        names = ", ".join(f.__name__ for f in functions)
        raise UsageError(
            f"%%tool: --name {args.name!r} names one tool, but the cell defines {names}. "
            "Put each tool in its own cell, or drop --name."
        )
    tools = []
    for fn in functions:
        _check_hints(fn)
        try:
            tools.append(
                define_tool(
                    fn,
                    name=args.name,
                    kind=args.kind,
                    category=args.category,
                    groups=tuple(args.group or ()),
                    timeout=args.timeout,
                    approval=args.approval,
                    inline=args.inline,
                    registry=None,
                )
            )
        except KodeUsageError as exc:
            raise UsageError(f"%%tool: {exc}") from None
    registry = session.registry
    try:
        registry.register_many(tools)
    except KodeUsageError as exc:
        raise UsageError(f"%%tool: {exc}") from None
    _forget_removed(shell, session, tools)
    return tools


def _forget_removed(shell: Any, session: KodeSession, tools: list[Tool]) -> None:
    parent = shell.get_parent() if hasattr(shell, "get_parent") else None
    cell_id = (parent or {}).get("metadata", {}).get("cellId") if isinstance(parent, dict) else None
    if not cell_id:
        return
    names = tuple(t.name for t in tools)
    for old in session.cell_tools.get(cell_id, ()):
        current = session.registry.get(old)
        if old not in names and current is not None and current.source.startswith("__main__."):
            session.registry.unregister(old)
    session.cell_tools[cell_id] = names
