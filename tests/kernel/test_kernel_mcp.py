"""``%mcp`` in a real kernel: config servers connect in the background at load, ``%mcp serve``
serves the notebook's tools to a real MCP client (run in a thread of the test process, not in
the kernel), approval prompts for outside calls are clicked in the ``%mcp serve`` cell's output,
and ``%mcp stop`` / kernel shutdown leave no port bound and no server process behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.client  # noqa: F401  (a dependency of kode_nb: missing, these tests fail, never skip)
import pytest

from .harness import Kernel

DEMO = Path(__file__).resolve().parents[2] / "notebooks" / "mcp_demo_server.py"

CONFIG = f"""\
[other]
ignored = true

[mcp.servers.demo]
command = [{json.dumps(sys.executable)}, {json.dumps(str(DEMO))}]
trust = true

[mcp.servers.broken]
command = ["/nonexistent/mcp-server"]
connect_timeout = 5
"""

WRITER = '''%%tool --kind edit
WROTE = []

def write_note(title: str, text: str) -> str:
    """Write a note.

    Args:
        title: Its title.
        text: What to write.
    """
    WROTE.append(title)
    return f"wrote {title}"
'''


def _start(tmp: Path) -> Kernel:
    (tmp / "kode_nb.toml").write_text(CONFIG, encoding="utf-8")
    return Kernel(tmp)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    k = _start(tmp_path_factory.mktemp("mcp-kernel"))
    try:
        yield k
    finally:
        k.close()


def _port_free(port: int) -> bool:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        sock.close()


AUTH: dict[str, str] = {}
"""The headers the served notebook wants (its bearer token), set by the ``served`` fixture."""


class ClientCall:
    """One MCP ``tools/call`` made by the SDK's client from a thread of the test process."""

    def __init__(self, url: str, tool: str, arguments: dict[str, Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(url, tool, arguments))
        self.thread.start()

    def _run(self, url: str, tool: str, arguments: dict[str, Any]) -> None:
        import httpx2
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async def go() -> Any:
            async with (
                httpx2.AsyncClient(headers=AUTH) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool(tool, arguments)

        try:
            self.result = asyncio.run(go())
        except BaseException as exc:  # reported by wait()
            self.error = exc

    def wait(self, timeout: float = 30) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the MCP client got no answer"
        if self.error is not None:
            raise self.error
        return self.result


class ClientWatch:
    """An SDK client, in a thread of the test process, that stays connected and counts the
    ``notifications/tools/list_changed`` it gets; :meth:`close` returns the tools listed then."""

    def __init__(self, url: str) -> None:
        self.changes = 0
        self.names: list[str] = []
        self.error: BaseException | None = None
        self._done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(url,))
        self.thread.start()

    def _run(self, url: str) -> None:
        import httpx2
        import mcp_types as mt
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async def heard(message: Any) -> None:
            if isinstance(message, mt.ToolListChangedNotification):
                self.changes += 1

        async def go() -> None:
            async with (
                httpx2.AsyncClient(headers=AUTH) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write, message_handler=heard) as session,
            ):
                await session.initialize()
                await asyncio.to_thread(self._done.wait)
                self.names = [t.name for t in (await session.list_tools()).tools]

        try:
            asyncio.run(go())
        except BaseException as exc:  # reported by close()
            self.error = exc

    def heard(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.changes and time.monotonic() < deadline:
            time.sleep(0.02)
        return bool(self.changes)

    def close(self) -> list[str]:
        self._done.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the MCP client did not finish"
        if self.error is not None:
            raise self.error
        return self.names


def test_config_servers_connect_in_the_background_at_load(kernel: Kernel) -> None:
    load = kernel.ok("%load_ext kode_nb")
    # the cell returned while the servers were still connecting; the next cell waits for them
    kernel.ok("from kode_nb.magics import get_session\nmcp = get_session().mcp")
    assert kernel.value("mcp.states['demo']") == "connected"
    kernel.ok("states = await mcp.ready()")
    assert kernel.value("states['demo']") == "connected"
    assert kernel.value("states['broken']").startswith("failed: ")
    report = kernel.wait_for(
        lambda m: (
            m["msg_type"] == "stream" and "MCP servers from kode_nb.toml" in m["content"]["text"]
        )
    )
    assert report["parent_header"]["msg_id"] == load.msg_id  # shown under %load_ext
    text = report["content"]["text"]
    assert "demo (3 tools)" in text
    assert "broken failed (" in text
    listing = kernel.ok("%mcp list").text()
    assert "demo    connected" in listing
    assert "broken  failed" in listing


def test_a_connected_servers_tool_streams_progress(kernel: Kernel) -> None:
    rows = [line.split()[:3] for line in kernel.ok("%mcp tools demo").text().splitlines()]
    assert ["count_slowly", "read", "yes"] in rows  # trusted in the config file
    kernel.ok("h = %tool count_slowly steps=3 delay=0.05")
    kernel.ok("r = await h")
    assert kernel.value("r.text") == "counted to 3"
    lines = ["[1/3] step 1 of 3", "[2/3] step 2 of 3", "[3/3] step 3 of 3"]
    assert kernel.value("h.view.text.splitlines()") == repr(lines)


def test_connect_reports_in_the_cell_and_disconnect_removes_the_tools(kernel: Kernel) -> None:
    run = kernel.ok(f"%mcp connect again -- {sys.executable} {DEMO}")
    # the cell waited for the connection: its output is the outcome, no "connecting…" line
    assert run.stdout.startswith("MCP server 'again': connected, 3 tools")
    assert not run.outputs
    # the names clashed with demo's tools, so they are prefixed; the next cell sees them
    assert "again_word_count" in kernel.ok("%mcp tools again").text()
    out = kernel.ok("%mcp disconnect again").stdout
    assert "Disconnected MCP server 'again' (3 tools removed)" in out
    assert kernel.value("get_session().registry.has('again_word_count')") == "False"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%mcp frobnicate", "unknown subcommand 'frobnicate'"),
        ("%mcp connect", "needs a server NAME"),
        ("%mcp connect x --", "give the command after '--'"),
        ("%mcp connect x ftp://host/mcp", "'ftp://host/mcp' is not a URL"),
        ("%mcp connect 9bad http://127.0.0.1:1/mcp", "bad MCP server name"),
        ("%mcp connect demo http://127.0.0.1:1/mcp", "'demo' is already connected"),
        ("%mcp tools nosuch", "no MCP server named 'nosuch'; servers: demo, broken"),
        ("%mcp tools", "needs one server NAME"),
        ("%mcp disconnect nosuch", "no MCP server named 'nosuch'"),
        ("%mcp tools broken", "MCP server 'broken' is failed: "),
        ("%mcp stop", "nothing is being served"),
        ("%mcp serve --port x", "argument --port: invalid int value"),
        ("%mcp serve --port 70000", "--port must be 0..65535"),
        ("%mcp list extra", "takes no arguments"),
    ],
)
def test_bad_input_is_a_usage_error(kernel: Kernel, line: str, message: str) -> None:
    run = kernel.run(line)
    assert run.status == "error"
    assert message in run.error_text, run.error_text


