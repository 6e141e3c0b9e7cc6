"""Call and run records (what a saved notebook keeps) never hold a secret: every field of the
record, its HTML and its text fallback are redacted when the record is built."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from kode_nb import Agent, ToolRegistry, ToolResult, define_tool
from kode_nb._redact import register_secret, unregister_secret
from kode_nb.execution import Executor
from kode_nb.models import ScriptedModel, call
from kode_nb.ui.records import Record, call_record, run_record

SECRET = "hunter2-correct-horse-battery"
"""Registered with the session, like an API key given to a model."""
SHAPED = "sk-live-1234567890abcdefABCDEF"
"""Unregistered, but shaped like a provider key."""


@pytest.fixture(autouse=True)
def secret() -> Iterator[None]:
    register_secret(SECRET)
    yield
    unregister_secret(SECRET)


def _everything(record: Record) -> str:
    return json.dumps(record.data) + record.html + record.text


def test_a_call_record_redacts_arguments_stream_result_and_details() -> None:
    result = ToolResult.from_text(
        f"logged in with {SECRET} and {SHAPED}", tool="login", duration=0.2
    )
    result = ToolResult(
        content=result.content,
        details={"token_used": SECRET, "note": f"key {SHAPED}"},
        tool="login",
        duration=0.2,
    )
    record = call_record(
        tool="login",
        call_id="c1",
        kind="edit",
        arguments={"user": "ann", "password": "pw-not-registered", "note": SECRET},
        result=result,
        stream=f"connecting with {SECRET}…\nkey {SHAPED}\n",
        updates=2,
    )
    shown = _everything(record)
    assert SECRET not in shown
    assert SHAPED not in shown
    assert "pw-not-registered" not in shown  # the value of a key naming a credential
    assert record.data["arguments"]["user"] == "ann"  # the rest is kept
    assert record.data["result"]["text"] == "logged in with [REDACTED] and [REDACTED]"
    assert record.data["updates"]["text"] == "connecting with [REDACTED]…\nkey [REDACTED]\n"
    assert record.data["arguments"]["note"] == "[REDACTED]"


def test_a_run_record_redacts_prompt_output_error_and_trace() -> None:
    registry = ToolRegistry()

    def echo(text: str) -> str:
        """Echo the text."""
        return text

    define_tool(echo, registry=registry)
    model = ScriptedModel([call("echo", text=f"use {SECRET}"), f"Done: {SECRET} and {SHAPED}"])
    agent = Agent(model=model, tools=["echo"], executor=Executor(registry))
    result = asyncio.run(agent.run(f"Log in with {SECRET}"))
    assert result.output == f"Done: {SECRET} and {SHAPED}"  # the run's own value is whole
    record = run_record(agent="main", model="scripted", result=result, prompt=f"pw {SECRET}")
    shown = _everything(record)
    assert SECRET not in shown
    assert SHAPED not in shown
    assert record.data["output"] == "Done: [REDACTED] and [REDACTED]"
    assert record.data["prompt"] == "pw [REDACTED]"
    failed = run_record(
        agent="main", model="scripted", result=None, error=f"HTTP 401 for key {SHAPED}"
    )
    assert SHAPED not in _everything(failed)
    assert failed.data["error"] == "HTTP 401 for key [REDACTED]"
