"""Built-in ``web`` tools (``group:web``): HTTP requests over httpx, to allowed hosts only.

============ ======= =========================================================================
http_get     fetch   GET a URL (runs without asking: reads only)
http_post    execute POST a body (asks by default: it may change things on the server)
http_request execute any method; asks by default whatever the method (use http_get to read)
============ ======= =========================================================================

**Allowed hosts.** No host is allowed until configured, with :class:`WebConfig` or
``register_builtins(allowed_hosts=[...])``. Entries are ``host`` (any port), ``host:port``,
``[v6addr]:port`` or globs such as ``*.example.com`` (subdomains only; list ``example.com`` too)
or ``*`` (everything). Redirects are followed by hand, up to ``max_redirects``, and every hop is
checked against the same list. A host name is resolved once and every address it resolves to is
checked too, and the connection goes to a checked address: a pattern (``*``,
``*.example.com``) never reaches a loopback or private address, and a link-local one (the cloud
metadata service ``169.254.169.254``) only when that address is listed (rules in
:mod:`kode_nb.builtins._addresses`). With ``trust_env=True`` and a proxy, the proxy resolves the
names (only the host name check applies).

**Credentials stay with their origin.** When a redirect leads to another origin (scheme, host or
port), ``Authorization``, ``Proxy-Authorization``, ``Cookie`` and any other credential-like
header the call gave (``X-Api-Key``, ``X-Auth-Token``...) are dropped, and so are the cookies
that earlier hops set, as curl, requests, httpx and browsers do.

**Limits.** The response body is streamed and cut at ``max_bytes`` (the result says so); the
whole exchange must finish within ``timeout`` seconds (status ``timed_out`` otherwise).

**Results** are JSON: ``url`` (after redirects), ``status``, ``reason``, ``headers``
(``Authorization``, ``Cookie``, ``Set-Cookie``... redacted; request headers like these are
redacted in approvals and events too), ``body`` (text, decoded with the
response's charset) or, for a binary body, ``body_base64``; ``truncated`` when the body was cut.
An HTTP error status (404, 500) is a normal result, not a failed call.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from kode_nb.builtins._addresses import CheckedBackend, IPAddress, address_refusal, ip_literal
from kode_nb.builtins._common import (
    SENSITIVE_HEADERS,
    is_secret_name,
    make_tool,
    redact_headers,
    redact_mapping,
)
from kode_nb.builtins._files import describe_size
from kode_nb.errors import ConfigurationError, ToolError, ToolPermissionError, ToolTimeoutError
from kode_nb.tools._model import Tool
from kode_nb.types import ToolContext

if TYPE_CHECKING:
    import httpx

__all__ = ["WebConfig", "web_tools"]

Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_TEXT_TYPES = ("text/", "json", "xml", "javascript", "x-www-form-urlencoded", "yaml", "csv")
_GLOB = re.compile(r"[*?\[]")
_HOW_TO_ALLOW = (
    "Allow hosts with register_builtins(allowed_hosts=['api.example.com', '127.0.0.1:8000']) "
    "or web_tools(WebConfig(allowed_hosts=[...]))."
)


def _parse_host(entry: str) -> tuple[str, int | None]:
    """``(host glob, port or None for any)`` of one allowed-hosts entry."""
    text = entry.strip().lower() if isinstance(entry, str) else ""
    if not text or "/" in text:
        raise ConfigurationError(
            f"allowed_hosts entry {entry!r} must be 'host', 'host:port' or a glob such as "
            "'*.example.com' (no scheme or path)"
        )
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if port in ("", "*"):
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"allowed_hosts entry {entry!r}: bad port {port!r}")
    return host, int(port)


@dataclass(frozen=True, kw_only=True)
class WebConfig:
    """Where the ``web`` tools may connect, and their limits."""

    allowed_hosts: Sequence[str] = ()
    """Host patterns that may be contacted; empty (the default) allows none."""
    max_bytes: int = 1024 * 1024
    """The most body bytes read from a response; the rest is cut (and the result says so)."""
    timeout: float = 30.0
    """Seconds for the whole request, redirects and body included."""
    max_redirects: int = 5
    """Redirects followed (each checked against ``allowed_hosts``); 0 returns the 3xx itself."""
    trust_env: bool = False
    """Use proxy settings and certificates from the environment (``HTTPS_PROXY``...)."""
    user_agent: str = "kode_nb"
    """The ``User-Agent`` sent unless the call gives one."""
    _patterns: tuple[tuple[str, int | None], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        hosts: object = self.allowed_hosts  # lists and other iterables are accepted too
        if isinstance(hosts, str) or not isinstance(hosts, Iterable):
            raise ConfigurationError(
                f"allowed_hosts must be a list of host patterns, not {hosts!r}"
            )
        object.__setattr__(self, "allowed_hosts", tuple(hosts))
        object.__setattr__(self, "_patterns", tuple(_parse_host(h) for h in self.allowed_hosts))
        for name, least in (("max_bytes", 1), ("max_redirects", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(
                    f"WebConfig({name}=...) must be an int >= {least}, got {value!r}"
                )
        if (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, (int, float))
            or self.timeout <= 0
        ):
            raise ConfigurationError(
                f"WebConfig(timeout=...) must be > 0 seconds, got {self.timeout!r}"
            )

    def check_url(self, url: str, tool: str = "") -> str:
        """``url`` if its scheme is http(s) and its host is allowed, else ToolPermissionError."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise ToolError(tool, f"Invalid URL {url!r}: {exc}.") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError(tool, f"Invalid URL {url!r}: expected http:// or https:// and a host.")
        host = parts.hostname.lower()
        port = port if port is not None else (443 if parts.scheme == "https" else 80)
        for pattern, allowed_port in self._patterns:
            if fnmatch.fnmatchcase(host, pattern) and allowed_port in (None, port):
                return url
        where = f"{host}:{port}"
        if not self._patterns:
            raise ToolPermissionError(
                tool,
                f"Web access is off: no hosts are allowed, so {where} cannot be reached. "
                + _HOW_TO_ALLOW,
            )
        shown = ", ".join(self.allowed_hosts)
        raise ToolPermissionError(
            tool, f"Host {where} is not in the allowed hosts ({shown}). " + _HOW_TO_ALLOW
        )

    def check_addresses(
        self, host: str, port: int, addresses: Sequence[IPAddress], tool: str = ""
    ) -> None:
        """Refuse (ToolPermissionError) unless every address ``host`` resolved to may be
        contacted (rules in :mod:`kode_nb.builtins._addresses`)."""
        name = host.strip("[]").lower()
        exact = any(
            p == name and not _GLOB.search(p) and q in (None, port) for p, q in self._patterns
        )
        listed = [a for p, q in self._patterns if q in (None, port) and (a := ip_literal(p))]
        for address in addresses:
            why = address_refusal(address, exact_name=exact, listed=listed)
            if why is not None:
                raise ToolPermissionError(
                    tool, f"Host {name}:{port} resolves to {address}, which is refused: {why}."
                )


