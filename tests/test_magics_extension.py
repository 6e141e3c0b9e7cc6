"""``%load_ext`` / ``%unload_ext`` / ``%reload_ext``: registers only magics and formatters,
imports nothing heavy, and removes exactly what it added."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from kode_nb import ToolRegistry, ToolResult, define_tool
from kode_nb.errors import ConfigurationError
from kode_nb.magics import get_session

EXT = "kode_nb"
MAGICS = {"line": {"tool", "tools", "policy", "approval"}, "cell": {"tool"}}


def _shell() -> Any:
    start_ipython()
    return InteractiveShell.instance()


def test_load_and_unload_add_and_remove_magics_formatters_and_config(
    registry: ToolRegistry,
) -> None:
    ip = _shell()
    result = ToolResult.from_text("<hi>", tool="t")
    formatters = ip.display_formatter.formatters  # (the terminal shell only *uses* text/plain)
    with pytest.raises(KeyError):
        formatters["text/html"].lookup_by_type(ToolResult)
    plain_before = formatters["text/plain"](result)

    ip.run_line_magic("load_ext", EXT)
    try:
        for kind, names in MAGICS.items():
            assert names <= set(ip.magics_manager.magics[kind])
        assert "&lt;hi&gt;" in formatters["text/html"].lookup_by_type(ToolResult)(result)
        assert formatters["text/plain"](result).startswith("[ok] t")
        assert any(type(c).__name__ == "KodeMagics" for c in ip.configurables)
        get_session(ip)  # create the session so unload has something to close
    finally:
        ip.run_line_magic("unload_ext", EXT)

    for kind, names in MAGICS.items():
        assert not names & set(ip.magics_manager.magics[kind])
    with pytest.raises(KeyError):
        formatters["text/html"].lookup_by_type(ToolResult)
    assert formatters["text/plain"](result) == plain_before
    assert not any(type(c).__name__ == "KodeMagics" for c in ip.configurables)
    with pytest.raises(ConfigurationError, match="run %load_ext kode_nb first"):
        get_session(ip)
    with pytest.raises(UsageError, match="not found"):
        ip.run_line_magic("tools", "")


def test_reload_gives_a_new_session_and_keeps_the_tools(registry: ToolRegistry) -> None:
    ip = _shell()
    ip.run_line_magic("load_ext", EXT)
    try:
        ip.run_cell_magic("tool", "", 'def ping() -> str:\n    """Ping."""\n    return "pong"\n')
        first = get_session(ip)
        ip.run_line_magic("reload_ext", EXT)
        second = get_session(ip)
        assert second is not first
        assert first.executor.closed
        assert second.registry.names() == ["ping"]
        assert ip.run_line_magic("tool", "ping").result().text == "pong"
    finally:
        ip.run_line_magic("unload_ext", EXT)


def test_loading_imports_no_widgets_pydantic_or_jsonschema() -> None:
    code = f"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
before = set(sys.modules)
t0 = time.perf_counter()
ip.run_line_magic("load_ext", {EXT!r})
elapsed = time.perf_counter() - t0
heavy = sorted(m for m in set(sys.modules) - before
               if m.split(".")[0] in ("ipywidgets", "anywidget", "pydantic", "jsonschema", "pydantic_core"))
print(json.dumps({{"heavy": heavy, "elapsed": elapsed}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []


def test_core_objects_display_through_the_formatters_the_extension_registers() -> None:
    """Runs, traces, divergences and an inbox carry no display code: ``%load_ext`` registers
    their record bundles (kode_nb/ui/formatters.py), ``%unload_ext`` removes them again."""
    import asyncio

    import kode_nb
    from kode_nb import Agent, Inbox
    from kode_nb.models import ScriptedModel

    ip = _shell()
    result = asyncio.run(Agent(model=ScriptedModel(["hello"])).run("hi"))
    objects = {
        "run": result,
        "trace": result.trace,
        "divergence": kode_nb.diverge(result, result),
        "table": Inbox(),
    }
    for obj in objects.values():
        assert set(ip.display_formatter.format(obj)[0]) == {"text/plain"}
    ip.run_line_magic("load_ext", EXT)
    try:
        for kind, obj in objects.items():
            bundle = ip.display_formatter.format(obj)[0]
            assert set(bundle) == {
                f"application/vnd.kode-nb.{kind}+json",
                "text/html",
                "text/plain",
            }
        assert "hello" in ip.display_formatter.format(result)[0]["text/plain"]
    finally:
        ip.run_line_magic("unload_ext", EXT)
    for obj in objects.values():
        assert set(ip.display_formatter.format(obj)[0]) == {"text/plain"}


def test_run_many_shows_its_batch_only_through_the_notebook_layer(registry: ToolRegistry) -> None:
    """``run_many(show=True)`` needs the notebook layer; with it loaded, the started batch is
    handed to kode_nb.ui.formatters.show_started (outside a kernel: a static record)."""
    import asyncio

    from kode_nb import _live
    from kode_nb.many import run_many

    def square(x: int) -> int:
        """Square."""
        return x * x

    define_tool(square, registry=registry)

    async def start() -> Any:
        batch = run_many("square", [{"x": 2}], cache=False, show=True, registry=registry)
        await batch
        return batch

    with pytest.raises(ConfigurationError, match="load the notebook layer"):
        asyncio.run(start())
    ip = _shell()
    ip.run_line_magic("load_ext", EXT)
    try:
        assert _live.can_show()
        shown: list[Any] = []
        ip.display_pub.publish = lambda data, **kw: shown.append(data)
        batch = asyncio.run(start())
        assert batch.done()
        assert any("application/vnd.kode-nb.table+json" in data for data in shown)
    finally:
        del ip.display_pub.publish
        ip.run_line_magic("unload_ext", EXT)
    assert not _live.can_show()
