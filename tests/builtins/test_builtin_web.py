"""The ``web`` built-ins against a real HTTP server on 127.0.0.1 (loopback only)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import data_of

from kode_nb import AutoApprove, Executor, Policy, ToolRegistry, ToolResult
from kode_nb.builtins import WebConfig, register_builtins, web_tools
from kode_nb.errors import ConfigurationError, ToolPermissionError

pytestmark = pytest.mark.anyio

BIG = 2 * 1024 * 1024


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    release: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path
        if path == "/text":
            self._send(200, b"hello", {
                "Content-Type": "text/plain", "Set-Cookie": "session=abc", "X-Custom": "yes",
            })  # fmt: skip
        elif path == "/big":
            self._send(200, b"a" * BIG, {"Content-Type": "text/plain"})
        elif path == "/slow":
            self.server.release.wait(10)
            self._send(200, b"late")
        elif path == "/binary":
            self._send(200, b"\x00\x01\x02\xff", {"Content-Type": "application/octet-stream"})
        elif path == "/latin":
            self._send(
                200, "café".encode("latin-1"), {"Content-Type": "text/plain; charset=iso-8859-1"}
            )
        elif path == "/redirect":
            self._send(302, b"", {"Location": "/text"})
        elif path == "/away":
            self._send(302, b"", {"Location": "http://elsewhere.invalid/x"})
        elif path == "/loop":
            self._send(302, b"", {"Location": "/loop"})
        else:
            self._send(404, b"no such page", {"Content-Type": "text/plain"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        echo = {"method": self.command, "body": body, "type": self.headers.get("Content-Type")}
        self._send(201, json.dumps(echo).encode(), {"Content-Type": "application/json"})

    do_PUT = do_POST
    do_DELETE = do_POST


@pytest.fixture
def server() -> Iterator[str]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.release = threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


async def _call(
    registry: ToolRegistry, name: str, config: WebConfig, **arguments: Any
) -> ToolResult:
    register_builtins(registry, ("web",), web=config)
    with Executor(registry, policy=Policy(), approver=AutoApprove()) as ex:
        return await ex.call(name, arguments)


_data = data_of


async def test_no_host_is_allowed_by_default(registry: ToolRegistry, server: str) -> None:
    result = await _call(registry, "http_get", WebConfig(), url=f"http://{server}/text")
    assert result.status == "denied"
    assert "no hosts are allowed" in result.text
    assert "register_builtins(allowed_hosts=" in result.text


async def test_get_from_an_allowed_host_redacts_cookies(
    registry: ToolRegistry, server: str
) -> None:
    config = WebConfig(allowed_hosts=[server])
    data = _data(await _call(registry, "http_get", config, url=f"http://{server}/text"))
    assert data["status"] == 200
    assert data["body"] == "hello"
    assert data["headers"]["Set-Cookie"] == "<redacted>"
    assert data["headers"]["X-Custom"] == "yes"
    assert "truncated" not in data


async def test_other_ports_and_hosts_are_denied(registry: ToolRegistry, server: str) -> None:
    config = WebConfig(allowed_hosts=["127.0.0.1:1"])
    result = await _call(registry, "http_get", config, url=f"http://{server}/text")
    assert result.status == "denied"
    assert f"Host {server} is not in the allowed hosts (127.0.0.1:1)" in result.text


def test_host_patterns() -> None:
    config = WebConfig(allowed_hosts=["*.example.com", "plain.org", "[::1]:8000", "LOCALHOST:*"])
    config.check_url("https://api.example.com/x")
    config.check_url("http://plain.org:8080/")
    config.check_url("http://[::1]:8000/")
    config.check_url("http://localhost:1234/")
    for url in ("https://example.com/", "http://[::1]:8001/", "http://evil.org/"):
        with pytest.raises(ToolPermissionError, match="not in the allowed hosts"):
            config.check_url(url)
    WebConfig(allowed_hosts=["*"]).check_url("http://anything.test/")
    for bad in (["http://x.com"], ["x.com:99999"], [""]):
        with pytest.raises(ConfigurationError, match="allowed_hosts entry"):
            WebConfig(allowed_hosts=bad)
    with pytest.raises(ConfigurationError, match="list of host patterns"):
        WebConfig(allowed_hosts="x.com")
    with pytest.raises(ConfigurationError, match="timeout"):
        WebConfig(timeout=0)


async def test_redirects_are_followed_and_checked(registry: ToolRegistry, server: str) -> None:
    config = WebConfig(allowed_hosts=[server], max_redirects=3)
    data = _data(await _call(registry, "http_get", config, url=f"http://{server}/redirect"))
    assert data["url"] == f"http://{server}/text"
    assert data["body"] == "hello"
    away = await _call(registry, "http_get", config, url=f"http://{server}/away")
    assert away.status == "denied"
    assert "redirects to http://elsewhere.invalid/x, which is refused" in away.text
    loop = _data(await _call(registry, "http_get", config, url=f"http://{server}/loop"))
    assert loop["status"] == 302


async def test_body_over_the_size_limit_is_truncated(registry: ToolRegistry, server: str) -> None:
    config = WebConfig(allowed_hosts=[server], max_bytes=1000)
    data = _data(await _call(registry, "http_get", config, url=f"http://{server}/big"))
    assert data["body"] == "a" * 1000
    assert (
        data["truncated"]
        == "only the first 1000 bytes of 2.0 MiB of the body was read (the size limit)"
    )
    default = _data(
        await _call(
            registry, "http_get", WebConfig(allowed_hosts=[server]), url=f"http://{server}/big"
        )
    )
    assert len(default["body"]) == 1024 * 1024


async def test_slow_server_times_out(registry: ToolRegistry, server: str) -> None:
    config = WebConfig(allowed_hosts=[server], timeout=0.2)
    started = time.monotonic()
    result = await _call(registry, "http_get", config, url=f"http://{server}/slow")
    assert time.monotonic() - started < 3
    assert result.status == "timed_out"
    assert "timed out after 0.2 s" in result.text
    assert "/slow got no complete response" in result.text


async def test_binary_text_and_error_statuses(registry: ToolRegistry, server: str) -> None:
    config = WebConfig(allowed_hosts=[server])
    binary = _data(await _call(registry, "http_get", config, url=f"http://{server}/binary"))
    assert binary["body_base64"] == "AAEC/w=="
    assert "binary body" in binary["note"]
    latin = _data(await _call(registry, "http_get", config, url=f"http://{server}/latin"))
    assert latin["body"] == "café"
    missing = _data(await _call(registry, "http_get", config, url=f"http://{server}/nope"))
    assert missing["status"] == 404
    assert missing["body"] == "no such page"


async def test_post_and_request_send_bodies(registry: ToolRegistry, server: str) -> None:
    config = WebConfig(allowed_hosts=[server])
    posted = _data(
        await _call(
            registry, "http_post", config, url=f"http://{server}/echo", body='{"a": 1}',
            headers={"Content-Type": "application/json"},
        )
    )  # fmt: skip
    assert posted["status"] == 201
    assert json.loads(posted["body"]) == {
        "method": "POST",
        "body": '{"a": 1}',
        "type": "application/json",
    }
    put = _data(
        await _call(
            registry, "http_request", config, method="PUT", url=f"http://{server}/e", body="x"
        )
    )
    assert json.loads(put["body"])["method"] == "PUT"


async def test_bad_urls_and_unreachable_servers(registry: ToolRegistry) -> None:
    config = WebConfig(allowed_hosts=["127.0.0.1"])
    bad = await _call(registry, "http_get", config, url="ftp://127.0.0.1/x")
    assert "expected http:// or https://" in bad.text
    refused = await _call(registry, "http_get", config, url="http://127.0.0.1:1/")
    assert refused.status == "error"
    assert "GET http://127.0.0.1:1/ failed: ConnectError" in refused.text


def test_reads_run_and_writes_ask() -> None:
    policy = Policy()
    decisions = {t.name: (t.kind.value, policy.approval_for(t, {})[0]) for t in web_tools()}
    assert decisions == {
        "http_get": ("fetch", "auto"),
        "http_post": ("execute", "ask"),
        "http_request": ("execute", "ask"),
    }
    post = next(t for t in web_tools() if t.name == "http_post")
    assert post.preview is not None
    assert (
        post.preview({"url": "http://x/", "body": "abc"}, None)
        == "POST http://x/ (body: 3 characters)"
    )