class WebTools:
    """The ``web`` tools over one :class:`WebConfig`; each public method is a tool."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config

    async def http_get(
        self, url: str, ctx: ToolContext, headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Fetch a URL with GET and return its status, headers and body.

        Args:
            url: The http:// or https:// URL.
            headers: Extra request headers.
        """
        return await self._request("GET", url, None, headers, ctx.tool)

    async def http_post(
        self,
        url: str,
        ctx: ToolContext,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Send a POST request and return the response's status, headers and body.

        Args:
            url: The http:// or https:// URL.
            body: The request body (set a Content-Type header for JSON and such).
            headers: Extra request headers.
        """
        return await self._request("POST", url, body, headers, ctx.tool)

    async def http_request(
        self,
        method: Method,
        url: str,
        ctx: ToolContext,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Send an HTTP request with any method and return the response.

        Args:
            method: The HTTP method.
            url: The http:// or https:// URL.
            body: The request body.
            headers: Extra request headers.
        """
        return await self._request(method, url, body, headers, ctx.tool)

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
        """``POST http://... (body: 12 characters)``, for the approval prompt."""
        method = str(arguments.get("method", "POST"))
        body = arguments.get("body")
        size = "no body" if body is None else f"body: {len(str(body))} characters"
        return f"{method} {arguments.get('url')} ({size})"

    async def _request(
        self, method: str, url: str, body: str | None, headers: Mapping[str, str] | None, tool: str
    ) -> dict[str, Any]:
        import httpx

        config = self.config
        config.check_url(url, tool)
        sent = {"User-Agent": config.user_agent, **(headers or {})}
        try:
            transport = httpx.AsyncHTTPTransport(trust_env=config.trust_env)
            pool = transport._pool  # connect through the address check (see _addresses)
            pool._network_backend = CheckedBackend(config.check_addresses, tool)
            async with httpx.AsyncClient(
                timeout=config.timeout, trust_env=config.trust_env, transport=transport
            ) as client:
                return await asyncio.wait_for(
                    self._exchange(client, method, url, body, sent, tool), config.timeout
                )
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise ToolTimeoutError(
                tool, config.timeout, note=f" {method} {url} got no complete response in time."
            ) from None
        except httpx.HTTPError as exc:
            raise ToolError(
                tool, f"{method} {url} failed: {type(exc).__name__}: {exc or 'no details'}."
            ) from None

    async def _exchange(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        body: str | None,
        headers: dict[str, str],
        tool: str,
    ) -> dict[str, Any]:
        config = self.config
        origin = _origin(url)
        for hop in range(config.max_redirects + 1):
            if _origin(url) != origin:  # credentials never follow a redirect to another origin
                headers = {k: v for k, v in headers.items() if not _is_credential(k)}
                client.cookies.clear()
            request = client.build_request(method, url, content=body, headers=headers)
            response = await client.send(request, stream=True)
            try:
                if response.is_redirect and hop < config.max_redirects:
                    target = str(response.url.join(response.headers["location"]))
                    try:
                        config.check_url(target, tool)
                    except ToolPermissionError as exc:
                        raise ToolPermissionError(
                            tool, f"{url} redirects to {target}, which is refused: {exc.message}"
                        ) from None
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and method == "POST"
                    ):
                        method, body = "GET", None
                    url = target
                    continue
                return await self._read(response)
            finally:
                await response.aclose()
        raise AssertionError("unreachable: the last hop returns")  # pragma: no cover

    async def _read(self, response: httpx.Response) -> dict[str, Any]:
        cap = self.config.max_bytes
        chunks: list[bytes] = []
        size = 0
        truncated = False
        async for chunk in response.aiter_bytes():
            room = cap - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                size = cap
                truncated = True
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
        result: dict[str, Any] = {
            "url": str(response.url),
            "status": response.status_code,
            "reason": response.reason_phrase,
            "headers": redact_headers(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw
            ),
        }
        content_type = response.headers.get("content-type", "").lower()
        textual = any(t in content_type for t in _TEXT_TYPES)
        if textual or (b"\x00" not in data and _is_utf8(data, truncated)):
            result["body"] = data.decode(response.charset_encoding or "utf-8", "replace")
        else:
            result["body_base64"] = base64.b64encode(data).decode("ascii")
            result["note"] = f"binary body ({content_type or 'no content type'}), base64-encoded"
        if truncated:
            total = response.headers.get("content-length")
            of = f" of {describe_size(int(total))}" if total and total.isdigit() else ""
            result["truncated"] = (
                f"only the first {describe_size(cap)}{of} of the body was read (the size limit)"
            )
        return result


