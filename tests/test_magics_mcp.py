"""``%mcp`` in terminal IPython (no running loop: each command runs to completion), the config
file lookup at load, and teardown on unload. The kernel side is in tests/kernel/test_kernel_mcp.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.client  # noqa: F401  (a dependency of kode_nb: missing, these tests fail, never skip)
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from kode_nb import AutoApprove, Executor, ToolRegistry
from kode_nb.magics import get_session
from kode_nb.magics.mcp_magics import CONFIG_FILES, find_config, read_config

DEMO = Path(__file__).resolve().parent.parent / "notebooks" / "mcp_demo_server.py"
COMMAND = f"{sys.executable} {DEMO}"
CHANGING = Path(__file__).resolve().parent / "mcp" / "servers" / "changing.py"
EXT = "kode_nb"


def _config(servers: str = "demo") -> str:
    return f"[{servers}]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(DEMO))}]\n"


@pytest.fixture
def ip(registry: ToolRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.chdir(tmp_path)
    start_ipython()
    shell = InteractiveShell.instance()
    yield shell
    if "KodeMagics" in shell.magics_manager.registry:
        shell.run_line_magic("unload_ext", EXT)
    shell.config.pop("KodeMagics", None)


def _load(shell: Any) -> Any:
    shell.run_line_magic("load_ext", EXT)
    return get_session(shell)


def test_connect_list_tools_call_disconnect(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    session = _load(ip)
    ip.run_line_magic("mcp", f"connect demo -- {COMMAND}")
    out = capsys.readouterr().out
    assert out == "MCP server 'demo': connected, 3 tools: count_slowly, forget_note, word_count\n"
    ip.run_line_magic("mcp", "list")
    listing = capsys.readouterr().out.splitlines()
    assert listing[:2] == ["MCP servers", "SERVER  STATE      TRANSPORT  TOOLS"]
    assert listing[3].split() == ["demo", "connected", "stdio", "3"]
    ip.run_line_magic("mcp", "tools demo")
    rows = [line.split()[:3] for line in capsys.readouterr().out.splitlines()[3:]]
    assert rows == [
        ["count_slowly", "read", "no"], ["forget_note", "delete", "no"], ["word_count", "read", "no"]
    ]  # fmt: skip
    ip.run_line_magic("mcp", "trust demo word_count")
    assert capsys.readouterr().out == (
        "Trusting MCP server 'demo': tools word_count. Trusted now: word_count.\n"
    )
    handle = ip.run_line_magic("tool", 'word_count text="one two three"')
    assert handle.result().text == "3"
    assert session.registry.get("word_count").category.value == "mcp"
    ip.run_line_magic("mcp", "disconnect demo")
    assert "Disconnected MCP server 'demo' (3 tools removed)." in capsys.readouterr().out
    assert not session.registry.has("word_count")
    ip.run_line_magic("mcp", "")  # no subcommand: list
    assert capsys.readouterr().out.startswith("MCP servers\nNo MCP servers")


def test_trust_and_untrust(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    session = _load(ip)
    ip.run_line_magic("mcp", f"connect demo -- {COMMAND}")
    headless = Executor(session.registry)  # no approver: what asks is denied
    call = session.mcp._run
    assert call(headless.call("word_count", {"text": "a b"})).status == "denied"
    for line, message in (
        ("trust", "needs a server NAME"),
        ("trust nosuch", "no MCP server named 'nosuch'"),
        ("trust demo drop_database", "no tool 'drop_database' on that server; its tools: "),
    ):
        with pytest.raises(UsageError, match=message):
            ip.run_line_magic("mcp", line)
    capsys.readouterr()
    ip.run_line_magic("mcp", "trust demo")
    assert capsys.readouterr().out == (
        "Trusting MCP server 'demo': all its tools. "
        "Trusted now: count_slowly, forget_note, word_count.\n"
    )
    assert call(headless.call("word_count", {"text": "a b"})).text == "2"
    assert call(headless.call("forget_note", {"title": "x"})).status == "denied"  # destructive
    ip.run_line_magic("mcp", "untrust demo word_count")
    assert "Trusted now: count_slowly, forget_note." in capsys.readouterr().out
    assert call(headless.call("word_count", {"text": "a b"})).status == "denied"
    ip.run_line_magic("mcp", "disconnect demo")


def test_list_says_when_refreshing_a_servers_tools_failed(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _load(ip)
    ip.run_line_magic("mcp", f"connect ch -- {sys.executable} {CHANGING}")
    connection = session.mcp.manager["ch"]
    calls = Executor(session.registry, approver=AutoApprove())
    # the server's tools/list fails from now on, and it says its tools changed: the refresh
    # (a task on the session's loop, which runs while a command runs) fails
    assert session.mcp._run(calls.call("break_listing")).text == "broken"
    session.mcp._run(connection.tools_refreshed())
    capsys.readouterr()
    ip.run_line_magic("mcp", "list")
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].split() == ["ch", "connected", "stdio", "11"]
    assert lines[4] == (
        "ch: tools refresh failed: listing its tools failed: error -32603: the tool catalogue "
        "is being rebuilt (the tools listed before stay)"
    )
    assert session.mcp._run(calls.call("fix_listing")).text == "fixed"
    session.mcp._run(connection.tools_refreshed())
    ip.run_line_magic("mcp", "list")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines[3:]] == [["ch", "connected", "stdio", "12"]]  # no note


def test_a_server_that_cannot_start_is_reported_and_can_be_retried(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _load(ip)
    ip.run_line_magic("mcp", "connect gone -- /nonexistent/mcp-server")
    assert capsys.readouterr().out.startswith("MCP server 'gone': could not connect: ")
    assert session.mcp.states["gone"].startswith("failed: ")
    with pytest.raises(UsageError, match="MCP server 'gone' is failed"):
        ip.run_line_magic("mcp", "tools gone")
    ip.run_line_magic("mcp", f"connect gone -- {COMMAND}")  # a failed name may be reused
    assert session.mcp.states["gone"] == "connected"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("bogus", r"unknown subcommand 'bogus'\. Usage: %mcp connect"),
        ("connect", "needs a server NAME"),
        ("connect -- x", "needs a server NAME"),
        ("connect x", "give a URL, or '--' and a command"),
        ("connect x a b", "give a URL, or '--' and a command"),
        ("connect x --", "give the command after '--'"),
        ("connect x 127.0.0.1:80", "'127.0.0.1:80' is not a URL"),
        ("connect x http://", "'http://' is not a URL"),
        ("connect 'a b' http://127.0.0.1:1/mcp", "bad MCP server name"),
        ("tools", "needs one server NAME"),
        ("tools a b", r"needs one server NAME \(got 2 words\)"),
        ("tools nope", "no MCP server named 'nope'; servers: none"),
        ("disconnect nope", "no MCP server named 'nope'"),
        ("stop", "nothing is being served"),
        ("serve", "needs a running event loop"),
        ("list x", "takes no arguments"),
        ("connect x 'unclosed", "cannot parse the line"),
    ],
)
def test_bad_input_is_a_usage_error(ip: Any, line: str, message: str) -> None:
    _load(ip)
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("mcp", line)


def test_the_config_file_connects_at_the_first_command_in_a_terminal(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kode_nb.toml").write_text(
        "[project]\nname = 'x'\n\n" + _config("mcp.servers.demo"), encoding="utf-8"
    )
    session = _load(ip)
    assert capsys.readouterr().out == ""  # nothing connected (no loop to do it in the background)
    assert session.mcp.states == {}
    ip.run_line_magic("mcp", "list")
    out = capsys.readouterr().out
    assert out.startswith("kode_nb MCP servers from kode_nb.toml: demo (3 tools)\n")
    assert session.registry.has("count_slowly")


def test_the_mcp_config_setting_names_the_file(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "servers.toml").write_text(_config("servers.mine"), encoding="utf-8")
    ip.run_line_magic("config", "KodeMagics.mcp_config = 'servers.toml'")
    session = _load(ip)
    ip.run_line_magic("mcp", "list")
    assert "kode_nb MCP servers from servers.toml: mine (3 tools)" in capsys.readouterr().out
    assert session.mcp.states == {"mine": "connected"}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("kode_nb.toml", "[mcp.servers.x]\nurl = 'ftp://x'\n", "url must start with http://"),
        ("kode_nb.toml", "not toml = = 1", "kode_nb.toml"),
        (".kode_nb/mcp.toml", "[servers.x]\nport = 1\n", "unknown key(s) 'port'"),
    ],
)
def test_a_broken_config_file_is_one_line_and_the_load_goes_on(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, message: str
) -> None:
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text(text, encoding="utf-8")
    _load(ip)
    out = capsys.readouterr().out
    assert out.startswith("kode_nb: MCP config not loaded: ")
    assert message in out
    assert out.count("\n") == 1
    assert "KodeMagics" in ip.magics_manager.registry


def test_find_config_order(tmp_path: Path) -> None:
    assert CONFIG_FILES == (".kode_nb/mcp.toml", "kode_nb.toml")
    assert find_config("", tmp_path) is None
    (tmp_path / "kode_nb.toml").write_text("", encoding="utf-8")
    assert find_config("", tmp_path) == tmp_path / "kode_nb.toml"
    (tmp_path / ".kode_nb").mkdir()
    (tmp_path / ".kode_nb" / "mcp.toml").write_text("", encoding="utf-8")
    assert find_config("", tmp_path) == tmp_path / ".kode_nb" / "mcp.toml"
    assert find_config("other.toml", tmp_path) == tmp_path / "other.toml"
    assert find_config("/abs/x.toml", tmp_path) == Path("/abs/x.toml")
    assert read_config(tmp_path / "kode_nb.toml") == {}  # no [mcp] table: no servers


def test_unload_disconnects_every_server(ip: Any) -> None:
    session = _load(ip)
    ip.run_line_magic("mcp", f"connect demo -- {COMMAND}")
    connection = session.mcp.manager.get("demo")
    assert connection is not None
    assert connection.connected
    ip.run_line_magic("unload_ext", EXT)
    assert not connection.connected
    assert not session.registry.has("word_count")
    assert session.mcp.states == {}
