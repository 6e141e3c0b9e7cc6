"""Agents and tools for the kode_nb.many tests.

The tools are made inside functions, so cloudpickle ships them by value to Dask and Ray
workers (whose processes cannot import this test module).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kode_nb import Agent, Executor, ToolRegistry, define_tool
from kode_nb.models import ScriptedModel, call


def square_agent(calls: list[int] | None = None, *, kind: str = "read") -> Agent:
    """An agent that squares the number in its prompt with the `square` tool (kind ``kind``:
    ``edit`` asks for approval), then answers ``"n^2 = m"``. ``calls`` collects each x squared."""
    reg = ToolRegistry()

    def square(x: int) -> int:
        """Square a number."""
        if calls is not None:
            calls.append(x)
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
