"""The approval protocol: decisions, the shipped approvers, coercion, and asking one safely."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kode_nb import (
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    AutoApprove,
    AutoDeny,
    CallbackApprover,
    ConfigurationError,
    approve,
    deny,
)
from kode_nb.execution._running import decide, preview_text

pytestmark = pytest.mark.anyio


def request(**changes: Any) -> ApprovalRequest:
    base = ApprovalRequest(
        tool="write_file", kind="edit", arguments={"path": "a.txt"}, call_id="c1",
        reason="edit tools ask by default",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_decision_helpers() -> None:
    assert approve() == ApprovalDecision(approved=True)
    edited = approve({"path": "b.txt"}, always=True, by="me")
    assert (edited.approved, edited.arguments, edited.always, edited.decided_by) == (
        True, {"path": "b.txt"}, True, "me",
    )  # fmt: skip
    refused = deny("too risky", by="you")
    assert (refused.approved, refused.reason, refused.decided_by) == (False, "too risky", "you")
    assert deny().reason is None


def test_requests_and_decisions_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        request().tool = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        approve().approved = False  # type: ignore[misc]


async def test_auto_approve_and_auto_deny() -> None:
    yes = await AutoApprove()(request())
    assert (yes.approved, yes.decided_by) == (True, "auto-approve")
    no = await AutoDeny("not in CI")(request())
    assert (no.approved, no.reason, no.decided_by) == (False, "not in CI", "auto-deny")
    assert "Denied automatically" in (await AutoDeny()(request())).reason  # type: ignore[operator]
    assert repr(AutoApprove()) == "AutoApprove()"
    assert repr(AutoDeny("x")) == "AutoDeny('x')"


def test_shipped_approvers_satisfy_the_protocol() -> None:
    for approver in (AutoApprove(), AutoDeny(), CallbackApprover(lambda r: True)):
        assert isinstance(approver, Approver)


@pytest.mark.parametrize(
    ("returned", "approved", "reason"),
    [
        (True, True, None),
        (False, False, None),
        (None, False, None),
        ("outside the project", False, "outside the project"),
        (approve(), True, None),
        (deny("nope"), False, "nope"),
    ],
)
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_callback_approver_coerces_what_the_callback_returns(
    returned: Any, approved: bool, reason: str | None, is_async: bool
) -> None:
    seen: list[ApprovalRequest] = []

    def sync_fn(req: ApprovalRequest) -> Any:
        seen.append(req)
        return returned

    async def async_fn(req: ApprovalRequest) -> Any:
        return sync_fn(req)

    approver = CallbackApprover(async_fn if is_async else sync_fn, name="reviewer")
    decision = await approver(request())
    assert (decision.approved, decision.reason) == (approved, reason)
    assert decision.decided_by == "reviewer"
    assert seen == [request()]


async def test_callback_approver_keeps_an_explicit_decided_by_and_names_itself() -> None:
    def reviewer(req: ApprovalRequest) -> ApprovalDecision:
        return approve(by="alice")

    approver = CallbackApprover(reviewer)
    assert (await approver(request())).decided_by == "alice"
    assert approver.name == "reviewer"
    assert repr(approver) == "CallbackApprover(reviewer)"


async def test_callback_approver_rejects_an_unusable_answer() -> None:
    approver = CallbackApprover(lambda r: 42, name="confused")
    with pytest.raises(TypeError, match="approver 'confused' returned 42"):
        await approver(request())


def test_callback_approver_needs_a_callable() -> None:
    with pytest.raises(ConfigurationError, match="needs a callable"):
        CallbackApprover("yes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- asking safely


async def test_decide_without_an_approver_denies_and_explains() -> None:
    decision, message = await decide(None, request())
    assert not decision.approved
    assert decision.decided_by == "no-approver"
    assert message is not None
    assert message.startswith("Tool 'write_file' needs approval (edit tools ask by default)")
    assert "no approver is configured" in message
    assert "Executor(approver=...)" in message
    assert decision.reason == message


async def test_decide_accepts_plain_functions_and_coroutines() -> None:
    async def later(req: ApprovalRequest) -> str:
        return "not today"

    decision, message = await decide(lambda r: True, request())
    assert decision.approved
    assert decision.decided_by == "<lambda>"
    assert message is None
    decision, message = await decide(later, request())
    assert (decision.approved, decision.decided_by) == (False, "later")
    assert message == "The user denied this call: not today"


@pytest.mark.parametrize(
    ("approver", "expected"),
    [
        (lambda r: 1 / 0, "raised ZeroDivisionError: division by zero"),
        (lambda r: ["yes"], "raised TypeError: approver '<lambda>' returned ['yes']"),
        (CallbackApprover(lambda r: {}, name="dicty"), "approver dicty raised TypeError"),
    ],
)
async def test_decide_turns_a_failing_approver_into_a_denial(approver: Any, expected: str) -> None:
    decision, message = await decide(approver, request())
    assert not decision.approved
    assert message is not None
    assert message.startswith("Tool 'write_file' was not run: asking for approval failed")
    assert expected in message


async def test_preview_text() -> None:
    async def async_preview(args: Any, ctx: Any) -> str:
        return f"+ {args['path']}"

    assert await preview_text(lambda a, c: f"- {a['path']}", {"path": "x"}, None) == "- x"
    assert await preview_text(async_preview, {"path": "x"}, None) == "+ x"
    assert await preview_text(lambda a, c: None, {}, None) is None
    assert await preview_text(lambda a, c: 1 / 0, {}, None) == (
        "(preview failed: ZeroDivisionError: division by zero)"
    )
