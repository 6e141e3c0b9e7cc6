"""The fast path of function_schema (no model class for simple signatures) against the model path.

For generated signatures of simple types (str/int/float/bool/None/Any, Literal, Optional, lists,
tuples, sets, dicts, Annotated descriptions, defaults) both paths must give the *same* JSON
Schema (key order included) and the *same* validation outcome for any input: the same kwargs,
or the same issues (paths, messages, expected, received) and the same error text.
"""

from __future__ import annotations

import inspect
import json
import keyword
import math
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import kode_nb.tools._schema as schema_module
from kode_nb.errors import ToolValidationError
from kode_nb.tools._schema import FunctionSchema, function_schema
from kode_nb.tools._validation import ParamsValidator, SimpleParamsValidator

# --------------------------------------------------------------------------- generated types

_LEAVES: list[Any] = [str, int, float, bool, type(None), Any, list, dict, tuple, set]
_literal_values = st.one_of(
    st.text(max_size=4), st.integers(-3, 300), st.booleans()
)  # fmt: skip


def _literal(values: list[Any]) -> Any:
    return Literal[tuple(values)]


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        inner.map(lambda t: Optional[t]),  # noqa: UP045
        inner.map(lambda t: Union[None, t]),
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: tuple[t, ...]),  # type: ignore[valid-type]
        st.lists(inner, min_size=1, max_size=3).map(lambda ts: tuple[tuple(ts)]),  # type: ignore[misc]
        inner.map(lambda t: set[t]),  # type: ignore[valid-type]
        inner.map(lambda t: frozenset[t]),  # type: ignore[valid-type]
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
    )


types = st.recursive(
    st.one_of(
        st.sampled_from(_LEAVES),
        st.lists(_literal_values, min_size=1, max_size=4, unique_by=lambda v: (type(v), v)).map(
            _literal
        ),
    ),
    _extend,
    max_leaves=4,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def values_for(annotation: Any) -> st.SearchStrategy[Any]:
    """JSON values that are (mostly) valid for ``annotation``."""
    import typing

    if annotation is str:
        return st.text(max_size=6)
    if annotation is int:
        return st.integers(-(10**12), 10**12)
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False) | st.integers(-100, 100)
    if annotation is bool:
        return st.booleans()
    if annotation is type(None):
        return st.none()
    if annotation in (Any, list, dict, tuple, set):
        return json_values
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return values_for(args[0])
    if origin is Literal:
        return st.sampled_from(args)
    if origin is Union:
        return st.one_of(*(values_for(a) for a in args))
    if origin in (list, set, frozenset) or (origin is tuple and args[-1:] == (Ellipsis,)):
        return st.lists(values_for(args[0]), max_size=3)
    if origin is tuple:
        return st.tuples(*(values_for(a) for a in args)).map(list)
    if origin is dict:
        return st.dictionaries(st.text(max_size=4), values_for(args[1]), max_size=3)
    raise AssertionError(annotation)


# --------------------------------------------------------------------------- generated signatures

_names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n)
) | st.sampled_from(["default", "properties", "p0", "json", "model_config", "type"])


@st.composite
def parameters(draw: st.DrawFn) -> list[inspect.Parameter]:
    names = draw(st.lists(_names, max_size=5, unique=True))
    params = []
    for name in names:
        annotation = draw(types)
        if draw(st.integers(0, 5)) == 0:
            text = draw(st.text(min_size=1, max_size=5))
            annotation = Annotated[annotation, Field(description=text)]
        default: Any = inspect.Parameter.empty
        choice = draw(st.integers(0, 3))
        if choice == 1:
            default = draw(values_for(annotation))
        elif choice == 2:
            default = draw(json_values | st.tuples(st.integers()) | st.frozensets(st.integers()))
        elif choice == 3 and draw(st.booleans()):
            default = draw(st.sampled_from([math.inf, object(), Field(3)]))
        params.append((name, annotation, default))
    required = [p for p in params if p[2] is inspect.Parameter.empty]
    optional = [p for p in params if p[2] is not inspect.Parameter.empty]
    return [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=a, default=d)
        for n, a, d in required + optional
    ]


