"""The layering rules, checked: docs/ARCHITECTURE.md's graph is current, every unit keeps to what
it may import, nothing imports in a circle (between units or between the modules of one unit,
imports inside functions included), package code never goes through the ``kode_nb`` facade,
each subpackage's ``__init__`` states its rule, the core carries no display code, and a
subpackage's modules are private."""

from __future__ import annotations

import ast
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kode_nb"
SCRIPT = ROOT / "scripts" / "arch_graph.py"
DOC = ROOT / "docs" / "ARCHITECTURE.md"

# unit -> the units it may import (besides itself). The same rule is the "may import" column of
# docs/ARCHITECTURE.md and the "May import:" sentence of each subpackage's __init__ docstring
# ("the core" there means every unit of CORE).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_paths": {"errors"},
    "_redact": set(),
    "_threads": set(),
    "_finite": {"errors"},
    "_format": set(),  # durations, tokens, costs, shortening: stdlib only
    "_live": set(),
    "_version": set(),
    "_lifecycle": {"policy"},  # one lifecycle for every handle; decisions are policy's
    "types": {"errors", "_paths"},
    "tools": {"types", "errors", "_finite"},
    "policy": {"tools", "types", "errors", "_paths"},
    "events": {"types", "errors", "_redact"},
    # _redact: in a kernel, what a tool prints is redacted before IOPub (Executor.__init__)
    "execution": {"tools", "policy", "events", "types", "errors", "_threads", "_redact"},
    "models": {"tools", "types", "errors", "_redact"},
    "traces": {"errors", "_redact"},
    "stepping": {"traces", "models", "tools", "types", "errors"},
    "agents": {
        "stepping",
        "traces",
        "execution",
        "models",
        "tools",
        "policy",
        "events",
        "types",
        "errors",
        "_format",
        "_redact",
        "_threads",
    },
    "debug": {
        "agents",
        "stepping",
        "traces",
        "execution",
        "models",
        "tools",
        "types",
        "errors",
        "_format",
        "_redact",
    },
    # _redact: a served endpoint's bearer token is registered as a secret (mcp/server.py)
    "mcp": {
        "execution",
        "tools",
        "policy",
        "events",
        "types",
        "errors",
        "_redact",
        "_threads",
        "_version",
    },
    "builtins": {"tools", "types", "errors", "_paths", "_threads"},
    # other agent frameworks: kode_nb's tools, approvals and traces in them; never Jupyter
    "interop": {
        "agents",
        "traces",
        "execution",
        "models",
        "policy",
        "tools",
        "events",
        "types",
        "errors",
        "_lifecycle",
        "_redact",
    },
    "many": {
        "interop",
        "agents",
        "traces",
        "execution",
        "models",
        "policy",
        "tools",
        "types",
        "errors",
        "_lifecycle",
        "_live",
        "_redact",  # results are redacted before they are cached or shown
    },
    # evaluations: cases run through many, scored (an LLM judge through models), reported
    "evals": {"many", "models", "traces", "errors", "_redact"},
}
CORE = set(ALLOWED)
# The notebook layer: renders and drives the core.
ALLOWED["ui"] = set(CORE)
ALLOWED["magics"] = CORE | {"ui"}
ALLOWED["_extension"] = {"magics", "ui", "_live"}
# The facade imports its public names lazily, by name; at run time only these.
ALLOWED["kode_nb"] = {"_extension", "_version"}

# Imports only the notebook layer may make: the core runs in a plain script with no kernel.
JUPYTER = ("IPython", "ipywidgets", "anywidget", "ipykernel", "comm", "jupyter_client")
DISPLAY_METHODS = (
    "_repr_html_",
    "_repr_mimebundle_",
    "_ipython_display_",
    "_repr_markdown_",
    "_repr_json_",
    "_repr_svg_",
    "_repr_png_",
    "_repr_latex_",
)

# Subpackages whose modules still have public names (every other module of a subpackage is
# private, ``_name.py``). The lists are exact: a new module must be private, or be added here.
PUBLIC_MODULES: dict[str, set[str]] = {
    "builtins": {"data", "fs", "fs_edit", "notebook", "runtime", "system", "web"},
    "magics": {
        "agent_magics",
        "agent_spec",
        "awaiting",
        "call_line",
        "define_cell",
        "expand",
        "kode_magics",
        "manage",
        "many_magic",
        "mcp_magics",
        "mcp_state",
        "nesting",
        "redacted",
        "session",
    },
    "many": {
        "cache",
        "compare",
        "core",
        "dask_engine",
        "engines",
        "frame",
        "inbox",
        "ray_engine",
        "rows",
        "runner",
        "target",
    },
    "mcp": {"client", "config", "errors", "manager", "server"},
    "models": {"anthropic", "base", "errors", "openai_compat", "resolve", "scripted", "test_model"},
    "ui": {
        "agent_handle",
        "agent_static",
        "agent_view",
        "approval",
        "call_view",
        "cell_display",
        "coalesce",
        "delegation",
        "diverge_view",
        "formatters",
        "handle",
        "html",
        "many_view",
        "mcp_serving",
        "notebook_comm",
        "record_html",
        "records",
        "static_view",
        "step_view",
        "stream",
        "terminal",
        "tool_html",
        "trace_html",
        "trace_ops",
    },
}


def _script() -> dict[str, Any]:
    """scripts/arch_graph.py's functions (``graph``, ``module_graph``, ``cycles``,
    ``imports_of``)."""
    return runpy.run_path(str(SCRIPT))


def _subpackages() -> list[str]:
    return sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def _units() -> set[str]:
    roots = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    return roots | set(_subpackages()) | {"kode_nb"}


