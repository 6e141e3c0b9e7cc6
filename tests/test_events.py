"""Events: the bus, the audit log, and the event sequence the executor emits for each outcome."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import kode_nb.execution._executor
import kode_nb.execution._pipeline
import kode_nb.execution._running
from kode_nb import (
    AutoApprove,
    AutoDeny,
    ConfigurationError,
    EventBus,
    Executor,
    JsonlAuditLog,
    Policy,
    ToolRegistry,
    ToolResult,
    define_tool,
)
from kode_nb.events import EVENT_TYPES, CallCompleted, CallRequested, CallUpdate, event_to_dict

TERMINAL = {"completed", "failed", "timed_out", "cancelled", "invalid_arguments"}


def requested(call_id: str = "c1") -> CallRequested:
    return CallRequested(tool="t", call_id=call_id, arguments='{"a": 1}')


# --------------------------------------------------------------------------- the bus


def test_subscribers_get_events_in_order_and_can_filter_by_type() -> None:
    bus = EventBus()
    everything: list[Any] = []
    updates: list[Any] = []
    assert not bus.active
    bus.subscribe(everything.append)
    bus.subscribe(updates.append, types=["update"])
    assert bus.active
    first, update = requested(), CallUpdate(tool="t", call_id="c1", data="x", sequence=1)
    bus.emit(first)
    bus.emit(update)
    assert everything == [first, update]
    assert updates == [update]


def test_unknown_event_type_filter_is_rejected_with_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown event type\(s\) \['finished'\]"):
        EventBus().subscribe(print, types=["completed", "finished"])


def test_unsubscribe_and_subscription_close() -> None:
    bus = EventBus()
    got: list[Any] = []
    sub = bus.subscribe(got.append)
    sub.close()
    assert not bus.active
    assert bus.unsubscribe(got.append) is False
    bus.emit(requested())
    assert got == []


def test_a_failing_subscriber_is_reported_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reported: list[tuple[Any, BaseException]] = []
    bus = EventBus(on_error=lambda event, exc: reported.append((event, exc)))
    got: list[Any] = []

    def broken(event: Any) -> None:
        raise ValueError("subscriber bug")

    bus.subscribe(broken)
    bus.subscribe(got.append)
    event = requested()
    bus.emit(event)
    assert got == [event]
    assert bus.errors == 1
    assert reported[0][0] is event
    assert str(reported[0][1]) == "subscriber bug"
    assert "event subscriber" in caplog.text


def test_a_failing_on_error_handler_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def bad_handler(event: Any, exc: BaseException) -> None:
        raise RuntimeError("handler bug")

    bus = EventBus(on_error=bad_handler)
    bus.subscribe(lambda e: 1 / 0)
    bus.emit(requested())
    assert bus.errors == 1
    assert "on_error handler failed" in caplog.text


def test_every_event_type_has_a_distinct_type_tag() -> None:
    tags = [cls.__dataclass_fields__["type"].default for cls in EVENT_TYPES]
    assert len(tags) == len(set(tags)) == 10


def test_event_to_dict_includes_result_text() -> None:
    result = ToolResult.from_json({"k": "é"}, tool="t", call_id="c1")
    data = event_to_dict(CallCompleted(tool="t", call_id="c1", result=result))
    assert data["type"] == "completed"
    assert data["result"]["text"] == '{"k": "é"}'
    assert data["result"]["content"] == [{"data": {"k": "é"}, "type": "json"}]
    json.dumps(data)


# --------------------------------------------------------------------------- audit log


def test_audit_log_to_a_stream_can_skip_updates() -> None:
    stream = io.StringIO()
    log = JsonlAuditLog(stream, include_updates=False)
    log(requested())
    log(CallUpdate(tool="t", call_id="c1", data="x", sequence=1))
    log.close()  # does not close a stream it does not own
    assert not stream.closed
    lines = stream.getvalue().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["requested"]


@pytest.mark.anyio
async def test_audit_log_writes_one_json_line_per_executor_event(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    async def stream(n: int) -> AsyncIterator[str]:
        for i in range(n):
            yield f"chunk {i}"

    def explode() -> None:
        raise OSError("disk on fire")

    define_tool(stream)
    define_tool(explode)
    path = tmp_path / "audit.jsonl"
    ex = Executor(registry)
    seen: list[Any] = []
    ex.bus.subscribe(seen.append)
    with JsonlAuditLog(path) as audit:
        ex.bus.subscribe(audit)
        await ex.call("stream", {"n": 2}, run_id="r1")
        await ex.call("explode", run_id="r1")
        await ex.call("nope", "{}", run_id="r1")
    assert audit.path == path
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(records) == len(seen) == 10
    assert [r["type"] for r in records] == [e.type for e in seen]
    assert {r["run_id"] for r in records} == {"r1"}
    assert records[4]["result"]["text"] == "chunk 1"
    failure = records[7]
    assert failure["type"] == "failed"
    assert failure["error_type"] == "OSError"
    assert failure["result"]["text"] == "Tool 'explode' raised OSError: disk on fire"


@pytest.mark.anyio
async def test_the_audit_log_redacts_secrets_unless_told_not_to(
    registry: ToolRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVICE_API_KEY", "s3cr3t-service-value")

    def login(user: str, password: str, note: str) -> str:
        """Log in."""
        return f"logged in {user} ({note})"

    define_tool(login)
    ex = Executor(registry)
    arguments = {"user": "ada", "password": "hunter2-long", "note": "key s3cr3t-service-value"}
    redacted, raw = tmp_path / "redacted.jsonl", tmp_path / "raw.jsonl"
    with JsonlAuditLog(redacted) as safe, JsonlAuditLog(raw, redact_secrets=False) as unsafe:
        ex.bus.subscribe(safe)
        ex.bus.subscribe(unsafe)
        result = await ex.call("login", arguments)
    assert result.text == "logged in ada (key s3cr3t-service-value)"  # the tool saw real values
    text = redacted.read_text(encoding="utf-8")
    assert "hunter2-long" not in text
    assert "s3cr3t-service-value" not in text
    assert "[REDACTED]" in text
    assert json.loads(text.splitlines()[0])["arguments"]["user"] == "ada"
    assert "hunter2-long" in raw.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- executor sequences


async def hang_tool() -> str:
    await asyncio.sleep(30)
    return "late"


async def ok_tool(x: int = 1) -> int:
    return x


def fail_tool() -> None:
    raise ValueError("no")


def edit_tool(path: str) -> str:
    return path


async def talk_tool(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


SEQUENCES: list[tuple[str, dict[str, Any], str, Any, list[str]]] = [
    ("ok", {}, "ok_tool", {"x": 2}, ["requested", "started", "completed"]),
    ("not found", {}, "missing", {}, ["requested", "failed"]),
    ("policy deny", {"policy": "deny"}, "ok_tool", {}, ["requested", "failed"]),
    ("invalid", {}, "ok_tool", {"x": "nope"}, ["requested", "invalid_arguments"]),
    ("error", {}, "fail_tool", {}, ["requested", "started", "failed"]),
    ("timeout", {}, "hang_tool", {}, ["requested", "started", "timed_out"]),
    (
        "approved", {"approver": AutoApprove()}, "edit_tool", {"path": "p"},
        ["requested", "approval_requested", "approval_resolved", "started", "completed"],
    ),
    (
        "user denied", {"approver": AutoDeny()}, "edit_tool", {"path": "p"},
        ["requested", "approval_requested", "approval_resolved", "failed"],
    ),
    (
        "no approver", {}, "edit_tool", {"path": "p"},
        ["requested", "approval_requested", "approval_resolved", "failed"],
    ),
    ("updates", {}, "talk_tool", {"n": 2}, ["requested", "started", "update", "update", "completed"]),
]  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("options", "tool", "arguments", "expected"),
    [s[1:] for s in SEQUENCES],
    ids=[s[0] for s in SEQUENCES],
)
async def test_event_sequence_per_outcome_ends_with_one_terminal_event(
    registry: ToolRegistry, options: dict[str, Any], tool: str, arguments: Any, expected: list[str]
) -> None:
    define_tool(ok_tool)
    define_tool(fail_tool)
    define_tool(hang_tool, timeout=0.05)
    define_tool(edit_tool, kind="edit")
    define_tool(talk_tool)
    if options.get("policy") == "deny":
        options = {**options, "policy": Policy(deny=["ok_tool"])}
    ex = Executor(registry, **options)
    events: list[Any] = []
    ex.bus.subscribe(events.append)
    result = await ex.call(tool, arguments, call_id="c1", run_id="r1", parent_call_id="p1")
    types = [e.type for e in events]
    assert types == expected
    assert sum(t in TERMINAL for t in types) == 1
    assert {(e.call_id, e.run_id, e.parent_call_id, e.tool) for e in events} == {
        ("c1", "r1", "p1", tool)
    }
    timestamps = [e.timestamp for e in events]
    assert timestamps == sorted(timestamps)
    terminal = events[-1]
    if terminal.type != "invalid_arguments":
        assert terminal.result is result


@pytest.mark.anyio
async def test_cancelled_call_sequence(registry: ToolRegistry) -> None:
    started = asyncio.Event()

    async def wait_here() -> str:
        started.set()
        await asyncio.sleep(30)
        return "late"

    define_tool(wait_here)
    ex = Executor(registry)
    events: list[Any] = []
    ex.bus.subscribe(events.append)
    task = asyncio.create_task(ex.call("wait_here", run_id="r"))
    await asyncio.wait_for(started.wait(), 5)
    ex.cancel(run_id="r", reason="stop")
    result = await task
    assert [e.type for e in events] == ["requested", "started", "cancelled"]
    assert events[-1].reason == "stop"
    assert events[-1].result is result


@pytest.mark.anyio
async def test_a_raising_subscriber_does_not_break_the_call(registry: ToolRegistry) -> None:
    define_tool(ok_tool)
    reported: list[Any] = []
    ex = Executor(registry, bus=EventBus(on_error=lambda e, exc: reported.append(e.type)))
    events: list[Any] = []

    def broken(event: Any) -> None:
        raise RuntimeError("bad subscriber")

    ex.bus.subscribe(broken)
    ex.bus.subscribe(events.append)
    result = await ex.call("ok_tool", {"x": 5})
    assert result.text == "5"
    assert [e.type for e in events] == ["requested", "started", "completed"]
    assert reported == ["requested", "started", "completed"]


@pytest.mark.anyio
async def test_no_event_objects_are_built_without_subscribers(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []

    def counting(cls: Any) -> Any:
        def make(**kwargs: Any) -> Any:
            built.append(cls.__name__)
            return cls(**kwargs)

        return make

    for module in (
        kode_nb.execution._executor,
        kode_nb.execution._pipeline,
        kode_nb.execution._running,
    ):
        for cls in EVENT_TYPES:
            if hasattr(module, cls.__name__):
                monkeypatch.setattr(module, cls.__name__, counting(cls))
    define_tool(ok_tool)
    define_tool(talk_tool)
    define_tool(edit_tool, kind="edit")
    ex = Executor(registry, approver=AutoApprove())
    for name, args in [
        ("ok_tool", {}),
        ("talk_tool", {"n": 3}),
        ("edit_tool", {"path": "p"}),
        ("x", {}),
    ]:
        await ex.call(name, args)
    await ex.call("ok_tool", {"x": "bad"})
    assert built == []
    ex.bus.subscribe(lambda e: None)
    await ex.call("talk_tool", {"n": 1})
    assert built == ["CallRequested", "CallStarted", "CallUpdate", "CallCompleted"]


def test_wants_updates_follows_the_subscribers_types() -> None:
    bus = EventBus()
    assert not bus.wants_updates
    only_ends = bus.subscribe(lambda e: None, types=["completed", "failed"])
    assert bus.active
    assert not bus.wants_updates
    everything = bus.subscribe(lambda e: None)
    assert bus.wants_updates
    everything.close()
    assert not bus.wants_updates
    bus.subscribe(lambda e: None, types=["update"])
    assert bus.wants_updates
    only_ends.close()
    assert bus.wants_updates
