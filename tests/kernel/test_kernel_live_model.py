"""The agent loop, a subagent and ``%%ask`` against a real OpenAI-compatible server, with kode_nb's
defaults (no profile, no tool_choice, streaming on).

``bash scripts/dev.sh test`` builds and starts llama.cpp's llama-server with a small model
(``scripts/llama_server.sh``, cached outside the repository) and sets ``KODE_NB_LIVE_URL`` to its
base URL (``http://127.0.0.1:PORT/v1``) and ``KODE_NB_LIVE_REQUIRED=1``, so a missing server fails
these tests instead of skipping them. Elsewhere, unset, they are skipped with that reason.
``KODE_NB_LIVE_MODEL`` picks the model id (default: the first from ``/models``),
``KODE_NB_LIVE_KEY`` a key. ``KODE_NB_LIVE_SERVER`` says which server it is: ``llama-server``
(default) or ``llama-cpp-python`` (``bash scripts/dev.sh live`` runs this file against both): the
profile kode_nb must identify, and the script that starts a second one to kill.

No case can pass by accident: each asserts that the tool ran with the arguments asked for and
that the answer carries the tool's result (a number the model cannot guess), or, for the failure
cases, that the run ended with an error naming the cause.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent

from .harness import Kernel

URL = os.environ.get("KODE_NB_LIVE_URL", "").strip()
REQUIRED = os.environ.get("KODE_NB_LIVE_REQUIRED", "") == "1"
SERVER = os.environ.get("KODE_NB_LIVE_SERVER", "").strip() or "llama-server"
SCRIPTS = {"llama-server": "llama_server.sh", "llama-cpp-python": "llama_cpp_python.sh"}
if SERVER not in SCRIPTS:  # pragma: no cover - a broken set-up
    raise RuntimeError(f"KODE_NB_LIVE_SERVER={SERVER!r}: expected one of {', '.join(SCRIPTS)}")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / SCRIPTS[SERVER]

if REQUIRED and not URL:  # pragma: no cover - a broken CI set-up
    raise RuntimeError(
        "KODE_NB_LIVE_REQUIRED=1 but KODE_NB_LIVE_URL is not set: the llama-server step of "
        "scripts/dev.sh test failed (see its output)"
    )

pytestmark = pytest.mark.skipif(
    not URL,
    reason="KODE_NB_LIVE_URL is not set (the base URL of an OpenAI-compatible server, e.g. "
    "http://127.0.0.1:8000/v1; scripts/dev.sh test starts llama-server for it)",
)

A, B = 48213, 91877
SUM = A + B  # 140090: a number the model cannot answer without the tool
NUMBERS = [(48213, 91877), (30517, 66284), (71409, 12836), (55120, 38967), (20483, 77719)][
    : int(os.environ.get("KODE_NB_LIVE_TRIES", "5"))
]
"""One try per pair: every round-trip case must succeed in all but one of its tries."""


def model_id(url: str = URL) -> str:
    given = os.environ.get("KODE_NB_LIVE_MODEL", "").strip()
    if given:
        return given
    with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=10) as response:
        listed = json.load(response)
    return str(listed["data"][0]["id"])


def model_name(url: str = URL, model: str | None = None) -> str:
    return f"openai-compatible:{url}#{model or model_id(url)}"


def model_options() -> dict[str, Any]:
    key = os.environ.get("KODE_NB_LIVE_KEY")
    return {"api_key": key} if key else {}


def live_model(url: str = URL, model: str | None = None) -> Any:
    from kode_nb.models import resolve_model

    return resolve_model(model_name(url, model), **model_options())


def uses(answer: object, number: int) -> bool:
    """``answer`` states ``number`` (digits, with or without thousands separators)."""
    digits = re.sub(r"(?<=\d)[,_ .](?=\d{3}\b)", "", str(answer))
    return str(number) in digits


@pytest.fixture
def tools(registry: ToolRegistry) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []

    def add(a: int, b: int) -> str:
        """Add two integers exactly.

        Args:
            a: The first integer.
            b: The second integer.
        """
        calls.append(("add", {"a": a, "b": b}))
        return f"{a} + {b} = {a + b}"

    def get_weather(city: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city name, e.g. Paris.
        """
        calls.append(("get_weather", {"city": city}))
        return f"It is 17 degrees Celsius and foggy in {city}."

    define_tool(add, inline=True)
    define_tool(get_weather, inline=True)
    return calls


def called(result: Any) -> list[Any]:
    return [s.attributes.get("arguments") for s in result.trace.spans() if s.kind == "tool_call"]


def notices(result: Any) -> list[str]:
    """Every notice of every model call of the run (its subagents' too)."""
    return [
        n for s in result.trace.spans() if s.kind == "model_call"
        for n in s.attributes.get("notices") or ()
    ]  # fmt: skip


def strategy_missing(result: Any) -> bool:
    """On llama-cpp-python the profile's strategy did not run (its native 'auto' step was used)."""
    ran = any("tool strategy named-then-none" in n for n in notices(result))
    return SERVER == "llama-cpp-python" and not ran


