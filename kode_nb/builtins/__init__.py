"""Built-in tools, one module per group; opt-in: nothing is registered on import.

======= ====================================================================== =============
group   tools                                                                  module
======= ====================================================================== =============
system  current_time, sleep, get_env, set_env                                  ``system``
fs      read_file, write_file, edit_file, list_files, delete_file, move_file,   ``fs``,
        get_file_info                                                          ``fs_edit``
web     http_get, http_post, http_request                                      ``web``
data    json_parse, json_stringify, base64_encode, base64_decode               ``data``
runtime exec                                                                   ``runtime``
notebook list_cells, read_cell, list_variables, read_variable, insert_cell,     ``notebook``
        run_cell
======= ====================================================================== =============

Each tool belongs to its group and to ``builtin``, so policies can say ``group:fs`` or
``group:builtin`` (and the ``coding`` profile picks up fs, runtime, data and system)::

    from kode_nb.builtins import register_builtins
    register_builtins(groups=("fs", "data"))                   # into the current registry
    register_builtins(reg, allowed_hosts=["127.0.0.1:8000"])   # everything, web to one host

Mutating tools ask for approval by default: write_file, edit_file, set_env (edit),
delete_file (delete), move_file (move), exec, http_post and http_request (execute),
insert_cell (edit) and run_cell (execute). The web
tools reach no host until ``allowed_hosts`` (or a :class:`WebConfig`) allows some.

May import: ``tools``, ``types``, ``errors``, ``_paths``, ``_threads``. Nothing here imports
Jupyter: the notebook tools reach the front end through a link the notebook layer sets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kode_nb.builtins.data import data_tools
from kode_nb.builtins.fs import FsLimits, fs_tools
from kode_nb.builtins.notebook import notebook_tools
from kode_nb.builtins.runtime import ExecConfig, runtime_tools
from kode_nb.builtins.system import system_tools
from kode_nb.builtins.web import WebConfig, web_tools
from kode_nb.errors import ConfigurationError
from kode_nb.tools._model import Tool
from kode_nb.tools._registry import ToolRegistry, default_registry

__all__ = [
    "GROUPS",
    "ExecConfig",
    "RegisteredTools",
    "FsLimits",
    "WebConfig",
    "builtin_tools",
    "data_tools",
    "fs_tools",
    "notebook_tools",
    "register_builtins",
    "runtime_tools",
    "system_tools",
    "web_tools",
]

GROUPS: tuple[str, ...] = ("system", "fs", "web", "data", "runtime", "notebook")
"""The built-in groups, in the order :func:`builtin_tools` returns them."""


class RegisteredTools(list[Tool]):
    """The tools :func:`register_builtins` registered: a plain list, shown in a notebook as the
    table ``%tools`` shows (name, kind, category, groups, calls) rather than a wall of reprs."""

    def __init__(self, tools: Iterable[Tool], registry: ToolRegistry) -> None:
        super().__init__(tools)
        self.registry = registry
        """Where they were registered."""


def _groups(groups: Iterable[str] | str) -> list[str]:
    if isinstance(groups, str):
        groups = (groups,)
    chosen: list[str] = []
    for entry in groups:
        name = entry.removeprefix("group:").strip().lower() if isinstance(entry, str) else entry
        if name not in GROUPS:
            raise ConfigurationError(
                f"unknown built-in group {entry!r}; the groups are: {', '.join(GROUPS)}"
            )
        if name not in chosen:
            chosen.append(name)
    return chosen


def builtin_tools(
    *groups: str,
    allowed_hosts: Iterable[str] | None = None,
    web: WebConfig | None = None,
    fs: FsLimits | None = None,
    runtime: ExecConfig | None = None,
) -> list[Tool]:
    """New built-in Tool objects of ``groups`` (all groups if none given); nothing registered.

    ``allowed_hosts`` is a shortcut for ``web=WebConfig(allowed_hosts=...)`` (give one or the
    other); ``fs`` and ``runtime`` set those groups' limits.
    """
    if allowed_hosts is not None and web is not None:
        raise ConfigurationError("give allowed_hosts= or web=WebConfig(...), not both")
    if allowed_hosts is not None:
        if isinstance(allowed_hosts, str):
            raise ConfigurationError(
                f"allowed_hosts must be a list of host patterns, e.g. [{allowed_hosts!r}]"
            )
        web = WebConfig(allowed_hosts=tuple(allowed_hosts))
    makers: dict[str, Callable[[], list[Tool]]] = {
        "system": system_tools,
        "fs": lambda: fs_tools(fs),
        "web": lambda: web_tools(web),
        "data": data_tools,
        "runtime": lambda: runtime_tools(runtime),
        "notebook": notebook_tools,
    }
    chosen = _groups(groups) if groups else list(GROUPS)
    return [tool for group in chosen for tool in makers[group]()]


def register_builtins(
    registry: ToolRegistry | None = None,
    groups: Iterable[str] | str = GROUPS,
    *,
    allowed_hosts: Iterable[str] | None = None,
    web: WebConfig | None = None,
    fs: FsLimits | None = None,
    runtime: ExecConfig | None = None,
    replace: bool = False,
) -> RegisteredTools:
    """Register built-in tools of ``groups`` in ``registry`` (default: the current one).

    Calling it again replaces the built-ins (e.g. with other ``allowed_hosts``). A tool of
    your own holding a built-in's name raises :class:`~kode_nb.DuplicateToolError` unless
    ``replace=True``. Returns the registered tools (a list).
    """
    target = default_registry() if registry is None else registry
    if not isinstance(target, ToolRegistry):
        raise ConfigurationError(
            f"register_builtins() needs a ToolRegistry, got {type(target).__name__}"
        )
    tools = builtin_tools(
        *_groups(groups), allowed_hosts=allowed_hosts, web=web, fs=fs, runtime=runtime
    )
    target.register_many(tools, replace=replace)
    return RegisteredTools(tools, target)
