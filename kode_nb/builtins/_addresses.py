"""Where the ``web`` tools may connect, by IP address (see :mod:`kode_nb.builtins.web`).

A host name that passes the allowed-hosts check is resolved once (``getaddrinfo``); every
address it resolves to is checked, and the connection is made to a checked address, never to a
second resolution (so a DNS answer that changes between check and connect, "DNS rebinding",
cannot reach an address that was not checked):

* a public (globally routable) address passes;
* a loopback, private, shared, reserved or unique-local address (``127.0.0.0/8``, ``10/8``,
  ``172.16/12``, ``192.168/16``, ``100.64/10``, ``::1``, ``fc00::/7``...) passes only when the
  URL's host matched an allowed-hosts entry **by its exact name** (``localhost``,
  ``api.internal``) or the address itself is listed (``127.0.0.1:8000``); a glob (``*``,
  ``*.example.com``) never reaches one;
* a link-local address (``169.254.0.0/16``, which holds the cloud metadata service
  ``169.254.169.254``, and ``fe80::/10``), ``0.0.0.0``/``::`` and multicast pass only when the
  address itself is listed.

IPv4-mapped IPv6 addresses (``::ffff:127.0.0.1``) are checked as the IPv4 address they carry.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import httpcore

from kode_nb.errors import ToolPermissionError

__all__ = ["CheckedBackend", "IPAddress", "address_refusal", "ip_literal"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def ip_literal(host: str) -> IPAddress | None:
    """``host`` as an address if it is an IP literal (IPv4-mapped IPv6 unwrapped), else None."""
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    return _unmapped(address)


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _always_listed(address: IPAddress) -> bool:
    """Reachable only when the address itself is listed."""
    return address.is_link_local or address.is_unspecified or address.is_multicast


def address_refusal(
    address: IPAddress, *, exact_name: bool, listed: Iterable[IPAddress]
) -> str | None:
    """Why ``address`` may not be contacted, or None if it may (rules in the module doc)."""
    address = _unmapped(address)
    if address in set(listed):
        return None
    if _always_listed(address):
        what = "link-local (cloud metadata lives there)" if address.is_link_local else "special"
        return f"{address} is a {what} address; list the address itself to allow it"
    if address.is_global:
        return None
    if exact_name:
        return None
    return (
        f"{address} is a loopback or private address, reached through a host pattern; list "
        "the host by its exact name, or the address, to allow it"
    )


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with each host resolved once, checked, and connected to by
    address. ``check(host, port, addresses)`` raises to refuse."""

    def __init__(self, check: Any, tool: str) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._check = check
        self._tool = tool

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await _resolve(host, port, self._tool)
        self._check(host, port, addresses, self._tool)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover - the web tools never use one
        raise ToolPermissionError(self._tool, "Unix sockets are not reachable by the web tools.")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def _resolve(host: str, port: int, tool: str) -> list[IPAddress]:
    literal = ip_literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from None
    found: list[IPAddress] = []
    for family, *_, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = _unmapped(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]))
            if address not in found:
                found.append(address)
    if not found:
        raise httpcore.ConnectError(f"{host!r} resolved to no IP address")
    return found
