"""The neutral protocol: collect(), ToolSpec, the error tree, the public names, HTTP helpers."""

from __future__ import annotations

import email.utils
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import httpx
import pytest

import kode_nb
import kode_nb.models as models
from kode_nb.errors import ConfigurationError, KodeError, KodeUsageError
from kode_nb.models import (
    AnthropicModel,
    AssistantMessage,
    Finish,
    Model,
    ModelError,
    ModelHTTPError,
    ModelProtocolError,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ScriptExhausted,
    ScriptMismatch,
    TestModel,
    TextChunk,
    ToolCallPart,
    ToolCallRequest,
    ToolSpec,
    UsageInfo,
    UserMessage,
    collect,
    resolve_model,
)
from kode_nb.models._http import error_message, iter_sse, redact, retry_after
from kode_nb.models.base import ModelEvent
from kode_nb.models.openai_compat import OpenAIChatModel
from kode_nb.tools import ToolRegistry

pytestmark = pytest.mark.anyio


async def _stream(*events: ModelEvent) -> AsyncIterator[ModelEvent]:
    for event in events:
        yield event


async def test_collect_folds_a_stream() -> None:
    seen: list[str] = []
    response = await collect(
        _stream(
            TextChunk(text="Hel"),
            TextChunk(text="lo"),
            ToolCallPart(id="1", name="a", arguments="{}"),
            UsageInfo(input_tokens=3, output_tokens=1),
            UsageInfo(input_tokens=0, output_tokens=2),
            Finish(stop_reason="max_tokens"),
        ),
        on_text=seen.append,
    )
    assert response == ModelResponse(
        text="Hello",
        tool_calls=(ToolCallRequest(id="1", name="a", arguments="{}"),),
        usage=UsageInfo(input_tokens=3, output_tokens=3),
        stop_reason="max_tokens",
    )
    assert seen == ["Hel", "lo"]
    assert response.to_message() == AssistantMessage(text="Hello", tool_calls=response.tool_calls)
    # without a Finish the reason is inferred
    assert (await collect(_stream(TextChunk(text="x")))).stop_reason == "end_turn"
    calls_only = await collect(_stream(ToolCallPart(id="1", name="a", arguments="")))
    assert calls_only.stop_reason == "tool_calls"


def test_tool_spec_from_tool_keeps_the_validator(registry: ToolRegistry) -> None:
    def area(width: float, height: float) -> float:
        """Area of a rectangle."""
        return width * height

    spec = ToolSpec.from_tool(kode_nb.define_tool(area, registry=registry))
    assert spec.name == "area"
    assert spec.description == "Area of a rectangle."
    assert spec.parameters["required"] == ["width", "height"]
    assert spec.validator is not None
    assert spec == ToolSpec(name="area", description=spec.description, parameters=spec.parameters)


def test_every_model_satisfies_the_protocol() -> None:
    for model in (
        ScriptedModel(["hi"]),
        TestModel(),
        OpenAIChatModel("gpt-4.1-mini"),
        AnthropicModel("claude-x"),
    ):
        assert isinstance(model, Model)
        assert model.name


def test_error_tree() -> None:
    for cls in (
        ModelHTTPError,
        ModelProtocolError,
        ScriptExhausted,
        ScriptMismatch,
        models.ModelConnectionError,
    ):
        assert issubclass(cls, ModelError)
    assert issubclass(ModelError, KodeError)
    assert not issubclass(ModelError, KodeUsageError)
    err = ModelHTTPError(503, "", model="openai:x")
    assert str(err) == "HTTP 503 from openai:x"


