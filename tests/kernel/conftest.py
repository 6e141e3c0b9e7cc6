"""Real-kernel fixtures: one IPython kernel per test module, its state in a temporary folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import Kernel

EXT = "kode_nb"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A kernel with kode_nb loaded (``k.ok(code)``, ``k.button(...)``, ``k.click(...)``)."""
    k = Kernel(tmp_path_factory.mktemp("kernel"))
    try:
        k.ok(f"%load_ext {EXT}")
        yield k
    finally:
        k.close()
