"""``%tools``, ``%policy``, ``%approval`` and the ``KodeMagics`` settings, in terminal IPython."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from kode_nb import ToolRegistry
from kode_nb.magics import get_session

TOOLS = '''
def read_note(path: str) -> str:
    """Read a note.

    Args:
        path: Which.
    """
    return path

def stats(data: dict[str, int]) -> int:
    """Sum values.

    Args:
        data: Named numbers.
    """
    return sum(data.values())
'''


@pytest.fixture
def ip(kode_ip: Any) -> Any:
    kode_ip.run_cell_magic("tool", "--kind read --group notes", TOOLS)
    return kode_ip


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


# --------------------------------------------------------------------------- %tools


def test_tools_lists_with_stats_and_filters(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("tool", "read_note path=a")
    _out(capsys)
    ip.run_line_magic("tools", "")
    lines = _out(capsys).splitlines()
    assert lines[0] == "registry test: 2 tools"
    assert lines[1].split() == [
        "NAME", "KIND", "CATEGORY", "GROUPS", "CALLS", "FAILURES", "DENIALS", "MEAN", "P95",
    ]  # fmt: skip
    assert lines[3].split()[:7] == ["read_note", "read", "custom", "notes", "1", "0", "0"]
    assert lines[4].split() == ["stats", "read", "custom", "notes", "0", "0", "0", "—", "—"]
    ip.run_line_magic("tools", "--kind edit")
    assert _out(capsys).strip() == "registry test: 0 tools\nNo tools."
    ip.run_line_magic("tools", "list --group notes")
    assert "read_note" in _out(capsys)


def test_tools_show_prints_the_card_or_one_format(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _out(capsys)
    ip.run_line_magic("tools", "show read_note")
    assert _out(capsys).startswith("read_note [read]")
    ip.run_line_magic("tools", "show read-note --format anthropic")
    data = json.loads(_out(capsys))
    assert data["name"] == "read_note"
    assert data["input_schema"]["required"] == ["path"]
    ip.run_line_magic("tools", "show read_note --format openai-strict")
    assert json.loads(_out(capsys))["function"]["strict"] is True


def test_tools_remove(ip: Any, registry: ToolRegistry, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("tools", "remove stats")
    assert "Removed tool 'stats'." in _out(capsys)
    assert registry.names() == ["read_note"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("frobnicate", "argument action: invalid choice: 'frobnicate'"),
        ("show", "%tools show needs a tool name"),
        ("remove", "%tools remove needs a tool name"),
        ("show nope", "no tool named 'nope'"),
        ("remove read_not", "Did you mean read_note?"),
        ("list read_note", "did you mean %tools show read_note?"),
        ("--kind magic", "unknown kind 'magic'; kinds: delete, edit"),
        ("--group nope", "no group 'nope'; groups: notes"),
        ("--format gemini", "--format goes with show"),
        ("show read_note --format yaml", "argument --format: invalid choice: 'yaml'"),
        ("show stats --format openai-strict", "Cannot export to OpenAI strict"),
        ("show read_note --kind read", "--kind and --group filter the list"),
    ],
)
def test_bad_tools_commands(ip: Any, line: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("tools", line)
    assert message in str(info.value)


# --------------------------------------------------------------------------- %policy


def test_policy_show_and_changes(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = get_session(ip).policy
    _out(capsys)
    ip.run_line_magic("policy", "")
    assert _out(capsys).startswith("Policy\n  profile: —")
    ip.run_line_magic("policy", "profile minimal")
    assert policy.profile == "minimal"
    assert "Policy profile: minimal" in _out(capsys)
    ip.run_line_magic("policy", "profile none")
    assert policy.profile is None
    ip.run_line_magic("policy", "deny group:notes kind:edit")
    assert policy.deny == ["group:notes", "kind:edit"]
    ip.run_line_magic("policy", "allow group:notes")
    assert policy.deny == ["kind:edit"]
    assert policy.allow == ["group:notes"]
    ip.run_line_magic("policy", f"paths add {tmp_path}")
    assert tmp_path.resolve() in policy.allowed_paths
    ip.run_line_magic("policy", "paths")
    assert str(tmp_path.resolve()) in _out(capsys)
    ip.run_line_magic("policy", f"paths remove {tmp_path}")
    assert tmp_path.resolve() not in policy.allowed_paths


def test_a_denied_tool_is_refused(ip: Any) -> None:
    ip.run_line_magic("policy", "deny read_note")
    handle = ip.run_line_magic("tool", "read_note path=a")
    assert handle.status == "denied"


def test_an_entry_that_matches_no_tool_gets_a_note(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _out(capsys)
    ip.run_line_magic("policy", "deny read_nte")
    out = _out(capsys)
    assert "Note: 'read_nte' matches no tool registered now (did you mean 'read_note'?)" in out
    assert get_session(ip).policy.deny == ["read_nte"]  # still applies to a later tool
    ip.run_line_magic("policy", "allow read_note group:nowhere")
    out = _out(capsys)
    assert "'read_note'" not in out.split("Note:", 1)[-1]
    assert "Note: 'group:nowhere' matches no tool registered now; it applies" in out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("profile nope", "unknown profile 'nope'; known profiles: coding, full, minimal"),
        ("deny kind:magic", "kind:magic"),
        ("paths remove /nowhere/at/all", "'/nowhere/at/all' is not an allowed path"),
        ("paths add /nowhere/at/all", "/nowhere/at/all"),
        ("frobnicate", "cannot read 'frobnicate'. Usage:"),
        ("allow", "cannot read 'allow'"),
        ("paths add 'x", "No closing quotation"),
    ],
)
def test_bad_policy_commands(ip: Any, line: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("policy", line)
    assert message in str(info.value)
    assert str(info.value).startswith("%policy:")


# --------------------------------------------------------------------------- %approval, %config


def test_approval_mode_follows_the_magic_and_config(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = get_session(ip).policy
    ip.run_line_magic("approval", "")
    assert "Approval mode: ask" in _out(capsys)
    ip.run_line_magic("approval", "DENY")
    assert policy.approval_mode == "deny"
    assert ip.magics_manager.registry["KodeMagics"].approval_mode == "deny"
    ip.run_line_magic("config", "KodeMagics.approval_mode = 'auto'")
    assert policy.approval_mode == "auto"
    with pytest.raises(UsageError, match="unknown mode 'sometimes'; use ask, auto or deny"):
        ip.run_line_magic("approval", "sometimes")


def test_settings_are_validated_and_limits_rebuild_the_executor(ip: Any) -> None:
    magics = ip.magics_manager.registry["KodeMagics"]
    session = get_session(ip)
    before = session.executor
    ip.run_line_magic("config", "KodeMagics.max_concurrency = 1")
    assert session.executor is not before
    assert session.executor.max_concurrency == 1
    ip.run_line_magic("config", "KodeMagics.max_concurrency = 0")
    assert session.executor.max_concurrency is None
    for line in (
        "update_rate = 0",
        "max_concurrency = -1",
        "approval_timeout = -2",
        "display_style = 'fancy'",
    ):
        ip.run_line_magic("config", f"KodeMagics.{line}")  # reported by %config, value kept
    assert (magics.update_rate, magics.approval_timeout, magics.display_style) == (
        20.0,
        0.0,
        "auto",
    )
    help_text = magics.class_get_help()
    for name in (
        "approval_mode",
        "max_concurrency",
        "update_rate",
        "display_style",
        "approval_timeout",
    ):
        assert f"KodeMagics.{name}" in help_text
