"""The kernel side of the ``kode_nb.notebook`` comm: the tools panel's feed and the notebook tools'
link to the front end (protocol: ``docs/RECORDS.md``, "Comm protocol").

The front end (the JupyterLab extension in ``labextension/``) opens the comm when a notebook's
kernel is ready; ``%load_ext kode_nb`` registers the target (:func:`register`), unloading removes it
(:func:`unregister`). On open the kernel sends a ``tools`` snapshot, then ``tools_changed`` when
tools are added, replaced or removed or calls finish, coalesced to at most :data:`RATE` messages a
second (the latest state wins), so 100,000 calls send a few messages, not 100,000. The last opened
channel is the notebook tools' front end (:data:`kode_nb.builtins.notebook.LINK`).

The front end also asks the kernel (``expand``, ``fork``: the trace viewer's "Expand into cells"
and "Fork from here"); :mod:`kode_nb.ui.trace_ops` makes those answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol


class CommHost(Protocol):
    """What the notebook comm reads of the magics that register it (``KodeMagics``)."""

    @property
    def shell(self) -> Any:
        """The IPython shell of the kernel."""

    @property
    def session(self) -> Any:
        """The kernel's ``KodeSession``: its registry, policy, bus and MCP state."""


__all__ = ["RATE", "TARGET", "NotebookChannel", "insert_cells", "register", "unregister"]

log = logging.getLogger(__name__)

TARGET = "kode_nb.notebook"
RATE = 4.0
"""The most ``tools_changed`` messages sent a second."""

_TERMINAL = ("CallCompleted", "CallFailed", "CallTimedOut", "CallCancelled")
_ids = itertools.count(1)
_CHANNELS: list[NotebookChannel] = []
"""The open channels (one kernel per process), the last opened last."""


def _comm_manager(shell: Any) -> Any:
    """The kernel's comm manager (ipykernel 6 and 7), or None outside a kernel."""
    return getattr(getattr(shell, "kernel", None), "comm_manager", None)


def front_end_connected() -> bool:
    """Whether a kode_nb front end (the JupyterLab / Notebook 7 extension) has the comm open:
    it applies display updates by display id, whatever cell they come from."""
    return bool(_CHANNELS)


_FIRST_USED = ("kode_nb.ui.records", "kode_nb.ui.tool_html", "kode_nb.ui.trace_ops")
"""Modules a channel's handlers import on the comm's thread (a card, expand, fork): imported
first on the kernel's thread, when the channel is made there."""


def register(magics: CommHost) -> bool:
    """Register the comm target for ``magics``' kernel; False where the kernel has no comms.

    The front end opens the comm as soon as the target exists, and its handler runs on a kernel
    subshell's thread (JupyterLab 4.6 on ipykernel 7) while the next cells run on the kernel's.
    Two threads importing the same package and its submodules in opposite orders (one enters
    ``kode_nb.tools``' ``__init__``, the other ``kode_nb.tools._model`` directly) meet in
    importlib's deadlock check, which hands one of them the module half-initialized (an
    ImportError in a cell). So the handler imports nothing: the channel (the session, its
    first ``tools`` message, the modules its handlers use) is made on the kernel's event loop,
    and the comm's messages and close wait for it there, in order."""
    manager = _comm_manager(magics.shell)
    if manager is None:
        return False
    channels = _CHANNELS
    loop = _kernel_loop(magics.shell)

    def opened(comm: Any, msg: Any) -> None:
        made: list[NotebookChannel] = []

        def make() -> None:
            try:
                for name in _FIRST_USED:
                    importlib.import_module(name)
                channel = NotebookChannel(comm, magics, channels, loop=loop)
            except Exception:  # never let a panel break the kernel
                log.exception("kode_nb.notebook comm failed to open")
                return
            made.append(channel)
            channels.append(channel)

        def early(handle: Callable[[NotebookChannel], None]) -> None:
            if made:
                handle(made[0])

        # until the channel replaces them: a message or close that comes first waits behind it
        comm.on_msg(lambda m: loop.call_soon_threadsafe(early, lambda c: c._on_msg(m)))
        comm.on_close(
            lambda m: loop.call_soon_threadsafe(early, lambda c: c.close(from_front=True))
        )
        try:
            loop.call_soon_threadsafe(make)
        except RuntimeError:  # a closed loop: the kernel is going away
            log.warning("kode_nb.notebook comm opened while the kernel closes")

    manager.register_target(TARGET, opened)
    return True


