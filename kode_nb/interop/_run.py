"""Framework runs in a notebook (:func:`start`) and as the function of a row (:func:`row_runner`).

A framework's run that calls a kode_nb tool needing approval waits for a click; a cell that
``await``\\ s it would hold the kernel (see docs/ARCHITECTURE.md, "Notebook execution model").
:func:`start` runs it as a task on the kernel's loop instead and returns a
:class:`FrameworkRun` at once: its tool calls carry its ``run_id``, its traces are captured
(:func:`kode_nb.capture`), a kernel interrupt cancels it, and a later cell can ``await`` it,
answer its approvals (``approve()`` / ``deny(reason)``, as the buttons do) or ``cancel()`` it.
Without a running loop (a script) :func:`start` runs it to the end first.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kode_nb._lifecycle import HandleBase
from kode_nb.errors import ConfigurationError
from kode_nb.interop._bridge import APPROVER, CURRENT_RUN
from kode_nb.interop._capture import Capture
from kode_nb.traces import Trace

__all__ = ["FrameworkRun", "framework_of", "row_runner", "start"]


class FrameworkRun(HandleBase):
    """A framework's run started with :func:`start`: await it, approve in it, cancel it.

    It follows kode_nb's one lifecycle (:mod:`kode_nb._lifecycle`): ``status``, ``phase``,
    ``await run``, ``approval()``, ``approve()``, ``deny()``, ``cancel()``. Its approvals are
    every prompt that waits for one of its calls: a kode_nb tool's call, and the framework's
    own approval requests (pydantic-ai's deferred tools, the Agents SDK's ``needs_approval``)
    put to kode_nb's approver inside the run."""

    def __init__(self, name: str, run_id: str, capture: Capture | None) -> None:
        self.name = name
        """What the run is called (the agent's name when known)."""
        self.run_id = run_id
        """The id its kode_nb tool calls carry."""
        self.agent = types.SimpleNamespace(name=name)
        self.capture = capture
        """The capture block around the run (``None`` with ``capture=False``)."""
        self.task: asyncio.Task[Any] | None = None
        self.exception: BaseException | None = None
        self._result: Any = None
        self._done = False
        self.cancelled = False
        self.on_done: list[Callable[[FrameworkRun], object]] = []
        """Called (on the loop) when the run ends; the notebook refreshes its view here."""
        self.shown_in: object = None
        """The notebook cell (its execution count) that shows the run's live display: the run
        displayed again as that cell's value adds nothing."""

    # ------------------------------------------------------------------ state

    def done(self) -> bool:
        return self._done

    @property
    def status(self) -> str:
        """``running``, ``waiting for approval``, ``completed``, ``cancelled`` or ``error``."""
        if self._done:
            return "cancelled" if self.cancelled else "error" if self.exception else "completed"
        return "waiting for approval" if self._waiting_prompt() is not None else "running"

    def result(self) -> Any:
        """What the framework's run returned; raises what it raised, or while it runs."""
        if not self._done:
            raise asyncio.InvalidStateError(
                f"the run {self.name} ({self.run_id}) is still {self.status}: `await` it in a "
                "cell, or check .done() first"
            )
        if self.exception is not None:
            raise self.exception
        return self._result

    @property
    def traces(self) -> list[Trace]:
        """The kode_nb traces captured from the run (nested agents inside them)."""
        return list(self.capture.traces) if self.capture is not None else []

    @property
    def trace(self) -> Trace | None:
        """The last captured trace (the run's, for a run of one agent)."""
        return self.capture.traces[-1] if self.capture is not None and self.capture.traces else None

    # ------------------------------------------------------------------ lifecycle

    def _waiting_prompt(self) -> Any:
        from kode_nb.interop._host import current_host

        host = current_host()
        return host.waiting_prompt(self.run_id) if host is not None else None

    def _stop(self, reason: str) -> bool:
        """Cancel the run's task (the framework sees ``CancelledError``)."""
        if self.task is None or self.task.done():
            return False
        self.cancelled = True
        self.task.cancel(reason)
        return True

    def _finish(self, result: Any, exception: BaseException | None) -> None:
        if self._done:
            return
        self._result, self.exception, self._done = result, exception, True
        if isinstance(exception, asyncio.CancelledError):
            self.cancelled = True
        for fn in self.on_done:
            with contextlib.suppress(Exception):
                fn(self)

    @property
    def label(self) -> str:
        return f"the run {self.name} ({self.run_id})"

    def __repr__(self) -> str:
        return f"<FrameworkRun {self.name} run={self.run_id} {self.status}>"


