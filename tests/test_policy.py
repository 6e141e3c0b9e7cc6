"""Policy: allow/deny selectors, profiles, approval resolution, allowed paths."""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kode_nb.errors import ConfigurationError, ToolPermissionError
from kode_nb.policy import Policy, resolve_allowed_path
from kode_nb.tools import Tool, ToolRegistry
from kode_nb.types import ToolContext, ToolKind


class _Validator:
    schema: dict[str, Any] = {"type": "object", "properties": {}}  # noqa: RUF012

    def validate(self, raw: Any, *, tool: str) -> dict[str, Any]:
        return {}

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return dict(validated)


def make(name: str, **kw: Any) -> Tool:
    return Tool(name=name, description=name, function=lambda: None, validator=_Validator(), **kw)


READ = make("read_file", kind="read", category="file", groups=("fs",))
WRITE = make("write_file", kind="edit", category="file", groups=("fs",))
EXEC = make("exec", kind="execute", category="system", groups=("runtime",))
FETCH = make("http_get", kind="fetch", category="network", groups=("web",))
NOTE = make("note", kind="other", category="custom")


@pytest.fixture
def reg() -> ToolRegistry:
    return ToolRegistry([READ, WRITE, EXEC, FETCH, NOTE])


def allowed(policy: Policy, reg: ToolRegistry) -> list[str]:
    return [t.name for t in policy.allowed_tools(reg)]


# --------------------------------------------------------------------------- construction


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    policy = Policy()
    assert policy.allowed_paths == [Path(os.path.realpath(tmp_path))]
    assert policy.profile is None
    assert policy.allow is None
    assert policy.deny == []
    assert policy.approval_mode == "ask"
    assert policy.kind_approval[ToolKind.EDIT] == "ask"
    assert policy.kind_approval[ToolKind.READ] == "auto"


def test_entries_are_normalized() -> None:
    policy = Policy(
        profile="Coding",
        allow=["Read-File", "GROUP:FS", "kind: Read", "read_file"],
        deny=["Exec"],
        overrides={"Write-File": "deny"},
        kind_approval={"execute": "auto"},
    )
    assert policy.profile == "coding"
    assert policy.allow == ["read_file", "group:fs", "kind:read"]
    assert policy.deny == ["exec"]
    assert policy.overrides == {"write_file": "deny"}
    assert policy.kind_approval[ToolKind.EXECUTE] == "auto"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"approval_mode": "sometimes"}, "approval_mode must be 'ask', 'auto' or 'deny'"),
        ({"kind_approval": {"teleport": "ask"}}, "unknown tool kind 'teleport'; known kinds"),
        ({"kind_approval": {"edit": "maybe"}}, r"kind_approval\['edit'\] must be"),
        ({"kind_approval": ["edit"]}, "kind_approval must be a mapping"),
        ({"overrides": {"exec": "never"}}, r"overrides\['exec'\] must be"),
        ({"overrides": {"no good!": "ask"}}, "invalid tool name 'no good!'"),
        ({"overrides": ["exec"]}, "overrides must be a mapping"),
        ({"allow": ["group:"]}, "names no group"),
        ({"allow": "read_file"}, "allow must be a list of selectors"),
        ({"deny": ["kind:bogus"]}, "unknown kind 'bogus'"),
        ({"deny": ["category:x"]}, "unknown category 'x'"),
        ({"deny": [None]}, "must be a string, not NoneType"),
        ({"profile": "not a profile!"}, "invalid profile name"),
        ({"allowed_paths": "/tmp"}, "allowed_paths must be a list"),
        ({"allowed_paths": ["/definitely/not/here"]}, "is not an existing directory"),
        ({"always_allowed": {"x y!"}}, "invalid tool name"),
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Policy(**kwargs)


