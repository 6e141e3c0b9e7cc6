"""Reading a function: its signature, resolved type hints, docstring and call mode.

Handles plain functions, bound methods, ``functools.partial`` and callable objects. Problems a
developer must fix raise :class:`~kode_nb.errors.ToolDefinitionError` naming the function and
the parameter.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Union

from kode_nb.errors import ToolDefinitionError
from kode_nb.tools._model import CallMode
from kode_nb.types import ToolContext

__all__ = [
    "DEFINE_FIRST",
    "call_mode",
    "check_param_kind",
    "docstring_of",
    "is_context_annotation",
    "param_hints",
    "qualname",
    "signature_of",
    "unwrap",
]

DEFINE_FIRST = "define the type at module level (or in the notebook) before the function"


def call_mode(fn: Callable[..., Any]) -> CallMode:
    """How ``fn`` must be driven: ``sync``, ``async``, ``async_gen`` or ``gen``."""
    target = unwrap(fn)
    if inspect.isasyncgenfunction(target):
        return "async_gen"
    if inspect.iscoroutinefunction(target):
        return "async"
    if inspect.isgeneratorfunction(target):
        return "gen"
    return "sync"


def unwrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The plain function behind partials and callable objects (for hints and mode)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(fn):
        call = type(fn).__call__
        if inspect.isfunction(call):
            return call
    return fn


def qualname(fn: object) -> str:
    """The name to show in errors: the function's (or the partial's function's) qualname."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__qualname__", None) or getattr(type(target), "__qualname__", "")
    return str(name) or repr(fn)


def docstring_of(fn: Callable[..., Any]) -> str | None:
    """The docstring that describes ``fn`` (a callable object's ``__call__``, else its class's)."""
    target = unwrap(fn)
    doc = getattr(target, "__doc__", None)
    if doc is None and target is not fn:
        doc = type(fn).__doc__
    return doc if isinstance(doc, str) else None


def signature_of(fn: Callable[..., Any], where: str) -> inspect.Signature:
    """``inspect.signature(fn)``, or a ToolDefinitionError saying why it cannot be read."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot read its signature: {exc}", function=where) from None


def param_hints(
    target: Callable[..., Any], signature: inspect.Signature, where: str
) -> dict[str, Any]:
    """Every parameter's resolved type hint (``Annotated`` kept); raise if one is missing or
    cannot be resolved. ``target`` is :func:`unwrap`'s result, ``signature`` the callable's."""
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:
        hints = {}  # find the culprit below; an unresolvable *return* annotation is fine
    hints.pop("return", None)
    globalns = getattr(inspect.unwrap(target), "__globals__", {})
    for param in signature.parameters.values():
        if param.name in hints or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.annotation is inspect.Parameter.empty:
            raise ToolDefinitionError(
                f"has no type hint; annotate it, e.g. `{param.name}: str`",
                function=where,
                parameter=param.name,
            )
        hints[param.name] = param.annotation
    for name, hint in hints.items():
        # a hint left as text: unresolvable, or quoted inside a postponed annotation
        while isinstance(hint, (str, typing.ForwardRef)):
            text = hint if isinstance(hint, str) else hint.__forward_arg__
            try:
                hint = eval(text, globalns)  # how get_type_hints resolves it, too
            except Exception as exc:
                raise ToolDefinitionError(
                    f"cannot resolve its type hint {text!r} ({type(exc).__name__}: {exc}); "
                    + DEFINE_FIRST,
                    function=where,
                    parameter=name,
                ) from None
        hints[name] = hint
    return hints


def check_param_kind(param: inspect.Parameter, where: str) -> None:
    """Raise for ``*args``, ``**kwargs`` and positional-only parameters: tools take named args."""
    if param.kind is param.VAR_POSITIONAL:
        hint = f"take a list instead, e.g. `{param.name}: list[str]`"
        problem = f"*{param.name} is not supported"
    elif param.kind is param.VAR_KEYWORD:
        hint = f"take a dict or name each argument, e.g. `{param.name}: dict[str, str]`"
        problem = f"**{param.name} is not supported"
    elif param.kind is param.POSITIONAL_ONLY:
        hint = "remove the '/' from the signature"
        problem = "positional-only parameters are not supported (arguments are passed by name)"
    else:
        return
    raise ToolDefinitionError(f"{problem}: {hint}", function=where, parameter=param.name)


def _strip(annotation: Any) -> Any:
    """``Annotated[X, ...]`` and ``Optional[X]`` -> ``X`` (for type tests only)."""
    if typing.get_origin(annotation) is Annotated:
        return _strip(typing.get_args(annotation)[0])
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in _UNION_TYPES and len(args) == 2 and type(None) in args:
        return _strip(args[0] if args[1] is type(None) else args[1])
    return annotation


_UNION_TYPES = (Union, types.UnionType)


def is_context_annotation(annotation: Any) -> bool:
    """True for ``ToolContext``, ``ToolContext | None`` and ``Annotated[ToolContext, ...]``."""
    return _strip(annotation) is ToolContext
