"""docs/ARCHITECTURE.md's dependency graph is current, and the graph keeps the layering rules."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "arch_graph.py"

# unit -> the units it may import (besides itself). The core first, then the notebook layer.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_paths": {"errors"},
    "_redact": set(),
    "_threads": set(),
    "_finite": {"errors"},
    "types": {"errors", "_paths"},
    "tools": {"types", "errors", "_finite"},
    "policy": {"tools", "types", "errors", "_paths"},
    "events": {"types", "errors", "_redact"},
    "execution": {"tools", "policy", "events", "types", "errors", "_threads"},
    "models": {"tools", "types", "errors", "_redact"},
    "agents": {
        "execution",
        "models",
        "tools",
        "policy",
        "events",
        "types",
        "errors",
        "_redact",
        "_threads",
    },
    # _redact: a served endpoint's bearer token is registered as a secret (mcp/server.py)
    "mcp": {"execution", "tools", "policy", "events", "types", "errors", "_redact", "_threads"},
    "builtins": {"tools", "types", "errors", "_paths", "_threads"},
    # other agent frameworks: the core, traces and costs from agents; never the notebook layer
    "interop": {"agents", "execution", "tools", "policy", "events", "types", "errors", "_redact"},
}
CORE = set(ALLOWED)


def _script() -> dict[str, Any]:
    """scripts/arch_graph.py's functions (``graph``, ``cycles``, ``imports_of``)."""
    return runpy.run_path(str(SCRIPT))


def test_the_documented_graph_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_core_keeps_its_layering() -> None:
    edges = _script()["graph"]()
    assert set(edges) >= CORE, f"units missing from the graph: {sorted(CORE - set(edges))}"
    broken = {
        unit: sorted(edges[unit] - ALLOWED[unit]) for unit in CORE if edges[unit] - ALLOWED[unit]
    }
    assert not broken, f"core units import what they may not: {broken}"


def test_there_are_no_cycles_between_units() -> None:
    script = _script()
    assert script["cycles"](script["graph"]()) == []


def test_the_graph_sees_function_level_imports_and_skips_type_checking(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from kode_nb.errors import KodeError\n"
        "if TYPE_CHECKING:\n"
        "    from kode_nb.agents import Agent\n"
        "def f():\n"
        "    from kode_nb.tools._model import Tool\n"
        "    import kode_nb.policy\n",
        encoding="utf-8",
    )
    assert _script()["imports_of"](source) == {
        "kode_nb.errors",
        "kode_nb.tools._model",
        "kode_nb.policy",
    }
