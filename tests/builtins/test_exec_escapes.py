"""``exec`` stops what a command started even when it left the process group (``setsid``).

Every process started here runs ``sleep`` with a duration unique to the test (a marker found
in ``/proc/*/cmdline``); the fixture kills any that survive, whatever the outcome.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kode_nb import Executor, ToolRegistry
from kode_nb.builtins import ExecConfig, _procs, register_builtins

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc"),
    pytest.mark.skipif(shutil.which("setsid") is None, reason="needs the setsid program"),
]


def _running(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line has ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(name))
    return found


def _wait_none(marker: str, within: float = 60.0) -> list[int]:
    """The processes still running with ``marker``, once none is (or ``within`` s passed)."""
    deadline = time.monotonic() + within
    while (left := _running(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def _wait_until(done: Callable[[], bool], within: float = 60.0) -> bool:
    """Whether ``done()`` came true within ``within`` seconds (a generous bound under load)."""
    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def marker() -> Iterator[str]:
    text = f"1000.{random.randrange(10**8, 10**9)}"
    yield text
    for pid in _running(text):  # whatever happened, leave nothing behind
        os.kill(pid, signal.SIGKILL)


def _escaping(marker: str) -> str:
    """Three processes that leave the command's process group, then a long wait."""
    quiet = "> /dev/null 2>&1"
    return (
        f"setsid sleep {marker}1 {quiet} & "
        f"setsid sh -c 'sleep {marker}2' {quiet} & "
        f"sh -c 'setsid sleep {marker}3 {quiet} &'; "  # double fork: re-parented at once
        "sleep 0.5; echo started; sleep 30"
    )


@pytest.fixture
def quick(executor: Executor, registry: ToolRegistry) -> Executor:
    register_builtins(registry, ("runtime",), runtime=ExecConfig(kill_grace=0.2))
    return executor


@pytest.mark.parametrize("lookup", ["children files", "stat table"])
async def test_a_timeout_stops_processes_that_left_the_group(
    quick: Executor, marker: str, lookup: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if lookup == "stat table":  # where /proc/<pid>/task/*/children is missing
        monkeypatch.setattr(_procs, "_HAS_CHILDREN", False)
    result = await quick.call("exec", {"command": _escaping(marker), "timeout": 3})
    assert result.status == "timed_out", result.text
    assert "started" in result.text
    assert _wait_none(marker) == []
    killed = result.details["killed"]
    for n in "123":
        assert any(f"sleep {marker}{n}" in k["command"] for k in killed), killed
    assert f"sleep {marker}1" in result.text
    assert "process(es) it started" in result.text


async def test_cancelling_stops_processes_that_left_the_group(quick: Executor, marker: str) -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(
        quick.call(
            "exec", {"command": _escaping(marker), "timeout": 60}, call_id="c1",
            on_update=seen.put_nowait,
        )
    )  # fmt: skip
    assert (await asyncio.wait_for(seen.get(), 60)).strip() == "started"
    assert await asyncio.to_thread(_wait_until, lambda: len(_running(marker)) >= 3)
    assert quick.cancel(call_id="c1") == 1
    result = await task
    assert result.status == "cancelled"
    assert _wait_none(marker) == []


async def test_a_detached_process_of_a_finished_command_keeps_running(
    quick: Executor, marker: str
) -> None:
    """Documented: after a normal exit, what closed the output is left alone (a server...)."""
    result = await quick.call("exec", {"command": f"setsid sleep {marker} > /dev/null 2>&1 &"})
    assert result.status == "ok"
    assert result.details["killed"] == []
    assert len(_running(marker)) == 1


@pytest.mark.parametrize("seen_as", ["?", "sh -c sleep"])
def test_a_process_seen_before_its_exec_is_reported_by_what_it_runs(
    marker: str, seen_as: str
) -> None:
    """A scan can meet a process between ``fork`` and ``exec`` (its parent's command line, or an
    empty one): what was stopped is named by the command line it had when signalled."""
    import subprocess

    proc = subprocess.Popen(["sleep", marker])
    try:  # the scan met it before its exec; it has exec'd by the time it is signalled
        assert _wait_until(lambda: _procs._command(proc.pid) == f"sleep {marker}")
        tracker = _procs.ProcessTracker(proc.pid, "unused-tag")
        info = _procs._stat(proc.pid)
        assert info is not None
        tracker.known[proc.pid] = _procs.TrackedProcess(proc.pid, info[1], seen_as)
        hit = tracker.signal(signal.SIGKILL)
        assert [p.command for p in hit] == [f"sleep {marker}"]
        assert tracker.known[proc.pid].command == f"sleep {marker}"
    finally:
        proc.kill()
        proc.wait()