def _named_units(text: str) -> set[str]:
    """The units a rule's text names: ``unit`` or :mod:`kode_nb.unit`, and "the core"."""
    names = set(re.findall(r"(?:``|:mod:`)(?:kode_nb\.)?(\w+)(?:``|`)", text))
    return names | (CORE if "the core" in text else set())


def test_the_documented_graph_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_unit_has_a_rule_and_every_rule_a_unit() -> None:
    assert set(ALLOWED) == _units()


def test_every_unit_keeps_its_rule() -> None:
    edges = _script()["graph"]()
    broken = {
        unit: sorted(edges[unit] - ALLOWED[unit]) for unit in edges if edges[unit] - ALLOWED[unit]
    }
    assert not broken, f"units import what they may not: {broken}"


def test_there_are_no_cycles_between_units() -> None:
    script = _script()
    assert script["cycles"](script["graph"]()) == []


def test_type_only_imports_keep_the_rules_too() -> None:
    """An import made for type checking only (under ``if TYPE_CHECKING:``) is a dependency all
    the same: a unit that names another unit's types keeps its rule and joins no circle (the
    stepping layer describes the run it pauses as a protocol instead of naming the loop's run
    state; the notebook's panels describe the session they read). The facade names every
    public type for type checkers, so it is left out."""
    script = _script()
    edges = script["graph"](typing=True)
    broken = {
        unit: sorted(edges[unit] - ALLOWED[unit])
        for unit in edges
        if unit != "kode_nb" and edges[unit] - ALLOWED[unit]
    }
    assert not broken, f"units name types of what they may not import: {broken}"
    assert script["cycles"](edges) == []


def test_there_are_no_cycles_between_modules() -> None:
    """Inside a package too: a module never imports (even inside a function) one that imports
    it back, and a package's own modules never import its ``__init__``."""
    script = _script()
    assert script["cycles"](script["module_graph"]()) == []


def test_package_code_never_imports_the_facade() -> None:
    """``from kode_nb import Executor`` inside the package would hide the real dependency (and
    load the facade's lazy names): package code imports the unit that defines a name."""
    imports_of = _script()["imports_of"]
    offenders = sorted(
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if path != PACKAGE / "__init__.py" and "kode_nb" in imports_of(path)
    )
    assert not offenders, f"these import names from the kode_nb facade: {offenders}"


@pytest.mark.parametrize("package", _subpackages())
def test_each_subpackage_states_its_rule(package: str) -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text("utf-8")))
    found = re.search(r"May import:(.*?)(?:\.\s|\.$)", doc or "", re.DOTALL)
    assert found, f"kode_nb/{package}/__init__.py's docstring has no 'May import:' sentence"
    assert _named_units(found.group(1)) == ALLOWED[package], (
        f"kode_nb/{package}/__init__.py says it may import {sorted(_named_units(found.group(1)))}"
        f", the rule is {sorted(ALLOWED[package])}"
    )


def test_the_documented_rules_are_the_checked_ones() -> None:
    """docs/ARCHITECTURE.md's rule table has one row per unit, with the same 'may import'."""
    table = DOC.read_text("utf-8").split("## Units and their rules", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        for unit in re.findall(r"`(\w+)(?:/|\.py)?`", cells[0]):
            named = set(re.findall(r"`(\w+)`", cells[2]))
            documented[unit] = named | (CORE if "the core" in cells[2] else set())
    assert set(documented) == set(ALLOWED)
    differ = {u: sorted(documented[u] ^ ALLOWED[u]) for u in ALLOWED if documented[u] != ALLOWED[u]}
    assert not differ, f"docs/ARCHITECTURE.md's rules differ from the checked ones: {differ}"


def _core_files() -> list[Path]:
    notebook = {"ui", "magics", "_extension"}
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0].removesuffix(".py") not in notebook
        and path != PACKAGE / "__init__.py"
    ]


def test_the_core_imports_no_jupyter_and_carries_no_display_code() -> None:
    """One way to display: every rich display is registered from kode_nb/ui/formatters.py."""
    found = []
    for path in _core_files():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                modules = []
            found += [f"{path.name}: import {m}" for m in modules if m.split(".")[0] in JUPYTER]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
                node.name in DISPLAY_METHODS
            ):
                found.append(f"{path.name}: def {node.name}")
    assert not found, f"core modules with Jupyter imports or display methods: {found}"


@pytest.mark.parametrize("package", _subpackages())
def test_a_subpackages_modules_are_private(package: str) -> None:
    public = {p.stem for p in (PACKAGE / package).glob("*.py") if not p.name.startswith("_")} | {
        p.parent.name for p in (PACKAGE / package).glob("*/__init__.py")
    }
    assert public == PUBLIC_MODULES.get(package, set()), (
        f"kode_nb/{package}: public modules {sorted(public)}; name new modules _name.py"
    )


def test_the_graph_sees_function_level_imports_and_skips_type_checking(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from kode_nb.errors import KodeError\n"
        "if TYPE_CHECKING:\n"
        "    from kode_nb.agents import Agent\n"
        "def f():\n"
        "    from kode_nb.tools._model import Tool\n"
        "    import kode_nb.policy\n"
        "    from kode_nb.tools import _formats\n"
        "    from kode_nb import Executor\n",
        encoding="utf-8",
    )
    assert _script()["imports_of"](source) == {
        "kode_nb.errors",
        "kode_nb.tools._model",
        "kode_nb.policy",
        "kode_nb.tools._formats",  # a module named by `from ... import`: not the package
        "kode_nb",  # a name of the facade
    }
