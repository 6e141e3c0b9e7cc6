"""The executor's fast paths give exactly what the plain ways give.

* the JSON text of results against ``json.dumps``;
* the positional builders of results and blocks against the dataclasses' keyword ``__init__``;
* :class:`~kode_nb.execution._plans.Limit` (the concurrency semaphore) under contention and cancellation;
* :class:`~kode_nb.execution._running.Deadlines` with in-order and out-of-order deadlines;
* worker threads handing their outcome to the loop;
* ``Policy.approval_for``'s shortcut against the full rules; arguments dumped only when needed;
* registry lookups and stats by exact key against normalized names.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kode_nb import (
    Executor,
    Policy,
    ToolContext,
    ToolKind,
    ToolRegistry,
    ToolResult,
    define_tool,
)
from kode_nb._threads import DaemonThreadPool
from kode_nb.events import CallStarted
from kode_nb.execution._plans import Limit
from kode_nb.execution._running import Deadlines
from kode_nb.types import JsonBlock, TextBlock, _json_block, _json_text, _new_result, _text_block

pytestmark = pytest.mark.anyio

# --------------------------------------------------------------------------- JSON text


json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(json_data)
def test_json_text_is_json_dumps(data: Any) -> None:
    assert _json_text(data) == json.dumps(data, ensure_ascii=False, default=str)


@pytest.mark.parametrize("value", [True, False, None, 0, -7, 2**70, 0.1, -0.0, float("inf"),
                                   float("-inf"), float("nan"), "é\n\"", ToolKind.READ])  # fmt: skip
def test_json_text_of_scalars(value: Any) -> None:
    assert ToolResult.from_json(value).text == json.dumps(value, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------- Limit


async def test_limit_serves_waiters_first_come_first_served() -> None:
    limit = Limit(1)
    await limit.take()
    order: list[int] = []

    async def one(i: int) -> None:
        await limit.take()
        order.append(i)
        await asyncio.sleep(0)
        limit.release()

    tasks = [asyncio.create_task(one(i)) for i in range(4)]
    await asyncio.sleep(0)
    assert len(limit.waiters) == 4
    limit.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3]
    assert (limit.free, len(limit.waiters)) == (1, 0)


async def test_a_cancelled_waiter_leaks_no_slot() -> None:
    limit = Limit(1)
    await limit.take()
    waiting = asyncio.create_task(limit.take())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not limit.waiters
    limit.release()
    assert limit.free == 1


async def test_a_slot_handed_to_a_cancelled_waiter_goes_to_the_next() -> None:
    limit = Limit(1)
    await limit.take()
    first = asyncio.create_task(limit.take())
    second = asyncio.create_task(limit.take())
    await asyncio.sleep(0)
    limit.release()  # hands the slot to `first`...
    first.cancel()  # ...which is cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)  # the slot went on to `second`
    assert (limit.free, len(limit.waiters)) == (0, 0)
    assert repr(limit) == "Limit(free=0, waiting=0)"


async def test_the_executor_limit_is_exact_under_load(registry: ToolRegistry) -> None:
    running = 0
    peak = 0

    async def busy() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        running -= 1

    define_tool(busy)
    ex = Executor(registry, max_concurrency=2, group_limits={})
    results = await ex.call_many([("busy", {})] * 20)
    assert {r.status for r in results} == {"ok"}
    assert peak == 2
    assert ex._slots.global_limit is not None
    assert ex._slots.global_limit.free == 2


# --------------------------------------------------------------------------- Deadlines


class FakeCall:
    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False


async def test_deadlines_fire_in_order_across_queue_and_heap() -> None:
    loop = asyncio.get_running_loop()
    expired: list[str] = []
    finished = asyncio.Event()

    def on_expire(call: Any) -> None:
        expired.append(call.name)
        if call.name == "last":
            finished.set()

    deadlines = Deadlines(loop, on_expire)
    now = loop.time()
    for name, delay in [("b", 0.02), ("d", 0.04), ("a", 0.01), ("c", 0.03), ("last", 0.05)]:
        deadlines.add(now + delay, FakeCall(name))  # type: ignore[arg-type]
    assert len(deadlines) == 5
    await asyncio.wait_for(finished.wait(), 5)
    assert expired == ["a", "b", "c", "d", "last"]
    assert len(deadlines) == 0


async def test_deadlines_drop_ended_calls_in_order() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, lambda call: None)
    calls = [FakeCall(str(i)) for i in range(1000)]
    for call in calls:
        deadlines.add(loop.time() + 60, call)  # type: ignore[arg-type]
        call.done = True
    assert len(deadlines) <= 1  # each add drops the ended calls in front


# --------------------------------------------------------------------------- async bodies
# An async tool's body: its timeout counts from its start, its awaits get their values and
# exceptions, and a cancellation reaches it.


async def test_an_async_body_that_suspends_times_out_from_its_start(
    registry: ToolRegistry,
) -> None:
    import time

    cleaned: list[str] = []

    async def busy_then_wait(seconds: float) -> str:
        """Computes for ``seconds``, then waits for ever."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:  # its first step outlasts the timeout
            pass
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append("finally")
        return "never"

    define_tool(busy_then_wait, timeout=0.2, registry=registry)
    ex = Executor(registry)
    started = time.perf_counter()
    result = await ex.call("busy_then_wait", {"seconds": 0.3})
    assert result.status == "timed_out", result.text
    assert cleaned == ["finally"]
    assert time.perf_counter() - started < 30  # fired at once, not after the hour


