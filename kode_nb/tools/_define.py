"""``@tool`` and :func:`define_tool`: a typed function becomes a registered :class:`~kode_nb.Tool`.

Defining is registering: the tool goes into the current registry
(:func:`kode_nb.default_registry`) unless ``registry=None``; re-running a notebook cell that
defines the same function replaces the tool (same ``module.qualname`` source).

Three ways to describe the arguments:

- the function's signature, type hints and docstring (the usual way, see :mod:`kode_nb.tools._schema`);
- ``parameters={...}``: a raw JSON Schema; the function gets the validated arguments dict;
- ``input_config={"inputs": {...}}``: same, with a simple typed input list.

Either way a parameter annotated :class:`~kode_nb.ToolContext` receives the call's context.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, TypeVar, overload

from kode_nb.errors import ToolDefinitionError
from kode_nb.tools._docstrings import parse_docstring
from kode_nb.tools._introspect import docstring_of, signature_of, unwrap
from kode_nb.tools._model import ArgumentValidator, Tool
from kode_nb.tools._registry import ToolRegistry, default_registry
from kode_nb.tools._schema import (
    call_mode,
    function_schema,
    input_config_validator,
    is_context_annotation,
    schema_validator,
)
from kode_nb.types import (
    NOT_GIVEN,
    ApprovalRule,
    NotGiven,
    ToolCategory,
    ToolContext,
    ToolKind,
    validate_name,
)

__all__ = ["define_tool", "tool"]

_E = TypeVar("_E", bound=Enum)
_Preview = Callable[[Mapping[str, Any], "ToolContext | None"], "str | None"]


def define_tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    input_config: Mapping[str, Any] | None = None,
    label: str = "",
    kind: ToolKind | str = "other",
    category: ToolCategory | str = "custom",
    groups: Iterable[str] | str = (),
    timeout: float | None = None,
    approval: ApprovalRule | None = None,
    is_output_markdown: bool = False,
    can_update_output: bool | None = None,
    inline: bool = False,
    require_descriptions: bool = False,
    preview: _Preview | None = None,
    metadata: Mapping[str, Any] | None = None,
    registry: ToolRegistry | NotGiven | None = NOT_GIVEN,
    replace: bool = False,
) -> Tool:
    """Make ``fn`` a :class:`~kode_nb.Tool` and register it; returns the Tool.

    Args:
        fn: The implementation: sync or async, a plain function or a (async) generator that
            yields updates. (To decorate, use :func:`tool`.)
        name: The name the model sees; defaults to the function's name.
        description: What the tool does, for the model; defaults to the docstring's description.
        parameters: A raw JSON Schema (top-level ``"type": "object"``) instead of the signature;
            the function then receives the validated arguments dict as its first parameter.
        input_config: An ``inputConfig`` ``{"inputs": {name: {"description", "type", "required"}}}``
            instead of the signature; the function receives the arguments dict.
        label: A human label for displays; defaults to the name in words.
        kind: read, edit, delete, move, search, execute, fetch, think or other.
        category: system, file, network, data, code, mcp, agent or custom.
        groups: Groups the tool belongs to (for ``group:NAME`` in policies).
        timeout: Seconds before a call is stopped (``None``: the executor's default).
        approval: ``"auto"``, ``"ask"``, ``"deny"`` or a predicate over the JSON arguments.
        is_output_markdown: Displays render the output as markdown.
        can_update_output: The tool streams partial output; defaults to True for generators
            and for functions that take a ToolContext.
        inline: A fast sync tool that may run on the event loop instead of a worker thread.
        require_descriptions: Fail unless the tool and every argument are described.
        preview: Renders a call's effect (e.g. a diff) for the approval prompt.
        metadata: Free-form extra data.
        registry: Where to register: the current registry by default, ``None`` for nowhere.
        replace: Replace a different tool that already holds the name.
    """
    if fn is None:
        raise ToolDefinitionError(
            "define_tool() needs the function: define_tool(fn, ...), or decorate with @tool(...)"
        )
    _check_function(fn)
    where = str(getattr(_target(fn), "__qualname__", None) or repr(fn))
    tool_name = _tool_name(fn, name, where)
    if parameters is not None and input_config is not None:
        raise ToolDefinitionError("give parameters= or input_config=, not both", function=where)
    context_param: str | None
    arguments_param: str | None = None
    validator: ArgumentValidator
    if parameters is not None or input_config is not None:
        try:
            if parameters is not None:
                validator = schema_validator(parameters)
            else:
                validator = input_config_validator(input_config or {})
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(str(exc), function=where) from None
        arguments_param, context_param = _raw_schema_params(fn, where)
        mode = call_mode(fn)
        doc_description = parse_docstring(docstring_of(fn)).description
    else:
        schema = function_schema(fn, require_descriptions=require_descriptions)
        validator, context_param, mode = schema.validator, schema.context_param, schema.mode
        doc_description = schema.description
    text = (doc_description if description is None else description).strip()
    if require_descriptions and not text:
        raise ToolDefinitionError(
            "has no description: add a docstring or pass description=", function=where
        )
    if can_update_output is None:
        can_update_output = mode in ("gen", "async_gen") or context_param is not None
    new = Tool(
        name=tool_name,
        description=text,
        function=fn,
        validator=validator,
        label=label,
        kind=_member(ToolKind, kind, "kind", where),
        category=_member(ToolCategory, category, "category", where),
        groups=_groups(groups, where),
        timeout=_timeout(timeout, where),
        approval=_approval(approval, where),
        is_output_markdown=bool(is_output_markdown),
        can_update_output=bool(can_update_output),
        inline=bool(inline),
        mode=mode,
        context_param=context_param,
        arguments_param=arguments_param,
        source=_source(fn),
        preview=_optional_callable(preview, "preview", where),
        metadata=dict(metadata or {}),
    )
    target = default_registry() if isinstance(registry, NotGiven) else registry
    if target is not None:
        target.register(new, replace=replace)
    return new


@overload
def tool(fn: Callable[..., Any], /, **options: Any) -> Tool: ...
@overload
def tool(fn: None = None, /, **options: Any) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, **options: Any
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., kind=...)`` (options as :func:`define_tool`).

    The decorated name is bound to the :class:`~kode_nb.Tool`; calling it calls the function.
    """
    if isinstance(fn, str):
        raise ToolDefinitionError(f"use @tool(name={fn!r}) to name a tool, not @tool({fn!r})")
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ToolDefinitionError(
            f"unknown option(s) {', '.join(unknown)} for @tool; valid: {', '.join(sorted(_OPTIONS))}"
        )
    if fn is None:
        return functools.partial(define_tool, **options)
    return define_tool(fn, **options)


_OPTIONS = frozenset(inspect.signature(define_tool).parameters) - {"fn"}


# --------------------------------------------------------------------------- helpers


def _check_function(fn: object) -> None:
    if isinstance(fn, Tool):
        raise ToolDefinitionError(
            f"{fn.name!r} is already a Tool; use its .evolve(...) to make a variant"
        )
    if inspect.isclass(fn) or not callable(fn):
        what = "a class" if inspect.isclass(fn) else type(fn).__name__
        raise ToolDefinitionError(
            f"a tool must be a function (or a callable object), got {what}: {fn!r}"
        )


def _target(fn: Callable[..., Any]) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn
    return type(fn)  # a callable object: name it after its class


def _source(fn: Callable[..., Any]) -> str:
    target = _target(fn)
    return f"{getattr(target, '__module__', None) or '?'}.{getattr(target, '__qualname__', '?')}"


def _tool_name(fn: Callable[..., Any], name: str | None, where: str) -> str:
    if name is not None:
        return name  # Tool validates it and names the function on failure
    default = str(getattr(_target(fn), "__name__", ""))
    try:
        return validate_name(default)
    except ValueError:
        raise ToolDefinitionError(
            f"{default!r} cannot be a tool name; pass name='...' (a letter, then letters, "
            "digits, '_' or '-')",
            function=where,
        ) from None


def _member(enum: type[_E], value: object, what: str, where: str) -> _E:
    try:
        return enum(value)
    except (ValueError, TypeError):
        valid = ", ".join(str(m.value) for m in enum)
        raise ToolDefinitionError(
            f"unknown {what} {value!r}; valid values: {valid}", function=where
        ) from None


def _groups(groups: Iterable[str] | str, where: str) -> tuple[str, ...]:
    if isinstance(groups, str):
        return (groups,)
    found = tuple(groups)
    bad = [g for g in found if not isinstance(g, str) or not g.strip()]
    if bad:
        raise ToolDefinitionError(
            f"groups must be non-empty strings, got {bad[0]!r}", function=where
        )
    return found


def _timeout(timeout: object, where: str) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ToolDefinitionError(
            f"timeout must be a positive number of seconds or None, got {timeout!r}",
            function=where,
        )
    return float(timeout)


def _approval(approval: object, where: str) -> ApprovalRule | None:
    if approval is None or approval in ("auto", "ask", "deny"):
        return typing.cast("ApprovalRule | None", approval)
    if callable(approval) and not isinstance(approval, str):
        return typing.cast("ApprovalRule", approval)
    raise ToolDefinitionError(
        f"approval must be 'auto', 'ask', 'deny', a predicate or None, got {approval!r}",
        function=where,
    )


def _optional_callable(value: Any, what: str, where: str) -> Any:
    if value is not None and not callable(value):
        raise ToolDefinitionError(
            f"{what} must be a callable or None, got {type(value).__name__}", function=where
        )
    return value


def _raw_schema_params(fn: Callable[..., Any], where: str) -> tuple[str, str | None]:
    """(the parameter receiving the arguments dict, the ToolContext parameter or None)."""
    signature = signature_of(fn, where)
    try:
        hints = typing.get_type_hints(unwrap(fn))
    except Exception:  # annotations are optional here; an unresolvable one is not a context
        hints = {}
    arguments: str | None = None
    context: str | None = None
    for param in signature.parameters.values():
        annotation = hints.get(param.name, param.annotation)
        if annotation == "ToolContext" or is_context_annotation(annotation):
            context = param.name
        elif param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        elif arguments is None:
            arguments = param.name
        elif param.default is inspect.Parameter.empty:
            raise ToolDefinitionError(
                "a schema-defined tool is called with the arguments dict (and a ToolContext) "
                "only; give this parameter a default or remove it",
                function=where,
                parameter=param.name,
            )
    if arguments is None:
        raise ToolDefinitionError(
            "a schema-defined tool receives the validated arguments as one dict: add a first "
            "parameter for it, e.g. `def fn(args: dict) -> str`",
            function=where,
        )
    if signature.parameters[arguments].kind is inspect.Parameter.KEYWORD_ONLY:
        raise ToolDefinitionError(
            "the arguments dict is passed positionally; make this parameter positional",
            function=where,
            parameter=arguments,
        )
    return arguments, context