def test_repr_is_readable(tmp_path: Path) -> None:
    policy = Policy(
        profile="coding",
        deny=["exec"],
        kind_approval={"fetch": "ask"},
        allowed_paths=[tmp_path],
    )
    policy.always_allow("write_file")
    text = repr(policy)
    assert text.startswith("Policy(profile='coding', allow=None, deny=['exec']")
    assert "kind_approval={'fetch': 'ask'}" in text
    assert "edit" not in text  # unchanged kind defaults are not repeated
    assert repr(str(Path(os.path.realpath(tmp_path)))) in text
    assert "always_allowed=['write_file']" in text


# --------------------------------------------------------------------------- allowed tools


def test_everything_is_allowed_by_default(reg: ToolRegistry) -> None:
    assert Policy().is_allowed(EXEC, reg) == (True, "allowed (no profile or allow list)")
    assert allowed(Policy(), reg) == ["exec", "http_get", "note", "read_file", "write_file"]


@pytest.mark.parametrize(
    ("entry", "denied"),
    [
        ("Write-File", ["write_file"]),
        ("group:fs", ["read_file", "write_file"]),
        ("kind:fetch", ["http_get"]),
        ("category:file", ["read_file", "write_file"]),
        ("*", ["exec", "http_get", "note", "read_file", "write_file"]),
    ],
)
def test_deny_selectors(reg: ToolRegistry, entry: str, denied: list[str]) -> None:
    policy = Policy(deny=[entry])
    for tool in reg:
        ok, reason = policy.is_allowed(tool, reg)
        assert ok is (tool.name not in denied)
        if not ok:
            assert reason == f"denied by '{policy.deny[0]}'"


def test_deny_wins_over_allow_and_profile(reg: ToolRegistry) -> None:
    policy = Policy(profile="full", allow=["group:fs"], deny=["write_file"])
    assert policy.is_allowed(WRITE, reg) == (False, "denied by 'write_file'")
    assert allowed(policy, reg) == ["read_file"]


def test_allow_list_alone(reg: ToolRegistry) -> None:
    policy = Policy(allow=["group:runtime", "note"])
    assert policy.is_allowed(EXEC, reg) == (True, "allowed by 'group:runtime'")
    assert policy.is_allowed(READ, reg) == (False, "not in the allow list")
    assert allowed(policy, reg) == ["exec", "note"]


def test_empty_allow_list_allows_nothing(reg: ToolRegistry) -> None:
    policy = Policy(allow=[])
    assert policy.is_allowed(READ, reg) == (False, "not in the allow list (it is empty)")


def test_minimal_profile_is_read_only(reg: ToolRegistry) -> None:
    policy = Policy(profile="minimal")
    assert policy.is_allowed(READ, reg) == (True, "allowed by profile 'minimal' ('kind:read')")
    assert policy.is_allowed(WRITE, reg) == (False, "not in profile 'minimal'")
    assert allowed(policy, reg) == ["read_file"]


def test_coding_profile(reg: ToolRegistry) -> None:
    # fs and runtime groups, custom category; not the network tool
    assert allowed(Policy(profile="coding"), reg) == ["exec", "note", "read_file", "write_file"]


def test_profile_intersected_with_allow(reg: ToolRegistry) -> None:
    policy = Policy(profile="coding", allow=["kind:edit", "http_get"])
    assert allowed(policy, reg) == ["write_file"]
    ok, reason = policy.is_allowed(WRITE, reg)
    assert ok
    assert reason == "allowed by profile 'coding' ('group:fs') and 'kind:edit'"
    assert policy.is_allowed(FETCH, reg) == (False, "not in profile 'coding'")


def test_custom_profile_and_registry_groups(reg: ToolRegistry) -> None:
    reg.define_group("dangerous", ["exec", "write_file"])
    reg.define_profile("reviewer", ["kind:read", "note"])
    assert allowed(Policy(profile="reviewer"), reg) == ["note", "read_file"]
    assert allowed(Policy(deny=["group:dangerous"]), reg) == ["http_get", "note", "read_file"]


