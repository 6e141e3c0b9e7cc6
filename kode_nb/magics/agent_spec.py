"""``%%agent``'s YAML front matter and the model, tools and inputs specs of the agent magics.

Everything here turns notebook text into :func:`kode_nb.agents.register_subagent` options, and
raises ``UsageError`` naming the cell (``where``) and what to fix. No kernel, no display.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError

from kode_nb.magics.nesting import check_nesting, too_deep

__all__ = [
    "DEFAULT_INPUTS",
    "FRONT_MATTER_KEYS",
    "choice_options",
    "inputs_option",
    "model_object",
    "number_option",
    "parse_front_matter",
    "resolve_model_spec",
    "tools_option",
]

FRONT_MATTER_KEYS = (
    "description",
    "inputs",
    "tools",
    "model",
    "max_turns",
    "time_limit",
    "max_depth",
    "label",
    "tool_choice",
    "reask",
)
"""The keys ``%%agent``'s front matter may have."""

DEFAULT_INPUTS = {
    "task": {"type": "string", "description": "The task to carry out.", "required": True}
}
"""The inputs of an agent whose front matter has no ``inputs``."""

_FENCE = re.compile(r"^---[ \t]*$", re.M)


def parse_front_matter(cell: str, where: str) -> tuple[dict[str, Any], str]:
    """``(front matter mapping, body)`` of a ``%%agent`` cell; UsageError when malformed."""
    text = cell.lstrip("\n")
    example = (
        "Start the cell with YAML front matter, e.g.\n---\ndescription: What it does and when "
        "to use it.\ntools: [read_file]\n---\nThe system prompt..."
    )
    if not _FENCE.match(text):
        raise UsageError(f"{where}: the cell has no front matter. {example}")
    first = text.index("\n") + 1 if "\n" in text else len(text)
    end = _FENCE.search(text, first)
    if end is None:
        raise UsageError(f"{where}: the front matter is not closed: add a line '---' after it.")
    import yaml  # type: ignore[import-untyped]

    front = text[first : end.start()]
    check_nesting(front, f"{where}: the front matter")
    try:
        meta = yaml.safe_load(front)
    except RecursionError:
        raise too_deep(f"{where}: the front matter") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (front matter line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise UsageError(f"{where}: the front matter is not valid YAML{at}: {problem}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise UsageError(
            f"{where}: the front matter must be 'key: value' lines, got {type(meta).__name__}: {meta!r}"
        )
    for key in meta:
        if key not in FRONT_MATTER_KEYS:
            close = difflib.get_close_matches(str(key), FRONT_MATTER_KEYS, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UsageError(
                f"{where}: unknown front matter key {key!r}.{hint} Allowed: {', '.join(FRONT_MATTER_KEYS)}"
            )
    body = text[end.end() :].strip("\n")
    return meta, body


def _variable(name: str, namespace: Mapping[str, Any], where: str, what: str) -> Any:
    if not name.isidentifier():
        raise UsageError(f"{where}: {what} ${name} is not a variable name")
    if name not in namespace:
        close = difflib.get_close_matches(
            name, [k for k in namespace if not k.startswith("_")], n=1
        )
        hint = f" Did you mean ${close[0]}?" if close else ""
        raise UsageError(f"{where}: {what}: there is no variable {name!r} in the notebook.{hint}")
    return namespace[name]


def resolve_model_spec(value: Any, namespace: Mapping[str, Any], where: str) -> tuple[Any, str]:
    """``(model spec, label)`` from ``model:`` / ``--model`` / ``%model``.

    A spec is a model name (checked now), a Model object, or a zero-argument factory; a
    ``$variable`` holds any of the three (a name as a string)."""
    from kode_nb.agents._toolset import is_model

    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: model must be a model name or $variable, got {value!r}")
    text = value.strip()
    if text.startswith("$") or (text.isidentifier() and text in namespace):
        name = text.removeprefix("$")
        obj = _variable(name, namespace, where, "model")
        if is_model(obj):
            return obj, f"${name}"
        if isinstance(obj, str) and obj.strip():
            return _model_name(obj.strip(), where), f"${name}"
        if callable(obj) and not isinstance(obj, type):
            return obj, f"${name}"
        raise UsageError(
            f"{where}: model ${name} is {type(obj).__name__}, not a Model (an object with .name "
            "and stream()), a zero-argument function returning one, or a model name"
        )
    return _model_name(text, where), text


def _model_name(text: str, where: str) -> str:
    """``text`` if it names a model (``test``, ``openai:gpt-4.1-mini``...); else UsageError."""
    if text.lower() == "scripted":
        raise UsageError(
            f"{where}: model 'scripted' needs its script: put it in a variable, "
            "e.g. `script = ScriptedModel([call('add', a=1, b=2), 'The sum is 3.'])`, and use "
            "$script (or a function returning a fresh ScriptedModel, for an agent run more than once)"
        )
    from kode_nb.errors import ConfigurationError
    from kode_nb.models import resolve_model

    try:
        resolve_model(text)
    except ConfigurationError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return text


def model_object(spec: Any, where: str) -> Any:
    """A model for one run, from a spec (a factory is called now)."""
    from kode_nb.agents._toolset import is_model

    if isinstance(spec, str):
        from kode_nb.errors import ConfigurationError
        from kode_nb.models import resolve_model

        try:
            return resolve_model(spec)
        except ConfigurationError as exc:
            raise UsageError(f"{where}: {exc}") from None
    if is_model(spec):
        return spec
    try:
        made = spec()
    except Exception as exc:
        raise UsageError(f"{where}: the model factory raised {type(exc).__name__}: {exc}") from None
    if not is_model(made):
        raise UsageError(f"{where}: the model factory returned {made!r}, not a Model")
    return made


def tools_option(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, list):
        items = value
    else:
        raise UsageError(f"{where}: tools must be a list ([a, b] or '- a' lines), got {value!r}")
    bad = [v for v in items if not isinstance(v, str) or not v.strip()]
    if bad:
        raise UsageError(f"{where}: tools must be tool names or selectors, got {bad[0]!r}")
    return tuple(v.strip() for v in items)


def inputs_option(value: Any, namespace: Mapping[str, Any], where: str) -> dict[str, Any]:
    from pydantic import BaseModel

    if value is None:
        return {"input_config": {"inputs": DEFAULT_INPUTS}}
    if isinstance(value, str) and value.strip().startswith("$"):
        obj = _variable(value.strip()[1:], namespace, where, "inputs")
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            return {"input_model": obj}
        raise UsageError(f"{where}: inputs {value.strip()} is {obj!r}, not a pydantic model class")
    if not isinstance(value, dict) or not value:
        raise UsageError(
            f"{where}: inputs must be $Model (a pydantic model) or a mapping of name -> "
            "{type, description, required}, got " + repr(value)
        )
    inputs: dict[str, Any] = {}
    for name, spec in value.items():
        inputs[str(name)] = {"type": spec} if isinstance(spec, str) else spec
    return {"input_config": {"inputs": inputs}}


def choice_options(meta: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``tool_choice`` and ``reask`` from front matter, checked."""
    out: dict[str, Any] = {}
    if meta.get("tool_choice") is not None:
        value = meta["tool_choice"]
        if not isinstance(value, str) or not value.strip():
            raise UsageError(
                f"{where}: tool_choice must be auto, required, none or a tool name, got {value!r}"
            )
        out["tool_choice"] = value.strip()
    if "reask" in meta:
        if not isinstance(meta["reask"], bool):
            raise UsageError(f"{where}: reask must be true or false, got {meta['reask']!r}")
        out["reask"] = meta["reask"]
    return out


def number_option(meta: Mapping[str, Any], key: str, where: str, kind: type) -> dict[str, Any]:
    if key not in meta:
        return {}
    value = meta[key]
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise UsageError(
            f"{where}: {key} must be {'a number' if kind is float else 'an integer'}, got {value!r}"
        )
    return {key: value}
