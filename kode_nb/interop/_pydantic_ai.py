"""kode_nb tools as a pydantic-ai toolset (imports pydantic-ai; loaded only when used).

:func:`pydantic_ai_toolset` returns a :class:`KodeToolset`, an ``AbstractToolset`` whose calls
go through kode_nb's executor. pydantic-ai's own argument validation is off for these tools
(kode_nb validates against the same JSON schema the model is offered); kode_nb's results map
to what pydantic-ai's model expects:

* invalid arguments → ``ModelRetry`` (the model gets the validation message and retries;
  ``max_retries`` bounds it, as for any pydantic-ai tool);
* denied, failed, timed out, cancelled → ``ToolFailed`` (the model sees why and adapts);
* ok → the tool's text.

Approvals. By default kode_nb asks during the call (Approve/Deny buttons in the notebook, the
executor's approver elsewhere). With ``approval="deferred"`` a call kode_nb's policy would ask
for raises pydantic-ai's ``ApprovalRequired`` instead: the run ends with
``DeferredToolRequests`` (the agent needs ``output_type=[..., DeferredToolRequests]``), and
:func:`answer_deferred` asks kode_nb's approver (the same buttons) and returns the
``DeferredToolResults`` to continue with. A call approved that way runs without a second
prompt; one the policy refuses is still refused.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic_ai.exceptions import ApprovalRequired, ModelRetry, ToolFailed
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDefinition, ToolDenied
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from kode_nb.errors import ConfigurationError
from kode_nb.interop._bridge import KodeTools, outcome

if TYPE_CHECKING:
    from pydantic_ai import RunContext

    from kode_nb.execution._executor import Executor

__all__ = ["KodeToolset", "answer_deferred", "pydantic_ai_toolset", "start_recording"]

_ANY = SchemaValidator(core_schema.any_schema())
FRAMEWORK = "pydantic-ai"


class KodeToolset(AbstractToolset[Any]):
    """Registered kode_nb tools as a pydantic-ai toolset (see the module docstring)."""

    def __init__(
        self,
        tools: KodeTools,
        *,
        approval: Literal["kode_nb", "deferred"] = "kode_nb",
        max_retries: int = 2,
        id: str | None = None,
    ) -> None:
        if approval not in ("kode_nb", "deferred"):
            raise ConfigurationError(
                f"pydantic_ai_toolset(approval=...) must be 'kode_nb' or 'deferred', got {approval!r}"
            )
        self.kode = tools
        """The kode_nb tools and the executor that runs them."""
        self.approval = approval
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def label(self) -> str:
        return f"kode_nb tools ({', '.join(t.name for t in self.kode.tools)})"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            t.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=t.name,
                    description=t.description or None,
                    parameters_json_schema=t.parameters,
                    strict=False,
                ),
                max_retries=self.max_retries,
                args_validator=_ANY,
            )
            for t in self.kode.tools
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        approved = bool(getattr(ctx, "tool_call_approved", False))
        if (
            self.approval == "deferred"
            and not approved
            and self.kode.needs_approval(name, tool_args)
        ):
            raise ApprovalRequired(metadata={"kode_nb": True})
        result = await self.kode.call(
            name,
            tool_args,
            call_id=ctx.tool_call_id,
            approved_by=FRAMEWORK if approved else None,
        )
        out = outcome(result)
        if out.kind == "retry":
            raise ModelRetry(out.text)
        if out.kind == "error":
            raise ToolFailed(out.text)
        return out.text

    def __repr__(self) -> str:
        return (
            f"KodeToolset({', '.join(t.name for t in self.kode.tools)}, approval={self.approval!r})"
        )


def pydantic_ai_toolset(
    tools: str | Sequence[str] = "*",
    *,
    executor: Executor | None = None,
    approval: Literal["kode_nb", "deferred"] = "kode_nb",
    max_retries: int = 2,
    id: str | None = None,
) -> KodeToolset:
    """Registered kode_nb tools (an allowlist: names, ``group:``, ``kind:``, ``profile:``...)
    as a pydantic-ai toolset: ``Agent(model, toolsets=[pydantic_ai_toolset(["edit_note"])])``.
    See :mod:`kode_nb.interop` for ``executor`` and the module docstring for ``approval``."""
    kode = KodeTools(tools, executor=executor, where="pydantic_ai_toolset")
    return KodeToolset(kode, approval=approval, max_retries=max_retries, id=id)


async def answer_deferred(
    requests: DeferredToolRequests,
    *,
    executor: Executor | None = None,
    run_id: str | None = None,
) -> DeferredToolResults:
    """Ask kode_nb's approver about each approval in ``requests`` (pydantic-ai's
    ``DeferredToolRequests``, the output of a run that stopped for approval) and return the
    ``DeferredToolResults`` to pass back: ``agent.run(message_history=result.all_messages(),
    deferred_tool_results=...)``. In a notebook the prompts are kode_nb's Approve/Deny buttons;
    a denial's reason reaches the model. Deferred *external* calls (``CallDeferred``) are not
    approvals and are left out: answer them yourself."""
    from kode_nb.interop._approvals import ask
    from kode_nb.interop._capture import ACTIVE

    results = DeferredToolResults()
    for call in requests.approvals:
        decision = await ask(
            call.tool_name,
            call.args_as_dict(),
            call_id=call.tool_call_id,
            executor=executor,
            run_id=run_id,
            framework=FRAMEWORK,
        )
        denial = decision.reason or "The user denied this call."
        reason = None if decision.approved else denial
        cap = ACTIVE.get()
        if cap is not None:  # who decided, and a denial recorded as denied: the call never runs
            cap.note_decision(
                call.tool_call_id,
                approved=decision.approved,
                decided_by=decision.decided_by or "kode_nb",
                reason=reason,
            )
        results.approvals[call.tool_call_id] = True if decision.approved else ToolDenied(denial)
    return results


# --------------------------------------------------------------------------- capture


class _Spans:
    """An OpenTelemetry span processor: the spans of runs started inside a capture block."""

    def __init__(self) -> None:
        self.owner: dict[int, Any] = {}
        self.done: dict[int, list[Any]] = {}
        self.lock = threading.Lock()
        self.order = itertools.count()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        from kode_nb.interop._capture import ACTIVE

        parent = span.parent.span_id if span.parent is not None else None
        with self.lock:
            cap = self.owner.get(parent) if parent is not None else None
            if cap is None:
                cap = ACTIVE.get()
            if cap is not None and not cap.closed:
                self.owner[span.context.span_id] = cap

    def on_end(self, span: Any) -> None:
        sid = span.context.span_id
        with self.lock:
            cap = self.owner.get(sid)
            if cap is None:
                return
            parent = span.parent.span_id if span.parent is not None else None
            root = parent is None or parent not in self.owner
            self.done.setdefault(id(cap), []).append((next(self.order), span))
            if not root:
                return
            spans = self.done.pop(id(cap), [])
            for _, s in spans:
                self.owner.pop(s.context.span_id, None)
        nodes = [_node(s, order) for order, s in spans]
        cap.add(nodes, framework=FRAMEWORK)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def _on_ending(self, span: Any) -> None:
        pass


def _node(span: Any, order: int) -> Any:
    from kode_nb.interop._otel import node_of

    status = getattr(span, "status", None)
    failed = status is not None and getattr(status.status_code, "name", "") == "ERROR"
    error = (getattr(status, "description", None) or "error") if failed else None
    parent = span.parent.span_id if span.parent is not None else None
    return node_of(
        span_id=f"{span.context.span_id:016x}",
        parent=f"{parent:016x}" if parent is not None else None,
        name=span.name,
        start=span.start_time / 1e9,
        end=span.end_time / 1e9 if span.end_time is not None else None,
        attributes=dict(span.attributes or {}),
        error=error,
        order=order,
        framework=FRAMEWORK,
    )


_PROCESSOR: _Spans | None = None
_PROVIDER: Any = None
_ACTIVE_BLOCKS = 0
_PREVIOUS: Any = None


def start_recording(capture: Any) -> Callable[[], None]:
    """Instrument pydantic-ai agents (those without ``instrument=`` of their own) with a
    private tracer provider for the block; restores the previous default when it ends."""
    global _PROCESSOR, _PROVIDER, _ACTIVE_BLOCKS, _PREVIOUS
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    if _PROVIDER is None:
        from opentelemetry.sdk.trace import TracerProvider

        _PROCESSOR = _Spans()
        _PROVIDER = TracerProvider()
        _PROVIDER.add_span_processor(_PROCESSOR)
    with _LOCK:
        if _ACTIVE_BLOCKS == 0:
            _PREVIOUS = Agent._instrument_default
            Agent.instrument_all(
                InstrumentationSettings(tracer_provider=_PROVIDER, include_content=True)
            )
        _ACTIVE_BLOCKS += 1

    def stop() -> None:
        global _ACTIVE_BLOCKS
        with _LOCK:
            _ACTIVE_BLOCKS -= 1
            if _ACTIVE_BLOCKS == 0:
                Agent.instrument_all(_PREVIOUS)

    return stop


_LOCK = threading.Lock()


# --------------------------------------------------------------------------- replay


def replaying_model(answers: list[dict[str, Any]], then: Any = None) -> Any:
    """A ``FunctionModel`` answering with ``answers`` in order, then asking ``then``."""
    import json

    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    given = 0

    async def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        nonlocal given
        given += 1
        if given > len(answers):
            if then is None:
                raise ConfigurationError(
                    f"replay: the run asked its model {given} times; {len(answers)} were recorded"
                )
            response: ModelResponse = await then.request(
                messages, info.model_settings, info.model_request_parameters
            )
            return response
        recorded = answers[given - 1]
        parts: list[Any] = [TextPart(str(recorded["text"]))] if recorded.get("text") else []
        for call in recorded.get("tool_calls") or []:
            args = call.get("arguments")
            parts.append(
                ToolCallPart(
                    str(call.get("name")),
                    args if isinstance(args, (dict, str)) else json.dumps(args),
                    tool_call_id=str(call.get("id") or f"replay_{given}_{len(parts)}"),
                )
            )
        return ModelResponse(parts=parts or [TextPart("")])

    return FunctionModel(answer, model_name=f"replay:{len(answers)}")