def test_unknown_profile_is_a_configuration_error(reg: ToolRegistry) -> None:
    policy = Policy(profile="nonexistent")
    with pytest.raises(ConfigurationError, match=r"unknown profile 'nonexistent'.*coding"):
        policy.is_allowed(READ, reg)
    with pytest.raises(ConfigurationError, match="unknown profile 'nope'"):
        Policy().set_profile("nope", reg)


def test_is_allowed_uses_the_current_registry(registry: ToolRegistry) -> None:
    registry.define_group("mine", ["note"])
    assert Policy(allow=["group:mine"]).is_allowed(NOTE) == (True, "allowed by 'group:mine'")


# --------------------------------------------------------------------------- approval


@pytest.mark.parametrize(
    ("tool", "decision", "reason"),
    [
        (READ, "auto", "read tools run without asking by default"),
        (FETCH, "auto", "fetch tools run without asking by default"),
        (NOTE, "auto", "other tools run without asking by default"),
        (WRITE, "ask", "edit tools ask by default"),
        (EXEC, "ask", "execute tools ask by default"),
        (make("rm", kind="delete"), "ask", "delete tools ask by default"),
        (make("mv", kind="move"), "ask", "move tools ask by default"),
    ],
)
def test_kind_defaults(tool: Tool, decision: str, reason: str) -> None:
    assert Policy().approval_for(tool, {}) == (decision, reason)


def test_kind_approval_changes_are_explained() -> None:
    policy = Policy(kind_approval={"execute": "auto", "fetch": "deny"})
    assert policy.approval_for(EXEC, {}) == ("auto", "execute tools run without asking by policy")
    assert policy.approval_for(FETCH, {}) == ("deny", "fetch tools are refused by policy")


def test_tool_rule_beats_kind_default() -> None:
    tool = make("safe_write", kind="edit", approval="auto")
    assert Policy().approval_for(tool, {}) == ("auto", "'safe_write' declares approval='auto'")


@pytest.mark.parametrize(
    ("answer", "decision", "fragment"),
    [
        (True, "ask", "asks for these arguments"),
        ("ask", "ask", "asks for these arguments"),
        (False, "auto", "allows these arguments"),
        ("auto", "auto", "allows these arguments"),
        ("deny", "deny", "refuses these arguments"),
        ("perhaps", "ask", "returned 'perhaps'"),
        (None, "ask", "returned None"),
    ],
)
def test_predicate_rules(answer: Any, decision: str, fragment: str) -> None:
    seen: list[Any] = []

    def rule(args: Mapping[str, Any]) -> Any:
        seen.append(dict(args))
        return answer

    tool = make("cmd", kind="execute", approval=rule)
    got, reason = Policy().approval_for(tool, {"command": "ls"})
    assert got == decision
    assert fragment in reason
    assert seen == [{"command": "ls"}]


def test_predicate_that_raises_asks() -> None:
    def rule(args: Mapping[str, Any]) -> bool:
        return bool(args["missing"])

    tool = make("cmd", kind="read", approval=rule)
    decision, reason = Policy().approval_for(tool, {})
    assert decision == "ask"
    assert "raised KeyError" in reason
    assert "asking to be safe" in reason


def test_override_beats_tool_rule() -> None:
    tool = make("cmd", kind="read", approval="auto")
    policy = Policy(overrides={"CMD": "deny"})
    assert policy.approval_for(tool, {}) == ("deny", "policy override for 'cmd': deny")
    policy.set_override("cmd", None)
    assert policy.approval_for(tool, {})[0] == "auto"


def test_always_allow_turns_ask_into_auto_only() -> None:
    policy = Policy(overrides={"exec": "deny"})
    policy.always_allow("Write-File")
    policy.always_allow("exec")
    assert policy.approval_for(WRITE, {}) == ("auto", "'write_file' is always allowed this session")
    assert policy.approval_for(EXEC, {})[0] == "deny"
    policy.revoke_always_allow("write_file")
    assert policy.approval_for(WRITE, {})[0] == "ask"
    policy.always_allow("write_file")
    policy.revoke_always_allow()
    assert policy.always_allowed == set()


