"""Shared fixtures of the interop tests: a registry with one edit tool and one read tool."""

from __future__ import annotations

import pytest

from kode_nb import ToolRegistry, tool


@pytest.fixture
def notes() -> dict[str, str]:
    return {}


@pytest.fixture
def registry(notes: dict[str, str]) -> ToolRegistry:
    reg = ToolRegistry()

    @tool(kind="edit", registry=reg)
    def write_note(title: str, text: str) -> str:
        """Write a note.

        Args:
            title: The note's title.
            text: What to write.
        """
        notes[title] = text
        return f"saved {title}"

    @tool(kind="read", registry=reg)
    def read_note(title: str) -> str:
        """Read a note.

        Args:
            title: The note's title.
        """
        return notes.get(title, "(no such note)")

    return reg
