"""pydantic-evals evaluator specs (as a dataset file writes them) as kode_nb scorers.

A spec is ``"Name"``, ``{"Name": first_argument}`` or ``{"Name": {keyword: value}}``.
Read: ``EqualsExpected``, ``Equals`` (``value``), ``Contains`` (``value``,
``case_sensitive``), ``IsInstance`` (``type_name``), ``MaxDuration`` (``seconds``), and
``LLMJudge`` (``rubric``, ``model``: a model name :func:`kode_nb.models.resolve_model` knows,
``include_input``, ``include_expected_output``). Another name raises
:class:`~kode_nb.errors.ConfigurationError` saying which are read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.evals._judge import LLMJudge
from kode_nb.evals._scorers import Contains, Equals, EqualsExpected, IsInstance, MaxDuration, Scorer

__all__ = ["scorers_from_specs"]

_FIRST = {
    "Equals": "value",
    "Contains": "value",
    "IsInstance": "type_name",
    "MaxDuration": "seconds",
    "LLMJudge": "rubric",
}


def _one(spec: Any) -> Scorer:
    if isinstance(spec, str):
        name, args = spec, {}
    elif isinstance(spec, Mapping) and len(spec) == 1:
        name, raw = next(iter(spec.items()))
        if isinstance(raw, Mapping) and name != "Equals":
            args = dict(raw)
        elif name in _FIRST:
            args = {_FIRST[name]: raw}
        else:
            raise ConfigurationError(f"evaluator {name!r} takes no argument, got {raw!r}")
    else:
        raise ConfigurationError(
            f"an evaluator spec is a name or {{name: arguments}}, got {spec!r}"
        )
    label = args.pop("evaluation_name", None)
    if name == "EqualsExpected":
        return EqualsExpected(name=label or "EqualsExpected")
    if name == "Equals":
        return Equals(args["value"], name=label or "Equals")
    if name == "Contains":
        return Contains(
            args["value"],
            case_sensitive=bool(args.get("case_sensitive", True)),
            name=label or "Contains",
        )
    if name == "IsInstance":
        return IsInstance(str(args["type_name"]), name=label or "IsInstance")
    if name == "MaxDuration":
        seconds = args["seconds"]
        if isinstance(
            seconds, Mapping
        ):  # a timedelta as pydantic writes it is a number; be lenient
            seconds = float(seconds.get("seconds", 0))
        return MaxDuration(float(seconds), name=label or "MaxDuration")
    if name == "LLMJudge":
        model = args.get("model")
        if model is None:
            raise ConfigurationError(
                "LLMJudge in a dataset file needs a model kode_nb can resolve (model: ...)"
            )
        return LLMJudge(
            str(args["rubric"]),
            model,
            include_input=bool(args.get("include_input", False)),
            include_expected=bool(args.get("include_expected_output", False)),
            name=label or "LLMJudge",
        )
    raise ConfigurationError(
        f"evaluator {name!r} is not read by kode_nb; it reads {', '.join(sorted(['EqualsExpected', *_FIRST]))}"
    )


def scorers_from_specs(specs: Sequence[Any]) -> list[Scorer]:
    """The kode_nb scorers of pydantic-evals evaluator specs (see the module docstring)."""
    return [_one(s) for s in specs]