def _name_of(work: Any, name: str | None) -> str:
    if name:
        return name
    frame = getattr(work, "cr_frame", None)
    if frame is not None:
        for value in frame.f_locals.values():
            found = getattr(value, "name", None)
            if isinstance(found, str) and found:
                return found
    return getattr(work, "__qualname__", None) or "framework run"


def start(
    work: Awaitable[Any] | Callable[[], Awaitable[Any]],
    *,
    name: str | None = None,
    capture: bool = True,
) -> FrameworkRun:
    """Run ``work`` (a coroutine such as ``agent.run("...")``, or a function returning one)
    as a task on the running loop; the :class:`FrameworkRun` comes back at once. In a notebook
    the cell shows the run's status line, replaced by its run record (the trace viewer) when
    it ends; its tool calls' live views and approval buttons appear below it."""
    if callable(work) and not inspect.isawaitable(work):
        work = work()
    if not inspect.isawaitable(work):
        raise ConfigurationError(
            f"kode_nb.interop.start needs a coroutine (e.g. agent.run('...')), got {type(work).__name__}"
        )
    run_id = f"fwrun_{secrets.token_hex(6)}"
    cap = Capture() if capture else None
    run = FrameworkRun(_name_of(work, name), run_id, cap)

    async def main() -> Any:
        token = CURRENT_RUN.set(run_id)
        result, error = None, None
        try:
            if cap is not None:
                with cap:
                    result = await work
            else:
                result = await work
            return result
        except BaseException as exc:
            error = exc
            raise
        finally:
            CURRENT_RUN.reset(token)
            run._finish(result, error)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        with contextlib.suppress(Exception):
            asyncio.run(main())
        return run
    from kode_nb.interop._host import current_host

    run.task = loop.create_task(main(), name=f"kode_nb framework run {run.name} {run_id}")
    run.task.add_done_callback(_consume)
    run.task.add_done_callback(lambda _t: _cancelled_before_start(run, work))
    host = current_host()
    if host is not None:
        host.add_run(run)
        show = getattr(host, "show_run", None)
        if callable(show):  # its line in this cell now; its run record there when it ends
            show(run)
    return run


def _cancelled_before_start(run: FrameworkRun, work: Any) -> None:
    """A task cancelled before its first step never ran ``main``: the run ends cancelled (and
    its coroutine, never awaited, is closed)."""
    if not run.done():
        if inspect.iscoroutine(work):
            work.close()
        run.cancelled = True
        run._finish(None, asyncio.CancelledError("cancelled before it started"))