def refits(result: Any) -> int:
    """Calls read from text that did not fit their tool and were asked for again, forced."""
    return sum("does not fit its schema" in n for n in notices(result))


def check_tries(
    scenario: str, failures: list[str | None], started: float, refitted: int | None = None
) -> None:
    """At least ``KODE_NB_LIVE_MIN_OK`` tries succeeded (by default all but one: 4 of 5); the
    counts are appended to ``KODE_NB_LIVE_REPORT`` when set. ``dev.sh test`` asks for a majority
    (3 of 5): with a 0.5B model a case that succeeds 87 % of the time still misses 4 of 5 in one
    run of 8, so CI fails on a regression, not on the model's noise; the rates are measured over
    many runs (docs/model-servers.md)."""
    ok = failures.count(None)
    need = int(os.environ.get("KODE_NB_LIVE_MIN_OK") or len(failures) - 1)
    report = os.environ.get("KODE_NB_LIVE_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps({"scenario": scenario, "tries": len(failures), "ok": ok,
                                  "seconds_per_try": round((time.monotonic() - started) / len(failures), 1),
                                  "refits": refitted,
                                  "failures": [f for f in failures if f]}) + "\n")  # fmt: skip
    assert ok >= need, f"{scenario}: {ok} of {len(failures)} round trips (need {need}): {failures}"


@pytest.mark.anyio
async def test_an_agent_with_two_tools_calls_the_right_one_and_uses_its_result(
    tools: list[tuple[str, dict[str, Any]]],
) -> None:
    failures: list[str | None] = []
    refitted = 0
    started = time.monotonic()
    for a, b in NUMBERS:
        tools.clear()
        agent = Agent(model=live_model(), tools=["add", "get_weather"], max_turns=4)
        result = await agent.run(f"What is {a} + {b}? Use the add tool.")
        run = result.trace.root.attributes
        assert run["settings"]["profile"] == SERVER  # known before the first request
        refitted += refits(result)
        failures.append(
            f"status {result.status}: {result.error}" if result.status != "completed"
            else f"no strategy notice: {notices(result)}" if strategy_missing(result)
            else f"no add({a}, {b}) call: {tools}" if ("add", {"a": a, "b": b}) not in tools
            else f"answer without the result: {result.output!r}" if not uses(result.output, a + b)
            else None
        )  # fmt: skip
    check_tries("agent with two tools", failures, started, refitted)


@pytest.mark.anyio
async def test_a_subagent_is_called_and_its_answer_used(
    tools: list[tuple[str, dict[str, Any]]],
) -> None:
    model = live_model()
    register_subagent(
        AgentDefinition(
            name="calculator",
            description="Answers an arithmetic question asked in words, exactly.",
            input_config={
                "inputs": {
                    "task": {
                        "type": "string",
                        "required": True,
                        "description": "The whole question, in words.",
                    }
                }
            },
            system_prompt="Use the add tool for: {task}. Then state the sum.",
            tools=["add"],
            model=model,
            max_turns=3,
        )
    )
    failures: list[str | None] = []
    refitted = 0
    started = time.monotonic()
    for a, b in NUMBERS:
        tools.clear()
        main = Agent(model=model, tools=["calculator", "get_weather"], max_turns=4)
        result = await main.run(f"What is {a} + {b}? Use the calculator tool.")
        runs = [s.name for s in result.trace.spans() if s.kind == "run"]
        refitted += refits(result)
        failures.append(
            f"status {result.status}: {result.error}" if result.status != "completed"
            else f"no strategy notice: {notices(result)}" if strategy_missing(result)
            else f"runs {runs}, answer {result.output!r}, calls {called(result)}" if runs != ["main", "calculator"]
            else f"no add({a}, {b}) call: {tools}" if ("add", {"a": a, "b": b}) not in tools
            else f"answer without the result: {result.output!r}" if not uses(result.output, a + b)
            else None
        )  # fmt: skip
    check_tries("subagent", failures, started, refitted)


