"""What one of many runs runs: a :class:`Target`, self-contained so it can travel to a worker.

:func:`as_target` accepts an :class:`~kode_nb.Agent`, an :class:`~kode_nb.AgentDefinition`, a
registered subagent tool or any other :class:`~kode_nb.Tool`, and captures everything a run
needs without the notebook's registry: the tool objects themselves (the allowlist resolved
now), the model (or a zero-argument factory), the prompts, the limits and the policy. A target
pickles with ``cloudpickle`` (tools defined in a notebook included), which is how the Dask and
Ray engines ship it.

:meth:`Target.key` is a hash of the definition — name, prompts, model identity and settings,
each tool's name, schema, kind, approval rule and code, limits, the executor's policy — so a
cache entry is reused only for the same definition (the inbox's policy is checked row by row
instead: :mod:`kode_nb.many._recheck`). Each function in it (a tool's, a prompt function, a
model factory or script step, a policy function) counts by
:func:`~kode_nb.many._fingerprint.fingerprint`: its code, its closure cells, its default
arguments and the module globals it reads, by content, and the same for the functions and
classes of your code it reaches. When one of those values cannot be hashed by content (a
client, a connection), :meth:`Target.key` raises :class:`Uncacheable` saying which and where:
the batch then runs without the cache.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from dataclasses import fields as dc_fields
from typing import Any, Literal

from kode_nb.errors import ConfigurationError
from kode_nb.many._fingerprint import Unhashable, fingerprint

__all__ = [
    "Target",
    "Uncacheable",
    "as_target",
    "fresh_model",
    "model_identity",
    "policy_identity",
    "tool_identity",
]

TargetKind = Literal["agent", "subagent", "tool", "function"]


@dataclass(frozen=True, kw_only=True, eq=False)
class Target:
    """An agent, subagent or tool, ready to be run on rows anywhere."""

    name: str
    """The agent's or tool's name."""
    kind: TargetKind
    """``agent`` (an Agent, prompted per row), ``subagent`` (a definition, its inputs per row)
    or ``tool`` (called with the row as its arguments)."""
    tools: tuple[Any, ...] = ()
    """The tool objects the run may use (for ``tool``: the tool itself)."""
    model: Any = None
    """A Model, or a zero-argument factory called per row; ``None`` for tools."""
    system_prompt: str = ""
    """The system prompt (for ``subagent``: a template over the row's inputs)."""
    prompt: str | Callable[[Mapping[str, Any]], str] | None = None
    """For ``agent``: a template over the row (``"Answer: {question}"``) or a function of it;
    ``None``: the row's ``prompt`` column, or its only column."""
    max_turns: int = 10
    time_limit: float | None = None
    settings: Any = None
    output_model: Any = None
    definition: Any = None
    """For ``subagent``: the :class:`~kode_nb.AgentDefinition`."""
    policy: Any = None
    """The policy of the runs' executors (``None``: the default ``Policy()``)."""
    label: str = ""
    """How results name this target (in a comparison); defaults to :attr:`name`."""
    function: Any = None
    """For ``function``: the async function of a row (a framework agent's, from
    :func:`kode_nb.interop.row_runner`, or your own)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else that should change the cache key (``version=`` of :func:`as_target`)."""

    @property
    def display(self) -> str:
        return self.label or self.name

    def key(self) -> str:
        """A hex digest of the definition: equal definitions, equal keys. Raises
        :class:`Uncacheable` when a value a function reads cannot be hashed by content."""
        tools = [_naming(f"tool {t.name!r}", tool_identity, t) for t in self.tools]
        prompt = self.prompt
        data = {
            "name": self.name,
            "kind": self.kind,
            "system_prompt": self.system_prompt,
            "prompt": _naming("the prompt function", _callable_identity, prompt)
            if callable(prompt)
            else prompt,
            "model": _naming("the model", model_identity, self.model),
            "tools": tools,
            "max_turns": self.max_turns,
            "time_limit": self.time_limit,
            "settings": asdict(self.settings)
            if is_dataclass(self.settings) and not isinstance(self.settings, type)
            else None,
            "output_model": _schema_of(self.output_model),
            "definition": _definition_identity(self.definition),
            "function": getattr(self.function, "kode_nb_identity", None)
            or (
                _naming(f"the function {self.name!r}", _callable_identity, self.function)
                if self.function is not None
                else None
            ),
            "extra": dict(self.extra),
            "policy": _naming("the policy", policy_identity, self.policy),
        }
        text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def with_label(self, label: str) -> Target:
        return _replace(self, label=label)

    def __getstate__(self) -> dict[str, Any]:
        """For pickling: a policy dataclass (which holds a lock) travels as its fields."""
        state = dict(self.__dict__)
        policy = state.get("policy")
        if is_dataclass(policy) and not isinstance(policy, type):
            fields = {f.name: getattr(policy, f.name) for f in dc_fields(policy) if f.init}
            state["policy"] = _PolicyFields(type(policy), fields)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        policy = state.get("policy")
        if isinstance(policy, _PolicyFields):
            state["policy"] = policy.build()
        for name, value in state.items():
            object.__setattr__(self, name, value)


class Uncacheable(ValueError):
    """A target whose answers depend on a value the cache key cannot cover (its message says
    which, and where it is read): the batch runs without the cache."""


def _naming(what: str, identity: Callable[[Any], Any], value: Any) -> Any:
    try:
        return identity(value)
    except Unhashable as exc:
        raise Uncacheable(f"{what}: {exc}") from None


@dataclass(frozen=True)
class _PolicyFields:
    cls: type
    fields: dict[str, Any]

    def build(self) -> Any:
        return self.cls(**self.fields)


def _replace(target: Target, **changes: Any) -> Target:
    from dataclasses import replace

    return replace(target, **changes)


def as_target(
    obj: Any,
    *,
    prompt: str | Callable[[Mapping[str, Any]], str] | None = None,
    model: Any = None,
    label: str = "",
    version: str | None = None,
    registry: Any = None,
    policy: Any = None,
) -> Target:
    """Capture ``obj`` (an Agent, AgentDefinition, subagent tool, Tool, Target or tool name)
    as a :class:`Target`. ``model`` replaces the model (to compare two models); ``version``
    changes the cache key by hand."""
    from kode_nb.agents import Agent, AgentDefinition
    from kode_nb.tools import Tool

    extra = {"version": version} if version is not None else {}
    if isinstance(obj, Target):
        out = obj
        if model is not None:
            out = _replace(out, model=model)
        if prompt is not None:
            out = _replace(out, prompt=prompt)
        return _replace(out, label=label or out.label, extra={**out.extra, **extra})
    if isinstance(obj, str):
        from kode_nb.tools import default_registry

        reg = registry if registry is not None else default_registry()
        found = reg.get(obj)
        if found is None:
            raise ConfigurationError(f"run_many: no tool or agent named {obj!r} is registered")
        obj = found
    if isinstance(obj, Tool) and isinstance((obj.metadata or {}).get("subagent"), AgentDefinition):
        obj = obj.metadata["subagent"]
    if isinstance(obj, Agent):
        tools = tuple(obj._resolve(obj.executor).values())
        return Target(
            name=obj.name,
            kind="agent",
            tools=tools,
            model=model or obj.model,
            system_prompt=obj.system_prompt,
            prompt=prompt,
            max_turns=obj.max_turns,
            time_limit=obj.time_limit,
            settings=obj.settings,
            output_model=obj.output_model,
            policy=policy if policy is not None else obj.executor.policy,
            label=label,
            extra=extra,
        )
    if isinstance(obj, AgentDefinition):
        from kode_nb.agents._toolset import resolve_tools
        from kode_nb.tools import default_registry

        reg = registry if registry is not None else default_registry()
        tools = tuple(resolve_tools(obj.tools, reg, where=f"agent {obj.name!r}"))
        chosen = model if model is not None else obj.model
        if chosen is None:
            raise ConfigurationError(
                f"run_many: agent {obj.name!r} has no model of its own; pass model=..."
            )
        return Target(
            name=obj.name,
            kind="subagent",
            tools=tools,
            model=chosen,
            system_prompt=obj.system_prompt,
            max_turns=obj.max_turns,
            time_limit=obj.time_limit,
            output_model=obj.output_model,
            definition=obj,
            policy=policy,
            label=label,
            extra=extra,
        )
    if isinstance(obj, Tool):
        return Target(
            name=obj.name, kind="tool", tools=(obj,), policy=policy, label=label, extra=extra
        )
    function = _row_function(obj, prompt)
    if function is not None:
        name = getattr(function, "kode_nb_name", None) or getattr(obj, "__name__", "function")
        return Target(
            name=str(name),
            kind="function",
            function=function,
            policy=policy,
            label=label,
            extra=extra,
        )
    raise ConfigurationError(
        "run_many needs an Agent, an AgentDefinition, a Tool, a registered name, an agent of "
        "pydantic-ai, the OpenAI Agents SDK or LangChain, or an async function of a row; "
        f"got {type(obj).__name__}"
    )


def _row_function(obj: Any, prompt: Any) -> Any:
    """The async function of a row that runs ``obj``: another framework's agent (through
    :func:`kode_nb.interop.row_runner`) or an async function itself; else ``None``."""
    import inspect

    from kode_nb.interop._run import framework_of, row_runner

    if framework_of(obj) is not None:
        return row_runner(obj, prompt=prompt)
    method = type(obj).__call__ if callable(obj) and not isinstance(obj, type) else None
    if inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(method):
        return obj
    return None


def fresh_model(model: Any) -> Any:
    """The model one row runs with: a factory is called; a model with state (``reset``, e.g.
    a ScriptedModel) is copied and rewound, so each row plays its script from the start."""
    from kode_nb.agents._toolset import is_model

    if model is None:
        return None
    if not is_model(model) and callable(model):
        return model()
    if callable(getattr(model, "reset", None)):
        clone = copy.copy(model)
        if isinstance(getattr(model, "requests", None), list):
            clone.requests = []
        clone.reset()
        return clone
    return model


def model_identity(model: Any) -> Any:
    """What identifies a model in a cache key: class, name, and (scripted) its script."""
    if model is None:
        return None
    from kode_nb.agents._toolset import is_model

    if not is_model(model) and callable(model):
        return {"factory": _callable_identity(model)}
    ident: dict[str, Any] = {"class": type(model).__qualname__, "name": model.name}
    script = getattr(model, "script", None)
    if script is not None:
        ident["script"] = [_callable_identity(i) if callable(i) else repr(i) for i in script]
    for attr in ("model", "base_url", "seed", "calls_per_tool", "text"):
        value = getattr(model, attr, None)
        if isinstance(value, (str, int, float)):
            ident[attr] = value
    return ident


def tool_identity(tool: Any) -> dict[str, Any]:
    """What identifies a tool in a cache key: name, schema, kind, approval rule, timeout,
    isolation and its code."""
    return {
        "name": tool.name,
        "parameters": tool.parameters,
        "kind": str(tool.kind),
        "approval": _value_identity(getattr(tool, "approval", None)),
        "timeout": getattr(tool, "timeout", None),
        "isolation": getattr(tool, "isolation", None),
        "code": _callable_identity(getattr(tool, "function", None)),
    }


def _unwrap(fn: Any) -> Any:
    seen = 0
    while seen < 20:
        seen += 1
        if hasattr(fn, "func") and not hasattr(fn, "__code__"):  # functools.partial
            fn = fn.func
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        elif hasattr(fn, "__func__"):
            fn = fn.__func__
        else:
            break
    if not hasattr(fn, "__code__") and callable(fn):
        call = getattr(type(fn), "__call__", None)  # noqa: B004 - an instance with __call__
        if hasattr(call, "__code__"):
            return call
    return fn


def policy_identity(policy: Any) -> Any:
    """What identifies a policy in a cache key: a dataclass policy's fields (rules, modes,
    paths), a function's code, else its ``repr``."""
    return _value_identity(policy)


def _value_identity(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if is_dataclass(value) and not isinstance(value, type):
        return {
            "class": type(value).__qualname__,
            "fields": {
                f.name: _value_identity(getattr(value, f.name)) for f in dc_fields(value) if f.init
            },
        }
    if isinstance(value, Mapping):
        return {str(k): _value_identity(v) for k, v in sorted(value.items(), key=repr)}
    if isinstance(value, (set, frozenset)):
        return sorted(str(_value_identity(v)) for v in value)
    if isinstance(value, (list, tuple)):
        return [_value_identity(v) for v in value]
    if callable(value):
        return _callable_identity(value)
    return repr(value)


def _callable_identity(fn: Any) -> str:
    """A function's name and its :func:`~kode_nb.many._fingerprint.fingerprint` (code, closure
    cells, defaults and the globals it reads, by content; no addresses, so it is the same in
    every process). Raises :class:`~kode_nb.many._fingerprint.Unhashable`."""
    if fn is None:
        return ""
    named = _unwrap(fn)
    return f"{getattr(named, '__qualname__', type(named).__name__)}:{fingerprint(fn)[:16]}"


def _schema_of(model: Any) -> Any:
    schema = getattr(model, "model_json_schema", None)
    return schema() if callable(schema) else None


def _definition_identity(defn: Any) -> Any:
    if defn is None:
        return None
    return {
        "inputs": _schema_of(defn.input_model) or defn.input_config,
        "tools": list(defn.tools),
        "description": defn.description,
    }
