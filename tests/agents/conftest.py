"""Fixtures shared by the fork tests (test_fork.py, test_fork_cell.py)."""

from __future__ import annotations

import pytest

from kode_nb import ToolRegistry, define_tool


@pytest.fixture
def adds(registry: ToolRegistry) -> list[tuple[int, int]]:
    """The tool ``add`` defined in the test's registry; the list of its calls' arguments."""
    seen: list[tuple[int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        seen.append((a, b))
        return a + b

    define_tool(add, inline=True)
    return seen
