"""Tools from installed packages: the ``kode_nb.tools`` entry-point group.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."kode_nb.tools"]
    mytools = "mypkg.tools:TOOLS"

where the object is a :class:`~kode_nb.Tool`, an iterable of Tools, or a zero-argument
callable returning either. Each failure (import error, wrong type, duplicate name) is logged and
recorded in the :class:`LoadReport`; it never stops the other entry points.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kode_nb.errors import ConfigurationError
from kode_nb.tools._model import Tool

if TYPE_CHECKING:
    from kode_nb.tools._registry import ToolRegistry

__all__ = ["LoadReport", "load_entry_points"]

log = logging.getLogger("kode_nb.tools._registry")


@dataclass(kw_only=True)
class LoadReport:
    """What :meth:`ToolRegistry.load_entry_points` did."""

    group: str
    """The entry-point group that was read."""
    loaded: list[str] = field(default_factory=list)
    """Names of the tools registered."""
    failures: list[tuple[str, str]] = field(default_factory=list)
    """``(entry point name, error message)`` for each entry point (or item) that failed."""

    @property
    def ok(self) -> bool:
        return not self.failures

    def __str__(self) -> str:
        lines = [
            f"{self.group}: loaded {len(self.loaded)} tool(s), {len(self.failures)} failure(s)"
        ]
        lines += [f"  {name}: {message}" for name, message in self.failures]
        return "\n".join(lines)


def load_entry_points(registry: ToolRegistry, group: str = "kode_nb.tools") -> LoadReport:
    """Register tools from installed packages' entry points; one failure never stops the rest.

    An entry point may resolve to a Tool, an iterable of Tools, or a zero-argument callable
    returning either.
    """
    from importlib.metadata import entry_points  # not at import: it is slow and rarely needed

    report = LoadReport(group=group)
    seen: set[tuple[str, str]] = set()
    for ep in entry_points(group=group):
        if (ep.name, ep.value) in seen:
            continue
        seen.add((ep.name, ep.value))
        try:
            tools = _tools_from(ep.load())
        except Exception as exc:
            report.failures.append((ep.name, f"{type(exc).__name__}: {exc}"))
            log.warning("entry point %r (%s) failed to load: %s", ep.name, ep.value, exc)
            continue
        for tool in tools:
            try:
                if not isinstance(tool, Tool):
                    raise ConfigurationError(
                        f"{ep.value} must give Tool objects, got {type(tool).__name__}"
                    )
                registry.register(tool if tool.source else tool.evolve(source=ep.value))
                report.loaded.append(tool.name)
            except Exception as exc:
                report.failures.append((ep.name, f"{type(exc).__name__}: {exc}"))
                log.warning("entry point %r (%s): %s", ep.name, ep.value, exc)
    return report


def _tools_from(obj: Any) -> list[Any]:
    if not isinstance(obj, Tool) and callable(obj):
        obj = obj()
    if isinstance(obj, Tool):
        return [obj]
    if isinstance(obj, (str, bytes, Mapping)) or not isinstance(obj, Iterable):
        raise ConfigurationError(
            "expected a Tool, an iterable of Tools or a callable returning one, "
            f"got {type(obj).__name__}"
        )
    return list(obj)
