"""OTLP/HTTP export of kode_nb traces to a real collector: Arize Phoenix (its PyPI package),
started by the test on 127.0.0.1, read back through its REST API.

Phoenix is large (about 850 MB installed), so it lives in its own venv: ``bash scripts/dev.sh
test`` makes ``.venv-phoenix`` and names its Python in ``KODE_NB_PHOENIX_PYTHON``. Phoenix's
gRPC receiver binds every interface; the launcher below binds it to 127.0.0.1 instead, so
nothing the tests start listens beyond the loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import kode_nb
from kode_nb import AutoApprove, ConfigurationError, Executor, ToolRegistry
from kode_nb.interop import capture, export_otlp, pydantic_ai_toolset
from kode_nb.interop._otlp import OtlpExportError
from kode_nb.traces import Span, Trace

PHOENIX_VAR = "KODE_NB_PHOENIX_PYTHON"
SECRET = "sk-otlp-secret-0123456789abcdef"

LAUNCHER = """
import sys
import grpc.aio._server as grpc_server
add = grpc_server.Server.add_insecure_port
grpc_server.Server.add_insecure_port = lambda self, address: add(self, address.replace("[::]", "127.0.0.1"))
from phoenix.server.main import main
sys.argv = ["phoenix", "serve"]
sys.exit(main())
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a Phoenix server on 127.0.0.1, its data in a temporary folder."""
    python = os.environ.get(PHOENIX_VAR)
    if not python:
        why = (f"{PHOENIX_VAR} (a Python with arize-phoenix installed) is unset; "
               "`bash scripts/dev.sh test` sets it")  # fmt: skip
        if os.environ.get("CI"):
            pytest.fail(f"{why} (on CI it must be set)", pytrace=False)
        pytest.skip(why)
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc),
           "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    log = (work / "server.log").open("w")
    proc = subprocess.Popen([python, "-c", LAUNCHER], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not start: {(work / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _spans(base: str, trace_id: str, expected: int) -> list[dict[str, Any]]:
    """The spans Phoenix stored for ``trace_id`` (it ingests asynchronously: wait for them)."""
    deadline = time.monotonic() + 30
    while True:
        url = f"{base}/v1/projects/default/spans?limit=1000"
        with urllib.request.urlopen(url, timeout=10) as r:
            data = json.load(r)["data"]
        found = [s for s in data if s["context"]["trace_id"] == trace_id]
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def _trace() -> Trace:
    kode_nb.register_secret(SECRET)
    root = Span(kind="run", name="main")
    root.set(agent="main", model="scripted", run_id="r1", depth=0)
    turn = root.child("turn", "turn 1", turn=1)
    model = turn.child("model_call", "chat scripted", model="scripted",
                       messages=[{"role": "user", "content": f"my key is {SECRET}"}],
                       response={"text": "noted"}, usage={"input_tokens": 7, "output_tokens": 2})  # fmt: skip
    model.finish("ok")
    tool = turn.child("tool_call", "execute_tool add", tool="add", call_id="c1",
                      arguments={"a": 1, "b": 2}, result={"status": "ok", "text": "3", "is_error": False})  # fmt: skip
    tool.finish("ok")
    turn.finish("ok")
    root.finish("completed")
    return Trace(root=root)


def test_a_kode_nb_trace_arrives_with_genai_attributes_and_no_secret(phoenix: str) -> None:
    trace = _trace()
    assert export_otlp(trace, endpoint=f"{phoenix}/v1/traces") == 3
    spans = {s["name"]: s for s in _spans(phoenix, trace.trace_id, 3)}
    assert set(spans) == {"invoke_agent main", "chat scripted", "execute_tool add"}
    chat, tool = spans["chat scripted"]["attributes"], spans["execute_tool add"]["attributes"]
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.usage.input_tokens"] == 7
    assert tool["gen_ai.tool.name"] == "add"
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    root_id = spans["invoke_agent main"]["context"]["span_id"]
    assert spans["chat scripted"]["parent_id"] == root_id
    assert SECRET not in json.dumps(spans)
    assert "[REDACTED]" in chat["gen_ai.input.messages"]


@pytest.mark.anyio
async def test_a_captured_pydantic_ai_run_arrives_whole(phoenix: str, tmp_path: Path) -> None:
    reg = ToolRegistry()

    @kode_nb.tool(kind="read", registry=reg)
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: One.
            b: Two.
        """
        return a + b

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2})])
        return ModelResponse(parts=[TextPart("3")])

    agent = Agent(FunctionModel(fn), name="adder",
                  toolsets=[pydantic_ai_toolset(["add"], executor=Executor(reg, approver=AutoApprove()))])  # fmt: skip
    with capture(["pydantic-ai"]) as cap:
        await agent.run("add 1 and 2")
    trace = cap.last
    sent = export_otlp(trace, endpoint=f"{phoenix}/v1/traces", service_name="notebook")
    names = sorted(s["name"] for s in _spans(phoenix, trace.trace_id, sent))
    assert names == [
        "chat function:fn:",
        "chat function:fn:",
        "execute_tool add",
        "invoke_agent adder",
    ]


def test_a_collector_that_is_not_there_is_a_clear_error() -> None:
    with pytest.raises(OtlpExportError, match="did not accept"):
        export_otlp(_trace(), endpoint=f"http://127.0.0.1:{_free_port()}/v1/traces", timeout=2)
    with pytest.raises(ConfigurationError, match="http"):
        export_otlp(_trace(), endpoint="127.0.0.1:4318")
