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

from kode_nb import ToolRegistry, ToolResult
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
               if m.split(".")[0] in ("ipywidgets", "anywidget", "pydantic", "jsonschema", "pydantic_core",
                                      "pydantic_ai", "agents", "langchain_core", "opentelemetry"))
print(json.dumps({{"heavy": heavy, "elapsed": elapsed}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
