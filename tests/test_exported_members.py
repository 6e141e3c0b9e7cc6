"""The curated public API: ``kode_nb.__all__`` is sorted, complete and lazy.

Every public name of the core modules is either exported from ``kode_nb`` or listed in
``NOT_EXPORTED`` with the reason it stays in its module. A new public name must be decided on
here, so the top-level API never grows or shrinks by accident.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import kode_nb

INIT_FILE = Path(kode_nb.__file__)

# The public core: the root modules and the documented subpackages users import from. Each
# public name is exported from kode_nb or listed in NOT_EXPORTED. Everything else in the core is a
# private (underscore) implementation module.
CORE_MODULES = [
    "kode_nb.errors",
    "kode_nb.events",
    "kode_nb.execution",
    "kode_nb.policy",
    "kode_nb.tools",
    "kode_nb.types",
]

# The other public subpackages: their own ``__init__`` is their API; nothing of theirs is in
# kode_nb.__all__ except the agent classes (SUBPACKAGE_EXPORTERS below).
OTHER_PACKAGES = ["kode_nb.agents", "kode_nb.builtins", "kode_nb.debug", "kode_nb.evals",
                  "kode_nb.interop", "kode_nb.magics", "kode_nb.many", "kode_nb.mcp", "kode_nb.models",
                  "kode_nb.stepping", "kode_nb.traces", "kode_nb.ui"]  # fmt: skip

# Module-level public names deliberately NOT re-exported from kode_nb (reached through their
# module instead). Keep each set exact: the test below fails on stale entries too.
NOT_EXPORTED: dict[str, set[str]] = {
    "kode_nb.errors": {
        "FieldIssue",  # read from ToolValidationError.issues, never built by users
        "ToolSignal",  # base of ToolRetry; tools raise ToolRetry
    },
    "kode_nb.events": {
        # events are told apart by their ``type`` string; the classes are for isinstance checks
        # and annotations, from kode_nb.events
        "EVENT_TYPES",
        "ApprovalRequested",
        "ApprovalResolved",
        "CallCancelled",
        "CallCompleted",
        "CallFailed",
        "CallRequested",
        "CallStarted",
        "CallTimedOut",
        "CallUpdate",
        "InvalidArguments",
        "Subscription",
        "ToolEvent",
        "event_to_dict",
    },
    "kode_nb.execution": {
        "ApproverLike",  # type aliases of the constructor's parameters
        "PolicyLike",
        "RegistryLike",
        "RunningCall",  # returned by Executor.running()
    },
    "kode_nb.policy": {
        "ApprovalMode",  # type aliases
        "Decision",
        "resolve_allowed_path",  # tools use ToolContext.resolve_path / Policy.check_path
    },
    "kode_nb.tools": {
        "ArgumentValidator",  # protocol for schema back-ends (kode_nb/tools/_validation.py)
        "BUILTIN_PROFILES",  # documented data, seen through ToolRegistry.profiles()
        "CallMode",  # type alias
        "Isolation",  # type alias
        "LoadReport",  # returned by ToolRegistry.load_entry_points()
        "RegistryStats",  # returned by ToolRegistry.stats()
        "Selector",  # policy/profile internals
        "ToolStats",  # returned by ToolRegistry.stats(name)
        "parse_selector",
    },
    "kode_nb.types": {
        "MUTATING_KINDS",  # ToolKind.is_mutating is the public way
        "ApprovalRule",  # type aliases, for annotations
        "ContentBlock",
        "ResultStatus",
        "NotGiven",  # the type of NOT_GIVEN
        "normalize_name",  # registry-key helpers
        "validate_name",
    },
}

# Importing kode_nb alone must not pull these in (laziness keeps `import kode_nb` fast).
HEAVY_MODULES = ["anywidget", "httpx", "IPython", "ipywidgets", "jsonschema", "pydantic"]
FRAMEWORKS = ["pydantic_ai", "agents", "langchain_core", "opentelemetry"]
"""The agent frameworks kode_nb.interop works with: imported only when their adapter is used."""


def _exports() -> dict[str, str]:
    exports: dict[str, str] = kode_nb._exports()
    return exports


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def test_all_is_sorted_and_unique() -> None:
    assert kode_nb.__all__ == sorted(kode_nb.__all__)
    assert len(set(kode_nb.__all__)) == len(kode_nb.__all__)
    assert set(kode_nb.__all__) == set(_exports())


@pytest.mark.parametrize("name", kode_nb.__all__)
def test_every_exported_name_resolves_to_its_module(name: str) -> None:
    module_name = _exports()[name]
    module = _module(module_name)
    value = getattr(kode_nb, name)
    assert value is getattr(module, name)
    assert name in module.__all__, f"{name} is exported but not in {module_name}.__all__"
    if inspect.isclass(value) or inspect.isfunction(value):
        defined_in = value.__module__
        assert defined_in == module_name or defined_in.startswith(f"{module_name}."), (
            f"{name} is defined in {defined_in}, outside {module_name}"
        )


@pytest.mark.parametrize("module_name", CORE_MODULES)
def test_core_public_names_are_exported_or_listed(module_name: str) -> None:
    module = _module(module_name)
    public = set(module.__all__)
    exported = {n for n, m in _exports().items() if m == module_name}
    listed = NOT_EXPORTED[module_name]
    missing = public - exported - listed
    assert not missing, (
        f"{module_name} has public names neither exported from kode_nb nor listed in "
        f"NOT_EXPORTED: {sorted(missing)}"
    )
    stale = listed - (public - exported)
    assert not stale, f"NOT_EXPORTED[{module_name!r}] lists names it should not: {sorted(stale)}"


def _public_modules() -> list[str]:
    """Every importable module of kode_nb whose dotted path has no underscore-private part."""
    names = ["kode_nb"]
    for info in pkgutil.walk_packages(kode_nb.__path__, "kode_nb."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("module_name", _public_modules())
def test_every_public_all_names_public_existing_objects(module_name: str) -> None:
    """Every public module declares its surface in ``__all__``: existing, public, unique names."""
    module = _module(module_name)
    public = getattr(module, "__all__", None)
    assert public is not None, f"{module_name} is public but has no __all__"
    assert len(set(public)) == len(public), f"{module_name}.__all__ has duplicates"
    for name in public:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name!r}"
        assert not name.startswith("_"), f"{module_name}.__all__ lists private {name!r}"


def test_the_core_has_no_public_modules_besides_its_api() -> None:
    """Core implementation modules are private: a new public one must be decided on here."""
    core = {
        name
        for name in _public_modules()
        if name != "kode_nb" and not name.startswith(tuple(f"{p}" for p in OTHER_PACKAGES))
    }
    assert core == set(CORE_MODULES)


def test_one_class_per_public_name_across_the_api() -> None:
    """A name exported from two public modules means the same object (one ``TextDelta``)."""
    seen: dict[str, tuple[str, object]] = {}
    clashes = []
    for module_name in _public_modules():
        module = _module(module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if not inspect.isclass(value):
                continue
            first = seen.setdefault(name, (module_name, value))
            if first[1] is not value:
                clashes.append(f"{name}: {first[0]} and {module_name}")
    assert not clashes, "one public name, two different classes: " + "; ".join(clashes)


# Subpackages whose main names are re-exported from kode_nb (lazily).
SUBPACKAGE_EXPORTERS = [
    "kode_nb.agents",  # Agent, AgentRunResult, AgentDefinition, register_subagent
    "kode_nb.debug",  # replay, fork, diverge, expand_trace
    "kode_nb.evals",  # evaluate
    "kode_nb.interop",  # capture
    "kode_nb.many",  # run_many, ManyRun, Inbox, compare, variant
    "kode_nb.models",  # prices, set_price
]
# Private modules whose one public function is part of kode_nb's API (``kode_nb.register_secret``).
PRIVATE_EXPORTERS = ["kode_nb._redact"]
# The notebook layer exports one name: ``settle`` (waits for the session's background work).
NOTEBOOK_EXPORTERS = ["kode_nb.magics"]


def test_only_core_modules_are_exported_from() -> None:
    allowed = (
        set(CORE_MODULES)
        | set(SUBPACKAGE_EXPORTERS)
        | set(PRIVATE_EXPORTERS)
        | set(NOTEBOOK_EXPORTERS)
    )
    assert set(_exports().values()) <= allowed


def test_dir_lists_every_public_name() -> None:
    listed = dir(kode_nb)
    assert set(kode_nb.__all__) <= set(listed)
    assert listed == sorted(listed)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = kode_nb.no_such_name


def test_each_public_name_is_listed_once_as_an_explicit_re_export() -> None:
    """The ``if TYPE_CHECKING:`` block is the one list: one ``from M import Name as Name`` per
    name (so strict type checkers see it re-exported), each name once; ``kode_nb`` reads its
    exports from it."""
    tree = ast.parse(INIT_FILE.read_text(encoding="utf-8"))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1
    listed: dict[str, str] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        assert [(a.name, a.asname) for a in node.names] == [(node.names[0].name,) * 2]
        assert node.names[0].name not in listed, f"{node.names[0].name} is listed twice"
        listed[node.names[0].name] = str(node.module)
    assert listed == _exports()


def test_star_import_gives_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from kode_nb import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(kode_nb.__all__)


def _run_python(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=INIT_FILE.parent.parent,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_kode_nb_is_lazy() -> None:
    out = _run_python(
        "import json, sys\n"
        "import kode_nb\n"
        f"heavy = {HEAVY_MODULES!r}\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    assert json.loads(out) == [], "import kode_nb must not import these (import them lazily)"


def test_no_agent_framework_is_imported_unless_used() -> None:
    """Neither ``import kode_nb`` nor ``kode_nb.capture()`` (which records only the frameworks
    already imported) nor the interop package imports pydantic-ai, the OpenAI Agents SDK,
    LangChain or OpenTelemetry."""
    out = _run_python(
        "import json, sys\n"
        "import kode_nb, kode_nb.interop\n"
        "with kode_nb.capture() as cap:\n"
        "    pass\n"
        f"fw = {FRAMEWORKS!r}\n"
        "print(json.dumps([[m for m in fw if m in sys.modules], cap.recording]))\n"
    )
    assert json.loads(out) == [[], []]


def test_defining_and_running_tools_does_not_import_jsonschema() -> None:
    """jsonschema (650 ms to import) is only for tools defined from a raw JSON Schema."""
    out = _run_python(
        "import json, sys\n"
        "import kode_nb\n"
        "@kode_nb.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add two numbers.'''\n"
        "    return a + b\n"
        "kode_nb.Executor\n"
        "print(json.dumps('jsonschema' in sys.modules))\n"
    )
    assert json.loads(out) is False


def test_users_code_type_checks_strictly(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(
        "import kode_nb\n"
        "from kode_nb import Executor, ToolResult\n"
        "\n"
        "@kode_nb.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add two numbers.'''\n"
        "    return a + b\n"
        "\n"
        "async def main() -> ToolResult:\n"
        "    return await Executor().call('add', {'a': 1, 'b': 2})\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            "user.py",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
