"""The agent loop: model ↔ tools until a final answer, a limit, an error or cancellation.

One run::

    system prompt + messages + the schemas of the agent's tools → model (streamed)
      → no tool calls: the final answer (validated against ``output_model`` if given; a bad
        answer gets a retry turn that says what is wrong)
      → tool calls: run in parallel through the executor (policy, validation, approval,
        timeouts and concurrency limits all apply; ``run_id`` and ``parent_call_id`` set),
        each result's *content* goes back to the model (details and displays never do; text
        past ``max_result_chars`` is cut, with a note saying so, so one huge result cannot
        overflow the model's context)
      → repeat, at most ``max_turns`` model calls, within ``time_limit`` seconds

A run never raises because of its model or tools: it returns an :class:`AgentRunResult` whose
``status`` is ``completed``, ``max_turns``, ``time_limit``, ``cancelled`` or ``error`` (a
:class:`~kode_nb.models.ModelError`, or a final answer that stayed invalid), with ``error``
saying why. Developer mistakes (an unknown tool name, a missing API key) raise
:class:`~kode_nb.errors.KodeUsageError`.

**Cancellation.** :meth:`Agent.cancel` (thread-safe: a Stop button) ends a run with status
``cancelled`` and returns normally. Cancelling the task that awaits :meth:`Agent.run` (a kernel
interrupt) cancels the run's tool calls and re-raises ``CancelledError``, as asyncio code must;
the result is still built: it is :attr:`Agent.last_result`, and in the ``RunFinished`` event.

**Events.** See :mod:`kode_nb.agents._events`: ``on_event`` callbacks on the agent and on each run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
import sys
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from kode_nb.agents import _output as out
from kode_nb.agents._answers import answer_warning, reask_prompt
from kode_nb.agents._events import (
    EventCallback,
    EventSink,
    RunFinished,
    RunStarted,
    TurnStarted,
)
from kode_nb.agents._model import model_turn, time_up
from kode_nb.agents._result import AgentRunResult, RunStatus, RunUsage
from kode_nb.agents._run import CURRENT_RUN, RunState
from kode_nb.agents._tools import run_tool_calls, unique_call_ids
from kode_nb.agents._toolset import derive_executor, resolve_model, resolve_tools
from kode_nb.errors import ConfigurationError
from kode_nb.execution._executor import Executor
from kode_nb.execution._session_defaults import run_watchers
from kode_nb.models._cost import rollup
from kode_nb.models.base import (
    TOOL_CHOICES,
    AssistantMessage,
    Message,
    Model,
    ModelSettings,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    check_tool_choice,
)
from kode_nb.stepping._step import Stepper
from kode_nb.stepping._step_loop import StartedRun
from kode_nb.traces._known import remember_trace
from kode_nb.traces._trace import Span, Trace

__all__ = ["MAX_RESULT_CHARS", "Agent", "AgentRunResult", "RunStatus", "RunUsage"]

MAX_RESULT_CHARS = 100_000
"""The default :attr:`Agent.max_result_chars` (about 25,000 tokens of text)."""

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


class Agent:
    """A model with a system prompt and an allowlist of tools, run by :meth:`run`.

    ``model`` is a :class:`~kode_nb.models.Model` or a model string (``"scripted"``, ``"test"``,
    ``"openai:gpt-4.1-mini"``...). ``tools`` are names and selectors (``"group:fs"``,
    ``"kind:read"``, ``"*"``) resolved against the executor's registry, now (unknown names raise
    :class:`~kode_nb.errors.ConfigurationError` with close matches) and again at each run (a
    re-defined tool is picked up). The model only sees the tools the executor's policy allows,
    and a call to a tool outside the allowlist gets a ``not_found`` result. ``executor``
    defaults to a new :class:`~kode_nb.Executor` on the current registry (no approver: tools
    that must ask are denied).

    ``tool_choice`` (``"auto"``, ``"required"``, ``"none"`` or one of its tool names) is sent
    with every model call that offers tools; a forced choice (``required`` or a name) holds for
    the first call of a run only, so the model can answer once it has the result. A final answer
    that is empty or looks like a tool call written as text gets a warning
    (:attr:`AgentRunResult.warnings`, the run span's ``warnings``); ``reask=True`` also asks
    the model once more. So does an answer cut off at the length limit.

    A run that cannot progress ends clearly: the same tool called with the same arguments
    ``max_repeated_calls`` times (default 3; ``None``: never checked) ends it with status
    ``error`` and a message naming the call and this setting (the model is not using the
    result, often because the server does not show it to the model).
    """

    def __init__(
        self,
        name: str = "main",
        *,
        model: str | Model,
        system_prompt: str = "",
        tools: Sequence[str] | None = (),
        max_turns: int = 10,
        time_limit: float | None = None,
        output_model: type[BaseModel] | None = None,
        output_retries: int = 2,
        executor: Executor | None = None,
        settings: ModelSettings | None = None,
        on_event: EventCallback | None = None,
        max_result_chars: int | None = MAX_RESULT_CHARS,
        tool_choice: str | None = None,
        reask: bool = False,
        max_repeated_calls: int | None = 3,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"Agent name must be a non-empty string, got {name!r}")
        where = f"Agent '{name}'"
        self.name = name.strip()
        """The agent's name (in events, traces and subagent results)."""
        self.model: Model = resolve_model(model, where=where)
        """The model it calls."""
        if not isinstance(system_prompt, str):
            raise ConfigurationError(
                f"{where}: system_prompt must be a string, got {system_prompt!r}"
            )
        self.system_prompt = system_prompt
        """The instructions sent with every request."""
        _check_count(max_turns, "max_turns", where)
        _check_count(output_retries, "output_retries", where, minimum=0)
        self.max_turns = max_turns
        """The most model calls one run may make."""
        self.output_retries = output_retries
        if max_result_chars is not None:
            _check_count(max_result_chars, "max_result_chars", where, minimum=100)
        self.max_result_chars = max_result_chars
        """Characters of a tool result's text the model is sent, at most (``None``: all)."""
        """How many times an invalid structured answer is sent back for a retry."""
        if time_limit is not None and (
            isinstance(time_limit, bool)
            or not isinstance(time_limit, (int, float))
            or not time_limit > 0
        ):
            raise ConfigurationError(
                f"{where}: time_limit must be a positive number of seconds or None, got {time_limit!r}"
            )
        self.time_limit = None if time_limit is None else float(time_limit)
        """Seconds a run may take (``None``: no limit)."""
        self.output_model = out.check_output_model(output_model, where)
        """The pydantic model the final answer must fit (``None``: plain text)."""
        if executor is not None and not isinstance(executor, Executor):
            raise ConfigurationError(f"{where}: executor must be an Executor, got {executor!r}")
        self.executor = executor if executor is not None else Executor()
        """Runs the tool calls."""
        if settings is not None and not isinstance(settings, ModelSettings):
            raise ConfigurationError(f"{where}: settings must be ModelSettings, got {settings!r}")
        self.settings = settings or ModelSettings()
        """Sampling and transport settings for every model call."""
        if tool_choice is not None:
            tool_choice = check_tool_choice(tool_choice, where)
            self.settings = dataclasses.replace(self.settings, tool_choice=tool_choice)
        if not isinstance(reask, bool):
            raise ConfigurationError(f"{where}: reask must be True or False, got {reask!r}")
        self.reask = reask
        if max_repeated_calls is not None:
            _check_count(max_repeated_calls, "max_repeated_calls", where, minimum=2)
        self.max_repeated_calls = max_repeated_calls
        """The most times one run may make the same call (same tool, same arguments)."""
        """Ask the model once more when its final answer is empty or a tool call written as
        text (the warning is recorded either way)."""
        if on_event is not None and not callable(on_event):
            raise ConfigurationError(f"{where}: on_event must be callable, got {on_event!r}")
        self.on_event = on_event
        """Called with every event of every run (see :mod:`kode_nb.agents._events`)."""
        self.tools: tuple[str, ...] = (
            () if tools is None else (tools,) if isinstance(tools, str) else tuple(tools)
        )
        """The allowlist: tool names and selectors."""
        resolved = resolve_tools(self.tools, self.executor.registry, where=where)  # fail now
        choice = self.settings.tool_choice
        if choice is not None and choice not in TOOL_CHOICES:
            names = sorted(t.name for t in resolved)
            if choice not in names:
                raise ConfigurationError(
                    f"{where}: tool_choice {choice!r} is not one of its tools "
                    f"({', '.join(names) or 'none'}); use 'auto', 'required', 'none' or a tool name"
                )
        self.last_result: AgentRunResult | None = None
        """The result of the latest run that ended (also a cancelled one)."""
        self._active: dict[str, RunState] = {}

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"Agent({self.name!r}, model={self.model.name!r}, tools={list(self.tools)!r}, "
            f"tool_choice={s.tool_choice or 'auto'!r}, first_byte_timeout={s.first_byte_timeout:g}, "
            f"timeout={s.timeout:g}, deadline={s.deadline!r})"
        )

    # ----------------------------------------------------------------- inspection

    def tool_specs(self) -> list[ToolSpec]:
        """The tools the model is offered now: the allowlist, minus what the policy denies."""
        return list(self._offer(self._resolve(self.executor)))

    def _turn_settings(self, turn: int) -> ModelSettings:
        """The settings of model call ``turn``: a forced tool choice (``required`` or a tool
        name) holds for the first call only, so the model can then answer."""
        choice = self.settings.tool_choice
        if turn > 1 and choice is not None and choice not in ("auto", "none"):
            return dataclasses.replace(self.settings, tool_choice="auto")
        return self.settings

    def _resolve(self, executor: Executor) -> dict[str, Any]:
        tools = resolve_tools(self.tools, executor.registry, where=f"Agent '{self.name}'")
        return {t.key: t for t in tools}

    @staticmethod
    def _offer_from(executor: Executor, tools: dict[str, Any]) -> tuple[ToolSpec, ...]:
        registry, policy = executor.registry, executor.policy
        specs = []
        for tool in tools.values():
            try:
                allowed = policy.is_allowed(tool, registry)[0]
            except Exception:
                allowed = True  # let the executor refuse it, with its reason
            if allowed:
                specs.append(ToolSpec.from_tool(tool))
        return tuple(specs)

    def _offer(self, tools: dict[str, Any]) -> tuple[ToolSpec, ...]:
        return self._offer_from(self.executor, tools)

    def running(self) -> list[str]:
        """The ids of this agent's runs in progress."""
        return list(self._active)

    def cancel(self, run_id: str | None = None, *, reason: str = "cancelled by the user") -> int:
        """Stop a run (or all of this agent's runs): it ends with status ``cancelled`` and
        :meth:`run` returns normally. Thread-safe. Returns how many runs were asked to stop."""
        count = 0
        for st in list(self._active.values()):
            if (run_id is not None and st.run_id != run_id) or st.task is None:
                continue
            try:
                st.loop.call_soon_threadsafe(self._cancel_now, st, reason)
            except RuntimeError:  # the loop is closed
                continue
            count += 1
        return count

    def _cancel_now(self, st: RunState, reason: str) -> None:
        """On the run's loop: cancel its task, unless the run has ended meanwhile."""
        if self._active.get(st.run_id) is not st or st.cancel_requested or st.task is None:
            return
        st.cancel_requested, st.cancel_reason = True, reason
        st.task.cancel()

    # ----------------------------------------------------------------- running

    async def run(
        self,
        prompt: str,
        *,
        message_history: Sequence[Message] | None = None,
        deps: Any = None,
        run_id: str | None = None,
        on_event: EventCallback | None = None,
        step: Stepper | bool | str | None = None,
    ) -> AgentRunResult:
        """Run the agent on ``prompt`` (after ``message_history``, if given).

        ``deps`` reaches the tools as ``ToolContext.deps`` (the run then uses an executor
        derived from the agent's, with the same registry, policy, approver and bus).
        ``on_event`` gets this run's events, after the agent's own callback.
        ``step``: a :class:`~kode_nb.debug.Stepper` that pauses the run before each model
        request and tool call (:mod:`kode_nb.stepping._step`); ``True``, ``"all"`` or ``"top"``
        make one (drive it from its ``on_pause``, or use :meth:`start`, which returns it).
        """
        return await self._execute(
            prompt,
            message_history=message_history,
            deps=deps,
            run_id=run_id,
            callbacks=(self.on_event, on_event),
            stepper=Stepper.of(step, f"Agent '{self.name}'"),
        )

    def start(
        self, prompt: str, *, step: Stepper | bool | str | None = None, **options: Any
    ) -> StartedRun[AgentRunResult]:
        """:meth:`run` as a task on the running loop, returned at once as a
        :class:`~kode_nb.debug.StartedRun`: ``await run.paused()`` for the next pause point
        when stepping (``step=True``: every run pauses, subagents' too; ``"top"``: only this
        one), ``await run`` for the result. ``options`` are :meth:`run`'s."""
        stepper = Stepper.of(step, f"Agent '{self.name}'")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigurationError(
                f"Agent '{self.name}': start() needs a running event loop (call it from async "
                "code or a notebook cell); without one, use asyncio.run(agent.run(prompt))"
            ) from None
        run_id = options.pop("run_id", None) or f"run_{secrets.token_hex(6)}"
        task = loop.create_task(
            self.run(prompt, run_id=run_id, step=stepper, **options),
            name=f"kode_nb agent {self.name} {run_id}",
        )
        return StartedRun(task, stepper, run_id)

    async def _execute(
        self,
        prompt: str,
        *,
        message_history: Sequence[Message] | None = None,
        deps: Any = None,
        run_id: str | None = None,
        callbacks: Sequence[EventCallback | None] = (),
        parent: RunState | None = None,
        parent_call_id: str | None = None,
        executor: Executor | None = None,
        on_text: Any = None,
        stepper: Stepper | None = None,
    ) -> AgentRunResult:
        """:meth:`run`, plus what a nested (subagent) run needs: the calling run's state, the
        subagent's call id, the derived executor, and a sink for streamed text."""
        where = f"Agent '{self.name}'"
        if not isinstance(prompt, str):
            raise ConfigurationError(
                f"{where}: the prompt must be a string, got {type(prompt).__name__}"
            )
        history = list(message_history or ())
        for i, message in enumerate(history):
            if not isinstance(message, _MESSAGE_TYPES):
                raise ConfigurationError(
                    f"{where}: message_history[{i}] is not a message (UserMessage, "
                    f"AssistantMessage or ToolResultMessage): {message!r}"
                )
        owns = deps is not None and executor is None
        base = executor if executor is not None else self.executor
        run_executor = derive_executor(base, deps=deps) if owns else base
        tools = self._resolve(run_executor)
        system = self.system_prompt
        if self.output_model is not None:
            system = (system + "\n\n" if system else "") + out.output_instructions(
                self.output_model
            )
        await _prepare(self.model)  # the server identified: its profile is on the run span
        rid = run_id or f"run_{secrets.token_hex(6)}"
        if parent is None:  # in a notebook: the session's live view of a run on its executor
            callbacks = (*callbacks, *run_watchers(self, rid, run_executor))
        depth = parent.depth + 1 if parent is not None else 0
        root = Span(kind="run", name=self.name)
        trace = Trace(root=root, trace_id=parent.trace.trace_id) if parent else Trace(root=root)
        loop = asyncio.get_running_loop()
        st = RunState(
            agent=self,
            run_id=rid,
            depth=depth,
            parent_call_id=parent_call_id,
            parent_run_id=parent.run_id if parent else None,
            executor=run_executor,
            owns_executor=owns,
            model=self.model,
            system=system,
            tools=tools,
            specs=self._offer_from(run_executor, tools),
            messages=[*history, UserMessage(content=prompt)],
            history_length=len(history),
            sink=EventSink([*(parent.sink.callbacks if parent else ()), *callbacks]),
            trace=trace,
            loop=loop,
            task=asyncio.current_task(),
            deadline=loop.time() + self.time_limit if self.time_limit else None,
            on_text=on_text,
            stepper=stepper if parent is None else parent.stepper,
        )
        if stepper is not None and parent is None:
            stepper._bind(st)
        root.set(
            agent=self.name,
            model=self.model.name,
            run_id=rid,
            parent_call_id=parent_call_id,
            depth=depth,
            system_prompt=system,
            prompt=prompt,
            tools=[s.name for s in st.specs],
            max_turns=self.max_turns,
            time_limit=self.time_limit,
            settings={**self.settings.describe(), **_model_settings(self.model)},
            tool_specs=st.parts.tools(st.specs),
            output_model=self.output_model.__name__ if self.output_model else None,
            output_retries=self.output_retries,
            max_result_chars=self.max_result_chars,
            reask=self.reask,
            history_length=len(history),
        )
        if parent is not None and parent_call_id in parent.tool_spans:
            parent.tool_spans[parent_call_id].children.append(root)
        subscription = run_executor.bus.subscribe(st.record_bus_event)
        self._active[rid] = st
        token = CURRENT_RUN.set(st)
        st.emit(
            RunStarted,
            prompt=prompt,
            model=self.model.name,
            tools=tuple(s.name for s in st.specs),
            trace=trace,
        )
        try:
            await self._drive(st)
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:
            st.status = "cancelled"
            st.error = st.cancel_reason or (
                "the run was interrupted"
                if isinstance(exc, KeyboardInterrupt)
                else "the run was cancelled"
            )
            run_executor.cancel(run_id=rid, reason=st.error)
            if not (isinstance(exc, asyncio.CancelledError) and st.cancel_requested):
                self._end(st, subscription, token)
                raise
            task = asyncio.current_task()
            if sys.version_info >= (3, 11) and task is not None and task.cancelling():
                task.uncancel()
        except BaseException as exc:
            st.status, st.error = "error", f"{type(exc).__name__}: {exc}"
            self._end(st, subscription, token)
            raise
        return self._end(st, subscription, token)

    def _end(self, st: RunState, subscription: Any, token: Any) -> AgentRunResult:
        """Close the trace, clean up, emit RunFinished; once per run."""
        CURRENT_RUN.reset(token)
        subscription.close()
        if st.stepper is not None:
            st.stepper._end(st)
        self._active.pop(st.run_id, None)
        if st.owns_executor:
            st.executor.close()
        if st.status != "completed":
            st.output = None
        span = st.span
        for node in span.walk():  # spans left open by an interruption
            if node.open and node is not span:
                node.finish("cancelled" if st.status == "cancelled" else "error", st.error)
        totals = rollup(node.attributes for node in span.walk() if node.kind == "model_call")
        span.set(
            output=out.dump_output(st.output),
            turns=st.turns,
            usage=st.usage.as_dict(),
            warnings=list(st.warnings),
            total_usage=totals["usage"],
            total_requests=totals["requests"],
            cost=totals["cost"],
        )
        span.finish(st.status, st.error)
        result = AgentRunResult(
            output=st.output,
            status=st.status,
            error=st.error,
            messages=tuple(st.messages),
            usage=st.usage,
            turns=st.turns,
            run_id=st.run_id,
            agent=self.name,
            trace=st.trace,
            duration=time.perf_counter() - st.t0,
            history_length=st.history_length,
            warnings=tuple(st.warnings),
            cost=totals["cost"],
        )
        self.last_result = result
        if st.depth == 0:  # what fork() continues with: this run's model and executor
            remember_trace(st.trace, model=self.model, executor=st.executor)
        else:
            remember_trace(st.trace)
        st.emit(RunFinished, status=st.status, result=result)
        return result

    async def _drive(self, st: RunState) -> None:
        while True:
            if st.turns >= self.max_turns:
                st.status = "max_turns"
                st.error = f"the run reached max_turns={self.max_turns} without a final answer"
                return
            if st.time_limited or (st.deadline is not None and st.loop.time() >= st.deadline):
                time_up(st)
                return
            st.turns += 1
            n = st.turns
            turn = st.span.child("turn", f"turn {n}", turn=n)
            st.emit(TurnStarted, turn=n)
            response = await model_turn(st, n, turn, self._turn_settings(n))
            if response is None:
                turn.finish("cancelled" if st.status == "time_limit" else "error", st.error)
                return
            calls = unique_call_ids(st, response.tool_calls)
            st.messages.append(AssistantMessage(text=response.text, tool_calls=calls))
            if response.stop_reason == "max_tokens":
                cut = _cut_off_warning(st, response)
                st.warnings.append(cut)
                turn.event("answer_warning", warning=cut)
            if calls:
                stuck = self._repeated(st, calls)
                if stuck is not None:
                    st.status, st.error = "error", stuck
                    turn.event("repeated_call", message=stuck)
                    turn.finish("error", stuck)
                    return
                await run_tool_calls(st, calls, n, turn)
                turn.finish("ok")
                continue
            warning = answer_warning(response.text, (s.name for s in st.specs))
            if warning is not None and response.notices:
                warning += " (" + "; ".join(response.notices) + ")"
            if warning is not None and self.output_model is None:
                st.warnings.append(warning)
                turn.event("answer_warning", warning=warning)
                if self.reask and not st.reasked and st.turns < self.max_turns:
                    st.reasked = True
                    turn.event("reask", reason=warning)
                    turn.finish("ok")
                    st.messages.append(UserMessage(content=reask_prompt(warning)))
                    continue
            if self.output_model is None:
                st.output, st.status = response.text, "completed"
                turn.finish("ok")
                return
            parsed, problem = out.parse_output(self.output_model, response.text)
            if problem is None:
                st.output, st.status = parsed, "completed"
                turn.finish("ok")
                return
            turn.event("output_invalid", problem=problem)
            turn.finish("ok")
            if st.output_retries >= self.output_retries:
                st.status = "error"
                st.error = (
                    f"the final answer did not match {self.output_model.__name__} after "
                    f"{st.output_retries} retr{'y' if st.output_retries == 1 else 'ies'}:\n{problem}"
                )
                return
            st.output_retries += 1
            st.messages.append(UserMessage(content=out.retry_prompt(self.output_model, problem)))

    def _repeated(self, st: RunState, calls: Sequence[Any]) -> str | None:
        """Count this turn's calls; the message that ends the run when one was made
        ``max_repeated_calls`` times with the same arguments, else ``None``."""
        limit = self.max_repeated_calls
        for call in calls:
            key = (call.name, _canonical(call.arguments))
            st.repeats[key] = count = st.repeats.get(key, 0) + 1
            if limit is not None and count >= limit:
                failed = _last_failure(st.messages, call.name, key[1])
                why = (
                    f"each time the call failed ({failed}) and the model sent it again unchanged "
                    "instead of correcting it"
                    if failed is not None
                    else "without answering: it is not using the result (some servers' templates "
                    "do not show tool results to the model)"
                )
                return (
                    f"the model called {call.name} with the same arguments {count} times "
                    f"({key[1][:200]}) {why}. The run was stopped; "
                    f"Agent(max_repeated_calls=...) sets how many repeats are allowed "
                    f"(now {limit}; None: no check)"
                )
        return None


