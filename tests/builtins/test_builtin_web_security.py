"""The ``web`` tools' defences: credentials across redirects, and checks of resolved addresses.

Real HTTP servers on 127.0.0.1; the only double is the DNS answer (``socket.getaddrinfo``) for
made-up ``.test`` names, so that a name can point at 127.0.0.1 without touching the hosts file.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import data_of

from kode_nb import AutoApprove, Executor, Policy, ToolRegistry, ToolResult
from kode_nb.builtins import WebConfig, register_builtins
from kode_nb.errors import ToolPermissionError

pytestmark = pytest.mark.anyio

SECRETS = {
    "Authorization": "Bearer s3cret-token-value",
    "Cookie": "session=abc",
    "Proxy-Authorization": "Basic cHJveHk6cHc=",
    "X-Api-Key": "key-123",
    "X-Auth-Token": "tok-456",
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def do_GET(self) -> None:
        if self.path == "/here":  # a redirect within the origin
            self.send_response(302)
            self.send_header("Location", "/echo")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/go"):  # redirect to the other server (or the same one)
            where = self.path.removeprefix("/go")
            self.send_response(302)
            self.send_header("Location", f"http://{self.server.other}{where or '/echo'}")  # type: ignore[attr-defined]
            self.send_header("Set-Cookie", "jar=from-first")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _start() -> tuple[ThreadingHTTPServer, threading.Thread]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    return httpd, thread


@pytest.fixture
def servers() -> Iterator[tuple[str, str]]:
    """Two real servers on 127.0.0.1 (different ports: different origins)."""
    (a, ta), (b, tb) = _start(), _start()
    first, second = (f"127.0.0.1:{s.server_address[1]}" for s in (a, b))
    a.other = second  # type: ignore[attr-defined]
    b.other = first  # type: ignore[attr-defined]
    try:
        yield first, second
    finally:
        for httpd, thread in ((a, ta), (b, tb)):
            httpd.shutdown()
            httpd.server_close()
            thread.join(5)


async def _call(registry: ToolRegistry, config: WebConfig, **arguments: Any) -> ToolResult:
    register_builtins(registry, ("web",), web=config)
    with Executor(registry, policy=Policy(), approver=AutoApprove()) as ex:
        return await ex.call("http_get", arguments)


def _seen(result: ToolResult) -> dict[str, str]:
    data = data_of(result)
    assert data["status"] == 200, data
    return json.loads(data["body"])  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- redirects


async def test_credentials_are_dropped_on_a_redirect_to_another_origin(
    registry: ToolRegistry, servers: tuple[str, str]
) -> None:
    first, second = servers
    config = WebConfig(allowed_hosts=[first, second])
    seen = _seen(
        await _call(registry, config, url=f"http://{first}/go", headers={**SECRETS, "X-Keep": "1"})
    )
    assert seen["host"] == second  # it did reach the other server
    assert seen["x-keep"] == "1"  # other headers still go
    for name in SECRETS:
        assert name.lower() not in seen, f"{name} was sent to {second}"
    assert "jar" not in seen.get("cookie", "")  # nor the cookie the first origin set


async def test_credentials_stay_on_a_redirect_within_the_origin(
    registry: ToolRegistry, servers: tuple[str, str]
) -> None:
    first, _ = servers
    config = WebConfig(allowed_hosts=[first])
    result = await _call(registry, config, url=f"http://{first}/here", headers=SECRETS)
    assert data_of(result)["url"] == f"http://{first}/echo"
    seen = _seen(result)
    for name, value in SECRETS.items():
        assert seen[name.lower()] == value


async def test_credentials_do_not_come_back_after_leaving_the_origin(
    registry: ToolRegistry, servers: tuple[str, str]
) -> None:
    first, second = servers
    config = WebConfig(allowed_hosts=[first, second])
    # first → second (/go/go) → first (/echo): once dropped, they stay dropped
    seen = _seen(await _call(registry, config, url=f"http://{first}/go/go", headers=SECRETS))
    assert seen["host"] == first
    assert "authorization" not in seen
    assert "x-api-key" not in seen


# --------------------------------------------------------------------------- addresses


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, list[str]]], list[str]]:
    """Answer ``getaddrinfo`` for made-up ``.test`` names; returns the names looked up."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def install(answers: dict[str, list[str]]) -> list[str]:
        def fake(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(host, str) and host.endswith(".test"):
                asked.append(host)
                if host not in answers or not answers[host]:
                    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
                address = answers[host].pop(0) if len(answers[host]) > 1 else answers[host][0]
                family = socket.AF_INET6 if ":" in address else socket.AF_INET
                return [(family, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]
            return real(host, port, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", fake)
        return asked

    return install


async def test_a_pattern_does_not_reach_loopback_through_a_name(
    registry: ToolRegistry, servers: tuple[str, str], dns: Any
) -> None:
    first, _ = servers
    port = first.rsplit(":", 1)[1]
    dns({"evil.example.test": ["127.0.0.1"]})
    for allowed in (["*.example.test"], ["*"]):
        result = await _call(
            registry, WebConfig(allowed_hosts=allowed), url=f"http://evil.example.test:{port}/echo"
        )
        assert result.status == "denied", result.text
        assert "resolves to 127.0.0.1, which is refused" in result.text
        assert "loopback or private address, reached through a host pattern" in result.text


async def test_metadata_address_is_refused_even_by_exact_name(
    registry: ToolRegistry, dns: Any
) -> None:
    dns({"metadata.test": ["169.254.169.254"], "mapped.test": ["::ffff:169.254.169.254"]})
    for host in ("metadata.test", "mapped.test"):
        result = await _call(registry, WebConfig(allowed_hosts=[host]), url=f"http://{host}/")
        assert result.status == "denied", result.text
        assert "169.254.169.254 is a link-local" in result.text
    literal = await _call(
        registry, WebConfig(allowed_hosts=["*"]), url="http://[::ffff:169.254.169.254]/"
    )
    assert literal.status == "denied"
    assert "link-local" in literal.text


async def test_exact_names_and_listed_addresses_reach_loopback(
    registry: ToolRegistry, servers: tuple[str, str], dns: Any
) -> None:
    first, _ = servers
    port = first.rsplit(":", 1)[1]
    dns({"app.test": ["127.0.0.1"]})
    by_name = await _call(
        registry, WebConfig(allowed_hosts=["app.test"]), url=f"http://app.test:{port}/echo"
    )
    assert _seen(by_name)["host"] == f"app.test:{port}"
    localhost = await _call(
        registry, WebConfig(allowed_hosts=["localhost"]), url=f"http://localhost:{port}/echo"
    )
    assert data_of(localhost)["status"] == 200
    by_address = await _call(
        registry,
        WebConfig(allowed_hosts=["*.test", f"127.0.0.1:{port}"]),
        url=f"http://app.test:{port}/echo",
    )
    assert data_of(by_address)["status"] == 200


async def test_the_connection_goes_to_the_checked_address(
    registry: ToolRegistry, servers: tuple[str, str], dns: Any
) -> None:
    """A second DNS answer (here 127.0.0.2, where nothing listens) is never used: the name is
    resolved once and the checked address connected to."""
    first, _ = servers
    port = first.rsplit(":", 1)[1]
    asked = dns({"rebind.test": ["127.0.0.1", "127.0.0.2"]})
    result = await _call(
        registry, WebConfig(allowed_hosts=["rebind.test"]), url=f"http://rebind.test:{port}/echo"
    )
    assert data_of(result)["status"] == 200
    assert asked == ["rebind.test"]


def test_address_rules() -> None:
    config = WebConfig(allowed_hosts=["*.corp.test", "db.test", "10.0.0.5:5432", "[fe80::1]"])
    ok = ipaddress.ip_address
    config.check_addresses("www.corp.test", 443, [ok("93.184.216.34")])
    config.check_addresses("db.test", 80, [ok("10.1.2.3"), ok("::1")])
    config.check_addresses("x.corp.test", 5432, [ok("10.0.0.5")])
    config.check_addresses("x.corp.test", 80, [ok("fe80::1")])
    refused = [
        ("x.corp.test", 80, "10.0.0.5"),  # listed for another port only
        ("x.corp.test", 80, "192.168.1.1"),
        ("x.corp.test", 80, "fd00::1"),
        ("x.corp.test", 80, "100.64.0.1"),
        ("x.corp.test", 80, "::ffff:127.0.0.1"),
        ("db.test", 80, "169.254.169.254"),
        ("db.test", 80, "0.0.0.0"),
        ("db.test", 80, "fe80::2"),
    ]
    for host, port, address in refused:
        with pytest.raises(ToolPermissionError, match="which is refused"):
            config.check_addresses(host, port, [ok("93.184.216.34"), ok(address)])