def test_serving_a_port_in_use_is_a_usage_error(kernel: Kernel) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        run = kernel.run(f"%mcp serve --port {port}")
        assert run.status == "error"
        assert f"port {port} on 127.0.0.1 is in use" in run.error_text
    finally:
        taken.close()


@pytest.fixture(scope="module")
def served(kernel: Kernel) -> Iterator[str]:
    """The notebook's write_note tool served over MCP; yields the URL."""
    kernel.ok(WRITER)
    run = kernel.ok("srv = %mcp serve --tools write_note\nawait srv")
    assert "MCP server starting: 1 tool (write_note) at http://127.0.0.1:" in run.text()
    url = kernel.value("srv.url")
    AUTH.clear()
    # printed, the token is redacted like every registered secret; the panel shows it
    assert kernel.value("srv.token") == "[REDACTED]"
    shown = kernel.run("srv").text()  # the panel shows the token, and a client config
    found = re.search(r"Authorization: Bearer (\S+)", shown)
    assert found is not None
    assert found.group(1) != "[REDACTED]"
    AUTH["Authorization"] = f"Bearer {found.group(1)}"
    assert '"mcpServers"' in shown
    assert "already serving" in kernel.run("%mcp serve").error_text
    yield url
    kernel.ok("%mcp stop")


