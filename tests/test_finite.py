"""NaN and Infinity are refused as number arguments unless the parameter opts in (kode_nb._finite)."""

from __future__ import annotations

import math
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic.types import AllowInfNan

from kode_nb import Executor, ToolRegistry, define_tool
from kode_nb.errors import ToolValidationError
from kode_nb.tools._raw_schema import input_config_validator, schema_validator

pytestmark = pytest.mark.anyio

NAN, INF = float("nan"), float("inf")


class Point(BaseModel):
    y: float


class Inner(BaseModel):
    values: list[float]


class Outer(BaseModel):
    inner: Inner


class Loose(BaseModel):
    model_config = ConfigDict(allow_inf_nan=True)
    y: float


class MarkedField(BaseModel):
    y: Annotated[float, AllowInfNan()]
    z: float = 0.0


@pytest.fixture
def tools() -> ToolRegistry:
    registry = ToolRegistry(name="finite")

    def simple(x: float) -> str:
        """A simple signature (the fast path)."""
        return repr(x)

    def containers(xs: list[float], d: dict[str, float], t: tuple[float, ...] = ()) -> str:
        """Floats inside containers."""
        return repr((xs, d, t))

    def lone(point: Point) -> str:
        """The arguments are one model of your own."""
        return repr(point)

    def nested(o: Outer, n: int = 1) -> str:
        """A model of your own inside the arguments."""
        return repr(o)

    def loose(point: Loose) -> str:
        """A model that opts in through its config."""
        return repr(point)

    def marked(point: MarkedField) -> str:
        """A model with one opted-in field."""
        return repr(point)

    def opted(x: Annotated[float, Field(allow_inf_nan=True)], y: float = 0.0) -> str:
        """One parameter opts in, the other does not."""
        return repr((x, y))

    def either(x: float | None = None) -> str:
        """An optional number."""
        return repr(x)

    for fn in (simple, containers, lone, nested, loose, marked, opted, either):
        define_tool(fn, registry=registry)
    return registry


@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        ("simple", '{"x": NaN}', "x"),
        ("simple", '{"x": Infinity}', "x"),
        ("simple", '{"x": -Infinity}', "x"),
        ("simple", '{"x": 1e999}', "x"),
        ("simple", {"x": NAN}, "x"),
        ("simple", {"x": -INF}, "x"),
        ("containers", '{"xs": [1, NaN], "d": {}}', "xs.1"),
        ("containers", {"xs": [], "d": {"a": INF}}, "d.a"),
        ("containers", '{"xs": [], "d": {}, "t": [0.5, Infinity]}', "t.1"),
        ("lone", '{"y": NaN}', "y"),
        ("lone", {"y": INF}, "y"),
        ("nested", '{"o": {"inner": {"values": [1, -Infinity]}}}', "o.inner.values.1"),
        ("marked", '{"y": 1, "z": NaN}', "z"),
        ("opted", '{"x": NaN, "y": Infinity}', "y"),
        ("either", '{"x": NaN}', "x"),
    ],
)
async def test_non_finite_numbers_are_invalid_arguments(
    tools: ToolRegistry, tool: str, arguments: Any, path: str
) -> None:
    result = await Executor(tools).call(tool, arguments)
    assert result.status == "invalid_arguments", result.text
    assert f"`{path}`" in result.text
    assert "finite number" in result.text


@pytest.mark.parametrize(
    ("tool", "arguments", "shown"),
    [
        ("opted", '{"x": NaN}', "(nan, 0.0)"),
        ("opted", {"x": -INF, "y": 2}, "(-inf, 2.0)"),
        ("loose", '{"y": Infinity}', "Loose(y=inf)"),
        ("marked", '{"y": NaN}', "MarkedField(y=nan, z=0.0)"),
        ("simple", '{"x": 1.5e300}', "1.5e+300"),
        ("containers", '{"xs": [1, 2.5], "d": {"a": -0.0}}', "([1.0, 2.5], {'a': -0.0}, ())"),
    ],
)
async def test_opted_in_and_finite_numbers_pass(
    tools: ToolRegistry, tool: str, arguments: Any, shown: str
) -> None:
    result = await Executor(tools).call(tool, arguments)
    assert result.status == "ok", result.text
    assert result.text == shown


def test_raw_json_schema_and_input_config_tools_refuse_them() -> None:
    raw = schema_validator(
        {"type": "object", "properties": {"x": {"type": "number"},
                                          "xs": {"type": "array", "items": {"type": "number"}}}}
    )  # fmt: skip
    for arguments, path in (('{"x": NaN}', "x"), ({"xs": [1, INF]}, "xs.1")):
        with pytest.raises(ToolValidationError) as info:
            raw.validate(arguments, tool="raw")
        (issue,) = info.value.issues
        assert issue.path == path
        assert "finite number" in issue.message
    assert raw.validate('{"x": 2.5}', tool="raw") == {"x": 2.5}
    config = input_config_validator({"inputs": {"x": {"type": "number", "description": "x"}}})
    with pytest.raises(ToolValidationError) as info:
        config.validate('{"x": Infinity}', tool="cfg")
    assert "finite number" in info.value.issues[0].message
    assert math.isclose(config.validate('{"x": 2}', tool="cfg")["x"], 2)


class Box(BaseModel):
    corner: tuple[float, float]
    sizes: tuple[float, ...] = ()


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ('{"box": {"corner": [0.5, NaN]}}', "box.corner.1"),
        ({"box": {"corner": (INF, 1.0)}}, "box.corner.0"),
        ({"box": {"corner": [1, 2], "sizes": (1.0, 2.0, NAN)}}, "box.sizes.2"),
        ({"box": Box(corner=(1.0, NAN))}, "box.corner.1"),
    ],
)
async def test_nan_inside_a_tuple_field_of_your_own_model_is_refused(
    arguments: Any, path: str
) -> None:
    """pydantic lets a model of your own hold NaN in a tuple (its default allows non-finite
    floats): kode_nb's own walk must look inside tuples as it does inside lists."""
    registry = ToolRegistry(name="tuples")

    def place(box: Box, label: str = "") -> str:
        """Place a box (a model of your own inside the arguments)."""
        return repr(box)

    define_tool(place, registry=registry)
    result = await Executor(registry).call("place", arguments)
    assert result.status == "invalid_arguments", result.text
    assert f"`{path}`" in result.text
    assert "finite number" in result.text