def test_public_names_are_sorted_and_importable() -> None:
    assert models.__all__ == sorted(models.__all__)
    for name in models.__all__:
        assert getattr(models, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = models.Nope


def test_importing_kode_nb_does_not_import_models_or_httpx_for_offline_models() -> None:
    code = (
        "import sys, kode_nb; assert 'kode_nb.models' not in sys.modules; "
        "import kode_nb.models; assert 'httpx' not in sys.modules, 'httpx'; "
        "kode_nb.models.OpenAIChatModel; assert 'httpx' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --------------------------------------------------------------------------- HTTP helpers


def test_redact_scrubs_keys_and_tokens() -> None:
    text = (
        "Incorrect API key provided: sk-proj-abc***xyz9. header Authorization: Bearer abc.def-123456 "
        '{"api_key": "hunter2-long-secret"} my-own-secret-value'
    )
    out = redact(text, ["my-own-secret-value"])
    for secret in ("sk-proj-abc", "abc.def-123456", "hunter2-long-secret", "my-own-secret-value"):
        assert secret not in out
    assert "Bearer [redacted]" in out
    assert redact("nothing to hide") == "nothing to hide"


def test_retry_after_forms() -> None:
    assert retry_after(httpx.Headers({"retry-after": "2"})) == 2.0
    assert retry_after(httpx.Headers({"retry-after": "0.5", "retry-after-ms": "120"})) == 0.12
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers()) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay = retry_after(httpx.Headers({"retry-after": future}))
    assert delay is not None
    assert 25 < delay <= 31


async def test_sse_parsing() -> None:
    async def lines() -> AsyncIterator[str]:
        for line in [
            ": comment",
            "event: a",
            "data: 1",
            "data: 2",
            "",
            "",
            "id: 7",
            "data:x",
            "",
            "data: tail",
        ]:
            yield line

    events = [(e.event, e.data) async for e in iter_sse(lines())]
    assert events == [("a", "1\n2"), ("message", "x"), ("message", "tail")]


def test_error_message_shapes() -> None:
    assert error_message('{"error": {"message": "bad", "type": "invalid_request_error"}}') == (
        "invalid_request_error: bad"
    )
    assert error_message('{"error": "model \\"x\\" not found"}') == 'model "x" not found'
    assert error_message('{"message": "nope"}') == "nope"
    assert error_message("<html>Bad Gateway</html>") == "<html>Bad Gateway</html>"


# --------------------------------------------------------------------------- resolve_model


def test_resolve_model_names() -> None:
    assert resolve_model("test").name == "test"
    assert isinstance(resolve_model("TEST", seed=3), TestModel)
    scripted = resolve_model("scripted", script=["hi"])
    assert isinstance(scripted, ScriptedModel)
    assert resolve_model(scripted) is scripted
    openai = resolve_model("openai:gpt-4.1-mini", api_key="sk-x")
    assert isinstance(openai, OpenAIChatModel)
    assert (openai.name, openai.model, openai.base_url) == (
        "openai:gpt-4.1-mini",
        "gpt-4.1-mini",
        "https://api.openai.com/v1",
    )
    assert "sk-x" not in repr(openai)
    claude = resolve_model("anthropic:claude-sonnet-4-20250514")
    assert isinstance(claude, AnthropicModel)
    local = resolve_model("openai-compatible:http://localhost:8000/v1#Qwen/Qwen2.5-7B", api_key="k")
    assert isinstance(local, OpenAIChatModel)
    assert (local.model, local.base_url, local.api_key_env) == (
        "Qwen/Qwen2.5-7B",
        "http://localhost:8000/v1",
        None,
    )


@pytest.mark.parametrize(
    ("spec", "options", "match"),
    [
        ("gpt-4", {}, "unknown model 'gpt-4'"),
        ("opneai:gpt-4", {}, "Did you mean 'openai'"),
        ("openai:", {}, "has no model after the ':'"),
        ("openai-compatible:http://127.0.0.1:11434/v1", {}, "openai-compatible:<base url>#<model>"),
        ("openai-compatible:127.0.0.1:11434/v1#m", {}, "base_url must start with http"),
        ("scripted", {}, "needs script="),
        ("test", {"sede": 1}, r"unknown option\(s\) \['sede'\]; TestModel accepts: calls_per_tool"),
        ("test", {"calls_per_tool": -1}, "calls_per_tool must be an integer"),
        ("openai:gpt-4.1", {"retry_base_delay": -1}, "must be >= 0"),
    ],
)
def test_resolve_model_errors(spec: str, options: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        resolve_model(spec, **options)


def test_resolve_model_rejects_options_for_a_model_object_and_non_models() -> None:
    with pytest.raises(ConfigurationError, match="only apply to a model name"):
        resolve_model(TestModel(), seed=1)
    with pytest.raises(ConfigurationError, match="got int"):
        resolve_model(42)  # type: ignore[arg-type]


def test_model_request_defaults() -> None:
    req = ModelRequest(system="", messages=(UserMessage(content="x"),))
    assert req.tools == ()
    assert req.settings.max_retries == 3
    assert req.settings.timeout == 60.0
