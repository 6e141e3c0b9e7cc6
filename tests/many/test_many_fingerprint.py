"""What a function's cache fingerprint covers: code, closure cells, defaults, the globals it
reads (through the helpers and classes of your code it reaches), by content; library code by
name; a value it cannot hash is an error naming it."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kode_nb.many._fingerprint import Unhashable, fingerprint

LIMIT = 10
TABLE = {"a": [1, 2]}


@dataclasses.dataclass
class Config:
    scale: int = 2
    tags: tuple[str, ...] = ()


CONFIG = Config()


def _limit() -> int:
    return LIMIT


def _countdown(n: int) -> int:
    return 0 if n <= 0 else _countdown(n - 1)  # recursion: hashed once


def test_code_defaults_and_closures_count() -> None:
    def make(k: int, default: int = 1) -> Any:
        def f(x: int, d: int = default) -> int:
            return x * k + d

        return f

    assert fingerprint(make(2)) == fingerprint(make(2))
    assert fingerprint(make(2)) != fingerprint(make(3))
    assert fingerprint(make(2)) != fingerprint(make(2, default=5))


@pytest.mark.parametrize(
    ("name", "new"),
    [("LIMIT", 11), ("TABLE", {"a": [1, 3]}), ("CONFIG", Config(tags=("x",)))],
)
def test_globals_read_directly_or_through_helpers_count(
    monkeypatch: pytest.MonkeyPatch, name: str, new: Any
) -> None:
    def tool(x: int) -> Any:
        return x < _limit(), TABLE["a"], CONFIG.scale, _countdown(x)

    before = fingerprint(tool)
    assert fingerprint(tool) == before
    monkeypatch.setitem(globals(), name, new)
    assert fingerprint(tool) != before


def test_library_code_counts_by_name_and_data_by_content() -> None:
    frame = pd.DataFrame({"a": [1, 2]})
    array = np.arange(4)

    def tool() -> Any:
        return io.StringIO, frame.sum(), array.sum(), pd.concat

    before = fingerprint(tool)
    frame.loc[0, "a"] = 5
    after_frame = fingerprint(tool)
    array[0] = 9
    assert len({before, after_frame, fingerprint(tool)}) == 3


def test_a_value_can_declare_what_counts() -> None:
    class Client:
        def __init__(self, url: str) -> None:
            self.url = url
            self.socket = io.BytesIO()  # not hashable by content

        def __kode_nb_cache_key__(self) -> str:
            return self.url

    def using(client: Client) -> Any:
        def tool() -> Any:
            return client.url

        return tool

    assert fingerprint(using(Client("a"))) == fingerprint(using(Client("a")))  # socket aside
    assert fingerprint(using(Client("a"))) != fingerprint(using(Client("b")))


def test_a_value_it_cannot_hash_is_named() -> None:
    handle = io.BytesIO()

    def tool() -> Any:
        return handle.getvalue()

    with pytest.raises(
        Unhashable,
        match=r"the variable `handle` that `.*tool` closes over is an? _io\.BytesIO object",
    ):
        fingerprint(tool)