def test_approval_modes() -> None:
    auto = Policy(approval_mode="auto")
    assert auto.approval_for(WRITE, {}) == (
        "auto",
        "edit tools ask by default; approval_mode='auto' runs it without asking",
    )
    headless = Policy(approval_mode="deny")
    decision, reason = headless.approval_for(WRITE, {})
    assert decision == "deny"
    assert "approval_mode='deny'" in reason
    assert headless.approval_for(READ, {})[0] == "auto"
    assert Policy(approval_mode="auto", overrides={"read_file": "deny"}).approval_for(READ)[0] == (
        "deny"
    )


def test_always_allow_is_thread_safe() -> None:
    policy = Policy()
    threads = [
        threading.Thread(target=lambda n=n: [policy.always_allow(f"t{n}_{i}") for i in range(200)])
        for n in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(policy.always_allowed) == 1200


# --------------------------------------------------------------------------- mutators


def test_allow_and_deny_tool_move_entries(reg: ToolRegistry) -> None:
    policy = Policy(deny=["exec"])
    policy.allow_tool("Exec")
    assert policy.allow == ["exec"]
    assert policy.deny == []
    policy.allow_tool("exec")
    assert policy.allow == ["exec"]
    policy.deny_tool("exec")
    assert policy.allow == []
    assert policy.deny == ["exec"]
    policy.clear_allow()
    assert policy.allow is None
    with pytest.raises(ConfigurationError, match="unknown kind 'nope'"):
        policy.deny_tool("kind:nope")


def test_setters_validate(tmp_path: Path, reg: ToolRegistry) -> None:
    policy = Policy(allowed_paths=[tmp_path])
    policy.set_profile("Minimal", reg)
    assert policy.profile == "minimal"
    policy.set_profile(None)
    assert policy.profile is None
    with pytest.raises(ConfigurationError, match="must be 'auto', 'ask' or 'deny'"):
        policy.set_override("exec", "sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown tool kind 'bogus'"):
        policy.set_kind_approval("bogus", "ask")
    with pytest.raises(ConfigurationError, match="approval_mode must be"):
        policy.set_approval_mode("yolo")  # type: ignore[arg-type]
    policy.set_kind_approval("read", "ask")
    policy.set_approval_mode("deny")
    assert policy.approval_for(READ, {})[0] == "deny"


def test_add_and_remove_paths(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    policy = Policy(allowed_paths=[first])
    assert policy.add_path(second) == Path(os.path.realpath(second))
    policy.add_path(str(second))
    assert len(policy.allowed_paths) == 2
    with pytest.raises(ConfigurationError, match="is not an existing directory"):
        policy.add_path(tmp_path / "missing")
    with pytest.raises(ConfigurationError, match="is not an existing directory"):
        policy.add_path(tmp_path / "a" / ".." / "file.txt")
    assert policy.remove_path(first) is True
    assert policy.remove_path(first) is False
    assert policy.check_path("x.txt") == Path(os.path.realpath(second)) / "x.txt"


def test_copies_are_independent(tmp_path: Path) -> None:
    policy = Policy(deny=["exec"], allowed_paths=[tmp_path])
    clone = policy.copy(profile="minimal")
    clone.deny_tool("note")
    clone.always_allow("x")
    deep = copy.deepcopy(policy)
    deep.overrides["y"] = "ask"
    assert policy.deny == ["exec"]
    assert policy.profile is None
    assert policy.always_allowed == set()
    assert policy.overrides == {}
    assert clone.deny == ["exec", "note"]
    assert clone.profile == "minimal"


# --------------------------------------------------------------------------- allowed paths


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "file.txt").write_text("hi")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return Path(os.path.realpath(base))


def test_relative_paths_resolve_against_the_first_root(root: Path) -> None:
    assert resolve_allowed_path("sub/file.txt", [root]) == root / "sub" / "file.txt"
    assert resolve_allowed_path("sub/../sub/file.txt", [root]) == root / "sub" / "file.txt"
    assert resolve_allowed_path(".", [root]) == root
    assert resolve_allowed_path(root / "sub", [root]) == root / "sub"


def test_files_that_do_not_exist_yet(root: Path) -> None:
    assert resolve_allowed_path("new.txt", [root]) == root / "new.txt"
    assert resolve_allowed_path("a/b/c.txt", [root]) == root / "a" / "b" / "c.txt"


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "sub/../../outside", "..", "sub/../../root2/x"]
)
def test_dotdot_escapes_are_refused(root: Path, path: str) -> None:
    with pytest.raises(ToolPermissionError, match="outside the allowed paths") as info:
        resolve_allowed_path(path, [root], tool="read_file")
    assert info.value.tool == "read_file"
    assert repr(path) in str(info.value)
    assert str(root) in str(info.value)


