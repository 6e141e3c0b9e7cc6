"""Agents and tools for the kode_nb.many tests.

The tools are made inside functions, so cloudpickle ships them by value to Dask and Ray
workers (whose processes cannot import this test module).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kode_nb import Agent, Executor, ToolRegistry, define_tool
from kode_nb.models import ScriptedModel, call


def call_log(calls: list[Any] | None) -> Callable[[Any], None]:
    """A recorder of a tool's calls into ``calls`` that does not decide its answers: the run
    cache's key leaves it out (``__kode_nb_cache_key__``), so a re-run of the same tool is
    served. (Its class is made here, so cloudpickle ships it to workers by value.)"""

    class CallLog:
        def __call__(self, value: Any) -> None:
            if calls is not None:
                calls.append(value)

        def __kode_nb_cache_key__(self) -> str:
            return "a call log"

    return CallLog()


def square_agent(calls: list[int] | None = None, *, kind: str = "read") -> Agent:
    """An agent that squares the number in its prompt with the `square` tool (kind ``kind``:
    ``edit`` asks for approval), then answers ``"n^2 = m"``. ``calls`` collects each x squared."""
    reg = ToolRegistry()
    record = call_log(calls)

    def square(x: int) -> int:
        """Square a number."""
        record(x)
        if x < 0:
            raise ValueError("negative numbers are not allowed")
        return x * x

    define_tool(square, registry=reg, kind=kind)

    def ask(request: Any) -> Any:
        return call("square", x=int(request.messages[-1].content.split()[-1]))

    def answer(request: Any) -> str:
        result = request.messages[-1].content[0]
        text = getattr(result, "text", None) or str(getattr(result, "data", result))
        return f"squared: {text}"

    model = ScriptedModel([ask, answer])
    return Agent("squarer", model=model, tools=["square"], executor=Executor(reg))


def crash_agent(marker_dir: str) -> Agent:
    """An agent whose tool kills its own process: once per row (a marker file remembers) for
    prompts ``once N``, every time for ``always N``, never for ``fine N``."""
    reg = ToolRegistry()

    def work(mode: str, n: int) -> str:
        """Do some work."""
        marker = Path(marker_dir) / f"{mode}-{n}"
        if mode == "always" or (mode == "once" and not marker.exists()):
            marker.touch()
            os._exit(17)
        return f"done {n} in {os.getpid()}"

    define_tool(work, registry=reg)

    def ask(request: Any) -> Any:
        mode, n = request.messages[-1].content.split()
        return call("work", mode=mode, n=int(n))

    model = ScriptedModel([ask, lambda r: "finished"])
    return Agent("crasher", model=model, tools=["work"], executor=Executor(reg))


def one_tool_agent(
    name: str, tool: Any, argument: str, prefix: str, *, kind: str = "read"
) -> Agent:
    """An agent that calls ``tool`` once with ``argument`` = the prompt's last word, then answers
    ``"<prefix>: <the tool's result>"``. (Everything the model needs is made in here, so
    cloudpickle ships it by value to Dask and Ray workers.)"""
    reg = ToolRegistry()
    define_tool(tool, registry=reg, kind=kind)

    def result_text(request: Any) -> str:
        result = request.messages[-1].content[0]
        return getattr(result, "text", None) or str(getattr(result, "data", result))

    model = ScriptedModel([
        lambda r: call(tool.__name__, **{argument: r.messages[-1].content.split()[-1]}),
        lambda r: f"{prefix}: {result_text(r)}",
    ])  # fmt: skip
    return Agent(name, model=model, tools=[tool.__name__], executor=Executor(reg))


def refund_agent(marker_dir: str) -> Agent:
    """An agent whose ``issue_refund`` tool (kind ``edit``: it asks for approval) leaves a file
    ``refund-<order>`` in ``marker_dir`` when it runs, so a test sees whether it ran anywhere."""

    def issue_refund(order: str) -> str:
        """Refund an order."""
        (Path(marker_dir) / f"refund-{order}").touch()
        return f"refunded {order}"

    return one_tool_agent("refunder", issue_refund, "order", "done", kind="edit")


def leaky_agent(secret: str) -> Agent:
    """An agent whose ``lookup`` tool returns (and prints) ``secret``, and whose answer repeats
    the tool's result: the secret is in the output, the trace and what the tool printed."""

    def lookup(name: str) -> str:
        """Look a credential up."""
        print(f"found {secret} for {name}")
        return f"{name} uses {secret}"

    return one_tool_agent("leaker", lookup, "name", "answer")


def local_cluster(distributed: Any) -> Any:
    """A Dask LocalCluster of 2 worker processes (1 thread each) on 127.0.0.1; its HTTP server
    on a free loopback port (dashboard_address=None still tries port 8787)."""
    return distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", silence_logs=50,
    )  # fmt: skip