def _last_failure(messages: Sequence[Message], tool: str, arguments: str) -> str | None:
    """The first line of the latest result of ``tool`` called with these (canonical)
    ``arguments`` when that result was an error, else None."""
    same = {
        c.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.name == tool and _canonical(c.arguments) == arguments
    }
    for message in reversed(messages):
        if isinstance(message, ToolResultMessage) and message.call_id in same:
            if not message.is_error:
                return None
            text = " ".join(getattr(b, "text", "") for b in message.content).strip()
            first = text.splitlines()[0] if text else "an error"
            return first[:200]
    return None


async def _prepare(model: Model) -> None:
    """Let a model that talks to a server identify it before the run (``prepare()``)."""
    prepare = getattr(model, "prepare", None)
    if not callable(prepare):
        return
    try:
        await prepare()
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception:  # a model object's own method: the first request reports any problem
        return


def _canonical(arguments: str) -> str:
    """The arguments as canonical JSON (key order and spacing do not make calls different)."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return arguments.strip()


def _cut_off_warning(st: RunState, response: Any) -> str:
    body = response.request.body if response.request is not None else {}
    limit = (
        body.get("max_tokens") or body.get("max_completion_tokens") or st.agent.settings.max_tokens
    )
    at = f" of {limit} tokens" if limit else ""
    return (
        f"the model's answer was cut off at the length limit{at} (finish_reason 'length'); "
        "raise ModelSettings(max_tokens=...) if the answer needs more"
    )


def _model_settings(model: Model) -> dict[str, Any]:
    describe = getattr(model, "describe", None)
    if not callable(describe):
        return {}
    try:
        described = describe()
    except Exception:  # a model object's own method: the run goes on without it
        return {}
    return {f"model_{k}" if k == "tool_choice" else k: v for k, v in dict(described).items()}


def _check_count(value: object, what: str, where: str, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{where}: {what} must be an int >= {minimum}, got {value!r}")