def build(params: list[inspect.Parameter], docs: dict[str, str]) -> Any:
    def fn(**kwargs: Any) -> Any:
        return kwargs

    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params}
    fn.__name__ = fn.__qualname__ = "generated"
    lines = "".join(f"    {name}: {text}\n" for name, text in docs.items())
    fn.__doc__ = f"A generated tool.\n\nArgs:\n{lines}" if docs else "A generated tool."
    return fn


def both_paths(fn: Any) -> tuple[FunctionSchema, FunctionSchema]:
    fast = function_schema(fn)
    schema_module._FAST_PATH = False
    try:
        slow = function_schema(fn)
    finally:
        schema_module._FAST_PATH = True
    assert not isinstance(slow.validator, SimpleParamsValidator)
    return fast, slow


def outcome(fs: FunctionSchema, raw: Any) -> tuple[str, str]:
    """A strict fingerprint of what validating ``raw`` does (reprs tell 1, 1.0 and True apart)."""
    try:
        kwargs = fs.validator.validate(raw, tool="generated")
    except ToolValidationError as exc:
        return "invalid", repr(exc.issues) + exc.message
    return "ok", repr(kwargs) + repr(fs.validator.dump(kwargs))


def inputs(draw: Callable[..., Any], params: list[inspect.Parameter]) -> Iterator[Any]:
    """Valid, partly valid and plainly wrong arguments, as JSON text and as mappings."""
    valid = {
        p.name: draw(values_for(p.annotation))
        for p in params
        if p.default is inspect.Parameter.empty or draw(st.booleans())
    }
    yield valid
    mixed = dict(valid)
    for p in params:
        if draw(st.booleans()):
            mixed[p.name] = draw(json_values)
        elif draw(st.booleans()):
            mixed.pop(p.name, None)
    if draw(st.booleans()):
        mixed[draw(_names)] = draw(json_values)
    yield mixed
    yield draw(json_values)
    yield draw(st.dictionaries(_names, json_values, max_size=4))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parameters(), st.data())
def test_fast_path_matches_the_model_path(
    params: list[inspect.Parameter], data: st.DataObject
) -> None:
    docs = {p.name: data.draw(st.text("abc xyz", min_size=1, max_size=6)) for p in params[:3]}
    fn = build(params, docs)
    fast, slow = both_paths(fn)
    event(f"fast path: {isinstance(fast.validator, SimpleParamsValidator)}")
    assert json.dumps(fast.parameters) == json.dumps(slow.parameters)  # key order too
    assert fast.parameters == slow.parameters
    assert fast.param_descriptions == slow.param_descriptions
    assert (fast.description, fast.mode, fast.context_param) == (
        slow.description, slow.mode, slow.context_param,
    )  # fmt: skip
    for raw in inputs(data.draw, params):
        text = json.dumps(raw)
        event(f"outcome: {outcome(fast, text)[0]}")
        assert outcome(fast, text) == outcome(slow, text)
        assert outcome(fast, text.encode()) == outcome(slow, text.encode())
        if isinstance(raw, dict):
            assert outcome(fast, raw) == outcome(slow, raw)
            assert outcome(fast, MappingProxyType(raw)) == outcome(slow, MappingProxyType(raw))


@pytest.mark.parametrize(
    "raw", [None, "", "  ", "{", "[1, 2]", "3", '"text"', "null", b"{}", 42, [1], '{"a": 1,}']
)
def test_empty_and_non_object_arguments_match(raw: Any) -> None:
    def fn(a: int, b: list[str] | None = None) -> None: ...

    fast, slow = both_paths(fn)
    assert isinstance(fast.validator, SimpleParamsValidator)
    assert outcome(fast, raw) == outcome(slow, raw)