def _kernel_loop(shell: Any) -> asyncio.AbstractEventLoop:
    """The kernel's own event loop, where cells, calls and the session live (``register`` runs
    in a cell: ``%load_ext``). A comm opens in a kernel subshell's thread where the front end
    uses subshells (JupyterLab 4.6 on ipykernel 7), whose loop is that subshell's and stops
    when the subshell is deleted: updates scheduled there would never be sent."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        io_loop = getattr(getattr(shell, "kernel", None), "io_loop", None)
        found = getattr(io_loop, "asyncio_loop", None)
        if isinstance(found, asyncio.AbstractEventLoop):
            return found
        return asyncio.get_event_loop_policy().get_event_loop()


def unregister(magics: CommHost) -> None:
    """Remove the comm target and close the open channels."""
    manager = _comm_manager(magics.shell)
    if manager is not None and TARGET in getattr(manager, "targets", {}):
        manager.unregister_target(TARGET, manager.targets[TARGET])
    for channel in list(_CHANNELS):
        channel.close()


async def insert_cells(
    cells: list[dict[str, Any]], *, below_cell_id: str | None = None, timeout: float = 30.0
) -> dict[str, Any]:
    """Insert nbformat ``cells`` into the notebook through its front end: below ``below_cell_id``,
    else below the cell whose execution sent the request. Returns ``{"index", "ids"}``; raises
    :class:`~kode_nb.ConfigurationError` without a front end, ``RuntimeError`` when it refuses
    (e.g. an unknown cell id), ``TimeoutError`` when it does not answer."""
    from kode_nb.builtins.notebook import LINK, NO_FRONT_END
    from kode_nb.errors import ConfigurationError

    front = LINK.front_end
    if front is None:
        raise ConfigurationError(NO_FRONT_END)
    payload: dict[str, Any] = {"cells": cells}
    if below_cell_id is not None:
        payload["below_cell_id"] = below_cell_id
    result: dict[str, Any] = await front.request("insert_cells", payload, timeout)
    return result


def _tool_row(tool: Any, stats: Any) -> dict[str, Any]:
    return {
        "name": tool.name,
        "kind": tool.kind.value,
        "category": tool.category.value,
        "groups": list(tool.groups),
        "description": (tool.description or "").split("\n", 1)[0][:200],
        "required": list(tool.parameters.get("required") or []),
        "calls": stats.calls if stats else 0,
        "failures": stats.failures if stats else 0,
        "p95": stats.p95 if stats else 0.0,
    }


def _disconnected(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(RuntimeError("the notebook front end disconnected"))


class NotebookChannel:
    """One open ``kode_nb.notebook`` comm: pushes tool state, answers cards, relays requests."""

    def __init__(
        self,
        comm: Any,
        magics: CommHost,
        channels: list[NotebookChannel],
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        from kode_nb.builtins.notebook import LINK

        self.comm = comm
        self.session = magics.session
        self.channels = channels
        self.loop = loop if loop is not None else _kernel_loop(magics.shell)
        """The kernel's loop: ``tools_changed`` is scheduled and sent there, never on the
        thread the comm opened in (a subshell's, which may stop)."""
        self.sent = 0
        """``tools``/``tools_changed`` messages sent (for tests and benchmarks)."""
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._lock = threading.Lock()
        self._scheduled = False
        self._last = 0.0
        self._closed = False
        comm.on_msg(self._on_msg)
        comm.on_close(lambda msg: self.close(from_front=True))
        self._unsubscribe = self.session.registry.on_change(lambda action, name: self.changed())
        self._subscription = self.session.bus.subscribe(self._on_event)
        LINK.front_end = self
        LINK.namespace = self.session.shell.user_ns
        self._send({"op": "tools", **self.state()})

    # ---------------------------------------------------------------- state

    def state(self) -> dict[str, Any]:
        """The panel's data: tools with their stats, MCP servers, the policy."""
        registry = self.session.registry
        stats = registry.stats()
        tools = [_tool_row(tool, stats.tools.get(tool.name)) for tool in registry.list()]
        mcp = self.session._mcp
        servers = [{"name": n, "state": s} for n, s in (mcp.states.items() if mcp else ())]
        policy = self.session.policy
        return {
            "tools": tools,
            "mcp": servers,
            "policy": {
                "profile": policy.profile,
                "approval_mode": policy.approval_mode,
                "allow": policy.allow,
                "deny": list(policy.deny),
            },
        }

    def _on_event(self, event: Any) -> None:
        if type(event).__name__ in _TERMINAL:
            self.changed()

    def changed(self) -> None:
        """Note a change: one ``tools_changed`` goes out within 1/RATE s (from any thread)."""
        with self._lock:
            if self._scheduled or self._closed:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._schedule)
        except RuntimeError:  # a closed loop: the kernel is going away; nothing is pending
            with self._lock:
                self._scheduled = False

    def _schedule(self) -> None:
        delay = max(0.0, self._last + 1.0 / RATE - time.monotonic())
        self.loop.call_later(delay, self._flush)

    def _flush(self) -> None:
        with self._lock:
            self._scheduled = False
        if self._closed:
            return
        self._last = time.monotonic()
        try:
            self._send({"op": "tools_changed", **self.state()})
        except Exception:
            log.exception("kode_nb.notebook: could not send tools_changed")

    def _send(self, data: dict[str, Any]) -> None:
        if data.get("op") in ("tools", "tools_changed"):
            self.sent += 1
        self.comm.send(data)

    # ---------------------------------------------------------------- front end -> kernel

    def _on_msg(self, msg: Any) -> None:
        data = msg.get("content", {}).get("data") or {}
        op = data.get("op")
        try:
            if op == "card":
                self._card(str(data.get("name", "")))
            elif op == "reply":
                self._reply(data)
            elif op == "refresh":
                self._send({"op": "tools", **self.state()})
            elif op in ("expand", "fork"):
                self._answer(op, data)
            else:
                self.comm.send({"op": "error", "error": f"unknown op {op!r}"})
        except Exception as exc:
            log.exception("kode_nb.notebook: %s failed", op)
            self.comm.send({"op": "error", "error": f"{op} failed: {exc}"})

    def _answer(self, op: str, data: dict[str, Any]) -> None:
        """A front-end request: ``{"op": "reply", "request_id", "ok", "result" | "error"}``; bad
        input is an ``ok: false`` reply saying what is wrong, never an exception in the kernel."""
        from kode_nb.ui.trace_ops import expand_request, fork_request

        reply: dict[str, Any] = {"op": "reply", "request_id": str(data.get("request_id", ""))}
        try:
            if op == "expand":
                result = expand_request(data, set(self.session.registry.names()))
            else:
                result = fork_request(data)
        except Exception as exc:  # a bad request is answered, never raised
            reply.update(ok=False, error=str(exc) or type(exc).__name__)
        else:
            reply.update(ok=True, result=result)
        self.comm.send(reply)

    def _card(self, name: str) -> None:
        from kode_nb.ui.records import card_record

        tool = self.session.registry.get(name)
        if tool is None:
            self.comm.send({"op": "card", "name": name, "error": f"no tool {name!r}"})
            return
        self.comm.send({"op": "card", "name": name, "card": card_record(tool).data})

    def _reply(self, data: dict[str, Any]) -> None:
        future = self._pending.pop(str(data.get("request_id")), None)
        if future is None:
            return  # late (timed out) or unknown: nothing waits for it
        ok = bool(data.get("ok"))
        value = data.get("result") if ok else str(data.get("error") or "failed")

        def settle() -> None:
            if future.done():
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(RuntimeError(value))

        future.get_loop().call_soon_threadsafe(settle)

    # ---------------------------------------------------------------- kernel -> front end

    async def request(self, op: str, payload: dict[str, Any], timeout: float) -> Any:
        """Send ``op`` and wait for the front end's reply (``TimeoutError`` after ``timeout``)."""
        if self._closed:
            raise RuntimeError("the notebook front end disconnected")
        request_id = f"r{next(_ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self.comm.send({"op": op, "request_id": request_id, **payload})
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:  # not the built-in one before Python 3.11
            raise TimeoutError(f"no reply to {op!r} within {timeout:g} s") from None
        finally:
            self._pending.pop(request_id, None)

    def close(self, *, from_front: bool = False) -> None:
        from kode_nb.builtins.notebook import LINK

        if self._closed:
            return
        self._closed = True
        self._unsubscribe()
        self._subscription.close()
        for future in self._pending.values():
            future.get_loop().call_soon_threadsafe(_disconnected, future)
        self._pending.clear()
        if self in self.channels:
            self.channels.remove(self)
        if LINK.front_end is self:
            LINK.front_end = self.channels[-1] if self.channels else None
        if not from_front:
            with contextlib.suppress(Exception):
                self.comm.close()
