"""kode_nb._format against the table of cases the TypeScript tests read too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kode_nb import _format

CASES = json.loads((Path(__file__).parent / "format_cases.json").read_text(encoding="utf-8"))
FUNCTIONS = [name for name in CASES if name != "about"]


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"float"}:
        return float(value["float"].replace("Infinity", "inf"))
    return value


def test_the_table_covers_every_public_function() -> None:
    assert sorted(FUNCTIONS) == sorted(_format.__all__)


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [(name, args, expected) for name in FUNCTIONS for args, expected in CASES[name]],
)
def test_case(name: str, args: list[Any], expected: str) -> None:
    assert getattr(_format, name)(*map(_decode, args)) == expected


@given(st.text(), st.integers(min_value=1, max_value=200))
def test_shorten_never_exceeds_its_limit(text: str, limit: int) -> None:
    shown = _format.shorten(text, limit)
    assert len(shown) <= limit
    assert "\n" not in shown
    if len(" ".join(text.split())) <= limit:
        assert shown == " ".join(text.split())


def test_shorten_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        _format.shorten("text", 0)


def test_shorten_writes_anything_else_as_json() -> None:
    assert _format.shorten({"a": [1, "é"]}, 100) == '{"a": [1, "é"]}'