def _consume(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


# --------------------------------------------------------------------------- many runs


def framework_of(agent: Any) -> str | None:
    """``pydantic-ai``, ``openai-agents`` or ``langchain`` for an agent of that framework."""
    module = type(agent).__module__ or ""
    if module.startswith("pydantic_ai"):
        return "pydantic-ai"
    if module.startswith("agents.") or module == "agents":
        return "openai-agents"
    if module.startswith(("langchain", "langgraph")):
        return "langchain"
    return None


def _prompt_of(
    row: Mapping[str, Any], prompt: str | Callable[[Mapping[str, Any]], str] | None
) -> str:
    if callable(prompt):
        return str(prompt(row))
    if isinstance(prompt, str):
        return prompt.format(**row)
    if "prompt" in row:
        return str(row["prompt"])
    if len(row) == 1:
        return str(next(iter(row.values())))
    raise ConfigurationError(
        f"row_runner: the row has columns {sorted(row)}; name a 'prompt' column or pass prompt="
    )


def row_runner(
    agent: Any, *, prompt: str | Callable[[Mapping[str, Any]], str] | None = None
) -> Callable[..., Awaitable[dict[str, Any]]]:
    """An async function of one row that runs a pydantic-ai agent, an OpenAI Agents SDK agent
    or a LangChain runnable (a chat model, an agent graph) on the row's prompt, captured:
    it returns ``{"output": ..., "trace": <kode_nb trace JSON>}``. ``prompt`` is a template
    over the row (``"Answer: {question}"``) or a function of it (default: the ``prompt``
    column, or the only column). ``kode_nb.run_many(agent, rows)`` uses it for such agents;
    its ``approver=`` answers the approvals of the kode_nb tools the agent calls (run_many's
    inbox)."""
    fw = framework_of(agent)
    if fw is None:
        raise ConfigurationError(
            "row_runner needs a pydantic-ai Agent, an OpenAI Agents SDK Agent or a LangChain "
            f"runnable, got {type(agent).__name__}"
        )

    async def run_row(row: Mapping[str, Any], approver: Any = None) -> dict[str, Any]:
        text = _prompt_of(row, prompt)
        token = APPROVER.set(approver) if approver is not None else None
        try:
            with Capture([fw]) as cap:
                output = await _run_framework(fw, agent, text)
        finally:
            if token is not None:
                APPROVER.reset(token)
        return {"output": output, "trace": cap.traces[-1].to_dict() if cap.traces else None}

    name = str(getattr(agent, "name", None) or type(agent).__name__)
    run_row.__name__ = f"run_{fw.replace('-', '_')}_row"
    run_row.kode_nb_row_runner = True  # type: ignore[attr-defined]
    run_row.kode_nb_name = name  # type: ignore[attr-defined]
    run_row.kode_nb_identity = f"{fw}:{name}:{_model_name(agent)}:{prompt!r}"  # type: ignore[attr-defined]
    return run_row


def _model_name(agent: Any) -> str:
    model = getattr(agent, "model", None)
    return str(getattr(model, "model_name", None) or getattr(model, "name", None) or model)


MAX_APPROVAL_ROUNDS = 20
"""How many times a row's framework run may stop for its own approvals and resume."""


async def _run_framework(fw: str, agent: Any, text: str) -> Any:
    """The row's run; a run that stops for the framework's own approvals (pydantic-ai's
    deferred tools, the Agents SDK's ``needs_approval``) has them answered by kode_nb's approver
    — the batch's inbox — and resumes, as :func:`answer_deferred` and
    :func:`~kode_nb.interop.run_with_approvals` do in a notebook."""
    if fw == "pydantic-ai":
        return await _pydantic_ai_row(agent, text)
    if fw == "openai-agents":
        from kode_nb.interop._openai_agents import run_with_approvals

        return (await run_with_approvals(agent, text, max_rounds=MAX_APPROVAL_ROUNDS)).final_output
    graph = hasattr(agent, "get_graph") and not hasattr(agent, "bind_tools")
    reply = await agent.ainvoke({"messages": [("user", text)]} if graph else text)
    if isinstance(reply, Mapping) and reply.get("messages"):
        last = reply["messages"][-1]
        return getattr(last, "content", last)
    return getattr(reply, "content", reply)


async def _pydantic_ai_row(agent: Any, text: str) -> Any:
    from pydantic_ai.tools import DeferredToolRequests

    from kode_nb.interop._pydantic_ai import answer_deferred

    result = await agent.run(text)
    for _ in range(MAX_APPROVAL_ROUNDS):
        if not isinstance(result.output, DeferredToolRequests) or not result.output.approvals:
            return result.output
        answers = await answer_deferred(result.output)
        result = await agent.run(
            message_history=result.all_messages(), deferred_tool_results=answers
        )
    raise RuntimeError(
        f"the run stopped for approval more than {MAX_APPROVAL_ROUNDS} times; it was not resumed"
    )
