"""Structured final answers: an agent's ``output_model`` (a pydantic model).

With ``Agent(output_model=Report)``, the system prompt asks for a final answer that is one JSON
object matching ``Report``'s JSON Schema; :func:`parse_output` validates the model's final text
(tolerating a surrounding code fence or prose), and when it does not fit, :func:`retry_prompt`
tells the model exactly which fields are wrong so it can answer again.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from kode_nb.errors import ConfigurationError

__all__ = ["check_output_model", "output_instructions", "parse_output", "retry_prompt"]

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def check_output_model(value: object, where: str) -> type[BaseModel] | None:
    """``value`` if it is ``None`` or a pydantic model class, else ConfigurationError."""
    if value is None or (inspect.isclass(value) and issubclass(value, BaseModel)):
        return value
    raise ConfigurationError(
        f"{where}: output_model must be a pydantic BaseModel subclass (or None), got {value!r}"
    )


def output_instructions(model: type[BaseModel]) -> str:
    """The system-prompt addition that asks for a final answer fitting ``model``."""
    schema = json.dumps(model.model_json_schema(), ensure_ascii=False)
    return (
        "When you give your final answer (a turn without tool calls), reply with only one JSON "
        f"object that matches this JSON Schema, and nothing else:\n{schema}"
    )


def _candidates(text: str) -> list[str]:
    stripped = text.strip()
    found = [stripped]
    fence = _FENCE.match(stripped)
    if fence:
        found.append(fence.group(1).strip())
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        found.append(stripped[start : end + 1])
    return list(dict.fromkeys(found))


def _problems(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "the answer"
        lines.append(f"- {where}: {error['msg']}")
    return "\n".join(lines)


def parse_output(model: type[BaseModel], text: str) -> tuple[BaseModel | None, str | None]:
    """``(instance, None)`` if ``text`` holds a JSON object fitting ``model``, else
    ``(None, what is wrong)``."""
    first_problem: str | None = None
    for candidate in _candidates(text):
        try:
            return model.model_validate_json(candidate), None
        except ValidationError as exc:
            json_error = any(e["type"] == "json_invalid" for e in exc.errors(include_url=False))
            if first_problem is None or (not json_error and first_problem.startswith("not JSON")):
                first_problem = (
                    "not JSON: the answer must be one JSON object" if json_error else _problems(exc)
                )
    return None, first_problem or "the answer is empty; it must be one JSON object"


def retry_prompt(model: type[BaseModel], problem: str) -> str:
    """The message sent to the model when its final answer does not fit ``model``."""
    return (
        f"Your final answer does not match the required {model.__name__} schema:\n{problem}\n"
        "Answer again with only the corrected JSON object."
    )


def dump_output(output: Any) -> Any:
    """A JSON-shaped form of an output (a model instance becomes its dict)."""
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json")
    return output
