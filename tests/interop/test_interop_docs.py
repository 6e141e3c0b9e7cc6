"""Every ``python`` snippet of docs/frameworks.md runs, in order, in one namespace (top-level
``await`` allowed, one event loop), and a snippet directly followed by a ``text`` block prints
exactly that text. ``ipython`` snippets need a notebook: the real-kernel tests and
notebooks/06-frameworks.ipynb run what they show."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "frameworks.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def _snippets() -> list[tuple[str, int, str | None]]:
    text = DOC.read_text("utf-8")
    blocks = [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 2, m.start(), m.end())
              for m in _FENCE.finditer(text)]  # fmt: skip
    out = []
    for i, (lang, body, line, _, end) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if (
            i + 1 < len(blocks)
            and blocks[i + 1][0] == "text"
            and not text[end : blocks[i + 1][3]].strip()
        ):
            expected = blocks[i + 1][1]
        out.append((body, line, expected))
    return out


def test_every_python_snippet_runs_and_prints_what_the_page_says() -> None:
    snippets = _snippets()
    assert len(snippets) >= 10
    namespace: dict[str, Any] = {"__name__": "__docs__"}

    async def run_all() -> None:
        for code, line, expected in snippets:
            compiled = compile(
                code, f"{DOC.name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            )
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                result = eval(compiled, namespace)
                if asyncio.iscoroutine(result):
                    await result
            if expected is not None:
                assert out.getvalue() == expected, f"{DOC.name}:{line} printed {out.getvalue()!r}"

    asyncio.run(run_all())
