"""Subagents as tools: an :class:`AgentDefinition` becomes a ``think`` tool.

:func:`register_subagent` wraps a definition as a :class:`~kode_nb.Tool` of kind ``think`` and
category ``agent`` (``is_output_markdown``, ``can_update_output``) whose parameters are exactly
the input contract: the ``input_model``'s JSON Schema, or the ``input_config``'s. At
registration a *construction probe* resolves the allowlist and the model and checks that the
system-prompt template only uses inputs; any failure raises
:class:`~kode_nb.errors.ToolDefinitionError` and nothing is registered.

Each call::

    validate the inputs → compress the parent's context (hook) → a FRESH Agent: its own memory,
    only its allowlisted tools, a NarrowedPolicy (allowlist ∩ the caller's policy) on an
    executor derived from the caller's (same approver and event bus) → run → fold the final
    answer into ONE ToolResult (markdown text; details {subagent, parent_call_id, run_id,
    depth, usage, turns, status, unavailable})

The caller is the calling agent's executor, else the executor the call came through
(``ToolContext.executor``: a script's ``Executor.call``, an MCP server), else the ``executor=``
given at registration; with none, nothing runs (fail closed). The caller's denials, allowed
paths and approvals (a per-call approver too; no approver: a call that must ask is denied) all
hold inside the subagent.

A failure — invalid inputs, the depth limit, a model error, a turn or time limit, a template or
hook error — folds into an error result with ``details["unavailable"] = True`` and the text
``Subagent 'x' unavailable: <why>``; the parent's run goes on. Cancellation is not a failure:
it propagates, and the executor reports the call as cancelled.

The subagent's trace nests under the parent's tool-call span; its events reach the parent's
``on_event`` callbacks (``SubagentStarted`` … ``SubagentFinished``) and its streamed text
reaches the executor as ``CallUpdate`` events of the subagent's call.
"""

from __future__ import annotations

import inspect
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, cast

from pydantic import BaseModel

from kode_nb.agents._context import CompressContext
from kode_nb.agents._context import compress_context as default_compress
from kode_nb.agents._events import SubagentFinished, SubagentStarted
from kode_nb.agents._inputs import (
    INVALID_KEY,
    FoldingValidator,
    Invalid,
    check_template,
    input_validator,
)
from kode_nb.agents._loop import MAX_RESULT_CHARS, Agent
from kode_nb.agents._output import check_output_model
from kode_nb.agents._result import AgentRunResult, RunUsage
from kode_nb.agents._run import CURRENT_RUN, RunState
from kode_nb.agents._toolset import NarrowedPolicy, derive_executor, is_model, resolve_model
from kode_nb.agents._toolset import resolve_tools as _resolve_tools
from kode_nb.errors import (
    ConfigurationError,
    KodeUsageError,
    ToolDefinitionError,
)
from kode_nb.execution._executor import Executor
from kode_nb.models._replay import ReplayModel
from kode_nb.models.base import Model
from kode_nb.tools._model import Tool
from kode_nb.tools._registry import ToolRegistry, default_registry
from kode_nb.types import (
    NOT_GIVEN,
    NotGiven,
    ResultStatus,
    TextBlock,
    ToolCategory,
    ToolContext,
    ToolKind,
    ToolResult,
    normalize_name,
    validate_name,
)

__all__ = [
    "AgentDefinition",
    "FoldingValidator",
    "ModelSpec",
    "register_subagent",
    "subagent_tool",
]

ModelSpec = Union[str, Model, Callable[[], Model], None]
"""A model name (resolved per call), a model object (shared by calls), a factory called per
call (a fresh model each time), or ``None``: the calling agent's model."""


