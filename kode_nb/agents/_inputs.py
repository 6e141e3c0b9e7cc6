"""A subagent's input contract: the validator, the folding of invalid inputs, the template check.

* :func:`input_validator` — from the ``input_model`` (pydantic; the same lone-model validator
  ``@tool`` uses, so the schema is exactly the model's) or the ``input_config``.
* :class:`FoldingValidator` — wraps it so invalid inputs reach the subagent call, which folds
  them into an *unavailable* result instead of the executor failing the call.
* :func:`check_template` — the system prompt may only use named inputs.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from kode_nb.errors import ToolDefinitionError, ToolValidationError
from kode_nb.tools._model import ArgumentValidator
from kode_nb.tools._raw_schema import input_config_validator
from kode_nb.tools._schema import function_schema

__all__ = ["INVALID_KEY", "FoldingValidator", "Invalid", "check_template", "input_validator"]

INVALID_KEY = "__invalid_input__"
"""The key under which :class:`FoldingValidator` passes an :class:`Invalid` on."""


@dataclass(frozen=True, slots=True)
class Invalid:
    """Inputs that did not validate, and why."""

    error: ToolValidationError
    raw: Any


class FoldingValidator:
    """Validates like ``inner``; invalid inputs come out as ``{INVALID_KEY: Invalid(...)}``."""

    def __init__(self, inner: ArgumentValidator) -> None:
        self.inner = inner
        """The real validator."""
        self.schema = inner.schema
        """Exactly the inner validator's schema."""
        self.strict = inner
        """The validator that raises instead of folding (to tell whether arguments fit,
        :meth:`~kode_nb.models.ToolSpec.validate` with ``strict=True``)."""

    def validate(self, raw: Any, *, tool: str) -> dict[str, Any]:
        try:
            return self.inner.validate(raw, tool=tool)
        except ToolValidationError as exc:
            return {INVALID_KEY: Invalid(exc, raw)}

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        invalid = validated.get(INVALID_KEY)
        if isinstance(invalid, Invalid):
            raw = invalid.raw
            return dict(raw) if isinstance(raw, Mapping) else {"raw_arguments": str(raw)}
        return self.inner.dump(validated)


def input_validator(
    input_model: type[BaseModel] | None, input_config: Mapping[str, Any] | None, where: str
) -> ArgumentValidator:
    """The validator of the input contract (validated inputs: ``{"inputs": instance}`` for a
    model, the given arguments dict for an ``input_config``)."""
    if input_config is not None:
        try:
            return input_config_validator(input_config)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(str(exc), function=where) from None

    def stub(inputs: Any) -> None:  # a function taking the model: the lone-model validator
        return None

    stub.__annotations__ = {"inputs": input_model, "return": None}
    return function_schema(stub, name=where).validator


def check_template(template: str, fields: Sequence[str], where: str) -> None:
    """Raise :class:`ToolDefinitionError` unless ``template`` only uses named ``fields``."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ToolDefinitionError(
            f"system_prompt is not a valid template ({exc}); write {{{{ and }}}} for literal braces",
            function=where,
        ) from None
    for _text, field, _spec, _conversion in parsed:
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise ToolDefinitionError(
                f"system_prompt has a positional placeholder {{{field}}}; name an input instead "
                f"({', '.join(fields) or 'no inputs'})",
                function=where,
            )
        if root not in fields:
            raise ToolDefinitionError(
                f"system_prompt uses {{{field}}}, but '{root}' is not an input; inputs: "
                f"{', '.join(fields) or 'none'}",
                function=where,
            )