def test_ask_in_a_real_kernel_with_an_approval_clicked(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    kernel = Kernel(tmp_path_factory.mktemp("kernel"))
    failures: list[str | None] = []
    started = time.monotonic()
    try:
        kernel.ok("%load_ext kode_nb")
        kernel.ok(
            "%%tool --kind edit\nRAN = []\n\ndef add(a: int, b: int) -> str:\n"
            '    """Add two integers exactly.\n\n    Args:\n        a: The first integer.\n'
            '        b: The second integer.\n    """\n    RAN.append((a, b))\n'
            "    return f'{a} + {b} = {a + b}'\n"
        )
        kernel.ok(
            "from kode_nb.models import resolve_model\n"
            f"live = resolve_model({model_name()!r}, **{model_options()!r})"
        )
        for a, b in NUMBERS:
            kernel.ok("RAN.clear()")
            start = len(kernel.log)
            run = kernel.ok(
                f"%%ask --model $live --tools add --out h\nWhat is {a} + {b}? Use the add tool."
            )
            assert run.outputs[0]["text/plain"].startswith("agent main: running")
            clicked = approve_or_finish(kernel, start)
            kernel.ok("r = await h", timeout=600)
            status, ran = kernel.value("r.status"), kernel.value("RAN")
            answer = kernel.value("r.output")
            failures.append(
                f"status {status}: {kernel.value('r.error')}" if status != "completed"
                else f"no approval was asked (RAN={ran}, answer {answer})" if not clicked
                else f"add({a}, {b}) did not run: RAN={ran}" if ran != f"[({a}, {b})]"
                else f"answer without the result: {answer}" if not uses(answer, a + b)
                else None
            )  # fmt: skip
    finally:
        kernel.close()
    check_tries("%%ask in a kernel, approval clicked", failures, started)


def approve_or_finish(kernel: Kernel, start: int, limit: float = 600.0) -> bool:
    """Click the run's first Approve button once it is shown; ``False`` when the run ended
    without asking (no tool call). A slow model may take minutes to ask."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            kernel.click(kernel.button("Approve", start, timeout=5))
            return True
        if kernel.value("h.done()") == "True":
            return False
    raise AssertionError(f"the run neither asked for an approval nor ended within {limit:g} s")


@pytest.mark.anyio
async def test_a_wrong_model_name_is_an_error_naming_the_served_ids(
    tools: list[tuple[str, dict[str, Any]]],
) -> None:
    agent = Agent(model=live_model(model="no-such-model"), tools=["add"], max_turns=2)
    result = await agent.run(f"What is {A} + {B}?")
    assert result.status == "error"
    assert "does not serve the model 'no-such-model'" in str(result.error)
    assert repr(model_id()) in str(result.error)
    assert tools == []


@pytest.mark.anyio
async def test_a_prompt_over_the_context_window_is_an_error_naming_it(
    tools: list[tuple[str, dict[str, Any]]],
) -> None:
    agent = Agent(model=live_model(), tools=["add"], max_turns=2)
    result = await agent.run("Sum these: " + " ".join(str(i) for i in range(6000)))
    assert result.status == "error"
    assert re.search(r"HTTP 400.*context", str(result.error)), result.error
    assert tools == []


def test_the_profile_claims_only_the_tool_choices_the_server_honours() -> None:
    """A named tool_choice forces that tool exactly where the profile claims it (llama-cpp-python),
    and is ignored where it does not (llama-server, which logs "Wrong type supplied for parameter
    'tool_choice'"): asked to add with the add tool at temperature 0, the model calls add unless
    the server forces get_weather."""
    import httpx

    from kode_nb.models._profiles import PROFILES

    tools = [
        {"type": "function", "function": {"name": "add", "description": "Add two integers.",
         "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                        "required": ["a", "b"]}}},
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    ]  # fmt: skip
    body = {
        "model": model_id(),
        "messages": [{"role": "user", "content": f"What is {A} + {B}? Use the add tool."}],
        "tools": tools,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "temperature": 0,
        "max_tokens": 64,
        "stream": False,
    }
    answer = httpx.post(URL.rstrip("/") + "/chat/completions", json=body, timeout=600).json()
    message = answer["choices"][0]["message"]
    names = [c["function"]["name"] for c in message.get("tool_calls") or ()]
    forced = names == ["get_weather"] or (
        not names and '"get_weather"' in (message["content"] or "")
    )
    assert forced == ("named" in PROFILES[SERVER].tool_choices), (SERVER, message)


@pytest.fixture
def own_server() -> Iterator[tuple[str, int]]:
    """A second server of our own (the kind under test), to kill."""
    url, pid, _log = subprocess.run(
        ["bash", str(SCRIPT), "start"], check=True, capture_output=True, text=True, timeout=600
    ).stdout.split()
    try:
        yield url, int(pid)
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", pid], check=False, timeout=30)


@pytest.mark.anyio
async def test_a_server_killed_mid_run_ends_it_with_an_error_naming_the_cause(
    registry: ToolRegistry, own_server: tuple[str, int]
) -> None:
    url, pid = own_server
    ran: list[int] = []

    def add(a: int, b: int) -> str:
        """Add two integers exactly.

        Args:
            a: The first integer.
            b: The second integer.
        """
        ran.append(a + b)
        os.kill(pid, signal.SIGKILL)  # the server dies while the run waits for this result
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return str(a + b)

    define_tool(add, inline=True)
    from kode_nb.models import ModelSettings

    agent = Agent(
        model=live_model(url),
        tools=["add"],
        max_turns=3,
        settings=ModelSettings(max_retries=1),
    )
    result = await agent.run(f"What is {A} + {B}? Use the add tool.")
    assert ran == [SUM], f"the tool was not called; {result.output!r}"
    assert result.status == "error"
    assert "no response from" in str(result.error), result.error
    assert url in str(result.error)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
