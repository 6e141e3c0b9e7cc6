"""NaN and Infinity are refused as number arguments unless a parameter opts in.

JSON has no NaN or Infinity, but Python's parser (and pydantic's) read ``NaN``, ``Infinity`` and
``1e999`` as floats, and a mapping of arguments may hold ``float("nan")``. A tool computing with
one rarely means it, so every number argument must be finite - nested ones too - unless its type
opts in with pydantic's own marker: ``Annotated[float, Field(allow_inf_nan=True)]`` (or
``Annotated[float, AllowInfNan()]`` from :mod:`pydantic.types`), or a pydantic model of your own
whose ``model_config`` sets ``allow_inf_nan=True``. A raw JSON Schema cannot say so: its number
arguments are always finite.

The models kode_nb builds use ``allow_inf_nan=False`` (pydantic enforces it); this module checks
what pydantic does not: the fields of your own models (pydantic's default allows non-finite
floats) and the arguments of raw-JSON-Schema tools.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from kode_nb.errors import FieldIssue

__all__ = ["NOT_FINITE", "non_finite_issues"]

NOT_FINITE = "should be a finite number (NaN and Infinity are not allowed)"
"""The issue's message."""

_MAX_DEPTH = 64


def _opted_in(model: type[BaseModel], field: str) -> bool:
    if model.model_config.get("allow_inf_nan") is True:
        return True
    info = model.model_fields.get(field)
    if info is None:
        return False
    if any(getattr(m, "allow_inf_nan", None) is True for m in info.metadata):
        return True
    return "allow_inf_nan=True" in repr(info.annotation)  # list[Annotated[float, AllowInfNan()]]


def non_finite_issues(value: Any, *, models_only: bool = False) -> list[FieldIssue]:
    """One issue per non-finite float in ``value`` (dicts, lists, tuples, sets, pydantic model
    instances) that no opt-in allows; with ``models_only``, only floats inside model instances
    are checked (those outside were validated under ``allow_inf_nan=False`` already)."""
    found: list[FieldIssue] = []
    _walk(value, "", not models_only, found, 0)
    return found


def _walk(value: Any, path: str, check: bool, found: list[FieldIssue], depth: int) -> None:
    if type(value) is float:
        if check and not math.isfinite(value):
            found.append(
                FieldIssue(path=path, message=NOT_FINITE, expected="number", received=value)
            )
        return
    if depth > _MAX_DEPTH or value is None or isinstance(value, (str, bytes, int)):
        return
    prefix = f"{path}." if path else ""
    if isinstance(value, BaseModel):
        model = type(value)
        for name, item in value.__dict__.items():
            info = model.model_fields.get(name)
            key = (info.alias if info is not None and info.alias else None) or name
            _walk(item, prefix + key, not _opted_in(model, name), found, depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, f"{prefix}{key}", check, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk(item, f"{prefix}{i}", check, found, depth + 1)
    elif isinstance(value, (set, frozenset)):
        for item in value:
            _walk(item, path, check, found, depth + 1)
