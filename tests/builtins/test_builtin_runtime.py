"""The ``exec`` built-in: streaming, output caps, timeouts and cancellation kill the process group."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Call

from kode_nb import Executor, Policy, ToolContext, ToolRegistry
from kode_nb.builtins import ExecConfig, register_builtins, runtime_tools
from kode_nb.errors import ConfigurationError

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.name != "posix", reason="exec needs POSIX process groups"),
]


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    except IndexError:
        return False
    return state in ("Z", "X")


def _wait_gone(pid: int, within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.01)
    return _gone(pid)


async def test_output_and_exit_code(call: Call) -> None:
    result = await call("exec", command="echo hello; echo oops >&2; exit 3")
    assert result.status == "ok"
    assert result.text.startswith("hello\n")
    assert "[stderr] oops\n" in result.text
    assert result.text.endswith("[exit code 3]")
    assert result.details["exit_code"] == 3
    quiet = await call("exec", command="true")
    assert quiet.text == "(no output)\n[exit code 0]"


async def test_stdout_and_stderr_stream_in_order(executor: Executor, root: Path) -> None:
    updates: list[str] = []

    def on_update(update: Any) -> None:
        updates.append(update)
        if update == "out1\n":
            (root / "f1").touch()
        if update == "[stderr] err1\n":
            (root / "f2").touch()

    wait = "i=0; while [ ! -e {0} ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done"
    command = f"echo out1; {wait.format('f1')}; echo err1 >&2; {wait.format('f2')}; echo out2"
    result = await executor.call("exec", {"command": command}, on_update=on_update)
    assert updates == ["out1\n", "[stderr] err1\n", "out2\n"]
    assert result.text == "out1\n[stderr] err1\nout2\n[exit code 0]"


async def test_a_lot_of_output_is_capped_keeping_head_and_tail(
    executor: Executor, registry: ToolRegistry
) -> None:
    register_builtins(
        registry, ("runtime",), runtime=ExecConfig(max_output_chars=200, max_streamed_chars=50)
    )
    updates: list[str] = []
    result = await executor.call("exec", {"command": "seq 1 100000"}, on_update=updates.append)
    text = result.text
    assert text.startswith("1\n2\n3\n")
    assert text.endswith("99999\n100000\n[exit code 0]")
    assert "lines (" in text
    assert "characters) of output dropped here" in text
    assert len(text) < 400
    assert result.details["dropped_lines"] > 99_000
    assert updates[-1].startswith("[... output too long: no longer streamed")
    assert len(updates) < 30


async def test_long_lines_are_split(executor: Executor) -> None:
    updates: list[str] = []
    await executor.call(
        "exec", {"command": "head -c 20000 /dev/zero | tr '\\0' a"}, on_update=updates.append
    )
    assert [len(u) for u in updates] == [8193, 8193, 3617]


async def test_timeout_kills_the_whole_process_group(
    executor: Executor, registry: ToolRegistry
) -> None:
    register_builtins(registry, ("runtime",), runtime=ExecConfig(kill_grace=0.2))
    # A child that ignores SIGTERM (so SIGKILL is needed) and a grandchild of it.
    command = "sh -c 'trap \"\" TERM; sleep 60 & echo $!; wait' & echo $!; wait"
    started = time.monotonic()
    result = await executor.call("exec", {"command": command, "timeout": 0.3})
    assert time.monotonic() - started < 5
    assert result.status == "timed_out"
    assert result.is_error
    assert "[timed out after 0.3 s: the process group was killed]" in result.text
    pids = [int(line) for line in result.text.splitlines() if line.isdigit()]
    assert len(pids) == 2
    for pid in pids:
        assert _wait_gone(pid), f"process {pid} survived the timeout"


async def test_cancelling_the_call_kills_the_process_group(executor: Executor) -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(
        executor.call(
            "exec", {"command": "sleep 60 & echo $!; wait"}, call_id="c1",
            on_update=seen.put_nowait,
        )
    )  # fmt: skip
    grandchild = int((await asyncio.wait_for(seen.get(), 60)).strip())
    assert executor.cancel(call_id="c1") == 1
    result = await task
    assert result.status == "cancelled"
    assert _wait_gone(grandchild)


async def test_cancelling_the_caller_task_kills_the_process_group(executor: Executor) -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(
        executor.call("exec", {"command": "sleep 60 & echo $!; wait"}, on_update=seen.put_nowait)
    )
    grandchild = int((await asyncio.wait_for(seen.get(), 60)).strip())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _wait_gone(grandchild)


async def test_background_process_holding_the_output_is_stopped(call: Call) -> None:
    result = await call("exec", command="sleep 60 & echo $!")
    assert "[background processes still holding the output were stopped]" in result.text
    assert _wait_gone(int(result.text.splitlines()[0]))


async def test_cwd_is_confined_and_env_is_passed(
    call: Call, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "sub").mkdir()
    assert (await call("exec", command="pwd", cwd="sub")).text.startswith(f"{root / 'sub'}\n")
    assert (await call("exec", command="pwd")).text.startswith(f"{root}\n")
    denied = await call("exec", command="pwd", cwd=str(outside))
    assert denied.status == "denied"
    assert "not an existing directory" in (await call("exec", command="pwd", cwd="nope")).text
    monkeypatch.setenv("KODE_TEST_INHERITED", "inherited")
    result = await call("exec", command="echo $KODE_TEST_INHERITED $EXTRA", env={"EXTRA": "given"})
    assert result.text.startswith("inherited given\n")
    assert (
        "Invalid environment variable name"
        in (await call("exec", command="true", env={"A=B": "x"})).text
    )
    assert "The command is empty" in (await call("exec", command="  ")).text
    too_long = await call("exec", command="true", timeout=10_000)
    assert too_long.status == "invalid_arguments"


def test_exec_asks_for_approval_and_previews_with_secrets_redacted(
    ctx: ToolContext, policy: Policy
) -> None:
    (tool,) = runtime_tools()
    assert policy.approval_for(tool, {"command": "ls"})[0] == "ask"
    assert (tool.kind.value, tool.category.value, tool.groups) == (
        "execute", "code", ("runtime", "builtin"),
    )  # fmt: skip
    preview = tool.preview
    assert preview is not None
    text = preview({"command": "make", "cwd": "src", "env": {"API_TOKEN": "abc", "X": "1"}}, ctx)
    assert text == "$ make\n(in src)\n(env API_TOKEN=<redacted>)\n(env X=1)"


def test_exec_config_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_output_chars"):
        ExecConfig(max_output_chars=1)
    with pytest.raises(ConfigurationError, match="kill_grace"):
        ExecConfig(kill_grace=0)
