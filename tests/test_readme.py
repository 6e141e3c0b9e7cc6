"""Every Python snippet in README.md runs, and prints exactly what the README says it prints.

The ``python`` code blocks run in order in one namespace (top-level ``await`` allowed, as in a
notebook). A ``python`` block directly followed by a ``text`` block must print that text.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


@dataclass
class Snippet:
    code: str
    line: int
    expected_output: str | None


def readme_snippets(text: str) -> list[Snippet]:
    blocks = [
        (m.group(1), m.group(2), text.count("\n", 0, m.start()) + 2, m.start(), m.end())
        for m in _FENCE.finditer(text)
    ]
    snippets = []
    for i, (lang, body, line, _start, end) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if i + 1 < len(blocks):
            next_lang, next_body, _, next_start, _ = blocks[i + 1]
            if next_lang == "text" and not text[end:next_start].strip():
                expected = next_body
        snippets.append(Snippet(body, line, expected))
    return snippets


def test_readme_has_snippets_with_outputs() -> None:
    snippets = readme_snippets(README.read_text(encoding="utf-8"))
    assert len(snippets) >= 2
    assert any(s.expected_output is not None for s in snippets)


def test_snippet_parser_pairs_code_with_the_following_output() -> None:
    text = "x\n```python\nprint(1)\n```\n\n```text\n1\n```\nprose\n```python\npass\n```\n"
    assert readme_snippets(text) == [Snippet("print(1)\n", 3, "1\n"), Snippet("pass\n", 11, None)]


def test_readme_snippets_run_and_print_what_the_readme_shows() -> None:
    snippets = readme_snippets(README.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {"__name__": "readme"}
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT

    async def run_all() -> None:
        for snippet in snippets:
            code = compile(snippet.code, f"README.md:{snippet.line}", "exec", flags=flags)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                result = eval(code, namespace)
                if asyncio.iscoroutine(result):
                    await result
            if snippet.expected_output is not None:
                assert out.getvalue() == snippet.expected_output, (
                    f"README.md line {snippet.line}: the snippet printed\n{out.getvalue()}"
                )

    asyncio.run(run_all())


@pytest.mark.parametrize(
    "command",
    ["bash scripts/dev.sh lab", "bash scripts/dev.sh test"],
)
def test_readme_shows_the_two_setup_commands(command: str) -> None:
    text = README.read_text(encoding="utf-8")
    first_block = _FENCE.search(text)
    assert first_block is not None
    assert command in first_block.group(2).splitlines()