async def test_an_async_body_resumed_gets_results_exceptions_and_cancellation(
    registry: ToolRegistry,
) -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[int] = loop.create_future()
    seen: list[str] = []

    async def relay(steps: int) -> int:
        """Awaits several times: a future's value, an exception it handles, and a sleep."""
        value = await gate
        failing: asyncio.Future[int] = loop.create_future()
        loop.call_soon(failing.set_exception, KeyError("k"))
        try:
            await failing
        except KeyError:
            seen.append("handled")
        for _ in range(steps):
            await asyncio.sleep(0)
        return value + steps

    define_tool(relay, registry=registry)
    ex = Executor(registry, default_timeout=30)
    task = asyncio.ensure_future(ex.call("relay", {"steps": 3}))
    await asyncio.sleep(0)
    gate.set_result(39)
    result = await task
    assert (result.status, result.text, seen) == ("ok", "42", ["handled"])

    started = asyncio.Event()

    async def stubborn() -> str:
        """Swallows the cancellation, waits once more and returns."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("swallowed")
        await asyncio.sleep(0)
        return "late"

    define_tool(stubborn, registry=registry)
    task = asyncio.ensure_future(ex.call("stubborn", {}))
    await asyncio.wait_for(started.wait(), 60)
    assert ex.cancel(reason="stop") == 1
    result = await asyncio.wait_for(task, 30)
    assert result.status == "cancelled"
    assert seen[-1] == "swallowed"

    started.clear()

    async def sleeper() -> str:
        """Sleeps for an hour."""
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            seen.append("sleeper stopped")
        return "never"

    define_tool(sleeper, registry=registry)
    task = asyncio.ensure_future(ex.call("sleeper", {}))
    await asyncio.wait_for(started.wait(), 60)
    task.cancel()  # the caller is cancelled: the tool is stopped and the caller sees it
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen[-1] == "sleeper stopped"


# --------------------------------------------------------------------------- worker threads


async def test_a_sync_tool_raising_stop_iteration_is_an_error_not_a_hang(
    registry: ToolRegistry,
) -> None:
    def stops() -> None:
        raise StopIteration("done")

    define_tool(stops)
    result = await asyncio.wait_for(Executor(registry).call("stops"), 5)
    assert result.status == "error"
    assert "StopIteration" in result.text


async def test_a_queued_sync_call_cancelled_by_its_caller_never_runs(
    registry: ToolRegistry,
) -> None:
    release = threading.Event()
    ran: list[str] = []

    def block() -> None:
        release.wait(5)

    def late() -> None:
        ran.append("late")

    define_tool(block)
    define_tool(late)
    ex = Executor(registry, max_concurrency=None)
    ex._workers.pool = DaemonThreadPool(1)  # one worker: the second call waits in the queue
    blocker = asyncio.create_task(ex.call("block"))
    await asyncio.sleep(0.05)
    queued = asyncio.create_task(ex.call("late"))
    await asyncio.sleep(0.05)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    release.set()
    assert (await blocker).status == "ok"
    await asyncio.sleep(0.05)
    assert ran == []
    ex.close()


async def test_a_sync_tool_runs_in_a_worker_with_the_callers_context(
    registry: ToolRegistry,
) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def where(ctx: ToolContext) -> str:
        return f"{var.get()} {threading.current_thread().name.startswith('kode_nb-tool')}"

    define_tool(where)
    var.set("caller")
    ex = Executor(registry)
    assert (await ex.call("where")).text == "caller True"
    assert ex.running() == []


# --------------------------------------------------------------------------- policy, dumps


def _reference_approval(policy: Policy, tool: Any, arguments: Mapping[str, Any]) -> tuple[str, str]:
    """The rules as documented, without the shortcut."""
    decision, reason = policy._rule(tool, arguments)
    if decision == "ask" and tool.key in policy.always_allowed:
        return "auto", f"'{tool.name}' is always allowed this session"
    if decision == "ask" and policy.approval_mode == "auto":
        return "auto", f"{reason}; approval_mode='auto' runs it without asking"
    if decision == "ask" and policy.approval_mode == "deny":
        return "deny", f"{reason}; approval_mode='deny' refuses calls that need approval"
    return decision, reason


decisions = st.sampled_from(["auto", "ask", "deny"])


policy_cases = {
    "kind": st.sampled_from(list(ToolKind)),
    "rule": st.none() | decisions | st.just(lambda args: "ask"),
    "kind_rules": st.dictionaries(st.sampled_from(list(ToolKind)), decisions),
    "override": st.none() | decisions,
    "mode": decisions,
    "always": st.booleans(),
}


@given(**policy_cases)
def test_approval_shortcut_matches_the_rules(
    kind: ToolKind, rule: Any, kind_rules: dict[ToolKind, str], override: str | None,
    mode: str, always: bool,
) -> None:  # fmt: skip
    def job() -> None: ...

    tool = define_tool(job, kind=kind, approval=rule, registry=None)
    policy = Policy(
        kind_approval=kind_rules,  # type: ignore[arg-type]
        overrides={"job": override} if override else {},  # type: ignore[dict-item]
        approval_mode=mode,  # type: ignore[arg-type]
        always_allowed={"job"} if always else set(),
    )
    assert policy.approval_for(tool, {}) == _reference_approval(policy, tool, {})
    assert policy.approval_for(tool) == _reference_approval(policy, tool, {})


@given(
    **policy_cases,
    deny=st.booleans(),
    allow=st.none() | st.just(["job"]) | st.just(["other"]),
)
def test_the_executor_decides_as_the_policy_does(
    kind: ToolKind, rule: Any, kind_rules: dict[ToolKind, str], override: str | None,
    mode: str, always: bool, deny: bool, allow: list[str] | None,
) -> None:  # fmt: skip
    """The executor's inline policy checks (CallSteps.run) against Policy's own answers."""
    ran: list[str] = []
    asked: list[str] = []

    def job() -> str:
        """Runs."""
        ran.append("job")
        return "done"

    registry = ToolRegistry()
    tool = define_tool(job, kind=kind, approval=rule, registry=registry)
    policy = Policy(
        kind_approval=kind_rules,  # type: ignore[arg-type]
        overrides={"job": override} if override else {},  # type: ignore[dict-item]
        approval_mode=mode,  # type: ignore[arg-type]
        always_allowed={"job"} if always else set(),
        deny=["job"] if deny else [],
        allow=allow,
    )
    allowed = policy.is_allowed(tool, registry)[0]
    decision = policy.approval_for(tool, {})[0] if allowed else "not allowed"

    def approver(request: Any) -> bool:
        asked.append(request.tool)
        return True

    ex = Executor(registry, policy=policy, approver=approver, default_timeout=None)
    result = asyncio.run(ex.call("job", "{}"))
    want = {"auto": (["job"], [], "ok"), "ask": (["job"], ["job"], "ok")}.get(
        decision, ([], [], "denied")
    )
    assert (ran, asked, result.status) == want, decision


async def test_arguments_reach_predicates_events_and_custom_policies(
    registry: ToolRegistry,
) -> None:
    seen: list[Any] = []

    def big(n: int) -> bool:
        seen.append(("rule", n))
        return n > 10

    def count(n: int) -> int:
        return n

    define_tool(count)
    define_tool(count, name="guarded", approval=lambda args: big(args["n"]))

    class Custom(Policy):
        def approval_for(self, tool: Any, arguments: Any = None) -> Any:
            seen.append(("policy", dict(arguments)))
            return super().approval_for(tool, arguments)

    started: list[Any] = []
    ex = Executor(registry, policy=Custom())
    ex.bus.subscribe(started.append, types=["started"])
    assert (await ex.call("count", '{"n": 3}')).text == "3"
    assert (await ex.call("guarded", '{"n": 30}')).status == "denied"  # asks; no approver
    assert seen == [("policy", {"n": 3}), ("policy", {"n": 30}), ("rule", 30)]
    assert [e.arguments for e in started if isinstance(e, CallStarted)] == [{"n": 3}]

    seen.clear()
    plain = Executor(registry)  # the plain Policy: arguments dumped only for the predicate
    assert (await plain.call("count", '{"n": 3}')).text == "3"
    assert (await plain.call("guarded", '{"n": 5}')).text == "5"
    assert seen == [("rule", 5)]
    plain.bus.subscribe(started.append, types=["started"])
    assert (await plain.call("count", {"n": 4})).text == "4"
    assert started[-1].arguments == {"n": 4}


# --------------------------------------------------------------------------- registry keys


def test_lookup_and_stats_by_key_or_by_name_agree() -> None:
    def fetch_page() -> None: ...

    reg = ToolRegistry()
    tool = define_tool(fetch_page, name="Fetch-Page", registry=reg)
    assert tool.key == "fetch_page"
    for name in ("fetch_page", "Fetch-Page", " FETCH page ", "fetch-page"):
        assert reg.get(name) is tool
        reg.record_call(name, 0.5)
    reg.record_call("other", 1.0)  # unknown: ignored
    stats = reg.stats("fetch_page")
    assert (stats.calls, stats.mean) == (4, 0.5)
    reg.unregister("fetch_page")
    reg.record_call("fetch_page", 0.5)
    assert reg.get("fetch_page") is None
    assert "fetch_page" not in reg.stats()


async def test_the_counter_a_plan_keeps_follows_resets_and_replacements() -> None:
    async def ping() -> str:
        """Pings."""
        return "pong"

    reg = ToolRegistry()
    define_tool(ping, registry=reg)
    ex = Executor(reg)
    for _ in range(3):
        await ex.call("ping", "{}")
    assert reg.stats("ping").calls == 3
    reg.reset_stats()
    await ex.call("ping", "{}")
    assert reg.stats("ping").calls == 1  # counted in the new counter, not the dropped one
    define_tool(ping, registry=reg, replace=True)
    await ex.call("ping", "{}")
    assert reg.stats("ping").calls == 2
    reg.unregister("ping")
    define_tool(ping, registry=reg)
    await ex.call("ping", "{}")
    assert reg.stats("ping").calls == 1


def _stats_after_threads(reg: ToolRegistry, target: Any, args: list[Any], most: int) -> Any:
    """``job``'s stats once a thread for each of ``args`` ran ``target``; read once while they
    run too (a consistent snapshot of no more than ``most`` calls)."""
    threads = [threading.Thread(target=target, args=(arg,)) for arg in args]
    for t in threads:
        t.start()
    assert reg.stats("job").calls <= most
    for t in threads:
        t.join()
    return reg.stats("job")


def test_stats_recorded_from_many_threads_are_exact() -> None:
    def job() -> None: ...

    reg = ToolRegistry()
    define_tool(job, registry=reg)
    per_thread = 5000

    def record(failed: bool) -> None:
        for _ in range(per_thread):
            reg.record_call("job", 0.001, failed)

    stats = _stats_after_threads(reg, record, [i % 2 == 0 for i in range(4)], 4 * per_thread)
    assert (stats.calls, stats.failures) == (4 * per_thread, 2 * per_thread)
    assert stats.mean == pytest.approx(0.001)
    assert stats.p95 == pytest.approx(0.001)
    reg.reset_stats()
    assert reg.stats("job").calls == 0


def test_stats_of_calls_from_many_loops_and_threads_are_exact() -> None:
    """The executor records a finished call without the registry's lock (an inbox settled
    under it every ``SETTLE_AT`` calls and when read): ok, failed and denied calls from four
    threads, each with its own loop and executor, read while they run and after, count
    exactly."""
    from kode_nb.tools._stats import SETTLE_AT

    def job(fail: bool) -> str:
        """Maybe fail.

        Args:
            fail: Whether to raise.
        """
        if fail:
            raise ValueError("asked to")
        return "ok"

    reg = ToolRegistry()
    define_tool(job, registry=reg)
    per_thread = 3 * SETTLE_AT + 7  # settled twice or more by the callers, the rest when read

    def calls(which: int) -> None:
        async def go() -> None:
            ex = Executor(reg, policy=Policy(deny=["job"]) if which == 3 else None)
            for i in range(per_thread):
                await ex.call("job", {"fail": which == 1 and i % 2 == 0})

        asyncio.run(go())

    stats = _stats_after_threads(reg, calls, list(range(4)), 4 * per_thread)
    failed = (per_thread + 1) // 2
    assert (stats.calls, stats.failures, stats.denials) == (4 * per_thread, failed, per_thread)
    assert 0 < stats.mean < 1
    assert 0 < stats.p95 < 1


# ----------------------------------------------------------------------- %load_ext (T6)


def test_what_load_ext_imports_leaves_the_executor_and_pydantic_out() -> None:
    code = (
        "import sys\n"
        "import kode_nb.execution._session_defaults, kode_nb.interop._host\n"
        "import kode_nb.magics, kode_nb.ui.notebook_comm\n"
        "heavy = ('pydantic', 'kode_nb.execution._executor', 'kode_nb.tools')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_execution_package_gives_its_names_on_first_use() -> None:
    import kode_nb.execution as package
    from kode_nb.execution import _executor

    assert package.Executor is _executor.Executor
    assert sorted(package.__all__) == sorted(_executor.__all__)
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        package.Nothing  # noqa: B018


class _ThreadComm:
    """A comm recording which thread sent each message."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, dict[str, Any]]] = []
        self.on_message: Any = None

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append((threading.get_ident(), data))

    def on_msg(self, handler: Any) -> None:
        self.on_message = handler

    def on_close(self, handler: Any) -> None:
        pass

    def close(self) -> None:
        pass