@dataclass(frozen=True, kw_only=True, eq=False)
class AgentDefinition:
    """A subagent: its input contract, instructions, allowlist, model and limits."""

    name: str
    """The tool name the parent's model sees."""
    description: str
    """When to use it, for the parent's model."""
    system_prompt: str
    """A template formatted with the validated inputs: ``"Investigate: {objective}"``."""
    input_model: type[BaseModel] | None = None
    """The pydantic input contract (schema and validation); or give ``input_config``."""
    input_config: Mapping[str, Any] | None = None
    """Seed-000 ``{"inputs": {name: {"description", "type", "required"}}}``; or ``input_model``."""
    tools: Sequence[str] = ()
    """The allowlist (names and selectors); the subagent never gets anything else."""
    model: ModelSpec = None
    """See :data:`ModelSpec`; ``None`` uses the calling agent's model."""
    max_turns: int = 10
    """Model calls per run."""
    time_limit: float | None = None
    """Seconds per run (``None``: no limit; the tool's executor timeout is then one hour)."""
    max_depth: int = 3
    """The deepest nesting this subagent may run at (a top-level agent's subagent is depth 1)."""
    output_model: type[BaseModel] | None = None
    """A structured final answer; the folded text is then its JSON."""
    label: str = ""
    """A display label for the tool."""
    tool_choice: str | None = None
    """``"auto"``, ``"required"``, ``"none"`` or one of its tool names (see
    :class:`~kode_nb.agents.Agent`); ``None``: ``"auto"``."""
    reask: bool = False
    """Ask the model once more after an empty answer or a tool call written as text."""
    compress_context: CompressContext = default_compress
    """``fn(parent_messages, inputs) -> str`` (sync or async): context prepended to the first
    user message (default: the parent's latest user request)."""

    def __post_init__(self) -> None:
        where = f"subagent {self.name!r}"
        try:
            object.__setattr__(self, "name", validate_name(self.name))
        except ValueError as exc:
            raise ToolDefinitionError(str(exc), function=where) from None
        if not isinstance(self.description, str) or not self.description.strip():
            raise ToolDefinitionError("needs a description (when to use it)", function=where)
        if (self.input_model is None) == (self.input_config is None):
            raise ToolDefinitionError(
                "give exactly one of input_model= (a pydantic model) or input_config=",
                function=where,
            )
        if self.input_model is not None and not (
            inspect.isclass(self.input_model) and issubclass(self.input_model, BaseModel)
        ):
            raise ToolDefinitionError(
                f"input_model must be a pydantic BaseModel subclass, got {self.input_model!r}",
                function=where,
            )
        if not isinstance(self.system_prompt, str):
            raise ToolDefinitionError("system_prompt must be a string", function=where)
        for what, value, low in (
            ("max_turns", self.max_turns, 1),
            ("max_depth", self.max_depth, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ToolDefinitionError(
                    f"{what} must be an int >= {low}, got {value!r}", function=where
                )
        t = self.time_limit
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
            raise ToolDefinitionError(
                f"time_limit must be a positive number or None, got {t!r}", function=where
            )
        if not callable(self.compress_context):
            raise ToolDefinitionError("compress_context must be callable", function=where)
        if self.tool_choice is not None and (
            not isinstance(self.tool_choice, str) or not self.tool_choice.strip()
        ):
            raise ToolDefinitionError(
                f"tool_choice must be 'auto', 'required', 'none' or a tool name, got "
                f"{self.tool_choice!r}",
                function=where,
            )
        if not isinstance(self.reask, bool):
            raise ToolDefinitionError(
                f"reask must be true or false, got {self.reask!r}", function=where
            )
        try:
            check_output_model(self.output_model, where)
        except ConfigurationError as exc:
            raise ToolDefinitionError(str(exc)) from None
        check_template(self.system_prompt, self.input_fields(), where)

    def input_fields(self) -> tuple[str, ...]:
        """The names the inputs have in the system-prompt template."""
        if self.input_model is not None:
            return tuple(self.input_model.model_fields)
        inputs = (self.input_config or {}).get("inputs")
        return tuple(inputs) if isinstance(inputs, Mapping) else ()


def _probe(defn: AgentDefinition, registry: Any) -> None:
    """Registration-time check that the allowlist and the model resolve."""
    where = f"subagent '{defn.name}'"
    own = normalize_name(defn.name)  # it may call itself (recursion, bounded by max_depth)
    try:
        _resolve_tools([t for t in defn.tools if normalize_name(t) != own], registry, where=where)
    except ConfigurationError as exc:
        raise ToolDefinitionError(f"cannot be constructed: {exc}") from None
    spec = defn.model
    try:
        if isinstance(spec, str) or is_model(spec):
            resolve_model(spec, where=where)
        elif callable(spec):
            made = spec()
            if not is_model(made):
                raise ConfigurationError(
                    f"{where}: the model factory returned {made!r}, not a Model (.name, .stream)"
                )
        elif spec is not None:
            resolve_model(spec, where=where)  # raises with a clear message
    except ConfigurationError as exc:
        raise ToolDefinitionError(f"cannot be constructed: {exc}") from None
    except Exception as exc:
        raise ToolDefinitionError(
            f"cannot be constructed: its model factory raised {type(exc).__name__}: {exc}",
            function=where,
        ) from None


def subagent_tool(defn: AgentDefinition, *, executor: Executor | None = None) -> Tool:
    """The :class:`~kode_nb.Tool` for ``defn``, unregistered (no probe: see
    :func:`register_subagent`).

    A call runs under the policy and approver of what called it: the calling agent's executor,
    else the executor the call came through (``Executor.call``, an MCP server's). ``executor``
    serves only calls that come through neither (the tool function invoked directly); with
    none of the three the call fails closed (``unavailable``)."""
    if not isinstance(defn, AgentDefinition):
        raise ToolDefinitionError(f"expected an AgentDefinition, got {defn!r}")

    async def call_subagent(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await delegate(defn, args, ctx, executor=executor)

    call_subagent.__qualname__ = f"subagent.{defn.name}"
    where = f"subagent '{defn.name}'"
    timeout = defn.time_limit + 5.0 if defn.time_limit else 3600.0
    return Tool(
        name=defn.name,
        description=defn.description.strip(),
        function=call_subagent,
        validator=FoldingValidator(input_validator(defn.input_model, defn.input_config, where)),
        label=defn.label,
        kind=ToolKind.THINK,
        category=ToolCategory.AGENT,
        is_output_markdown=True,
        can_update_output=True,
        timeout=timeout,
        mode="async",
        context_param="ctx",
        arguments_param="args",
        source=f"{__name__}.subagent.{defn.name}",
        metadata={"subagent": defn},
    )


def register_subagent(
    defn: AgentDefinition,
    *,
    registry: ToolRegistry | NotGiven | None = NOT_GIVEN,
    executor: Executor | None = None,
    replace: bool = False,
) -> Tool:
    """Probe ``defn`` and register it as a tool (``registry``: the current one by default,
    ``None``: do not register). Re-registering the same name replaces it. Returns the Tool."""
    tool = subagent_tool(defn, executor=executor)
    target = default_registry() if isinstance(registry, NotGiven) else registry
    probe_registry: Any = target
    if probe_registry is None:
        probe_registry = executor.registry if executor is not None else default_registry()
    _probe(defn, probe_registry)
    if target is not None:
        target.register(tool, replace=replace)
    return tool


# --------------------------------------------------------------------------- one call


def _unavailable(
    defn: AgentDefinition, meta: dict[str, Any], why: str, *, status: ResultStatus = "error"
) -> ToolResult:
    return ToolResult(
        content=(TextBlock(text=f"Subagent '{defn.name}' unavailable: {why}"),),
        is_error=True,
        status=status,
        details={**meta, "unavailable": True, "error": why},
        error_type="SubagentUnavailable",
    )


def _invalid(defn: AgentDefinition, meta: dict[str, Any], invalid: Invalid) -> ToolResult:
    """Inputs that did not validate: each problem, then the exact shape of a valid call (what
    a model needs to call again; nothing is guessed from what it sent)."""
    issues = "\n".join(f"- {i.render()}" for i in invalid.error.issues)
    text = (
        f"Invalid arguments for subagent '{defn.name}' (it did not run):\n{issues}\n"
        f"It takes exactly these arguments: {call_shape(input_schema(defn))}. "
        "Call it again with them."
    )
    return ToolResult(
        content=(TextBlock(text=text),),
        is_error=True,
        status="invalid_arguments",
        details={**meta, "unavailable": True, "error": text},
        error_type="ToolValidationError",  # as any tool's arguments that do not validate
    )


def input_schema(defn: AgentDefinition) -> dict[str, Any]:
    """The JSON Schema of ``defn``'s inputs (what its tool offers)."""
    return dict(input_validator(defn.input_model, defn.input_config, defn.name).schema)


def call_shape(schema: Mapping[str, Any]) -> str:
    """A JSON object with one placeholder per property: ``{"task": "<string, required>"}``."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name, prop in properties.items():
        kind = prop.get("type", "value") if isinstance(prop, Mapping) else "value"
        note = ", ".join(
            [
                kind if isinstance(kind, str) else "/".join(map(str, kind)),
                "required" if name in required else "optional",
                *(
                    [str(prop["description"])]
                    if isinstance(prop, Mapping) and prop.get("description")
                    else []
                ),
            ]
        )
        parts.append(f'"{name}": <{note}>')
    return "{" + ", ".join(parts) + "}"


def _prompt(summary: str, inputs: Mapping[str, Any]) -> str:
    text = "Your inputs:\n" + json.dumps(dict(inputs), indent=2, ensure_ascii=False, default=str)
    return f"{summary.strip()}\n\n{text}" if summary.strip() else text


def _model_for(defn: AgentDefinition, parent: RunState | None, call_id: str = "") -> Model:
    if parent is not None and isinstance(parent.model, ReplayModel):
        return parent.model.nested(call_id, defn.name)  # a replay: the recorded nested run
    spec = defn.model
    if spec is None:
        if parent is None:
            raise ConfigurationError(
                "it has no model of its own (model=None) and no calling agent to inherit one from"
            )
        return parent.model
    if isinstance(spec, str) or is_model(spec):
        return resolve_model(spec, where=f"subagent '{defn.name}'")
    factory = cast("Callable[[], Model]", spec)
    return resolve_model(factory(), where=f"subagent '{defn.name}'")


async def delegate(
    defn: AgentDefinition, args: Mapping[str, Any], ctx: ToolContext, *, executor: Executor | None
) -> ToolResult:
    """Run one subagent call (the tool's body); see the module docstring."""
    parent = CURRENT_RUN.get()
    if parent is not None and parent.run_id != ctx.run_id:
        parent = None  # called from elsewhere (a notebook cell), not by this run's model
    depth = parent.depth + 1 if parent is not None else 1
    run_id = f"run_{secrets.token_hex(6)}"
    meta: dict[str, Any] = {
        "subagent": defn.name,
        "parent_call_id": ctx.call_id,
        "run_id": run_id,
        "depth": depth,
        "usage": RunUsage().as_dict(),
        "turns": 0,
        "status": "not_started",
    }
    invalid = args.get(INVALID_KEY)
    if isinstance(invalid, Invalid):
        return _invalid(defn, meta, invalid)
    if depth > defn.max_depth:
        why = (
            f"the subagent depth limit was reached: this call would run at depth {depth}, "
            f"and '{defn.name}' allows at most max_depth={defn.max_depth}."
        )
        return _unavailable(defn, meta, why)
    if defn.input_model is not None:
        instance: BaseModel = args["inputs"]
        values, inputs = dict(instance), instance.model_dump(mode="json")
    else:
        inputs = dict(args)
        values = {name: args.get(name) for name in defn.input_fields()}
    try:
        system = defn.system_prompt.format(**{k: "" if v is None else v for k, v in values.items()})
    except Exception as exc:
        return _unavailable(
            defn, meta, f"its system prompt could not be filled in ({type(exc).__name__}: {exc})."
        )
    try:
        summary = defn.compress_context(list(parent.messages) if parent else [], inputs)
        if inspect.isawaitable(summary):
            summary = await summary
        if not isinstance(summary, str):
            raise TypeError(f"it returned {type(summary).__name__}, not str")
    except Exception as exc:
        return _unavailable(
            defn, meta, f"the context compression hook failed ({type(exc).__name__}: {exc})."
        )
    approver = ctx.approver
    if parent is not None:
        base: Executor | None = parent.executor
    elif isinstance(ctx.executor, Executor):
        base = ctx.executor  # its policy governs what the caller may run, subagent or not
    else:
        base, approver = executor, None
    if base is None:
        why = (
            "no calling executor's policy is known (it was called outside an executor and "
            "has no executor=), so it runs nothing. Call it through an Executor or an agent."
        )
        return _unavailable(defn, meta, why)
    narrowed = NarrowedPolicy(base.policy, defn.tools, owner=defn.name)
    child_executor = derive_executor(base, policy=narrowed, approver=approver)
    try:
        agent = Agent(
            defn.name,
            model=_model_for(defn, parent, ctx.call_id),
            system_prompt=system,
            tools=defn.tools,
            max_turns=defn.max_turns,
            time_limit=defn.time_limit,
            output_model=defn.output_model,
            executor=child_executor,
            tool_choice=defn.tool_choice,
            reask=defn.reask,
            max_result_chars=parent.agent.max_result_chars
            if parent is not None
            else MAX_RESULT_CHARS,
        )
    except Exception as exc:
        child_executor.close()
        return _unavailable(defn, meta, f"{exc}")
    if parent is not None:
        parent.sink.emit(
            SubagentStarted(
                agent=defn.name,
                run_id=run_id,
                depth=depth,
                parent_call_id=ctx.call_id,
                parent_run_id=parent.run_id,
                inputs=inputs,
            )
        )
    status, folded = "cancelled", None
    try:
        try:
            result = await agent._execute(
                _prompt(summary, inputs),
                run_id=run_id,
                parent=parent,
                parent_call_id=ctx.call_id,
                executor=child_executor,
                on_text=ctx.on_update,
            )
            status, folded = result.status, _fold(defn, meta, result)
        except KodeUsageError as exc:  # e.g. a missing API key, met at the first request
            status, folded = "error", _unavailable(defn, meta, str(exc))
        return folded
    finally:
        child_executor.close()
        if parent is not None:
            parent.sink.emit(
                SubagentFinished(
                    agent=defn.name,
                    run_id=run_id,
                    depth=depth,
                    parent_call_id=ctx.call_id,
                    parent_run_id=parent.run_id,
                    status=status,
                    result=folded,
                )
            )


def _fold(defn: AgentDefinition, meta: dict[str, Any], result: AgentRunResult) -> ToolResult:
    """The child's run as ONE tool result for the parent's model."""
    meta = {**meta, "usage": result.usage.as_dict(), "turns": result.turns, "status": result.status}
    if result.status != "completed":
        if result.status == "max_turns":
            why = f"it reached its turn limit (max_turns={defn.max_turns}) without a final answer."
        elif result.status == "time_limit":
            why = f"it reached its time limit ({defn.time_limit or 0:g} s) without a final answer."
        else:
            why = f"{result.error}."
        return _unavailable(defn, {**meta, "trace": result.trace}, why)
    output = result.output
    if isinstance(output, BaseModel):
        text = output.model_dump_json(indent=2)
    else:
        text = str(output) if str(output).strip() else "(the subagent gave an empty answer)"
    return ToolResult(
        content=(TextBlock(text=text),),
        details={**meta, "unavailable": False, "trace": result.trace},
    )