def test_absolute_path_outside_is_refused(root: Path) -> None:
    with pytest.raises(ToolPermissionError, match=r"'/etc/passwd' is outside the allowed paths"):
        resolve_allowed_path("/etc/passwd", [root])


def test_prefix_sibling_is_not_inside(root: Path) -> None:
    sibling = root.parent / "root-evil"
    sibling.mkdir()
    with pytest.raises(ToolPermissionError):
        resolve_allowed_path(sibling / "x", [root])


def test_symlink_escape_is_refused(root: Path) -> None:
    outside = root.parent / "outside"
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "file_link").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    for path in ("link/secret.txt", "link", "file_link", "dangling", "link/new/file.txt"):
        with pytest.raises(ToolPermissionError, match="resolves to") as info:
            resolve_allowed_path(path, [root])
        assert str(outside) in str(info.value)


def test_symlink_inside_the_root_is_fine(root: Path) -> None:
    (root / "alias").symlink_to(root / "sub", target_is_directory=True)
    assert resolve_allowed_path("alias/file.txt", [root]) == root / "sub" / "file.txt"


def test_symlinked_root_is_resolved(root: Path, tmp_path: Path) -> None:
    link_root = tmp_path / "root_link"
    link_root.symlink_to(root, target_is_directory=True)
    assert resolve_allowed_path("sub/file.txt", [link_root]) == root / "sub" / "file.txt"
    assert resolve_allowed_path(root / "sub", [link_root]) == root / "sub"


def test_second_root_and_home_expansion(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Path(os.path.realpath(tmp_path / "outside"))
    assert resolve_allowed_path(other / "secret.txt", [root, other]) == other / "secret.txt"
    monkeypatch.setenv("HOME", str(root))
    assert resolve_allowed_path("~/sub/file.txt", ["~"]) == root / "sub" / "file.txt"


def test_no_roots_explains_how_to_configure() -> None:
    with pytest.raises(ToolPermissionError, match="no allowed paths are configured") as info:
        resolve_allowed_path("a.txt", [], tool="write_file")
    assert "Policy(allowed_paths=" in str(info.value)
    assert "add_path" in str(info.value)
    with pytest.raises(ToolPermissionError, match="no allowed paths"):
        Policy(allowed_paths=[]).check_path("a.txt")


@pytest.mark.parametrize("path", ["", "   ", "a\x00b", 42, b"bytes"])
def test_invalid_paths(root: Path, path: Any) -> None:
    with pytest.raises(ToolPermissionError, match="Invalid path"):
        resolve_allowed_path(path, [root])


def test_tool_context_resolves_through_the_policy(root: Path) -> None:
    ctx = ToolContext(tool="read_file", call_id="c1", allowed_paths=(root,))
    assert ctx.resolve_path("sub/file.txt") == root / "sub" / "file.txt"
    with pytest.raises(ToolPermissionError):
        ctx.resolve_path("../outside")
