"""The ``system`` and ``data`` built-ins: time, sleep, environment (with redaction), JSON, base64."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime
from typing import Any

import pytest
from conftest import Call, data_of

from kode_nb import ApprovalRequest, CallbackApprover, EventBus, Executor, Policy, ToolRegistry
from kode_nb.builtins import register_builtins, system_tools
from kode_nb.builtins._common import is_secret_name, redact_headers

pytestmark = pytest.mark.anyio


_data = data_of


# --------------------------------------------------------------------------- system


async def test_current_time_in_a_zone_and_locally(call: Call) -> None:
    before = time.time()
    paris = _data(await call("current_time", timezone="Europe/Paris"))
    after = time.time()
    assert before - 0.01 <= paris["timestamp"] <= after + 0.01
    parsed = datetime.fromisoformat(paris["iso"])
    assert parsed.utcoffset() is not None
    assert paris["timezone"] == "Europe/Paris"
    assert abs(parsed.timestamp() - paris["timestamp"]) < 0.01
    utc = _data(await call("current_time", timezone="utc"))
    assert utc["iso"].endswith("+00:00")
    local = _data(await call("current_time"))
    assert datetime.fromisoformat(local["iso"]).utcoffset() is not None
    for bad in ("Mars/Olympus", "../etc", "Europe"):
        result = await call("current_time", timezone=bad)
        assert result.status == "error"
        assert f"Unknown time zone {bad!r}" in result.text


async def test_sleep_waits_and_is_bounded(call: Call) -> None:
    started = time.monotonic()
    assert _data(await call("sleep", seconds=0.05)) == {"slept": 0.05}
    assert time.monotonic() - started >= 0.05
    assert (await call("sleep", seconds=301)).status == "invalid_arguments"
    assert (await call("sleep", seconds=-1)).status == "invalid_arguments"


async def test_sleep_is_cancellable(executor: Executor) -> None:
    started = asyncio.Event()
    executor.bus.subscribe(lambda event: started.set() if event.type == "started" else None)
    task = asyncio.create_task(executor.call("sleep", {"seconds": 60}, call_id="s1"))
    await asyncio.wait_for(started.wait(), 60)
    assert executor.cancel(call_id="s1") == 1
    assert (await task).status == "cancelled"


async def test_get_env_redacts_secret_names(call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KODE_PLAIN", "visible")
    monkeypatch.setenv("KODE_API_KEY", "sk-12345")
    monkeypatch.delenv("KODE_MISSING", raising=False)
    assert _data(await call("get_env", key="KODE_PLAIN")) == {
        "key": "KODE_PLAIN", "value": "visible", "set": True,
    }  # fmt: skip
    secret = await call("get_env", key="KODE_API_KEY")
    assert "sk-12345" not in secret.text
    assert _data(secret) == {
        "key": "KODE_API_KEY",
        "value": "<redacted>",
        "set": True,
        "redacted": True,
    }
    assert _data(await call("get_env", key="KODE_MISSING"))["set"] is False
    assert "Invalid environment variable name" in (await call("get_env", key="A=B")).text


async def test_set_env_sets_and_redacts(call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KODE_DB_PASSWORD", "old-secret")
    monkeypatch.delenv("KODE_COLOR", raising=False)
    assert _data(await call("set_env", key="KODE_COLOR", value="blue")) == {
        "key": "KODE_COLOR", "value": "blue", "previous": None,
    }  # fmt: skip
    assert os.environ["KODE_COLOR"] == "blue"
    result = await call("set_env", key="KODE_DB_PASSWORD", value="new-secret")
    assert os.environ["KODE_DB_PASSWORD"] == "new-secret"
    assert "secret" not in result.text.replace("redacted", "")
    assert "Invalid environment variable name" in (await call("set_env", key="", value="x")).text
    assert "NUL" in (await call("set_env", key="KODE_COLOR", value="a\x00b")).text
    assert os.environ["KODE_COLOR"] == "blue"


def test_set_env_asks_and_its_preview_redacts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KODE_TOKEN", "abc")
    tools = {t.name: t for t in system_tools()}
    policy = Policy()
    assert policy.approval_for(tools["set_env"], {})[0] == "ask"
    assert all(
        policy.approval_for(tools[n], {})[0] == "auto" for n in ("get_env", "current_time", "sleep")
    )
    preview = tools["set_env"].preview
    assert preview is not None
    assert preview({"key": "KODE_TOKEN", "value": "xyz"}, None) == (
        "set KODE_TOKEN='<redacted>' (currently '<redacted>')"
    )


def test_secret_names_and_header_redaction() -> None:
    secret = ["OPENAI_API_KEY", "github_token", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "MYSECRET"]
    plain = ["HOME", "PATH", "KEYBOARD_LAYOUT", "TOKENIZERS_PARALLELISM"]
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []
    headers = [
        ("Authorization", "Bearer x"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
        ("X", "y"),
    ]
    assert redact_headers(headers) == {
        "Authorization": "<redacted>", "Set-Cookie": "<redacted>, <redacted>", "X": "y",
    }  # fmt: skip


# --------------------------------------------------------------------------- data


async def test_json_parse_and_stringify(call: Call) -> None:
    assert _data(await call("json_parse", text='{"a": [1, 2.5, null, "é"]}')) == {
        "data": {"a": [1, 2.5, None, "é"]}
    }
    bad = await call("json_parse", text='{"a": 1')
    assert bad.text == "Invalid JSON: Expecting ',' delimiter at line 1 column 8 (character 7)."
    compact = await call("json_stringify", data={"b": 1, "a": "é"})
    assert compact.text == '{"b":1,"a":"é"}'
    pretty = await call("json_stringify", data={"b": 1, "a": [1]}, pretty=True, sort_keys=True)
    assert pretty.text == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
    assert (await call("json_stringify", data=None)).text == "null"


async def test_base64_round_trips_and_errors(call: Call) -> None:
    assert (await call("base64_encode", text="héllo?>")).text == "aMOpbGxvPz4="
    assert (await call("base64_encode", text="héllo?>", url_safe=True)).text == "aMOpbGxvPz4="
    assert (await call("base64_encode", text="??>", url_safe=True)).text == "Pz8-"
    assert (await call("base64_decode", encoded="aMOpbGxvPz4")).text == "héllo?>"  # no padding
    assert (await call("base64_decode", encoded="Pz8-", url_safe=True)).text == "??>"
    hint = await call("base64_decode", encoded="Pz8-")
    assert "Invalid base64" in hint.text
    assert "url_safe=true" in hint.text
    assert (await call("base64_encode", text="é", encoding="latin-1")).text == "6Q=="
    assert (await call("base64_decode", encoded="6Q==", encoding="latin-1")).text == "é"
    binary = await call("base64_decode", encoded="/wD+")
    assert "The decoded data (3 bytes) is not utf-8 text" in binary.text
    assert "Unknown encoding" in (await call("base64_encode", text="x", encoding="nope")).text
    assert (
        "cannot be encoded as ascii"
        in (await call("base64_encode", text="é", encoding="ascii")).text
    )


async def test_secrets_are_redacted_in_approvals_and_events(
    registry: ToolRegistry, policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KODE_NEW_TOKEN", raising=False)
    register_builtins(registry, ("system", "runtime"))
    requests: list[ApprovalRequest] = []
    events: list[Any] = []
    bus = EventBus()
    bus.subscribe(events.append, types=["approval_requested", "started", "completed"])

    def approver(request: ApprovalRequest) -> bool:
        requests.append(request)
        return True

    with Executor(registry, policy=policy, approver=CallbackApprover(approver), bus=bus) as ex:
        result = await ex.call("set_env", {"key": "KODE_NEW_TOKEN", "value": "hunter2"})
        ran = await ex.call(
            "exec", {"command": "echo $KODE_PASSWORD", "env": {"KODE_PASSWORD": "pw123", "A": "1"}}
        )
    assert os.environ["KODE_NEW_TOKEN"] == "hunter2"
    assert ran.text.startswith("pw123\n")  # the command itself gets the real value
    assert "hunter2" not in result.text
    assert requests[0].arguments == {"key": "KODE_NEW_TOKEN", "value": "<redacted>"}
    assert requests[0].preview == "set KODE_NEW_TOKEN='<redacted>' (currently unset)"
    assert requests[1].arguments["env"] == {"KODE_PASSWORD": "<redacted>", "A": "1"}
    assert "pw123" not in (requests[1].preview or "")
    assert [e.type for e in events] == ["approval_requested", "started", "completed"] * 2
    for event in events[:5]:  # the last one is exec's output, which echoes the password
        assert "hunter2" not in repr(event)
        assert "pw123" not in repr(event)
