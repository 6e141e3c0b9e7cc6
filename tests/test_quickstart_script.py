"""notebooks/01-quickstart.ipynb is what scripts/make_quickstart.py builds, and it was executed.

nbval (``dev.sh test``) then re-runs it and compares every saved output, strictly.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    path = ROOT / "scripts" / "make_quickstart.py"
    spec = importlib.util.spec_from_file_location("make_quickstart", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _saved() -> dict[str, Any]:
    path = ROOT / "notebooks" / "01-quickstart.ipynb"
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def test_saved_notebook_has_the_generators_cells() -> None:
    built = _generator().build()
    saved = _saved()
    assert [(c["cell_type"], "".join(c["source"])) for c in saved["cells"]] == [
        (c["cell_type"], c["source"]) for c in built.cells
    ], "notebooks/01-quickstart.ipynb is out of date: run .venv/bin/python scripts/make_quickstart.py"
    assert saved["metadata"]["kernelspec"]["name"] == "python3"


def test_saved_notebook_was_executed_in_order() -> None:
    code = [c for c in _saved()["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert errors == []
