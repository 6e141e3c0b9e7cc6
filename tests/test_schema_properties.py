"""Property tests: for generated function signatures, the schema mirrors the signature and valid
arguments round-trip through validation."""

from __future__ import annotations

import inspect
import json
import keyword
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from kode_nb.tools._schema import function_schema
from kode_nb.types import ToolContext


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Item(BaseModel):
    name: str
    qty: int = 1


@dataclass(frozen=True)
class Kind:
    """One type from the pool: its annotation and a strategy for valid Python values."""

    annotation: Any
    values: st.SearchStrategy[Any]


_text = st.text(max_size=8)
_ints = st.integers(-(10**9), 10**9)
POOL: dict[str, Kind] = {
    "str": Kind(str, _text),
    "int": Kind(int, _ints),
    "float": Kind(float, st.floats(allow_nan=False, allow_infinity=False)),
    "bool": Kind(bool, st.booleans()),
    "optional_int": Kind(Optional[int], st.none() | _ints),  # noqa: UP045
    "int_or_none": Kind(int | None, st.none() | _ints),
    "list_str": Kind(list[str], st.lists(_text, max_size=3)),
    "dict_str_int": Kind(dict[str, int], st.dictionaries(_text, _ints, max_size=3)),
    "tuple": Kind(tuple[int, str], st.tuples(_ints, _text)),
    "literal": Kind(Literal["a", "b", "c"], st.sampled_from(["a", "b", "c"])),
    "enum": Kind(Color, st.sampled_from(list(Color))),
    "model": Kind(Item, st.builds(Item, name=_text, qty=_ints)),
    "list_model": Kind(list[Item], st.lists(st.builds(Item, name=_text, qty=_ints), max_size=2)),
}

_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n)
)


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    keyword_only: bool
    default: Any = inspect.Parameter.empty

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty


@st.composite
def signatures(draw: st.DrawFn) -> tuple[list[Param], str | None]:
    names = draw(st.lists(_names, max_size=6, unique=True))
    context = draw(st.none() | _names.filter(lambda n: n not in names))
    params = []
    for name in names:
        kind = draw(st.sampled_from(sorted(POOL)))
        default = (
            draw(st.none() | POOL[kind].values) if draw(st.booleans()) else inspect.Parameter.empty
        )
        if default is None and kind not in ("optional_int", "int_or_none"):
            default = inspect.Parameter.empty
        params.append(Param(name, kind, draw(st.booleans()), default))
    return params, context


def build(params: list[Param], context: str | None) -> Any:
    """A function with exactly this signature and these annotations."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        return kwargs

    # Python's ordering rule: positional params without defaults, then with, then keyword-only
    positional = [p for p in params if not p.keyword_only]
    positional.sort(key=lambda p: not p.required)
    ordered = positional + [p for p in params if p.keyword_only]
    sig_params = [
        inspect.Parameter(
            p.name,
            inspect.Parameter.KEYWORD_ONLY
            if p.keyword_only
            else inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=p.default,
            annotation=POOL[p.kind].annotation,
        )
        for p in ordered
    ]
    if context is not None:
        sig_params.append(
            inspect.Parameter(context, inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext)
        )
    fn.__signature__ = inspect.Signature(sig_params)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in sig_params}
    fn.__name__ = fn.__qualname__ = "generated"
    return fn, [p.name for p in ordered]


def jsonable(value: Any) -> Any:
    return to_jsonable_python(value, by_alias=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signatures(), st.data())
def test_schema_mirrors_signature_and_valid_arguments_round_trip(
    sig: tuple[list[Param], str | None], data: st.DataObject
) -> None:
    params, context = sig
    fn, order = build(params, context)
    fs = function_schema(fn)
    schema = fs.parameters
    by_name = {p.name: p for p in params}
    assert fs.context_param == context

    lone = len(params) == 1 and params[0].kind == "model"
    if lone:
        assert list(schema["properties"]) == ["name", "qty"]
        assert schema["required"] == ["name"]
        value = data.draw(POOL["model"].values)
        validated = fs.validator.validate(json.dumps(jsonable(value)), tool="generated")
        assert validated == {params[0].name: value}
        return

    assert list(schema["properties"]) == order
    assert set(schema.get("required", [])) == {p.name for p in params if p.required}
    assert schema["additionalProperties"] is False
    for name, prop in schema["properties"].items():
        param = by_name[name]
        if param.required:
            assert "default" not in prop
        else:
            assert prop["default"] == jsonable(param.default)

    # a generated valid value for every required argument and some optional ones
    given_values = {
        p.name: data.draw(POOL[p.kind].values, label=p.name)
        for p in params
        if p.required or data.draw(st.booleans(), label=f"give {p.name}")
    }
    expected = {p.name: p.default for p in params if not p.required} | given_values
    as_json = {k: jsonable(v) for k, v in given_values.items()}
    for raw in (json.dumps(as_json), as_json):
        validated = fs.validator.validate(raw, tool="generated")
        assert validated == expected
        assert list(validated) == order
        assert fs.validator.dump(validated) == {k: jsonable(v) for k, v in expected.items()}


@pytest.mark.parametrize(
    "name", ["json", "schema", "copy", "model_config", "model_fields", "_x", "self", "match"]
)
def test_awkward_names_round_trip(name: str) -> None:
    fn, _ = build([Param(name, "int", keyword_only=False)], None)
    fs = function_schema(fn)
    assert list(fs.parameters["properties"]) == [name]
    assert fs.validator.validate({name: 3}, tool="generated") == {name: 3}
