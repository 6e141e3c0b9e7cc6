"""Shared test fixtures: the anyio backend, an isolated tool registry per test, and no network.

* ``anyio_backend`` — async tests (``@pytest.mark.anyio``) run on asyncio.
* Every test runs with a fresh :class:`~kode_nb.tools._registry.ToolRegistry` made current with
  :func:`~kode_nb.tools._registry.use_registry`, so define-is-register side effects (``@kode_nb.tool``)
  never leak between tests; the ``registry`` fixture returns that registry.
* ``restore_prices`` — undoes the prices a test set.
* ``kode_ip`` — IPython's shared in-process test shell with ``%load_ext kode_nb`` done, unloaded
  (and its ``%config KodeMagics`` settings dropped) afterwards.
* Real network is blocked: connecting to (or resolving) anything but loopback raises
  :class:`NetworkBlockedError`. Loopback keeps working — kernels talk ZMQ over 127.0.0.1 and the MCP
  tests use loopback HTTP.
"""

from __future__ import annotations

import inspect
import ipaddress
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import kode_nb._redact
import kode_nb.tools._registry
from kode_nb.tools import ToolRegistry, use_registry


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------- registry isolation


@pytest.fixture(autouse=True)
def _isolated_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[ToolRegistry]:
    reg = ToolRegistry(name="test")
    # The process-wide fallback too, for code running where the context variable is not set
    # (a plain threading.Thread, an event loop started earlier).
    monkeypatch.setattr(kode_nb.tools._registry, "_process_registry", reg)
    with use_registry(reg):
        yield reg


@pytest.fixture(autouse=True)
def _isolated_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets registered by one test (model API keys, ``register_secret``) stay in that test:
    a known secret makes the stream coalescer hold back text that could begin it."""
    monkeypatch.setattr(kode_nb._redact, "_registered", set())
    monkeypatch.setattr(kode_nb._redact, "_registered_sorted", [])


@pytest.fixture(autouse=True)
def _model_clients() -> Iterator[None]:
    """Identified servers are forgotten after each test (a later test may get the same loopback
    port), and models' own HTTP clients closed where their loop is still there."""
    yield
    if "kode_nb.models._http" in sys.modules:
        from kode_nb.models._http import close_models
        from kode_nb.models._servers import forget_servers

        close_models()
        forget_servers()


@pytest.fixture
async def _model_clients_async() -> AsyncIterator[None]:
    """In an async test: models' own HTTP clients are closed on the test's loop, before it ends."""
    yield
    if "kode_nb.models._http" in sys.modules:
        from kode_nb.models._http import _OPEN

        for model in list(_OPEN):
            await model.aclose()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (
            isinstance(item, pytest.Function)
            and item.get_closest_marker("anyio") is not None
            and inspect.iscoroutinefunction(item.obj)
        ):
            item.fixturenames.append("_model_clients_async")


@pytest.fixture
def registry(_isolated_registry: ToolRegistry) -> ToolRegistry:
    """The fresh registry that is current for this test (``default_registry()`` returns it)."""
    return _isolated_registry


@pytest.fixture
def restore_prices() -> Iterator[None]:
    """The model price table (``kode_nb.models.prices``) as it was before the test: prices a test
    sets with ``set_price`` are dropped."""
    from kode_nb.models import prices

    saved = dict(prices)
    yield
    prices.clear()
    prices.update(saved)


@pytest.fixture
def kode_ip(registry: ToolRegistry) -> Iterator[Any]:
    """IPython's in-process test shell with kode_nb loaded; unloaded again after the test."""
    from IPython.testing.globalipapp import start_ipython

    start_ipython()
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kode_nb")
    try:
        yield shell
    finally:
        shell.run_line_magic("unload_ext", "kode_nb")
        shell.config.pop("KodeMagics", None)  # %config settings outlive the extension


# --------------------------------------------------------------------------- no network


class NetworkBlockedError(ConnectionError):
    """A test tried to reach a non-loopback address; tests never use the network."""


_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def _is_loopback_host(host: object) -> bool:
    if host is None or host == "":
        return True  # getaddrinfo(None, port): the wildcard / local address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").lower()
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _is_ip_literal(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    try:
        ipaddress.ip_address(str(host).strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _check_address(family: int, address: Any, what: str) -> None:
    if family not in (socket.AF_INET, socket.AF_INET6):
        return  # AF_UNIX, netlink...: not the network
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_loopback_host(host):
        raise NetworkBlockedError(
            f"{what} to {address!r} refused: tests must not use the network "
            "(tests/conftest.py allows loopback addresses only)"
        )


@pytest.fixture(autouse=True)
def _block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(self.family, address, "connect")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(self.family, address, "connect_ex")
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        _check_address(socket.AF_INET, address, "create_connection")
        return real_create_connection(address, *args, **kwargs)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        # Resolving a real name would send a DNS query; IP literals resolve locally and are
        # checked again on connect.
        if not (_is_loopback_host(host) or _is_ip_literal(host)):
            raise NetworkBlockedError(
                f"resolving {host!r} refused: tests must not use the network "
                "(tests/conftest.py allows loopback addresses only)"
            )
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
