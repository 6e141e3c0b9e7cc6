"""Tools declared ``isolation="process"``: each call in a fresh worker process, killed if it stops.

Python cannot kill a thread, but it can kill a process. :class:`ProcessRunner` starts one
``spawn`` process per call (nothing of the parent is inherited but ``sys.path``), which imports
the tool's function by module and qualified name (no function is pickled), receives the
pickled arguments, and sends back the pickled result or exception. A small daemon thread waits
for the answer and reaps the process. When the call times out or is cancelled, the process is
killed (``SIGKILL`` on POSIX) and the result says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import pickle
import threading
from typing import TYPE_CHECKING, Any

from kode_nb.errors import ToolError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from kode_nb.execution._plans import Plan
    from kode_nb.execution._running import CallState

__all__ = ["ProcessRunner", "ProcessToolError"]

_CONTEXT = multiprocessing.get_context("spawn")


class ProcessToolError(ToolError):
    """A process-isolated call could not run: unpicklable data, or the process died."""


class ProcessRunner:
    """Starts, waits for, and kills the worker processes of one executor."""

    def __init__(self) -> None:
        self.live: dict[BaseProcess, None] = {}
        """Worker processes not reaped yet."""

    async def run(self, st: CallState, plan: Plan, kwargs: dict[str, Any]) -> Any:
        """Run the call in a new process and return its value (or raise its exception)."""
        assert plan.process is not None
        module, qualname, positional = plan.process
        try:
            payload = pickle.dumps(kwargs)
        except Exception as exc:
            raise ProcessToolError(
                plan.name,
                f"Tool '{plan.name}' was not run: its arguments cannot be sent to a worker "
                f"process ({type(exc).__name__}: {exc}).",
            ) from None
        ours, theirs = _CONTEXT.Pipe(duplex=False)
        process = _CONTEXT.Process(
            target=child_main,
            args=(theirs, module, qualname, positional, payload),
            name=f"kode_nb-{plan.name}",
            daemon=True,
        )
        loop = st.loop
        waiter: asyncio.Future[tuple[str, Any]] = loop.create_future()
        process.start()
        theirs.close()  # only the child holds the sending end: its death is our EOF
        self.live[process] = None
        st.pid = process.pid
        threading.Thread(
            target=self._wait, args=(process, ours, loop, waiter), daemon=True,
            name=f"kode_nb-wait-{process.pid}",
        ).start()  # fmt: skip
        try:
            kind, value = await waiter
        except BaseException:
            process.kill()  # timed out or cancelled
            raise
        if kind == "ok":
            return value
        if kind == "raised":
            raise value
        raise ProcessToolError(
            plan.name, f"Tool '{plan.name}' failed in its worker process: {value}"
        )

    def _wait(
        self,
        process: BaseProcess,
        conn: Connection,
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[tuple[str, Any]],
    ) -> None:
        """In a daemon thread: receive the answer, reap the process, hand the answer over."""
        outcome: tuple[str, Any]
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            data = b""
        finally:
            conn.close()
        process.join()
        self.live.pop(process, None)
        if not data:
            outcome = ("failed", f"the process ended with exit code {process.exitcode}, no result")
        else:
            try:
                outcome = pickle.loads(data)
            except Exception as exc:  # e.g. the class of the result cannot be rebuilt here
                outcome = ("failed", f"its answer could not be unpickled ({exc})")
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(_settle, waiter, outcome)

    def close(self) -> None:
        """Kill every worker process still running."""
        for process in list(self.live):
            with contextlib.suppress(Exception):
                process.kill()


def _settle(waiter: asyncio.Future[tuple[str, Any]], outcome: tuple[str, Any]) -> None:
    if not waiter.done():
        waiter.set_result(outcome)


def resolve(module: str, qualname: str) -> Any:
    """The function ``module.qualname`` (a Tool's function if the name is bound to a Tool)."""
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    function = getattr(target, "function", None)
    if callable(function) and type(target).__name__ == "Tool":
        return function
    return target


def child_main(
    conn: Connection, module: str, qualname: str, positional: str | None, payload: bytes
) -> None:
    """In the worker process: import the function, call it, send back the outcome."""
    try:
        kwargs = pickle.loads(payload)
        fn = resolve(module, qualname)
    except BaseException as exc:
        data = pickle.dumps(("failed", f"importing {module}.{qualname} raised {_describe(exc)}"))
    else:
        try:
            value = fn(kwargs.pop(positional), **kwargs) if positional else fn(**kwargs)
            data = _dumps(("ok", value), "its result")
        except BaseException as exc:
            data = _dumps(("raised", exc), "the exception it raised")
    with contextlib.suppress(OSError):
        conn.send_bytes(data)
    conn.close()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _dumps(outcome: tuple[str, Any], what: str) -> bytes:
    try:
        data = pickle.dumps(outcome)
        pickle.loads(data)  # an exception class may not rebuild from its args
        return data
    except Exception as exc:
        value = outcome[1]
        detail = _describe(value) if isinstance(value, BaseException) else type(value).__name__
        return pickle.dumps(("failed", f"{what} ({detail}) cannot be pickled: {exc}"))
