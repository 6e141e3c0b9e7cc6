"""The Executor: every pipeline step, results, approval, limits, timeouts, cancellation, updates."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pydantic
import pytest

from kode_nb import (
    AutoApprove,
    AutoDeny,
    CallbackApprover,
    ConfigurationError,
    Executor,
    ImageBlock,
    JsonBlock,
    KodeUsageError,
    Policy,
    TextBlock,
    ToolCall,
    ToolCancelledError,
    ToolContext,
    ToolPermissionError,
    ToolRegistry,
    ToolResult,
    ToolRetry,
    ToolTimeoutError,
    ToolValidationError,
    approve,
    define_tool,
    deny,
)
from kode_nb.errors import FieldIssue
from kode_nb.policy import ApprovalRequest

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 10  # 18 bytes: base64 without padding


class Recorder:
    """Subscribes to a bus and keeps every event."""

    def __init__(self, ex: Executor) -> None:
        self.events: list[Any] = []
        ex.bus.subscribe(self.events.append)

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def write_note(path: str, text: str = "") -> str:
    """Write a note (an edit tool: asks for approval by default)."""
    return f"wrote {path}: {text}"


@pytest.fixture
def reg(registry: ToolRegistry) -> ToolRegistry:
    define_tool(add)
    define_tool(write_note, kind="edit")
    return registry


def current_cancelling() -> int:
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling() if sys.version_info >= (3, 11) else 0


# --------------------------------------------------------------------------- happy path and lookup


async def test_ok_call_returns_result_with_ids_and_timing(reg: ToolRegistry) -> None:
    ex = Executor(reg)
    rec = Recorder(ex)
    result = await ex.call("add", '{"a": 1, "b": 2}', call_id="c1", run_id="r1")
    assert result.status == "ok"
    assert not result.is_error
    assert result.text == "3"
    assert result.content == (JsonBlock(data=3),)
    assert (result.tool, result.call_id) == ("add", "c1")
    assert result.started_at <= result.ended_at
    assert result.duration >= 0
    assert rec.types == ["requested", "started", "completed"]
    assert {(e.call_id, e.run_id) for e in rec.events} == {("c1", "r1")}
    assert rec.events[0].arguments == '{"a": 1, "b": 2}'
    assert rec.events[1].arguments == {"a": 1, "b": 2}
    assert rec.events[-1].result is result


async def test_call_ids_are_generated_and_unique(reg: ToolRegistry) -> None:
    ex = Executor(reg)
    ids = {(await ex.call("add", {"a": 1, "b": 1})).call_id for _ in range(5)}
    assert len(ids) == 5
    assert all(i.startswith("call_") for i in ids)


async def test_name_is_normalized_but_result_keeps_requested_name(reg: ToolRegistry) -> None:
    result = await Executor(reg).call("ADD", {"a": 2, "b": 2})
    assert (result.status, result.text, result.tool) == ("ok", "4", "ADD")


async def test_unknown_tool_suggests_close_names(reg: ToolRegistry) -> None:
    ex = Executor(reg)
    rec = Recorder(ex)
    result = await ex.call("ad", "{}")
    assert result.status == "not_found"
    assert result.is_error
    assert "Unknown tool 'ad'" in result.text
    assert "'add'" in result.text
    assert result.error_type == "ToolNotFoundError"
    assert rec.types == ["requested", "failed"]
    assert rec.events[-1].error_type == "ToolNotFoundError"
    assert reg.stats().calls == 0


@pytest.mark.parametrize("name", [None, 3, ["add"]])
async def test_non_string_name_is_not_found_not_a_crash(reg: ToolRegistry, name: Any) -> None:
    result = await Executor(reg).call(name, "{}")
    assert result.status == "not_found"
    assert "must be a string" in result.text


async def test_default_registry_is_the_current_one(reg: ToolRegistry) -> None:
    ex = Executor()
    assert ex.registry is reg
    assert (await ex.call("add", {"a": 1, "b": 1})).text == "2"


# --------------------------------------------------------------------------- policy and validation


async def test_policy_refusal_names_the_rule(reg: ToolRegistry) -> None:
    ex = Executor(reg, policy=Policy(deny=["add"]))
    rec = Recorder(ex)
    result = await ex.call("add", {"a": 1, "b": 2})
    assert result.status == "denied"
    assert "not allowed by the policy" in result.text
    assert "denied by 'add'" in result.text
    assert result.error_type == "ToolPermissionError"
    assert rec.types == ["requested", "failed"]
    stats = reg.stats("add")
    assert (stats.calls, stats.failures, stats.denials) == (1, 0, 1)  # a denial, not a failure


async def test_invalid_arguments_list_each_field_and_end_with_invalid_event(
    reg: ToolRegistry,
) -> None:
    ex = Executor(reg)
    rec = Recorder(ex)
    result = await ex.call("add", '{"a": "x", "b": "y"}')
    assert result.status == "invalid_arguments"
    assert result.is_error
    assert "`a`" in result.text
    assert "`b`" in result.text
    assert rec.types == ["requested", "invalid_arguments"]
    event = rec.events[-1]
    assert event.message == result.text
    assert [issue.path for issue in event.issues] == ["a", "b"]


@pytest.mark.parametrize(
    "raw",
    ["not json", "[1, 2]", "null", None, b"\xff\xfe", [1, 2], 42, '{"a": 1}', "{"],
    ids=repr,
)
async def test_bad_arguments_never_raise(reg: ToolRegistry, raw: Any) -> None:
    ex = Executor(reg)
    result = await ex.call("add", raw)
    assert result.status == "invalid_arguments"
    assert result.text.startswith("Invalid arguments for tool 'add'")
    assert ex.running() == []


async def test_validation_runs_before_approval(reg: ToolRegistry) -> None:
    asked: list[ApprovalRequest] = []
    ex = Executor(reg, approver=lambda request: asked.append(request) or True)
    rec = Recorder(ex)
    result = await ex.call("write_note", '{"path": 5}')
    assert result.status == "invalid_arguments"
    assert asked == []
    assert "approval_requested" not in rec.types


async def test_a_validator_that_raises_something_else_is_invalid_arguments(
    registry: ToolRegistry,
) -> None:
    class Broken:
        schema: dict[str, Any] = {"type": "object"}  # noqa: RUF012

        def validate(self, raw: Any, *, tool: str) -> dict[str, Any]:
            raise KeyError("weird")

        def dump(self, validated: Any) -> dict[str, Any]:
            return dict(validated)

    from kode_nb import Tool

    registry.register(Tool(name="odd", description="odd", function=lambda: 1, validator=Broken()))
    result = await Executor(registry).call("odd", "{}")
    assert result.status == "invalid_arguments"
    assert "weird" in result.text
    assert result.error_type == "KeyError"


async def test_policy_approval_deny_mode_refuses_without_asking(reg: ToolRegistry) -> None:
    asked: list[Any] = []
    ex = Executor(reg, policy=Policy(approval_mode="deny"), approver=asked.append)
    result = await ex.call("write_note", {"path": "a"})
    assert result.status == "denied"
    assert "approval_mode='deny'" in result.text
    assert asked == []


async def test_approval_rule_predicate_sees_json_arguments(registry: ToolRegistry) -> None:
    seen: list[Any] = []

    def risky(path: str) -> str:
        return path

    define_tool(risky, approval=lambda args: seen.append(dict(args)) or args["path"] == "/etc")
    ex = Executor(registry)  # no approver: whatever asks is denied
    assert (await ex.call("risky", {"path": "ok.txt"})).status == "ok"
    assert (await ex.call("risky", {"path": "/etc"})).status == "denied"
    assert seen == [{"path": "ok.txt"}, {"path": "/etc"}]


# --------------------------------------------------------------------------- approval


async def test_auto_approve_runs_and_reports_decision(reg: ToolRegistry) -> None:
    ex = Executor(reg, approver=AutoApprove())
    rec = Recorder(ex)
    result = await ex.call("write_note", {"path": "a.txt", "text": "hi"})
    assert result.text == "wrote a.txt: hi"
    assert rec.types == [
        "requested", "approval_requested", "approval_resolved", "started", "completed",
    ]  # fmt: skip
    requested, resolved = rec.events[1], rec.events[2]
    assert requested.kind == "edit"
    assert requested.arguments == {"path": "a.txt", "text": "hi"}
    assert "edit tools ask" in requested.reason
    assert resolved.approved
    assert resolved.decided_by == "auto-approve"


async def test_denial_reason_reaches_the_model(reg: ToolRegistry) -> None:
    ex = Executor(reg, approver=CallbackApprover(lambda r: deny("not on Fridays")))
    rec = Recorder(ex)
    result = await ex.call("write_note", {"path": "a"})
    assert result.status == "denied"
    assert result.text == "The user denied this call: not on Fridays"
    assert rec.types == ["requested", "approval_requested", "approval_resolved", "failed"]
    assert rec.events[2].reason == "not on Fridays"
    assert not rec.events[2].approved


@pytest.mark.parametrize("by", ["timeout", "inbox timeout"])
async def test_a_denial_nobody_made_is_not_put_on_the_user(reg: ToolRegistry, by: str) -> None:
    """Denied because no decision came in time: the model is told that, not that a person said no."""
    ex = Executor(
        reg, approver=CallbackApprover(lambda r: deny("Nobody answered within 2 s.", by=by))
    )
    result = await ex.call("write_note", {"path": "a"})
    assert result.status == "denied"
    assert result.text == "This call was not run: Nobody answered within 2 s."


async def test_auto_deny_approver(reg: ToolRegistry) -> None:
    result = await Executor(reg, approver=AutoDeny("headless")).call("write_note", {"path": "a"})
    assert result.text == "The user denied this call: headless"


async def test_denial_without_reason(reg: ToolRegistry) -> None:
    result = await Executor(reg, approver=lambda r: False).call("write_note", {"path": "a"})
    assert (result.status, result.text) == ("denied", "The user denied this call.")


async def test_async_callback_approver_and_request_contents(reg: ToolRegistry) -> None:
    requests: list[ApprovalRequest] = []

    async def decide(request: ApprovalRequest) -> bool:
        requests.append(request)
        await asyncio.sleep(0)
        return True

    result = await Executor(reg, approver=CallbackApprover(decide)).call(
        "write_note", {"path": "a"}, call_id="c9", run_id="r9", parent_call_id="p9"
    )
    assert result.status == "ok"
    (request,) = requests
    assert (request.tool, request.kind, request.call_id) == ("write_note", "edit", "c9")
    assert (request.run_id, request.parent_call_id) == ("r9", "p9")
    assert request.arguments == {"path": "a", "text": ""}
    assert request.label == "Write note"
    assert request.description.startswith("Write a note")
    assert request.preview is None


async def test_per_call_approver_overrides_the_executors(reg: ToolRegistry) -> None:
    ex = Executor(reg, approver=AutoDeny())
    result = await ex.call("write_note", {"path": "a"}, approver=AutoApprove())
    assert result.status == "ok"


async def test_edited_arguments_are_revalidated_and_used(reg: ToolRegistry) -> None:
    ex = Executor(reg, approver=lambda r: approve({"path": "b.txt", "text": "edited"}))
    rec = Recorder(ex)
    result = await ex.call("write_note", {"path": "a.txt"})
    assert result.text == "wrote b.txt: edited"
    assert rec.of("approval_resolved")[0].edited
    assert rec.of("started")[0].arguments == {"path": "b.txt", "text": "edited"}


async def test_invalid_edited_arguments_are_an_invalid_arguments_result(
    reg: ToolRegistry,
) -> None:
    ran: list[str] = []

    def guarded(path: str) -> str:
        ran.append(path)
        return path

    define_tool(guarded, kind="delete")
    ex = Executor(reg, approver=lambda r: approve({"path": 12}))
    rec = Recorder(ex)
    result = await ex.call("guarded", {"path": "a"})
    assert result.status == "invalid_arguments"
    assert "edited during approval" in result.text
    assert "`path`" in result.text
    assert ran == []
    assert rec.types[-2:] == ["approval_resolved", "invalid_arguments"]


async def test_always_allow_stops_asking(reg: ToolRegistry) -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> Any:
        asked.append(request.tool)
        return approve(always=True)

    ex = Executor(reg, approver=approver)
    assert (await ex.call("write_note", {"path": "a"})).status == "ok"
    assert (await ex.call("write_note", {"path": "b"})).status == "ok"
    assert asked == ["write_note"]
    assert "write_note" in ex.policy.always_allowed  # type: ignore[attr-defined]


async def test_no_approver_denies_and_says_how_to_configure_one(reg: ToolRegistry) -> None:
    ex = Executor(reg)
    rec = Recorder(ex)
    result = await ex.call("write_note", {"path": "a"})
    assert result.status == "denied"
    assert "needs approval" in result.text
    assert "no approver is configured" in result.text
    assert "Executor(approver=" in result.text
    assert rec.of("approval_resolved")[0].decided_by == "no-approver"


@pytest.mark.parametrize("outcome", ["raise", "junk"])
async def test_a_failing_approver_is_a_denial_not_a_crash(reg: ToolRegistry, outcome: str) -> None:
    def approver(request: ApprovalRequest) -> Any:
        if outcome == "raise":
            raise RuntimeError("kaput")
        return 42

    result = await Executor(reg, approver=approver).call("write_note", {"path": "a"})
    assert result.status == "denied"
    assert "asking for approval failed" in result.text
    assert ("RuntimeError: kaput" if outcome == "raise" else "TypeError") in result.text


async def test_preview_is_shown_and_a_failing_preview_does_not_break_the_call(
    registry: ToolRegistry,
) -> None:
    def patch(path: str) -> str:
        return "patched"

    def preview(args: Any, ctx: ToolContext | None) -> str:
        assert ctx is not None
        return f"--- {args['path']} ({ctx.call_id})"

    def bad_preview(args: Any, ctx: ToolContext | None) -> str:
        raise ValueError("no diff")

    define_tool(patch, kind="edit", preview=preview)
    define_tool(patch, name="patch2", kind="edit", preview=bad_preview)
    requests: list[ApprovalRequest] = []
    ex = Executor(registry, approver=lambda r: requests.append(r) or True)
    assert (await ex.call("patch", {"path": "x.py"}, call_id="c1")).text == "patched"
    assert (await ex.call("patch2", {"path": "x.py"})).text == "patched"
    assert requests[0].preview == "--- x.py (c1)"
    assert requests[1].preview == "(preview failed: ValueError: no diff)"


async def test_waiting_for_approval_holds_no_slot(reg: ToolRegistry) -> None:
    asked = asyncio.Event()
    gate = asyncio.Event()

    async def slow_approver(request: ApprovalRequest) -> bool:
        asked.set()
        await gate.wait()
        return True

    ex = Executor(reg, approver=slow_approver, max_concurrency=1)
    pending = asyncio.create_task(ex.call("write_note", {"path": "a"}))
    await asyncio.wait_for(asked.wait(), 60)
    assert [c.status for c in ex.running()] == ["waiting_approval"]
    quick = await asyncio.wait_for(ex.call("add", {"a": 1, "b": 1}), 60)
    assert quick.text == "2"
    gate.set()
    assert (await pending).status == "ok"


# --------------------------------------------------------------------------- tool errors


async def test_tool_exception_names_type_and_message(registry: ToolRegistry) -> None:
    def boom(x: int) -> int:
        raise ValueError(f"bad x={x}")

    define_tool(boom)
    ex = Executor(registry)
    rec = Recorder(ex)
    result = await ex.call("boom", {"x": 3})
    assert result.status == "error"
    assert result.text == "Tool 'boom' raised ValueError: bad x=3"
    assert result.error_type == "ValueError"
    assert rec.types == ["requested", "started", "failed"]
    assert rec.events[-1].error_type == "ValueError"
    assert registry.stats("boom").failures == 1


async def test_exception_without_message(registry: ToolRegistry) -> None:
    async def quiet() -> None:
        raise LookupError

    define_tool(quiet)
    assert (await Executor(registry).call("quiet")).text == "Tool 'quiet' raised LookupError"


async def test_tool_retry_message_is_verbatim(registry: ToolRegistry) -> None:
    def picky(q: str) -> str:
        raise ToolRetry("Use a shorter query, under 10 characters.")

    define_tool(picky)
    result = await Executor(registry).call("picky", {"q": "x" * 50})
    assert (result.status, result.is_error) == ("error", True)
    assert result.text == "Use a shorter query, under 10 characters."


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (ToolPermissionError("t", "Access denied: /etc"), "denied"),
        (
            ToolValidationError("t", [FieldIssue(path="q", message="too long", received="x")]),
            "invalid_arguments",
        ),
        (ToolTimeoutError("t", 2.0), "timed_out"),
        (ToolCancelledError("t", "stopped by the tool"), "cancelled"),
    ],
)
async def test_tool_errors_map_to_their_status(
    registry: ToolRegistry, exc: Exception, status: str
) -> None:
    def failing() -> None:
        raise exc

    define_tool(failing, inline=True)
    ex = Executor(registry)
    events: list[Any] = []
    ex.bus.subscribe(events.append)
    result = await ex.call("failing")
    assert events[-1].type == {"denied": "failed"}.get(status, status)
    if status == "timed_out":
        assert events[-1].timeout == 2.0
    assert result.status == status
    assert result.is_error
    assert result.text == str(exc)
    assert result.error_type == type(exc).__name__


async def test_system_exit_in_a_tool_is_an_error_result(registry: ToolRegistry) -> None:
    def quitter() -> None:
        raise SystemExit(3)

    define_tool(quitter)
    result = await Executor(registry).call("quitter")
    assert (result.status, result.text) == ("error", "Tool 'quitter' raised SystemExit: 3")


# --------------------------------------------------------------------------- results


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Model(pydantic.BaseModel):
    name: str
    size: int = 1


@pytest.mark.parametrize(
    ("value", "content", "text"),
    [
        ("hello", (TextBlock(text="hello"),), "hello"),
        (None, (TextBlock(text="(no output)"),), "(no output)"),
        ({"k": [1, 2]}, (JsonBlock(data={"k": [1, 2]}),), '{"k": [1, 2]}'),
        ([1, "two"], (JsonBlock(data=[1, "two"]),), '[1, "two"]'),
        ((1, 2), (JsonBlock(data=[1, 2]),), "[1, 2]"),
        (2.5, (JsonBlock(data=2.5),), "2.5"),
        (True, (JsonBlock(data=True),), "true"),
        ({3, 1, 2}, (JsonBlock(data=[1, 2, 3]),), "[1, 2, 3]"),
        (TextBlock(text="t"), (TextBlock(text="t"),), "t"),
        (
            [TextBlock(text="a"), "b", {"c": 1}],
            (TextBlock(text="a"), TextBlock(text="b"), JsonBlock(data={"c": 1})),
            'a\nb\n{"c": 1}',
        ),
        (b"caf\xc3\xa9", (TextBlock(text="café"),), "café"),
        (PNG, (ImageBlock.from_bytes(PNG, "image/png"),), "[image: image/png, 18 bytes]"),
    ],
    ids=lambda v: type(v).__name__,
)
async def test_return_values_become_content(
    registry: ToolRegistry, value: Any, content: tuple[Any, ...], text: str
) -> None:
    def produce() -> Any:
        return value

    define_tool(produce, inline=True)
    result = await Executor(registry).call("produce")
    assert result.status == "ok"
    assert result.content == content
    assert result.text == text


async def test_models_and_dataclasses_are_json_with_the_object_in_details(
    registry: ToolRegistry,
) -> None:
    model, point = Model(name="m"), Point(x=1, y=2)

    def make_model() -> Model:
        return model

    def make_point() -> Point:
        return point

    define_tool(make_model)
    define_tool(make_point)
    ex = Executor(registry)
    m = await ex.call("make_model")
    p = await ex.call("make_point")
    assert (m.content, m.details) == ((JsonBlock(data={"name": "m", "size": 1}),), model)
    assert (p.content, p.details) == ((JsonBlock(data={"x": 1, "y": 2}),), point)


async def test_other_objects_become_their_str(registry: ToolRegistry) -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    thing = Thing()

    def make() -> Any:
        return thing

    define_tool(make)
    result = await Executor(registry).call("make")
    assert (result.text, result.details) == ("a thing", thing)


async def test_binary_bytes_are_an_error_with_advice(registry: ToolRegistry) -> None:
    def blob() -> bytes:
        return b"\x00\xff\xfe binary"

    define_tool(blob)
    result = await Executor(registry).call("blob")
    assert result.status == "error"
    assert "neither UTF-8 text nor a PNG" in result.text


async def test_a_value_whose_str_raises_is_an_error_that_says_so(registry: ToolRegistry) -> None:
    class Opaque:
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

    def make() -> object:
        return Opaque()

    define_tool(make)
    result = await Executor(registry).call("make")
    assert result.status == "error"
    assert result.text == (
        "Tool 'make' returned an unusable result: str() of the returned Opaque raised "
        "RuntimeError: no text for you; return text, JSON-able data or content blocks instead"
    )


async def test_returned_tool_result_keeps_content_and_gets_ids(registry: ToolRegistry) -> None:
    def rich() -> ToolResult:
        return ToolResult(content=(TextBlock(text="shown"),), details={"rows": 3})

    def soft_fail() -> ToolResult:
        return ToolResult(content=(TextBlock(text="nope"),), is_error=True)

    define_tool(rich)
    define_tool(soft_fail)
    ex = Executor(registry)
    rec = Recorder(ex)
    result = await ex.call("rich", call_id="c1")
    assert (result.text, result.details, result.call_id, result.tool) == (
        "shown", {"rows": 3}, "c1", "rich",
    )  # fmt: skip
    assert result.duration >= 0
    failed = await ex.call("soft_fail")
    assert (failed.status, failed.is_error) == ("error", True)
    assert rec.types[-1] == "failed"


# --------------------------------------------------------------------------- calling conventions


async def test_context_is_injected_with_ids_deps_user_and_paths(registry: ToolRegistry) -> None:
    seen: list[ToolContext] = []

    def inspect_ctx(x: int, ctx: ToolContext) -> int:
        seen.append(ctx)
        return x

    define_tool(inspect_ctx)
    deps = object()
    ex = Executor(registry, deps=deps, user="ada")
    result = await ex.call("inspect_ctx", {"x": 1}, call_id="c", run_id="r", parent_call_id="p")
    assert result.text == "1"
    (ctx,) = seen
    assert (ctx.tool, ctx.call_id, ctx.run_id, ctx.parent_call_id) == ("inspect_ctx", "c", "r", "p")
    assert (ctx.deps, ctx.user) == (deps, "ada")
    assert list(ctx.allowed_paths) == list(ex.policy.allowed_paths)
    assert not ctx.cancelled


async def test_a_misspelt_context_attribute_names_the_right_one(registry: ToolRegistry) -> None:
    def stream(n: int, ctx: ToolContext) -> str:
        ctx.update(f"at {n}")  # type: ignore[attr-defined]  # on_update is meant
        return "done"

    define_tool(stream)
    result = await Executor(registry).call("stream", {"n": 1})
    assert result.status == "error"
    assert "ToolContext has no attribute 'update'. Did you mean on_update?" in result.text
    assert "It has: allowed_paths, approver, call_id" in result.text
    assert not hasattr(ToolContext(tool="t", call_id="c"), "__missing_dunder__")
    broken = ToolContext(tool="t", call_id="c", cancel=object())  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match="'object' object has no attribute 'cancelled'"):
        broken.cancelled  # noqa: B018  # the property's own error, not "no attribute"


async def test_schema_defined_tool_gets_the_arguments_dict(registry: ToolRegistry) -> None:
    def search(args: dict[str, Any], ctx: ToolContext) -> str:
        return f"{args['q']}|{args['limit']}|{ctx.call_id}"

    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
        "required": ["q"],
    }
    define_tool(search, description="Search.", parameters=schema)
    ex = Executor(registry)
    assert (await ex.call("search", {"q": "x"}, call_id="c")).text == "x|5|c"
    assert (await ex.call("search", {"limit": 1})).status == "invalid_arguments"


async def test_positional_only_arguments_parameter(registry: ToolRegistry) -> None:
    def echo(args: dict[str, Any], /) -> str:
        return args["q"]

    async def echo_ctx(args: dict[str, Any], /, ctx: ToolContext) -> str:
        return f"{args['q']}@{ctx.call_id}"

    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    define_tool(echo, description="Echo.", parameters=schema)
    define_tool(echo_ctx, description="Echo.", parameters=schema)
    ex = Executor(registry)
    assert (await ex.call("echo", {"q": "hi"})).text == "hi"
    assert (await ex.call("echo_ctx", {"q": "hi"}, call_id="c")).text == "hi@c"


async def test_sync_tools_run_in_worker_threads_with_context_vars(registry: ToolRegistry) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def where() -> str:
        return f"{threading.current_thread().name}|{var.get()}"

    def where_inline() -> str:
        return threading.current_thread().name

    define_tool(where)
    define_tool(where_inline, inline=True)
    ex = Executor(registry)
    var.set("from caller")
    thread_name, value = (await ex.call("where")).text.split("|")
    assert thread_name.startswith("kode_nb-tool")
    assert value == "from caller"
    assert (await ex.call("where_inline")).text == threading.current_thread().name
    ex.close()


# --------------------------------------------------------------------------- updates


async def test_async_generator_items_are_updates_and_the_last_is_the_result(
    registry: ToolRegistry,
) -> None:
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(1, n + 1):
            yield i

    define_tool(count)
    ex = Executor(registry)
    rec = Recorder(ex)
    got: list[Any] = []
    result = await ex.call("count", {"n": 3}, on_update=got.append)
    assert result.text == "3"
    assert got == [1, 2, 3]
    updates = rec.of("update")
    assert [(u.data, u.sequence) for u in updates] == [(1, 1), (2, 2), (3, 3)]
    assert rec.types == ["requested", "started", "update", "update", "update", "completed"]


async def test_sync_generator_return_value_is_the_result(registry: ToolRegistry) -> None:
    def steps() -> Iterator[str]:
        yield "a"
        yield "b"
        return "done"

    def plain_steps() -> Iterator[str]:
        yield "x"
        yield "y"

    define_tool(steps)
    define_tool(plain_steps, inline=True)
    ex = Executor(registry)
    got: list[Any] = []
    assert (await ex.call("steps", on_update=got.append)).text == "done"
    assert (await ex.call("plain_steps", on_update=got.append)).text == "y"
    assert got == ["a", "b", "x", "y"]


async def test_updates_from_a_worker_thread_arrive_in_order_on_the_loop(
    registry: ToolRegistry,
) -> None:
    def chatty(n: int, ctx: ToolContext) -> int:
        for i in range(n):
            ctx.on_update(i)
        return n

    define_tool(chatty)
    ex = Executor(registry)
    rec = Recorder(ex)
    got: list[int] = []
    threads: set[int] = set()

    def on_update(data: int) -> None:
        got.append(data)
        threads.add(threading.get_ident())

    result = await ex.call("chatty", {"n": 300}, on_update=on_update)
    assert result.text == "300"
    assert got == list(range(300))
    assert threads == {threading.get_ident()}
    assert [u.sequence for u in rec.of("update")] == list(range(1, 301))
    assert rec.types[-1] == "completed"


async def test_a_failing_on_update_callback_does_not_break_the_call(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    async def talk(ctx: ToolContext) -> str:
        ctx.on_update("x")
        return "fine"

    define_tool(talk)

    def bad(data: Any) -> None:
        raise RuntimeError("display broke")

    result = await Executor(registry).call("talk", on_update=bad)
    assert result.text == "fine"
    assert "on_update callback" in caplog.text


# --------------------------------------------------------------------------- concurrency


async def test_global_limit_caps_running_calls(registry: ToolRegistry) -> None:
    active = peak = 0

    async def work(i: int) -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return i

    define_tool(work)
    ex = Executor(registry, max_concurrency=2)
    results = await ex.call_many([("work", {"i": i}) for i in range(6)])
    assert [r.text for r in results] == [str(i) for i in range(6)]
    assert peak == 2


async def test_global_limit_also_caps_threads(registry: ToolRegistry) -> None:
    lock = threading.Lock()
    active = peak = 0
    release = threading.Event()

    def block(i: int) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        release.wait(0.05)
        with lock:
            active -= 1
        return i

    define_tool(block)
    ex = Executor(registry, max_concurrency=2)
    results = await ex.call_many([("block", {"i": i}) for i in range(5)])
    assert [r.status for r in results] == ["ok"] * 5
    assert peak == 2
    ex.close()


async def test_unlimited_concurrency(registry: ToolRegistry) -> None:
    arrived = 0
    all_in = asyncio.Event()

    async def meet() -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 8:
            all_in.set()
        await all_in.wait()  # deadlocks unless all 8 run at once
        return "met"

    define_tool(meet)
    ex = Executor(registry, max_concurrency=None)
    results = await asyncio.wait_for(ex.call_many([("meet", None)] * 8), 60)
    assert {r.text for r in results} == {"met"}


async def test_group_limit_caps_group_members(registry: ToolRegistry) -> None:
    active = peak = 0

    async def fs_op() -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return "done"

    define_tool(fs_op, name="fs_read", groups=["fs"])
    define_tool(fs_op, name="fs_write")
    registry.define_group("fs", ["fs_write"])  # membership from the registry counts too
    ex = Executor(registry, max_concurrency=None, group_limits={"group:fs": 1})
    results = await ex.call_many([("fs_read", None), ("fs_write", None)] * 2)
    assert [r.text for r in results] == ["done"] * 4
    assert peak == 1


async def test_calls_queued_for_a_group_slot_hold_no_global_slot(registry: ToolRegistry) -> None:
    other_ran = asyncio.Event()

    async def fs_read() -> str:
        await other_ran.wait()  # only finishes once "other" got a global slot beside it
        return "read"

    async def fs_write() -> str:
        return "written"

    async def other() -> str:
        other_ran.set()
        return "other"

    define_tool(fs_read, groups=["fs"])
    define_tool(fs_write, groups=["fs"])
    define_tool(other)
    ex = Executor(registry, max_concurrency=2, group_limits={"fs": 1})
    # fs_read holds fs + one global slot; fs_write waits for fs. If it waited while holding the
    # second global slot, "other" could never start and fs_read would never finish.
    calls = [("fs_read", None), ("fs_write", None), ("other", None)]
    results = await asyncio.wait_for(ex.call_many(calls), 60)
    assert [r.text for r in results] == ["read", "written", "other"]


# --------------------------------------------------------------------------- timeouts


async def test_async_tool_timeout(registry: ToolRegistry) -> None:
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    define_tool(slow, timeout=0.05)
    ex = Executor(registry)
    rec = Recorder(ex)
    result = await ex.call("slow")
    assert result.status == "timed_out"
    assert result.is_error
    assert result.text == "Tool 'slow' timed out after 0.05 s."
    assert result.error_type == "ToolTimeoutError"
    assert result.duration >= 0.04
    assert rec.types == ["requested", "started", "timed_out"]
    assert rec.events[-1].timeout == 0.05
    assert current_cancelling() == 0
    assert ex.running() == []


async def test_sync_tool_timeout_signals_the_thread(registry: ToolRegistry) -> None:
    stopped = threading.Event()

    def patient(ctx: ToolContext) -> str:
        ctx.cancel.wait(10)
        if ctx.cancelled:
            stopped.set()
        return "late"

    define_tool(patient, timeout=0.05)
    ex = Executor(registry)
    result = await ex.call("patient")
    assert result.status == "timed_out"
    assert "worker thread was signalled to stop cooperatively" in result.text
    assert await asyncio.to_thread(stopped.wait, 5)
    ex.close()


async def test_an_uninterruptible_thread_gives_its_slot_back_and_shows_as_stopping(
    reg: ToolRegistry,
) -> None:
    release = threading.Event()

    def stuck() -> str:
        release.wait(10)
        return "late"

    define_tool(stuck, timeout=0.05)
    ex = Executor(reg, max_concurrency=1)
    result = await ex.call("stuck")
    assert result.status == "timed_out"
    assert "cannot be interrupted" in result.text
    assert [c.status for c in ex.running()] == ["stopping"]
    assert ex.stuck() == {"stuck": 1}
    # The stuck thread holds no slot: the next call runs at once.
    assert (await asyncio.wait_for(ex.call("add", {"a": 1, "b": 1}), 60)).text == "2"
    release.set()
    for _ in range(3000):  # up to 60 s
        if not ex.running():
            break
        await asyncio.sleep(0.02)
    assert ex.running() == []
    assert ex.stuck() == {}
    ex.close()


async def test_default_and_network_timeouts(registry: ToolRegistry) -> None:
    async def fetch() -> str:
        await asyncio.sleep(30)
        return "late"

    async def compute() -> str:
        await asyncio.sleep(30)
        return "late"

    async def remote() -> str:
        await asyncio.sleep(30)
        return "late"

    define_tool(fetch, category="network")
    define_tool(compute)
    define_tool(remote, category="mcp")
    ex = Executor(registry, default_timeout=0.05, network_timeout=0.1)
    net, local, mcp = await ex.call_many([("fetch", None), ("compute", None), ("remote", None)])
    assert net.text == "Tool 'fetch' timed out after 0.1 s."
    assert local.text == "Tool 'compute' timed out after 0.05 s."
    assert mcp.text == "Tool 'remote' timed out after 0.1 s."


async def test_no_timeout_when_none(registry: ToolRegistry) -> None:
    async def brief() -> str:
        await asyncio.sleep(0.02)
        return "done"

    define_tool(brief)
    ex = Executor(registry, default_timeout=None)
    assert (await ex.call("brief")).text == "done"


async def test_a_tool_that_swallows_the_timeout_still_times_out(registry: ToolRegistry) -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "ignored the cancel"
        return "late"

    define_tool(stubborn, timeout=0.05)
    result = await Executor(registry).call("stubborn")
    assert result.status == "timed_out"
    assert current_cancelling() == 0


class FakeCall:
    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False


async def test_deadlines_share_one_timer_and_fire_in_order() -> None:
    from kode_nb.execution._running import Deadlines

    loop = asyncio.get_running_loop()
    expired: list[str] = []
    all_expired = asyncio.Event()

    def on_expire(call: Any) -> None:
        expired.append(call.name)
        if len(expired) == 2:
            all_expired.set()

    deadlines = Deadlines(loop, on_expire)
    late, early, finished = FakeCall("late"), FakeCall("early"), FakeCall("finished")
    now = loop.time()
    deadlines.add(now + 0.06, late)
    deadlines.add(now + 0.02, early)  # earlier than the armed timer: re-armed
    deadlines.add(now + 0.01, finished)
    finished.done = True  # ended before its deadline: never expires
    await asyncio.wait_for(all_expired.wait(), 60)
    assert expired == ["early", "late"]


async def test_deadlines_compact_entries_of_ended_calls() -> None:
    from kode_nb.execution._running import Deadlines

    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, lambda call: None)
    blocker = FakeCall("long")
    deadlines.add(loop.time() + 60, blocker)  # stays in front of the others
    for i in range(1000):
        call = FakeCall(str(i))
        deadlines.add(loop.time() + 61, call)
        call.done = True
    assert len(deadlines) < 300
    blocker.done = True
    deadlines.add(loop.time() + 62, FakeCall("next"))
    assert len(deadlines) < 300


# --------------------------------------------------------------------------- cancellation


async def test_cancel_run_stops_async_and_sync_calls_of_that_run_only(
    registry: ToolRegistry,
) -> None:
    async_started = asyncio.Event()
    sync_started = threading.Event()
    sync_stopped = threading.Event()
    gate = asyncio.Event()

    async def waiter() -> str:
        async_started.set()
        await asyncio.sleep(30)
        return "late"

    def worker(ctx: ToolContext) -> str:
        sync_started.set()
        if ctx.cancel.wait(30):
            sync_stopped.set()
        return "late"

    async def other() -> str:
        await gate.wait()
        return "other"

    for fn in (waiter, worker, other):
        define_tool(fn)
    ex = Executor(registry)
    rec = Recorder(ex)
    t1 = asyncio.create_task(ex.call("waiter", run_id="r1"))
    t2 = asyncio.create_task(ex.call("worker", run_id="r1"))
    t3 = asyncio.create_task(ex.call("other", run_id="r2"))
    await asyncio.wait_for(async_started.wait(), 60)
    assert await asyncio.to_thread(sync_started.wait, 5)
    # From another thread, as a widget button would.
    n = await asyncio.to_thread(ex.cancel, run_id="r1", reason="the user pressed Stop")
    assert n == 2
    r1, r2 = await t1, await t2
    assert (r1.status, r2.status) == ("cancelled", "cancelled")
    assert r1.text == "Tool 'waiter' was cancelled (the user pressed Stop)."
    assert "the user pressed Stop" in r2.text
    assert "worker thread was signalled to stop cooperatively" in r2.text
    assert await asyncio.to_thread(sync_stopped.wait, 5)  # the token reached the thread
    assert not t1.cancelled()
    assert not t3.done()
    gate.set()
    assert (await t3).text == "other"
    assert [e.reason for e in rec.of("cancelled")] == ["the user pressed Stop"] * 2
    assert ex.cancel(run_id="r1") == 0
    ex.close()


async def test_cancel_by_call_id_while_waiting_for_approval(reg: ToolRegistry) -> None:
    asked = asyncio.Event()

    async def never(request: ApprovalRequest) -> bool:
        asked.set()
        await asyncio.Event().wait()
        return True

    ex = Executor(reg, approver=never)
    task = asyncio.create_task(ex.call("write_note", {"path": "a"}, call_id="c7"))
    await asyncio.wait_for(asked.wait(), 60)
    assert ex.cancel(call_id="other") == 0
    assert ex.cancel(call_id="c7") == 1
    result = await task
    assert (result.status, result.call_id) == ("cancelled", "c7")
    assert ex.running() == []


async def test_cancel_while_queued_for_a_slot(registry: ToolRegistry) -> None:
    gate = asyncio.Event()

    async def hold() -> str:
        await gate.wait()
        return "held"

    define_tool(hold)
    ex = Executor(registry, max_concurrency=1)
    first = asyncio.create_task(ex.call("hold", call_id="first"))
    second = asyncio.create_task(ex.call("hold", call_id="second"))
    await asyncio.sleep(0.01)
    assert {c.call_id: c.status for c in ex.running()} == {"first": "running", "second": "queued"}
    assert ex.cancel(call_id="second") == 1
    assert (await second).status == "cancelled"
    gate.set()
    assert (await first).text == "held"


async def test_caller_cancellation_is_re_raised_and_reported(registry: ToolRegistry) -> None:
    started = asyncio.Event()
    tokens: list[Any] = []

    async def hang(ctx: ToolContext) -> str:
        tokens.append(ctx.cancel)
        started.set()
        await asyncio.sleep(30)
        return "late"

    define_tool(hang)
    ex = Executor(registry)
    rec = Recorder(ex)
    task = asyncio.create_task(ex.call("hang"))
    await asyncio.wait_for(started.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rec.types == ["requested", "started", "cancelled"]
    assert rec.events[-1].reason == "the caller was cancelled"
    assert tokens[0].cancelled
    assert ex.running() == []
    assert registry.stats("hang").failures == 1


async def test_caller_timeout_around_call_is_not_swallowed(registry: ToolRegistry) -> None:
    async def hang() -> str:
        await asyncio.sleep(30)
        return "late"

    define_tool(hang)
    ex = Executor(registry)
    with pytest.raises((asyncio.TimeoutError, TimeoutError)):
        await asyncio.wait_for(ex.call("hang"), 0.05)


async def test_keyboard_interrupt_propagates_after_reporting(registry: ToolRegistry) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    define_tool(interrupted, inline=True)
    ex = Executor(registry)
    rec = Recorder(ex)
    with pytest.raises(KeyboardInterrupt):
        await ex.call("interrupted")
    assert rec.types[-1] == "cancelled"
    assert ex.running() == []


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 cannot tell who cancelled")
async def test_a_tool_raising_cancelled_error_itself(registry: ToolRegistry) -> None:
    async def odd() -> None:
        raise asyncio.CancelledError

    define_tool(odd)
    result = await Executor(registry).call("odd")
    assert result.status == "cancelled"
    assert "raised CancelledError" in result.text


async def test_cancel_from_inside_a_sync_generator_stops_it(registry: ToolRegistry) -> None:
    produced: list[int] = []
    ex = Executor(registry)

    def ticker() -> Iterator[int]:
        for i in range(1000):
            produced.append(i)
            if i == 2:
                ex.cancel(run_id="gen-run", reason="enough")
            yield i
            threading.Event().wait(0.001)

    define_tool(ticker)
    result = await ex.call("ticker", run_id="gen-run")
    assert result.status == "cancelled"
    assert "enough" in result.text
    assert len(produced) < 1000
    ex.close()


# --------------------------------------------------------------------------- call_many, stats, lifecycle


async def test_call_many_keeps_order_and_isolates_failures(registry: ToolRegistry) -> None:
    async def nap(ms: int) -> int:
        await asyncio.sleep(ms / 1000)
        return ms

    define_tool(nap)
    ex = Executor(registry)
    results = await ex.call_many(
        [
            ("nap", '{"ms": 30}', "first"),
            ToolCall(name="nap", arguments={"ms": 1}),
            ("nap", '{"ms": "x"}'),
            ("missing", None),
            ("nap", {"ms": 15}),
        ],
        run_id="batch",
    )
    assert [r.status for r in results] == ["ok", "ok", "invalid_arguments", "not_found", "ok"]
    assert [r.text for r in results if r.status == "ok"] == ["30", "1", "15"]
    assert results[0].call_id == "first"
    assert len({r.call_id for r in results}) == 5
    assert await ex.call_many([]) == []


@pytest.mark.parametrize("item", [42, ("nap",), (1, "{}"), "nap"])
async def test_call_many_rejects_malformed_items(registry: ToolRegistry, item: Any) -> None:
    with pytest.raises(TypeError, match="item 1 must be a ToolCall"):
        await Executor(registry).call_many([("x", None), item])


async def test_stats_are_recorded_once_per_call(reg: ToolRegistry) -> None:
    ex = Executor(reg)
    await ex.call("add", {"a": 1, "b": 2})
    await ex.call("add", {"a": 1, "b": 2})
    await ex.call("add", {"a": "x"})
    await ex.call("nothing")
    stats = reg.stats("add")
    assert (stats.calls, stats.failures) == (3, 1)
    assert reg.stats().calls == 3


async def test_running_lists_in_flight_calls(registry: ToolRegistry) -> None:
    gate = asyncio.Event()

    async def hold() -> str:
        await gate.wait()
        return "ok"

    define_tool(hold)
    ex = Executor(registry)
    task = asyncio.create_task(ex.call("hold", call_id="c1", run_id="r", parent_call_id="p"))
    await asyncio.sleep(0.01)
    (info,) = ex.running()
    assert (info.call_id, info.run_id, info.parent_call_id, info.tool) == ("c1", "r", "p", "hold")
    assert info.status == "running"
    assert info.started > 0
    gate.set()
    await task
    assert ex.running() == []


async def test_when_a_call_arrived_and_ran_is_wall_clock_time(registry: ToolRegistry) -> None:
    """A queued call (no clock read until it waits), a running one and a finished result all
    report wall-clock times inside the window the test saw them in."""
    gate, running = asyncio.Event(), asyncio.Event()

    async def hold() -> str:
        running.set()
        await gate.wait()
        return "ok"

    define_tool(hold)
    ex = Executor(registry, max_concurrency=1)
    before = time.time()
    first = asyncio.create_task(ex.call("hold", call_id="first"))
    second = asyncio.create_task(ex.call("hold", call_id="second"))
    await asyncio.wait_for(running.wait(), 60)  # the first runs; the second got to its slot
    assert sorted(c.status for c in ex.running()) == ["queued", "running"]
    after = time.time()
    for info in ex.running():
        assert before <= info.started <= after, info
    gate.set()
    done = await asyncio.gather(first, second)
    end = time.time()
    for result in done:
        assert before <= result.started_at <= result.ended_at <= end
        assert result.ended_at - result.started_at == pytest.approx(result.duration, abs=1e-6)
    assert done[1].started_at >= done[0].started_at  # the queued one ran after the slot freed


async def test_close_cancels_in_flight_calls_and_refuses_new_ones(registry: ToolRegistry) -> None:
    started = asyncio.Event()

    async def hold() -> str:
        started.set()
        await asyncio.sleep(30)
        return "late"

    define_tool(hold)
    async with Executor(registry) as ex:
        task = asyncio.create_task(ex.call("hold"))
        await asyncio.wait_for(started.wait(), 60)
    result = await task
    assert result.status == "cancelled"
    assert "the executor was closed" in result.text
    assert ex.closed
    ex.close()  # idempotent
    with pytest.raises(KodeUsageError, match="closed"):
        await ex.call("hold")


def test_one_executor_serves_successive_event_loops(reg: ToolRegistry) -> None:
    ex = Executor(reg, max_concurrency=1)
    for _ in range(3):
        results = asyncio.run(ex.call_many([("add", {"a": 1, "b": 1})] * 3))
        assert [r.text for r in results] == ["2"] * 3
    with ex:
        pass
    assert ex.closed


def test_settings_are_exposed_read_only(reg: ToolRegistry) -> None:
    ex = Executor(reg, max_concurrency=None, group_limits={"FS": 2}, default_timeout=5)
    assert ex.max_concurrency is None
    assert ex.group_limits == {"fs": 2}
    assert (ex.default_timeout, ex.network_timeout) == (5, 60.0)
    assert "max_concurrency=None" in repr(ex)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_concurrency": True}, "max_concurrency"),
        ({"max_concurrency": "3"}, "max_concurrency"),
        ({"group_limits": {"fs": 0}}, "group_limits"),
        ({"group_limits": {3: 1}}, "group_limits"),
        ({"default_timeout": 0}, "default_timeout"),
        ({"network_timeout": -1.0}, "network_timeout"),
        ({"default_timeout": "30"}, "default_timeout"),
        ({"policy": object()}, "policy"),
        ({"approver": "yes"}, "approver"),
        ({"bus": []}, "bus"),
    ],
)
def test_bad_settings_are_configuration_errors(
    reg: ToolRegistry, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Executor(reg, **kwargs)


def test_bad_registry_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="registry"):
        Executor(object())  # type: ignore[arg-type]
