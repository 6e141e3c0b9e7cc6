"""ToolRegistry: normalized names, duplicates, groups, profiles, stats, entry points, current one."""

from __future__ import annotations

import logging
import sys
import textwrap
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import kode_nb.tools._registry as registry_module
from kode_nb.errors import ConfigurationError, DuplicateToolError, ToolNotFoundError
from kode_nb.tools import (
    BUILTIN_PROFILES,
    RegistryStats,
    Tool,
    ToolRegistry,
    ToolStats,
    default_registry,
    parse_selector,
    use_registry,
)
from kode_nb.tools._stats import STATS_WINDOW
from kode_nb.types import ToolKind


class _Validator:
    def __init__(self, schema: dict[str, Any] | None = None) -> None:
        self.schema = schema or {"type": "object", "properties": {}}

    def validate(self, raw: Any, *, tool: str) -> dict[str, Any]:
        return dict(raw or {})

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return dict(validated)


def make(name: str, *, source: str | None = None, **kw: Any) -> Tool:
    return Tool(
        name=name,
        description=f"The {name} tool.",
        function=lambda **_: None,
        validator=_Validator(),
        source=f"tests.{name}" if source is None else source,
        **kw,
    )


# --------------------------------------------------------------------------- registration


def test_lookup_is_by_normalized_name() -> None:
    reg = ToolRegistry()
    tool = reg.register(make("read_file"))
    assert reg.get("Read-File") is tool
    assert reg.get(" READ FILE ") is tool
    assert reg.has("read-file")
    assert "Read-File" in reg
    assert tool in reg
    assert 42 not in reg
    assert reg.get("write_file") is None
    assert len(reg) == 1
    assert list(reg) == [tool]


def test_list_and_names_are_sorted() -> None:
    reg = ToolRegistry([make("zeta"), make("Alpha"), make("mid")])
    assert reg.names() == ["Alpha", "mid", "zeta"]
    assert [t.name for t in reg.list()] == ["Alpha", "mid", "zeta"]


def test_names_that_normalize_alike_clash() -> None:
    reg = ToolRegistry([make("read_file", source="pkg.a")])
    with pytest.raises(DuplicateToolError, match=r"'Read-File'.*pkg\.a, as 'read_file'"):
        reg.register(make("Read-File", source="pkg.b"))
    assert reg.get("read_file").source == "pkg.a"  # type: ignore[union-attr]


def test_same_source_replaces_like_a_rerun_cell() -> None:
    reg = ToolRegistry()
    first = reg.register(make("echo", source="__main__.echo"))
    version = reg.version
    second = reg.register(make("echo", source="__main__.echo", kind="read"))
    assert reg.get("echo") is second
    assert second is not first
    assert reg.version == version + 1


def test_tools_without_source_cannot_replace_each_other() -> None:
    reg = ToolRegistry()
    tool = reg.register(make("echo", source=""))
    reg.register(tool)  # the very same object: fine
    with pytest.raises(DuplicateToolError, match="an unknown source"):
        reg.register(make("echo", source=""))


def test_replace_flag_and_replace_method() -> None:
    reg = ToolRegistry([make("echo", source="a")])
    newer = make("echo", source="b")
    reg.register(newer, replace=True)
    assert reg.get("echo") is newer
    newest = make("Echo", source="c")
    assert reg.replace(newest) is newer
    assert reg.get("echo") is newest
    assert reg.replace(make("fresh")) is None


def test_register_many_is_all_or_nothing() -> None:
    reg = ToolRegistry([make("taken", source="x")])
    with pytest.raises(DuplicateToolError):
        reg.register_many([make("new_one"), make("taken", source="y")])
    assert reg.names() == ["taken"]
    with pytest.raises(DuplicateToolError, match="'B'"):
        reg.register_many([make("b", source="1"), make("B", source="2")])
    assert reg.names() == ["taken"]


@pytest.mark.parametrize("bad", [None, "echo", {"name": "echo"}])
def test_register_rejects_non_tools(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="can only register Tool objects"):
        ToolRegistry().register(bad)


