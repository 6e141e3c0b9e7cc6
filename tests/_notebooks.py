"""The demo notebooks as saved in ``notebooks/`` and the ``scripts/make_*.py`` that build them:
shared by the tests that check a saved notebook is its generator's and was executed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def generator(script: str) -> ModuleType:
    """``scripts/<script>.py`` imported as a module (its ``build()`` returns the notebook)."""
    path = ROOT / "scripts" / f"{script}.py"
    spec = importlib.util.spec_from_file_location(script, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def saved(notebook: Path) -> dict[str, Any]:
    """The saved notebook's JSON."""
    data: dict[str, Any] = json.loads(notebook.read_text("utf-8"))
    return data


def source(cell: dict[str, Any]) -> str:
    """A cell's source as one string (saved notebooks may hold it as a list of lines)."""
    value = cell["source"]
    return value if isinstance(value, str) else "".join(value)


def code_cells(notebook: Path) -> list[dict[str, Any]]:
    return [c for c in saved(notebook)["cells"] if c["cell_type"] == "code"]


def assert_built_by(notebook: Path, script: str) -> None:
    """The saved notebook holds the cells ``scripts/<script>.py`` builds, in order."""
    built = generator(script).build()
    assert [(c["cell_type"], source(c)) for c in saved(notebook)["cells"]] == [
        (c["cell_type"], c["source"]) for c in built.cells
    ], f"notebooks/{notebook.name} is out of date: run .venv/bin/python scripts/{script}.py"


def assert_executed_in_order(notebook: Path) -> None:
    """Every code cell ran once, in order, and none raised."""
    code = code_cells(notebook)
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    assert [o for c in code for o in c["outputs"] if o["output_type"] == "error"] == []
