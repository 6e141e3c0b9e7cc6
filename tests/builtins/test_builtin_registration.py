"""Registering the built-ins: opt-in, groups, profiles, kinds, approval defaults, schemas."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from kode_nb import DuplicateToolError, Policy, ToolRegistry, define_tool
from kode_nb.builtins import GROUPS, WebConfig, builtin_tools, register_builtins
from kode_nb.errors import ConfigurationError

EXPECTED = {
    # name: (kind, category, group, asks by default)
    "current_time": ("read", "system", "system", False),
    "sleep": ("read", "system", "system", False),
    "get_env": ("read", "system", "system", False),
    "set_env": ("edit", "system", "system", True),
    "read_file": ("read", "file", "fs", False),
    "write_file": ("edit", "file", "fs", True),
    "edit_file": ("edit", "file", "fs", True),
    "list_files": ("read", "file", "fs", False),
    "delete_file": ("delete", "file", "fs", True),
    "move_file": ("move", "file", "fs", True),
    "get_file_info": ("read", "file", "fs", False),
    "http_get": ("fetch", "network", "web", False),
    "http_post": ("execute", "network", "web", True),
    "http_request": ("execute", "network", "web", True),
    "json_parse": ("other", "data", "data", False),
    "json_stringify": ("other", "data", "data", False),
    "base64_encode": ("other", "data", "data", False),
    "base64_decode": ("other", "data", "data", False),
    "exec": ("execute", "code", "runtime", True),
    "list_cells": ("read", "code", "notebook", False),
    "read_cell": ("read", "code", "notebook", False),
    "list_variables": ("read", "code", "notebook", False),
    "read_variable": ("read", "code", "notebook", False),
    "insert_cell": ("edit", "code", "notebook", True),
    "run_cell": ("execute", "code", "notebook", True),
}


def test_importing_registers_nothing() -> None:
    code = (
        "import sys, kode_nb\n"
        "assert 'kode_nb.builtins' not in sys.modules\n"
        "import kode_nb.builtins\n"
        "print(len(kode_nb.default_registry()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_every_builtin_has_its_kind_category_group_and_approval(registry: ToolRegistry) -> None:
    tools = register_builtins()  # into the current registry
    assert registry.names() == sorted(EXPECTED)
    assert [t.name for t in tools] == list(EXPECTED)
    policy = Policy()
    for tool in tools:
        kind, category, group, asks = EXPECTED[tool.name]
        assert (tool.kind.value, tool.category.value, tool.groups) == (
            kind,
            category,
            (group, "builtin"),
        )
        assert (policy.approval_for(tool, {})[0] == "ask") is asks, tool.name


def test_every_tool_and_argument_is_described() -> None:
    for tool in builtin_tools():
        assert tool.description, tool.name
        for name, schema in tool.parameters["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name}"


def test_schemas_export_to_every_provider(registry: ToolRegistry) -> None:
    register_builtins(registry)
    for export in (registry.to_openai(), registry.to_anthropic(), registry.to_gemini()):
        assert len(export) == len(EXPECTED)
    # Free-form dicts (headers, env) and "any JSON value" cannot be OpenAI-strict.
    loose = {"exec", "http_get", "http_post", "http_request", "json_stringify"}
    assert len(registry.to_openai(strict=True, names=sorted(set(EXPECTED) - loose))) == 20
    for name in loose:
        with pytest.raises(ConfigurationError, match="strict mode cannot express it"):
            registry.to_openai(strict=True, names=[name])


def test_groups_select_what_is_registered(registry: ToolRegistry) -> None:
    register_builtins(registry, ("group:fs", "data", "fs"))
    assert {registry.get(n).groups[0] for n in registry.names()} == {"fs", "data"}  # type: ignore[union-attr]
    assert len(registry.group_members("builtin")) == 11
    other = ToolRegistry()
    register_builtins(other, "runtime")
    assert other.names() == ["exec"]
    assert [t.name for t in builtin_tools("system")] == [
        "current_time",
        "sleep",
        "get_env",
        "set_env",
    ]
    with pytest.raises(ConfigurationError, match="unknown built-in group 'shell'; the groups are"):
        register_builtins(registry, ("shell",))
    assert GROUPS == ("system", "fs", "web", "data", "runtime", "notebook")


def test_policies_and_profiles_select_builtins(registry: ToolRegistry) -> None:
    register_builtins(registry)
    fs_only = Policy(allow=["group:fs"])
    assert {t.name for t in fs_only.allowed_tools(registry)} == {
        n for n, v in EXPECTED.items() if v[2] == "fs"
    }
    coding = {t.name for t in Policy(profile="coding").allowed_tools(registry)}
    assert coding == {n for n, v in EXPECTED.items() if v[2] != "web"}
    minimal = {t.name for t in Policy(profile="minimal").allowed_tools(registry)}
    assert minimal == {n for n, v in EXPECTED.items() if v[0] == "read"}
    no_exec = Policy(profile="coding", deny=["exec"])
    assert not no_exec.is_allowed(registry.require("exec"), registry)[0]


def test_registering_again_replaces_but_a_foreign_tool_clashes(registry: ToolRegistry) -> None:
    register_builtins(registry, ("web",))
    before = registry.get("http_get")
    register_builtins(registry, ("web",), allowed_hosts=["example.com"])
    assert registry.get("http_get") is not before
    assert len(registry) == 3

    def read_file(path: str) -> str:
        """My own reader."""
        return path

    define_tool(read_file, registry=registry)
    with pytest.raises(DuplicateToolError, match="read_file"):
        register_builtins(registry, ("fs",))
    assert "write_file" not in registry  # all or nothing
    register_builtins(registry, ("fs",), replace=True)
    assert registry.require("read_file").source.startswith("kode_nb.builtins")


def test_bad_options() -> None:
    with pytest.raises(ConfigurationError, match="list of host patterns"):
        builtin_tools("web", allowed_hosts="example.com")
    with pytest.raises(ConfigurationError, match="not both"):
        builtin_tools("web", allowed_hosts=["a.com"], web=WebConfig())
    with pytest.raises(ConfigurationError, match="needs a ToolRegistry"):
        register_builtins(object())  # type: ignore[arg-type]


def test_the_registered_tools_display_as_a_table(registry: ToolRegistry, kode_ip: Any) -> None:
    tools = register_builtins(registry, groups=("data", "system"))
    assert isinstance(tools, list)
    assert tools.registry is registry
    assert [t.name for t in tools] == [t.name for t in builtin_tools("data", "system")]
    formatters = kode_ip.display_formatter.formatters  # by type name, as %load_ext registers
    page = formatters["text/html"].lookup_by_type(type(tools))(tools)
    assert page.count("<tr>") == len(tools) + 1  # the header and one row a tool
    assert "<code>base64_decode</code>" in page
    assert "8 tools" in page
    plain = formatters["text/plain"](tools)
    assert plain.splitlines()[0].split() == [
        "name", "kind", "category", "groups", "calls", "failures", "mean"
    ]  # fmt: skip