def _origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)``, the port made explicit."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _is_credential(header: str) -> bool:
    """A header that carries a credential (``Authorization``, ``Cookie``, ``X-Api-Key``...)."""
    name = header.lower()
    return name in SENSITIVE_HEADERS or "auth" in name or is_secret_name(name)


def _is_utf8(data: bytes, truncated: bool) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return truncated and exc.start >= len(data) - 3  # cut inside the last character
    return True


def _redact_request(arguments: dict[str, Any]) -> dict[str, Any]:
    """Hide ``Authorization``-like request headers in approvals and events."""
    if arguments.get("headers"):
        hidden = redact_mapping(arguments["headers"], lambda k: k.lower() in SENSITIVE_HEADERS)
        return {**arguments, "headers": hidden}
    return arguments


def web_tools(config: WebConfig | None = None) -> list[Tool]:
    """New ``http_get``, ``http_post`` and ``http_request`` tools using ``config``."""
    tools = WebTools(config if config is not None else WebConfig())
    # The executor's network timeout must not cut the request before its own timeout does.
    net: dict[str, Any] = {
        "category": "network",
        "timeout": tools.config.timeout + 5,
        "redact": _redact_request,
    }
    return [
        make_tool(tools.http_get, "web", kind="fetch", **net),
        make_tool(tools.http_post, "web", kind="execute", preview=tools.preview, **net),
        make_tool(tools.http_request, "web", kind="execute", preview=tools.preview, **net),
    ]
