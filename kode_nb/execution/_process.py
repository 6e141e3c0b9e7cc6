"""Tools declared ``isolation="process"``: each call in a fresh worker process, killed if it stops.

Python cannot kill a thread, but it can kill a process. :class:`ProcessRunner` starts one new
Python interpreter per call (``sys.executable -c``; of the parent it gets only ``sys.path``),
which imports the tool's function by module and qualified name (no function is pickled),
receives the pickled arguments on stdin, and writes back the pickled result or exception on
stdout (what the tool prints goes to stderr). A small daemon thread feeds it, waits for the
answer and reaps the process. When the call times out or is cancelled, the process is killed
(``SIGKILL`` on POSIX) and the result says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from kode_nb.errors import ToolError

if TYPE_CHECKING:
    from kode_nb.execution._plans import Plan
    from kode_nb.execution._running import CallState

__all__ = ["ProcessRunner", "ProcessToolError"]

_CHILD = """\
import os, pickle, sys
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)  # what the tool prints goes to stderr; stdout carries the answer
path, module, qualname, positional, payload = pickle.load(sys.stdin.buffer)
sys.path[:] = path
from importlib import import_module

def describe(exc):
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

def dumps(outcome, what):
    try:
        data = pickle.dumps(outcome)
        pickle.loads(data)  # an exception class may not rebuild from its args
        return data
    except Exception as exc:
        value = outcome[1]
        detail = describe(value) if isinstance(value, BaseException) else type(value).__name__
        return pickle.dumps(("failed", f"{what} ({detail}) cannot be pickled: {exc}"))

try:
    kwargs = pickle.loads(payload)
    target = import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    if type(target).__name__ == "Tool" and callable(getattr(target, "function", None)):
        target = target.function
except BaseException as exc:
    data = pickle.dumps(("failed", f"importing {module}.{qualname} raised {describe(exc)}"))
else:
    try:
        value = target(kwargs.pop(positional), **kwargs) if positional else target(**kwargs)
        data = dumps(("ok", value), "its result")
    except BaseException as exc:
        data = dumps(("raised", exc), "the exception it raised")
out.write(data)
out.flush()
"""
"""The worker process's program (run with ``python -c``): it imports nothing of kode_nb."""


class ProcessToolError(ToolError):
    """A process-isolated call could not run: unpicklable data, or the process died."""


class ProcessRunner:
    """Starts, waits for, and kills the worker processes of one executor."""

    def __init__(self) -> None:
        self.live: dict[subprocess.Popen[bytes], None] = {}
        """Worker processes not reaped yet."""

    async def run(self, st: CallState, plan: Plan, kwargs: dict[str, Any]) -> Any:
        """Run the call in a new process and return its value (or raise its exception)."""
        assert plan.process is not None
        module, qualname, positional = plan.process
        try:
            request = pickle.dumps((sys.path, module, qualname, positional, pickle.dumps(kwargs)))
        except Exception as exc:
            raise ProcessToolError(
                plan.name,
                f"Tool '{plan.name}' was not run: its arguments cannot be sent to a worker "
                f"process ({type(exc).__name__}: {exc}).",
            ) from None
        loop = st.loop
        waiter: asyncio.Future[tuple[str, Any]] = loop.create_future()
        # Popen returns once the child is started (a few ms); it never waits for it.
        process = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.live[process] = None
        st.pid = process.pid
        threading.Thread(
            target=self._wait,
            args=(process, request, loop, waiter),
            daemon=True,
            name=f"kode_nb-wait-{process.pid}",
        ).start()
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
        process: subprocess.Popen[bytes],
        request: bytes,
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[tuple[str, Any]],
    ) -> None:
        """In a daemon thread: send the call, read the answer, reap the process, hand it over."""
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            process.stdin.write(request)
            process.stdin.close()
        except OSError:  # it died (or was killed) before reading the call
            pass
        data = process.stdout.read()
        process.stdout.close()
        process.wait()
        self.live.pop(process, None)
        outcome: tuple[str, Any]
        if not data:
            outcome = (
                "failed",
                f"the process ended with exit code {process.returncode}, no result",
            )
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