async def test_the_notebook_comm_opens_on_the_kernels_thread(
    kode_ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The front end opens the comm from a subshell's thread while cells run on the kernel's:
    nothing is imported or made there (two threads importing the same package and its
    submodules in opposite orders can hand one a half-initialized module)."""
    from kode_nb.ui import notebook_comm

    targets: dict[str, Any] = {}

    class Manager:
        def register_target(self, name: str, opened: Any) -> None:
            targets[name] = opened

    monkeypatch.setattr(notebook_comm, "_comm_manager", lambda shell: Manager())
    magics = kode_ip.magics_manager.registry["KodeMagics"]
    assert notebook_comm.register(magics)
    comm = _ThreadComm()

    def front_end() -> None:
        targets[notebook_comm.TARGET](comm, {})
        comm.on_message({"content": {"data": {"op": "refresh"}}})  # before the channel exists

    thread = threading.Thread(target=front_end)
    thread.start()
    thread.join()
    assert comm.sent == []  # nothing happened on the comm's thread
    for _ in range(20):
        await asyncio.sleep(0.01)
        if len(comm.sent) == 2:
            break
    try:
        loop_thread = threading.get_ident()
        assert [(t, d["op"]) for t, d in comm.sent] == [(loop_thread, "tools")] * 2
    finally:
        for channel in list(notebook_comm._CHANNELS):
            channel.close()


# ----------------------------------------------------------------- result and block builders


def test_the_result_builder_sets_every_field_in_field_order() -> None:
    names = [f.name for f in dataclasses.fields(ToolResult)]
    values = [(_text_block("x"),), {"d": 1}, True, "error", "t", "c9", "E", 1.5, 2.5, 1.0]
    assert len(values) == len(names)  # a new field must be added to _new_result too
    built = _new_result(*values)
    keyword_built = ToolResult(**dict(zip(names, values, strict=True)))
    assert built == keyword_built
    assert [getattr(built, n) for n in names] == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.status = "ok"  # type: ignore[misc]
    assert hash(built.content) == hash(keyword_built.content)
    assert repr(built) == repr(keyword_built)


@given(st.text() | st.none())
def test_the_block_builders_equal_the_dataclasses(text: str | None) -> None:
    assert _text_block(text) == TextBlock(text=text)  # type: ignore[arg-type]
    assert _text_block(text).type == "text"
    assert _json_block(text) == JsonBlock(data=text)
    assert _json_block([text]).type == "json"
    assert [f.name for f in dataclasses.fields(TextBlock)] == ["text", "type"]
    assert [f.name for f in dataclasses.fields(JsonBlock)] == ["data", "type"]