# --------------------------------------------------------------------------- which path is taken


def forecast(city: str, days: int = 3, units: str = "metric", include_hourly: bool = False) -> str:
    """Get the weather forecast for a city.

    Args:
        city: Name of the city.
        days: How many days to forecast.
    """
    return city


class Item(BaseModel):
    name: str


@pytest.mark.parametrize(
    "annotation",
    [
        str, int | None, Literal["a", 1, True], list[dict[str, tuple[int, ...]]], dict, Any,
        Annotated[int, Field(description="n")], set[bool], tuple[int, str],
    ],
)  # fmt: skip
def test_simple_types_take_the_fast_path(annotation: Any) -> None:
    fn = build([inspect.Parameter("x", inspect.Parameter.KEYWORD_ONLY, annotation=annotation)], {})
    assert isinstance(function_schema(fn).validator, SimpleParamsValidator)


@pytest.mark.parametrize(
    ("annotation", "default"),
    [
        (list[Item], inspect.Parameter.empty),  # a model
        (int | str, inspect.Parameter.empty),  # a real union
        (Optional[Any], None),  # noqa: UP045
        (Annotated[int, Field(ge=0)], inspect.Parameter.empty),  # a constraint
        (Annotated[int, "note"], inspect.Parameter.empty),  # foreign metadata
        (int, Field(3)),  # a Field default
        (float, math.nan),  # no JSON form
        (Literal[None], None),
        (dict[int, str], inspect.Parameter.empty),
        (tuple[()], inspect.Parameter.empty),
    ],
)
def test_other_types_take_the_model_path(annotation: Any, default: Any) -> None:
    param = inspect.Parameter(
        "x", inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )
    assert isinstance(function_schema(build([param], {})).validator, ParamsValidator)


def test_param_names_pydantic_keeps_unsorted_take_the_model_path() -> None:
    for name in ("default", "properties"):
        param = inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=int)
        assert isinstance(function_schema(build([param], {})).validator, ParamsValidator)


def test_the_fast_validator_builds_its_model_only_when_asked() -> None:
    validator = function_schema(forecast).validator
    assert isinstance(validator, SimpleParamsValidator)
    assert validator._model is None
    model = validator.model
    assert validator.model is model
    assert list(model.model_json_schema(by_alias=True)["properties"]) == [
        "city", "days", "units", "include_hourly",
    ]  # fmt: skip
    assert repr(validator) == "SimpleParamsValidator(city, days, units, include_hourly)"


def test_forecast_schema_and_errors() -> None:
    fast, slow = both_paths(forecast)
    assert fast.parameters == {
        "type": "object",
        "properties": {
            "city": {"description": "Name of the city.", "type": "string"},
            "days": {"default": 3, "description": "How many days to forecast.", "type": "integer"},
            "units": {"default": "metric", "type": "string"},
            "include_hourly": {"default": False, "type": "boolean"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    with pytest.raises(ToolValidationError) as info:
        fast.validator.validate('{"days": "x", "town": 1}', tool="forecast")
    assert [(i.path, i.message, i.expected, i.received, i.missing) for i in info.value.issues] == [
        ("city", "required field is missing", "string", None, True),
        ("days", "expected integer", "integer", "x", False),
        ("town", "unexpected field; allowed fields: city, days, units, include_hourly", None, 1,
         False),
    ]  # fmt: skip
    assert outcome(fast, '{"days": "x", "town": 1}') == outcome(slow, '{"days": "x", "town": 1}')


def test_mutable_defaults_are_not_shared_between_calls() -> None:
    def fn(tags: list[str] = ["a"]) -> None: ...  # noqa: B006

    validator = function_schema(fn).validator
    first = validator.validate("{}", tool="fn")
    first["tags"].append("b")
    assert validator.validate("{}", tool="fn") == {"tags": ["a"]}