def test_the_token_is_never_in_widget_state_while_serving(
    kernel: Kernel, served: str, tmp_path: Path
) -> None:
    """What a front end saves as widget state (every model's state, as the kernel sent it and as
    ipywidgets reports it) holds no token while the server serves; the token is shown in a
    plain output of the serve cell instead."""
    token = AUTH["Authorization"].removeprefix("Bearer ")
    assert len(token) >= 16
    sent = [
        m["content"]["data"].get("state", {})
        for m in kernel.log
        if m["msg_type"] in ("comm_open", "comm_msg")
        and isinstance(m["content"].get("data"), dict)
    ]  # fmt: skip
    assert sent  # the panel's models were sent
    assert token not in json.dumps(sent)
    state = tmp_path / "widget-state.json"  # written by the kernel, not printed (printing redacts)
    kernel.ok(
        "import json, pathlib, ipywidgets\n"
        f"pathlib.Path({str(state)!r}).write_text("
        "json.dumps(ipywidgets.Widget.get_manager_state(drop_defaults=False)))"
    )
    saved = state.read_text()
    assert "MCP server" in saved  # the panel's header is in it...
    assert token not in saved  # ...without the token
    outputs = [
        m["content"]["data"]
        for m in kernel.log
        if m["msg_type"] in ("display_data", "update_display_data")
        and "application/vnd.jupyter.widget-view+json" not in m["content"]["data"]
    ]  # fmt: skip
    assert any(token in json.dumps(o) for o in outputs)  # shown, outside widget state


@pytest.mark.parametrize("button", ["Approve", "Deny"])
def test_an_outside_call_asks_in_the_serve_cell(kernel: Kernel, served: str, button: str) -> None:
    start = len(kernel.log)
    call = ClientCall(served, "write_note", {"title": button, "text": "hi"})
    kernel.click(kernel.button(button, start, timeout=30))
    result = call.wait()
    ran = kernel.value(f"{button!r} in WROTE")
    if button == "Approve":
        assert not result.is_error
        assert result.content[0].text == "wrote Approve"
        assert ran == "True"
    else:
        assert result.is_error
        assert "denied" in result.content[0].text.lower()
        assert ran == "False"
    # the prompt was inside the call's view, inside the panel %mcp serve displayed
    view = "srv._panel.children[-1]"
    assert kernel.value(f"type({view}).__name__") == "_ServedCallView"
    assert kernel.value(f"{view}.prompt.decision.approved") == str(button == "Approve")
    assert kernel.value(f"{view}.call_id.startswith('mcp_')") == "True"
    assert kernel.value("srv.results[-1].status") == ("ok" if button == "Approve" else "denied")


def test_the_server_object_decides_like_the_buttons(kernel: Kernel, served: str) -> None:
    call = ClientCall(served, "write_note", {"title": "by-api", "text": "hi"})
    kernel.ok("assert await srv.approval(timeout=30)")
    assert kernel.value("srv.approve()") == "True"
    assert call.wait().content[0].text == "wrote by-api"
    assert kernel.value("srv.approve()") == "False"  # nothing waits any more


def test_running_a_served_tool_cell_again_tells_connected_clients(
    kernel: Kernel, served: str
) -> None:
    watch = ClientWatch(served)
    try:
        # the client's notification stream opens just after its handshake: until it is open, a
        # change reaches nobody, so the cell is run again until the client hears of it
        assert any(kernel.ok(WRITER) and watch.heard(0.5) for _ in range(40))
        time.sleep(0.3)
        heard = watch.changes
        kernel.ok(
            '%%tool --kind read\ndef not_served() -> str:\n    """Not served."""\n    return ""'
        )
        time.sleep(0.5)
        assert watch.changes == heard  # outside --tools write_note: not announced
    finally:
        names = watch.close()
    assert names == ["write_note"]


def test_stop_frees_the_port(kernel: Kernel, served: str) -> None:
    port = int(served.split(":")[2].split("/")[0])
    assert not _port_free(port)
    assert kernel.ok("%mcp stop").stdout.strip() == f"Stopped serving {served}."
    assert _port_free(port)
    assert "nothing is being served" in kernel.run("%mcp stop").error_text
    kernel.ok("srv = %mcp serve --tools write_note\nawait srv")  # again, for the fixture's stop


def _children_running(pid: int, needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and needle in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z":
            found.append(int(entry.name))
    return found


def test_kernel_shutdown_stops_servers_and_frees_the_port(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    k = _start(tmp_path_factory.mktemp("mcp-shutdown"))
    try:
        k.ok("%load_ext kode_nb\nfrom kode_nb.magics import get_session")
        k.ok("srv = %mcp serve\nawait srv")
        port = int(k.value("srv.port"))
        pid = int(k.value("__import__('os').getpid()"))
        assert _children_running(pid, "mcp_demo_server.py")
        assert not _port_free(port)
    finally:
        k.kc.stop_channels()
        k.km.shutdown_kernel(now=False)  # a shutdown_request, as a front end sends
    deadline = time.monotonic() + 15
    while _children_running(pid, "mcp_demo_server.py") or os.path.exists(f"/proc/{pid}/stat"):
        assert time.monotonic() < deadline, "the kernel or its MCP server process is still running"
        time.sleep(0.1)
    assert _port_free(port)