def test_unregister() -> None:
    reg = ToolRegistry([make("echo")])
    reg.record_call("echo", 0.1)
    tool = reg.unregister("ECHO")
    assert tool is not None
    assert tool.name == "echo"
    assert reg.unregister("echo") is None
    assert reg.unregister("never_there") is None
    reg.register(make("echo"))
    assert reg.stats("echo").calls == 0  # stats went with the tool


def test_get_rejects_non_strings() -> None:
    with pytest.raises(ConfigurationError, match="must be a string, not int"):
        ToolRegistry().get(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must be a string, not NoneType"):
        ToolRegistry().unregister(None)  # type: ignore[arg-type]


def test_require_suggests_close_names() -> None:
    reg = ToolRegistry([make("read_file"), make("write_file"), make("list_dir")])
    with pytest.raises(ToolNotFoundError, match=r"Did you mean: 'read_file'") as info:
        reg.require("read_fil")
    assert info.value.close_matches[0] == "read_file"
    assert reg.close_matches("Write-Fille")[0] == "write_file"
    assert reg.close_matches("Write-Fille", n=1) == ["write_file"]
    assert reg.close_matches("zzzzzz") == []
    with pytest.raises(ToolNotFoundError, match="There are 3 tools"):
        reg.require("zzzzzz")


def test_change_listeners_are_isolated(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry()
    seen: list[tuple[str, str]] = []

    def broken(action: str, name: str) -> None:
        raise RuntimeError("listener bug")

    reg.on_change(broken)
    stop = reg.on_change(lambda action, name: seen.append((action, name)))
    with caplog.at_level(logging.ERROR, logger="kode_nb.tools._registry"):
        reg.register(make("echo", source="s"))
        reg.register(make("echo", source="s"))
        reg.unregister("echo")
    assert seen == [("registered", "echo"), ("replaced", "echo"), ("unregistered", "echo")]
    assert "listener" in caplog.text
    assert "listener bug" in caplog.text
    stop()
    reg.register(make("other"))
    assert len(seen) == 3


def test_repr() -> None:
    assert repr(ToolRegistry(name="x")) == "ToolRegistry('x', empty)"
    assert repr(ToolRegistry([make("b"), make("a")])) == "ToolRegistry(2 tools: a, b)"


# --------------------------------------------------------------------------- listing and groups


def test_list_by_kind_category_group() -> None:
    reg = ToolRegistry(
        [
            make("read_file", kind="read", category="file", groups=("FS",)),
            make("write_file", kind="edit", category="file", groups=("fs",)),
            make("http_get", kind="fetch", category="network", groups=("web",)),
        ]
    )
    assert [t.name for t in reg.list_by_kind("read")] == ["read_file"]
    assert [t.name for t in reg.list_by_kind(ToolKind.FETCH)] == ["http_get"]
    assert [t.name for t in reg.list_by_category("FILE")] == ["read_file", "write_file"]
    assert [t.name for t in reg.list_by_group("fs")] == ["read_file", "write_file"]
    assert reg.list_by_group("nothing_here") == []
    with pytest.raises(ConfigurationError, match=r"unknown kind 'bogus'.*known kinds: read"):
        reg.list_by_kind("bogus")
    with pytest.raises(ConfigurationError, match="unknown category 'nope'"):
        reg.list_by_category("nope")


def test_defined_groups_add_to_tools_own_groups() -> None:
    reg = ToolRegistry([make("read_file", groups=("fs",)), make("exec", groups=("runtime",))])
    assert reg.define_group("File-System", ["Read-File", "grep", "grep"]) == ("read_file", "grep")
    reg.define_group("fs", ["exec"])
    assert reg.groups() == {
        "file_system": ("grep", "read_file"),
        "fs": ("exec", "read_file"),
        "runtime": ("exec",),
    }
    assert [t.name for t in reg.list_by_group("FS")] == ["exec", "read_file"]
    assert [t.name for t in reg.select("group:file-system")] == ["read_file"]
    reg.define_group("fs", [])  # redefine (a re-run cell)
    assert reg.group_members("fs") == ("read_file",)


@pytest.mark.parametrize(
    ("name", "members", "message"),
    [
        ("", ["a"], "invalid group name ''"),
        ("fs", "read_file", "must be a list of names, not a string"),
        ("fs", ["ok", "not ok!"], "invalid tool name 'not ok!'"),
        ("fs", [3], "must be a string, not int"),
        (None, [], "must be a string, not NoneType"),
    ],
)
def test_define_group_rejects_bad_input(name: Any, members: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ToolRegistry().define_group(name, members)


def test_select() -> None:
    reg = ToolRegistry([make("a", kind="read"), make("b", kind="edit"), make("c", category="code")])
    assert [t.name for t in reg.select("kind:read", "c")] == ["a", "c"]
    assert [t.name for t in reg.select("*")] == ["a", "b", "c"]
    with pytest.raises(ConfigurationError, match="names no group"):
        reg.select("group:")


# --------------------------------------------------------------------------- profiles


def test_builtin_profiles() -> None:
    reg = ToolRegistry()
    assert reg.profile("minimal") == ("kind:read", "kind:search", "kind:think")
    assert set(reg.profile("minimal")) < set(reg.profile("coding"))
    assert reg.profile("Full") == ("*",)
    assert reg.profiles() == dict(BUILTIN_PROFILES)


def test_define_profile() -> None:
    reg = ToolRegistry()
    assert reg.define_profile("Review", ["kind:read", "Group:FS", " grep ", "kind:read"]) == (
        "kind:read",
        "group:fs",
        "grep",
    )
    assert reg.profile("review") == ("kind:read", "group:fs", "grep")
    reg.define_profile("review", ["*"])
    assert reg.profile("review") == ("*",)


@pytest.mark.parametrize(
    ("name", "entries", "message"),
    [
        ("minimal", ["*"], "'minimal' is a built-in profile"),
        ("x", "kind:read", "entries must be a list"),
        ("x", ["kind:bogus"], "unknown kind 'bogus'"),
        ("x", ["group:"], "names no group"),
        ("bad name!", ["*"], "invalid profile name"),
    ],
)
def test_define_profile_rejects_bad_input(name: str, entries: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ToolRegistry().define_profile(name, entries)


def test_unknown_profile_lists_known_ones() -> None:
    reg = ToolRegistry()
    reg.define_profile("mine", ["*"])
    with pytest.raises(ConfigurationError, match=r"unknown profile 'codeing'.*coding, full, mine"):
        reg.profile("codeing")


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ("*", "*"),
        (" Read-File ", "read_file"),
        ("group:File-System", "group:file_system"),
        ("KIND: Read", "kind:read"),
        ("category:NETWORK", "category:network"),
    ],
)
def test_parse_selector(entry: str, text: str) -> None:
    assert str(parse_selector(entry)) == text


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("", "invalid tool name ''"),
        ("group:", "names no group"),
        ("kind:", "names no kind"),
        ("kind:bogus", "unknown kind 'bogus'.*known kinds: read, edit"),
        ("category:cloud", "unknown category 'cloud'.*known categories: system"),
        ("tool:read_file", "unknown selector 'tool:read_file'"),
        ("read file!", "invalid tool name"),
        ("group:a b!", "invalid group name"),
        (3, "must be a string, not int"),
        (["*"], "must be a string, not list"),
    ],
)
def test_parse_selector_rejects_bad_entries(entry: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_selector(entry)


# --------------------------------------------------------------------------- stats


def test_stats_per_tool() -> None:
    reg = ToolRegistry([make("echo")])
    assert reg.stats("echo") == ToolStats(name="echo")
    for ms in range(1, 21):  # 1..20 ms
        reg.record_call("Echo", ms / 1000, failed=ms % 5 == 0)
    stats = reg.stats("ECHO")
    assert (stats.calls, stats.failures) == (20, 4)
    assert stats.mean == pytest.approx(0.0105)
    assert stats.p95 == pytest.approx(0.019)  # nearest rank: ceil(0.95 * 20) = 19th value
    assert stats.failure_rate == pytest.approx(0.2)


def test_p95_uses_a_bounded_window_but_mean_counts_all() -> None:
    reg = ToolRegistry([make("echo")])
    for _ in range(100):
        reg.record_call("echo", 100.0)  # old and slow: falls out of the window
    for i in range(STATS_WINDOW):
        reg.record_call("echo", 0.001 * (i % 100 + 1))
    stats = reg.stats("echo")
    assert stats.calls == 100 + STATS_WINDOW
    assert stats.p95 < 1.0
    assert stats.mean > 1.0


def test_record_call_ignores_unknown_tools() -> None:
    reg = ToolRegistry([make("echo")])
    reg.record_call("no_such_tool", 1.0, failed=True)
    assert list(reg.stats()) == ["echo"]
    with pytest.raises(ToolNotFoundError):
        reg.stats("no_such_tool")


def test_stats_summary() -> None:
    reg = ToolRegistry(
        [
            make("a", kind="read", category="file"),
            make("b", kind="edit", category="file"),
            make("c", kind="read", category="network"),
        ]
    )
    reg.record_call("a", 0.5)
    reg.record_call("b", 1.5, failed=True)
    summary = reg.stats()
    assert isinstance(summary, RegistryStats)
    assert summary.total == 3
    assert summary.by_category == {"file": 2, "network": 1}
    assert summary.by_kind == {"read": 2, "edit": 1}
    assert (summary.calls, summary.failures) == (2, 1)
    assert summary["b"].mean == 1.5
    assert summary["c"].calls == 0
    assert dict(summary) == {name: summary[name] for name in ("a", "b", "c")}
    reg.reset_stats()
    assert reg.stats().calls == 0


# --------------------------------------------------------------------------- thread safety


def test_concurrent_registration_and_recording() -> None:
    reg = ToolRegistry([make("shared")])
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(50):
                reg.register(make(f"t{n}_{i}"))
                reg.record_call("shared", 0.001, failed=i % 2 == 0)
                reg.list()
                reg.groups()
                if i % 10 == 0:
                    reg.unregister(f"t{n}_{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(reg) == 1 + 8 * 45
    stats = reg.stats("shared")
    assert (stats.calls, stats.failures) == (400, 200)


# --------------------------------------------------------------------------- exports


def test_exports_delegate_to_formats() -> None:
    reg = ToolRegistry([make("b"), make("a", kind="read")])
    assert [d["function"]["name"] for d in reg.to_openai()] == ["a", "b"]
    assert all(d["function"]["strict"] for d in reg.to_openai(strict=True))
    assert [d["name"] for d in reg.to_anthropic(names=["B"])] == ["b"]
    assert [d["name"] for d in reg.to_gemini()] == ["a", "b"]
    assert reg.to_mcp(names=["a"])[0]["annotations"]["readOnlyHint"] is True
    with pytest.raises(ToolNotFoundError, match="Unknown tool 'c'"):
        reg.to_openai(names=["c"])


# --------------------------------------------------------------------------- current registry


def test_use_registry_nests_and_restores(registry: ToolRegistry) -> None:
    assert default_registry() is registry
    outer, inner = ToolRegistry(name="outer"), ToolRegistry(name="inner")
    with use_registry(outer) as got:
        assert got is outer
        assert default_registry() is outer
        with use_registry(inner):
            assert default_registry() is inner
        assert default_registry() is outer
    assert default_registry() is registry


def test_use_registry_restores_after_an_error(registry: ToolRegistry) -> None:
    with pytest.raises(KeyError), use_registry(ToolRegistry()):
        raise KeyError("boom")
    assert default_registry() is registry


def test_use_registry_rejects_other_objects() -> None:
    with (
        pytest.raises(ConfigurationError, match="needs a ToolRegistry, got dict"),
        use_registry({}),
    ):  # type: ignore[arg-type]
        pass


def test_process_wide_registry_is_created_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_process_registry", None)
    found: list[ToolRegistry] = []

    def look() -> None:  # a new thread starts with an empty context: no use_registry there
        found.append(default_registry())

    threads = [threading.Thread(target=look) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(r) for r in found}) == 1
    assert found[0].name == "default"
    assert registry_module._process_registry is found[0]


# --------------------------------------------------------------------------- entry points

_TOOLS_MODULE = """
from kode_nb.tools._model import Tool
from kode_nb.types import ToolKind


class V:
    schema = {"type": "object", "properties": {}}

    def validate(self, raw, *, tool):
        return {}

    def dump(self, validated):
        return {}


def _tool(name, source=""):
    return Tool(name=name, description=name, function=lambda: name, validator=V(), source=source)


ECHO = _tool("echo")
MORE = [_tool("alpha"), _tool("beta")]
MIXED = [_tool("gamma"), "not a tool"]
CLASH = _tool("Echo", source="elsewhere.echo")
NUMBER = 42


def factory():
    return _tool("delta")


def failing_factory():
    raise RuntimeError("factory exploded")
"""

_ENTRY_POINTS = """
[kode_nb.tools]
echo = fakepkg.tools:ECHO
more = fakepkg.tools:MORE
mixed = fakepkg.tools:MIXED
factory = fakepkg.tools:factory
clash = fakepkg.tools:CLASH
number = fakepkg.tools:NUMBER
failing = fakepkg.tools:failing_factory
missing_attr = fakepkg.tools:NOT_THERE
broken = fakepkg.broken:THING

[other.group]
ignored = fakepkg.tools:ECHO
"""


@pytest.fixture
def fakepkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tools.py").write_text(textwrap.dedent(_TOOLS_MODULE))
    (pkg / "broken.py").write_text("import not_a_real_module_kode_nb\n")
    info = tmp_path / "fakepkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(_ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("fakepkg", "fakepkg.tools", "fakepkg.broken"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_load_entry_points_from_a_real_distribution(
    fakepkg: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reg = ToolRegistry()
    with caplog.at_level(logging.WARNING, logger="kode_nb.tools._registry"):
        report = reg.load_entry_points()
    assert report.group == "kode_nb.tools"
    assert sorted(report.loaded) == ["alpha", "beta", "delta", "echo", "gamma"]
    assert reg.names() == ["alpha", "beta", "delta", "echo", "gamma"]
    assert reg.get("echo").source == "fakepkg.tools:ECHO"  # type: ignore[union-attr]
    failures = dict(report.failures)
    assert set(failures) == {"mixed", "clash", "number", "failing", "missing_attr", "broken"}
    assert "must give Tool objects, got str" in failures["mixed"]
    assert failures["clash"].startswith("DuplicateToolError: A tool named 'Echo'")
    assert "got int" in failures["number"]
    assert failures["failing"] == "RuntimeError: factory exploded"
    assert "AttributeError" in failures["missing_attr"]
    assert "not_a_real_module_kode_nb" in failures["broken"]
    assert not report.ok
    assert "loaded 5 tool(s), 6 failure(s)" in str(report)
    assert caplog.text.count("entry point") == 6


def test_reloading_entry_points_replaces_instead_of_clashing(fakepkg: Path) -> None:
    reg = ToolRegistry()
    reg.load_entry_points()
    again = reg.load_entry_points()
    assert sorted(again.loaded) == ["alpha", "beta", "delta", "echo", "gamma"]
    assert len(again.failures) == 6
    assert len(reg) == 5


def test_other_groups_and_empty_groups(fakepkg: Path) -> None:
    reg = ToolRegistry()
    assert reg.load_entry_points("other.group").loaded == ["echo"]
    empty = ToolRegistry().load_entry_points("kode_nb.no_such_group")
    assert empty.ok
    assert empty.loaded == []
