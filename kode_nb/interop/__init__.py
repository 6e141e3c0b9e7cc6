"""kode_nb in the agent frameworks people already use: pydantic-ai, the OpenAI Agents SDK,
LangChain/LangGraph.

* **Tools** — registered kode_nb tools (an allowlist of names and selectors: ``group:fs``,
  ``kind:edit``, ``profile:readonly``, ``*``) as a pydantic-ai toolset
  (:func:`pydantic_ai_toolset`), OpenAI Agents SDK function tools (:func:`openai_agents_tools`)
  or LangChain tools (:func:`langchain_tools`). Every call goes through a kode_nb
  :class:`~kode_nb.Executor` — validation (errors go back to the framework's model in the form it
  expects, so it can fix its arguments), policy, approval, limits, timeouts, cancellation,
  events. ``executor=None``: the notebook session's when kode_nb is loaded in a kernel (each
  call shows a live view with Approve/Deny buttons in the cell that started the run), else a
  new ``Executor()`` (a call that must ask is denied, saying so).
* **Framework approvals** — pydantic-ai's deferred (approval-required) tools and the OpenAI
  SDK's ``needs_approval`` interruptions answered by kode_nb's approver:
  :func:`answer_deferred`, :func:`answer_interruptions`, :func:`run_with_approvals`.
* **Runs in the notebook** — :func:`start` runs a framework's coroutine as a task on the
  kernel's loop and returns a :class:`FrameworkRun` at once (the kernel stays free for the
  Approve click; a kernel interrupt cancels it; ``await kode_nb.settle()`` waits for it).
* **Traces** — :func:`capture` (also ``kode_nb.capture``) records the frameworks' runs as
  kode_nb traces through their own instrumentation; :func:`export_otlp` sends any kode_nb trace
  to an OpenTelemetry collector over OTLP/HTTP.
* **Replay and fork** — :func:`replay_model` swaps a recorded model into a captured
  pydantic-ai or OpenAI Agents SDK run (a fork: ``until=N, then=model``); not LangChain.
* **kode_nb's model in the frameworks** — :func:`pydantic_ai_model` (a pydantic-ai ``Model``),
  :func:`openai_agents_model` and :class:`KodeModelProvider` (an OpenAI Agents SDK ``Model`` and
  ``ModelProvider``), :func:`langchain_model` (a LangChain chat model, for LangGraph too): each
  request goes through a kode_nb model, with its server profile, tool calls written as text read
  back, refits, time limits, one HTTP client per model and bounded rounds of calls.
* **Many runs** — :func:`row_runner` turns a framework agent into the async function of a row
  that ``kode_nb.run_many`` runs.

Nothing of a framework is imported until its function is called. The notebook layer registers
itself as the host of the calls (:mod:`kode_nb.interop._host`); nothing here imports Jupyter.
May import: ``agents``, ``traces``, ``execution``, ``models``, ``policy``, ``tools``, ``events``,
``types``, ``errors``, ``_lifecycle``, ``_redact``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Capture",
    "FrameworkRun",
    "KodeModelProvider",
    "KodeTools",
    "ScriptedAgentsModel",
    "answer_deferred",
    "answer_interruptions",
    "capture",
    "export_otlp",
    "langchain_model",
    "langchain_tools",
    "openai_agents_model",
    "openai_agents_tools",
    "pydantic_ai_model",
    "pydantic_ai_toolset",
    "recorded_answers",
    "replay_model",
    "row_runner",
    "run_with_approvals",
    "start",
]

_EXPORTS = {
    "Capture": "kode_nb.interop._capture",
    "capture": "kode_nb.interop._capture",
    "FrameworkRun": "kode_nb.interop._run",
    "start": "kode_nb.interop._run",
    "row_runner": "kode_nb.interop._run",
    "KodeTools": "kode_nb.interop._bridge",
    "pydantic_ai_toolset": "kode_nb.interop._pydantic_ai",
    "answer_deferred": "kode_nb.interop._pydantic_ai",
    "openai_agents_tools": "kode_nb.interop._openai_agents",
    "answer_interruptions": "kode_nb.interop._openai_agents",
    "run_with_approvals": "kode_nb.interop._openai_agents",
    "ScriptedAgentsModel": "kode_nb.interop._openai_agents",
    "langchain_tools": "kode_nb.interop._langchain",
    "export_otlp": "kode_nb.interop._otlp",
    "pydantic_ai_model": "kode_nb.interop._pa_model",
    "openai_agents_model": "kode_nb.interop._sdk_model",
    "KodeModelProvider": "kode_nb.interop._sdk_model",
    "langchain_model": "kode_nb.interop._lc_model",
    "replay_model": "kode_nb.interop._replay",
    "recorded_answers": "kode_nb.interop._replay",
}

_NEEDS = {
    "kode_nb.interop._pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "kode_nb.interop._openai_agents": ("agents", "openai-agents"),
    "kode_nb.interop._langchain": ("langchain_core", "langchain"),
    "kode_nb.interop._otlp": ("opentelemetry.exporter.otlp.proto.http", "otlp"),
    "kode_nb.interop._pa_model": ("pydantic_ai", "pydantic-ai"),
    "kode_nb.interop._sdk_model": ("agents", "openai-agents"),
    "kode_nb.interop._lc_model": ("langchain_core", "langchain"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kode_nb.interop' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        need = _NEEDS.get(module)
        if need is None or not (exc.name or "").startswith(need[0].split(".")[0]):
            raise
        raise ModuleNotFoundError(
            f"kode_nb.interop.{name} needs {need[0].split('.')[0]}: pip install 'kode_nb[{need[1]}]'",
            name=exc.name,
        ) from exc
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from kode_nb.interop._bridge import KodeTools as KodeTools
    from kode_nb.interop._capture import Capture as Capture
    from kode_nb.interop._capture import capture as capture
    from kode_nb.interop._langchain import langchain_tools as langchain_tools
    from kode_nb.interop._lc_model import langchain_model as langchain_model
    from kode_nb.interop._openai_agents import ScriptedAgentsModel as ScriptedAgentsModel
    from kode_nb.interop._openai_agents import answer_interruptions as answer_interruptions
    from kode_nb.interop._openai_agents import openai_agents_tools as openai_agents_tools
    from kode_nb.interop._openai_agents import run_with_approvals as run_with_approvals
    from kode_nb.interop._otlp import export_otlp as export_otlp
    from kode_nb.interop._pa_model import pydantic_ai_model as pydantic_ai_model
    from kode_nb.interop._pydantic_ai import answer_deferred as answer_deferred
    from kode_nb.interop._pydantic_ai import pydantic_ai_toolset as pydantic_ai_toolset
    from kode_nb.interop._replay import recorded_answers as recorded_answers
    from kode_nb.interop._replay import replay_model as replay_model
    from kode_nb.interop._run import FrameworkRun as FrameworkRun
    from kode_nb.interop._run import row_runner as row_runner
    from kode_nb.interop._run import start as start
    from kode_nb.interop._sdk_model import KodeModelProvider as KodeModelProvider
    from kode_nb.interop._sdk_model import openai_agents_model as openai_agents_model
