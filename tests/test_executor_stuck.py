"""Sync tools that ignore cancellation: slots come back at once, stuck threads are counted and
capped, queued calls have a deadline, and ``isolation="process"`` tools are killed.

The hanging tools wait on an Event that the ``blocker`` fixture sets at teardown, so no thread
outlives its test for long. Every wait is bounded by ``asyncio.wait_for``: a regression fails,
it does not hang the suite.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kode_nb import Executor, ToolContext, ToolDefinitionError, ToolRegistry, define_tool, tool

pytestmark = pytest.mark.anyio

BOUND = 60.0


@pytest.fixture
def blocker() -> Iterator[threading.Event]:
    """What the hanging tools wait on; set at teardown so their threads end."""
    event = threading.Event()
    yield event
    event.set()


def _add(a: int, b: int) -> int:
    return a + b


async def _until(condition: object, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.02)
    return False


# --------------------------------------------------------------------------- stuck threads


async def test_timed_out_sync_calls_give_their_slots_back(
    registry: ToolRegistry, blocker: threading.Event
) -> None:
    @tool(timeout=1)
    def hang() -> None:
        """Ignores cancellation (like time.sleep(1e6))."""
        blocker.wait()

    define_tool(_add, name="add")
    ex = Executor(registry, max_concurrency=3)
    results = await asyncio.wait_for(ex.call_many([("hang", None)] * 4), BOUND)
    assert [r.status for r in results] == ["timed_out"] * 4
    assert all("cannot be interrupted" in r.text for r in results[:3])
    # The 4th queued for a slot with the same deadline: it timed out waiting, or (if the first
    # three were stopped a moment before its deadline was handled) it got a slot and was stopped.
    fourth = results[3].text
    assert "waiting for a slot" in fourth or "cannot be interrupted" in fourth
    ran = "cannot be interrupted" in fourth
    # Every later call of any tool still runs: the stuck threads hold no slot.
    added = await asyncio.wait_for(ex.call("add", {"a": 1, "b": 2}), BOUND)
    assert (added.status, added.text) == ("ok", "3")
    again = await asyncio.wait_for(ex.call("hang"), BOUND)
    assert again.status == "timed_out"
    assert "cannot be interrupted" in again.text
    assert ex.stuck() == {"hang": 4 + ran}
    assert [c.status for c in ex.running()] == ["stopping"] * (4 + ran)
    blocker.set()
    assert await _until(lambda: ex.stuck() == {} and ex.running() == [])
    ex.close()


async def test_stuck_threads_do_not_exhaust_the_unlimited_pool(
    registry: ToolRegistry, blocker: threading.Event
) -> None:
    def hang() -> None:
        blocker.wait()

    define_tool(hang, timeout=0.3)
    define_tool(_add, name="add")
    ex = Executor(registry, max_concurrency=None)
    results = await asyncio.wait_for(ex.call_many([("hang", None)] * 40), BOUND)
    assert {r.status for r in results} == {"timed_out"}
    added = await asyncio.wait_for(ex.call("add", {"a": 2, "b": 2}), BOUND)
    assert (added.status, added.text) == ("ok", "4")
    # The pool's 32 threads got stuck; of the 8 calls queued in the pool, those a replacement
    # thread took up before their own deadline was handled may be stuck too.
    stuck = ex.stuck()["hang"]
    assert 32 <= stuck <= 40
    # At max_stuck_threads, calls of the tool that keeps getting stuck fail fast.
    t0 = time.perf_counter()
    refused = await asyncio.wait_for(ex.call("hang"), BOUND)
    assert time.perf_counter() - t0 < 0.25
    assert refused.status == "error"
    assert refused.error_type == "ToolStuckError"
    assert f"Tool 'hang' was not run: {stuck} of its earlier calls" in refused.text
    assert "max_stuck_threads=32" in refused.text
    pool = ex._workers.pool
    assert pool is not None
    assert pool.threads <= 32 + 32
    assert pool.abandoned == 32
    blocker.set()
    assert await _until(lambda: ex.stuck() == {})
    assert (await asyncio.wait_for(ex.call("hang"), BOUND)).status == "ok"
    ex.close()


async def test_the_stuck_cap_is_configurable_and_spares_other_tools(
    registry: ToolRegistry, blocker: threading.Event
) -> None:
    def hang() -> None:
        blocker.wait()

    def other(ctx: ToolContext) -> str:
        ctx.cancel.wait(BOUND)
        return "other"

    define_tool(hang, timeout=0.2)
    define_tool(other)
    define_tool(_add, name="add")
    ex = Executor(registry, max_concurrency=2, max_stuck_threads=2)
    assert ex.max_stuck_threads == 2
    assert [r.status for r in await ex.call_many([("hang", None)] * 2)] == ["timed_out"] * 2
    refused = await asyncio.wait_for(ex.call("hang"), BOUND)
    assert refused.error_type == "ToolStuckError"
    assert "(hang: 2)" in refused.text
    assert (await asyncio.wait_for(ex.call("add", {"a": 1, "b": 1}), BOUND)).text == "2"
    blocker.set()
    assert await _until(lambda: ex.stuck() == {})
    ex.close()


async def test_a_cancelled_call_releases_its_slot_at_once(
    registry: ToolRegistry, blocker: threading.Event
) -> None:
    started = threading.Event()

    def hang() -> None:
        started.set()
        blocker.wait()

    define_tool(hang)
    define_tool(_add, name="add")
    ex = Executor(registry, max_concurrency=1)
    call = asyncio.create_task(ex.call("hang"))
    assert await asyncio.to_thread(started.wait, BOUND)
    assert ex.cancel(reason="stop") == 1
    result = await asyncio.wait_for(call, BOUND)
    assert result.status == "cancelled"
    assert "cannot be interrupted" in result.text
    assert (await asyncio.wait_for(ex.call("add", {"a": 1, "b": 1}), BOUND)).text == "2"
    assert ex.stuck() == {"hang": 1}
    blocker.set()
    assert await _until(lambda: ex.stuck() == {})
    ex.close()


def test_bad_max_stuck_threads_is_refused() -> None:
    with pytest.raises(ValueError, match="max_stuck_threads"):
        Executor(max_stuck_threads=0)


# --------------------------------------------------------------------------- queued deadline


async def test_a_queued_call_times_out_waiting_for_a_slot(registry: ToolRegistry) -> None:
    gate = asyncio.Event()

    async def holder() -> str:
        await gate.wait()
        return "held"

    async def quick() -> str:
        return "quick"

    define_tool(holder, timeout=BOUND)
    define_tool(quick, timeout=0.2)
    ex = Executor(registry, max_concurrency=1)
    held = asyncio.create_task(ex.call("holder", call_id="h1"))
    await asyncio.sleep(0)
    result = await asyncio.wait_for(ex.call("quick"), BOUND)
    assert result.status == "timed_out"
    assert result.text == (
        "Tool 'quick' timed out after 0.2 s. It timed out waiting for a slot and never ran: "
        "max_concurrency=1 reached (running: holder (h1)). The timeout counts from when a call "
        "queues for a slot."
    )
    assert result.duration == 0.0
    gate.set()
    assert (await asyncio.wait_for(held, BOUND)).text == "held"
    assert ex.running() == []


async def test_a_queued_call_names_the_group_limit(registry: ToolRegistry) -> None:
    gate = asyncio.Event()

    async def first() -> str:
        await gate.wait()
        return "first"

    async def second() -> str:
        return "second"

    define_tool(first, groups=["fs"], timeout=BOUND)
    define_tool(second, groups=["fs"], timeout=0.2)
    ex = Executor(registry, max_concurrency=None, group_limits={"fs": 1})
    held = asyncio.create_task(ex.call("first", call_id="f1"))
    await asyncio.sleep(0)
    result = await asyncio.wait_for(ex.call("second"), BOUND)
    assert "group_limits['fs']=1 reached (running: first (f1))" in result.text
    gate.set()
    assert (await asyncio.wait_for(held, BOUND)).status == "ok"


# --------------------------------------------------------------------------- process isolation


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_process_isolated_tool_runs_in_another_process(registry: ToolRegistry) -> None:
    import _process_tools as p

    define_tool(p.double, isolation="process", timeout=BOUND)
    define_tool(p.fails, isolation="process", timeout=BOUND)
    define_tool(p.unpicklable, isolation="process", timeout=BOUND)
    define_tool(p.dies, isolation="process", timeout=BOUND)
    ex = Executor(registry, max_concurrency=None)
    doubled, pid, failed, bad, died = await asyncio.wait_for(
        ex.call_many(
            [
                ("double", {"x": 4}),
                ("double", {"x": 21}),
                ("fails", {"why": "no"}),
                ("unpicklable", None),
                ("dies", None),
            ]
        ),
        4 * BOUND,
    )
    assert (doubled.status, doubled.text) == ("ok", "8")
    assert int(pid.text) != os.getpid()
    assert failed.text == "Tool 'fails' raised ValueError: no"
    assert bad.status == "error"
    assert "its result (function) cannot be pickled" in bad.text
    assert died.status == "error"
    assert died.text == (
        "Tool 'dies' failed in its worker process: the process ended with exit code 3, no result"
    )
    ex.close()


async def test_a_process_isolated_tool_is_killed_on_timeout(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    import _process_tools as p

    define_tool(p.sleepy, isolation="process", timeout=3)
    ex = Executor(registry)
    pidfile = tmp_path / "pid"
    result = await asyncio.wait_for(ex.call("sleepy", {"path": str(pidfile)}), BOUND)
    assert result.status == "timed_out"
    match = re.search(r"Its worker process \(pid (\d+)\) was killed\.", result.text)
    assert match, result.text
    pid = int(match.group(1))
    assert pidfile.read_text() == str(pid)  # the tool really ran there
    assert await _until(lambda: _gone(pid))
    assert ex.stuck() == {}
    assert ex.running() == []
    ex.close()


async def test_a_process_isolated_tool_is_killed_on_cancel(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    import _process_tools as p

    define_tool(p.sleepy, isolation="process")
    define_tool(_add, name="add")
    ex = Executor(registry, max_concurrency=1)
    pidfile = tmp_path / "pid"
    call = asyncio.create_task(ex.call("sleepy", {"path": str(pidfile)}))
    assert await _until(lambda: pidfile.exists() and pidfile.read_text(), BOUND)
    pid = int(pidfile.read_text())
    assert ex.cancel(reason="the user pressed Stop") == 1
    result = await asyncio.wait_for(call, BOUND)
    assert result.status == "cancelled"
    assert result.text == (
        f"Tool 'sleepy' was cancelled (the user pressed Stop). Its worker process (pid {pid}) "
        "was killed."
    )
    assert await _until(lambda: _gone(pid))
    assert (await asyncio.wait_for(ex.call("add", {"a": 1, "b": 1}), BOUND)).text == "2"
    ex.close()


async def test_unpicklable_arguments_get_a_clear_error(registry: ToolRegistry) -> None:
    import _process_tools as p

    define_tool(p.double, isolation="process", parameters={"type": "object"}, name="raw")
    ex = Executor(registry)
    # A schema-defined tool receives the arguments dict; JSON arguments always pickle, so
    # call the runner's check through a plan whose arguments hold a lock.
    plan_tool = registry.get("raw")
    assert plan_tool is not None
    assert plan_tool.isolation == "process"
    from kode_nb.execution._process import ProcessRunner, ProcessToolError

    class _Plan:
        name = "raw"
        process = ("_process_tools", "double", None)

    with pytest.raises(ProcessToolError, match="its arguments cannot be sent to a worker process"):
        await ProcessRunner().run(None, _Plan(), {"x": threading.Lock()})  # type: ignore[arg-type]
    ex.close()


def test_process_isolation_needs_an_importable_plain_sync_function() -> None:
    def nested(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="cannot be imported there"):
        define_tool(nested, isolation="process")

    async def coro() -> int:
        return 1

    with pytest.raises(ToolDefinitionError, match="needs a plain sync function, not a async"):
        define_tool(coro, isolation="process")

    def with_context(ctx: ToolContext) -> int:
        return 1

    with pytest.raises(ToolDefinitionError, match="cannot pass a ToolContext"):
        define_tool(with_context, isolation="process")
    with pytest.raises(ToolDefinitionError, match="isolation must be 'thread' or 'process'"):
        define_tool(_add, name="add", isolation="fork")


def test_the_tool_card_and_table_show_isolation_and_stuck_threads(registry: ToolRegistry) -> None:
    import _process_tools as p

    from kode_nb.ui import tool_html as T

    t = define_tool(p.double, isolation="process")
    define_tool(_add, name="add")
    assert "isolation: process" in T.tool_text(t)
    assert t.parameters == define_tool(p.double, registry=None).parameters  # schema-neutral
    text = T.registry_text(registry, stuck={"double": 3})
    assert "threads" in text.splitlines()[0]
    assert "3 stuck" in text
    assert "threads" not in T.registry_text(registry, stuck={})
    assert "3 stuck" in T.registry_html(registry, stuck={"double": 3})
