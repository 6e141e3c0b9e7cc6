"""Every snippet in README.md runs, and prints exactly what the README says it prints.

* ``python`` blocks run in order in one namespace in this process, as a script would run them
  (a block whose code uses top-level ``await`` runs in a fresh event loop).
* ``ipython`` blocks are notebook cells: they run in order in a real kernel, magics and all.
  When a cell leaves a call waiting for approval, the test clicks **Approve** the way the
  browser does (a ``comm_msg`` to the button) and waits for the call to finish, as the README
  tells its reader to.
* A block directly followed by a ``text`` block must print that text.
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
_RUNNABLE = ("python", "ipython")

PENDING_APPROVALS = """\
try:
    from kode_nb.magics import get_session as _kode_session
    print(sum(h.status == "waiting for approval" for h in _kode_session().handles.values()))
except Exception:  # the extension is not loaded yet
    print(0)"""
"""Prints how many calls started from the notebook wait for a decision."""


@dataclass
class Snippet:
    lang: str
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
        if lang not in _RUNNABLE:
            continue
        expected = None
        if i + 1 < len(blocks):
            next_lang, next_body, _, next_start, _ = blocks[i + 1]
            if next_lang == "text" and not text[end:next_start].strip():
                expected = next_body
        snippets.append(Snippet(lang, body, line, expected))
    return snippets


def _snippets(lang: str) -> list[Snippet]:
    return [s for s in readme_snippets(README.read_text(encoding="utf-8")) if s.lang == lang]


def test_readme_has_snippets_with_outputs() -> None:
    for lang in _RUNNABLE:
        snippets = _snippets(lang)
        assert snippets, f"README.md has no {lang} block"
        assert any(s.expected_output is not None for s in snippets), lang


def test_readme_shows_the_notebook_workflow() -> None:
    cells = [s.code for s in _snippets("ipython")]
    assert cells[0] == "%load_ext kode_nb\n"
    assert any(c.startswith("%%tool\n") for c in cells)
    assert any(c.startswith("%%tool --kind edit\n") for c in cells)
    assert any(re.match(r"\w+ = %tool \w+ \w+=", c) for c in cells)


def test_snippet_parser_pairs_code_with_the_following_output() -> None:
    text = (
        "x\n```python\nprint(1)\n```\n\n```text\n1\n```\nprose\n```ipython\n%load_ext x\n```\n"
        "```bash\nls\n```\n"
    )
    assert readme_snippets(text) == [
        Snippet("python", "print(1)\n", 3, "1\n"),
        Snippet("ipython", "%load_ext x\n", 11, None),
    ]


def test_readme_python_snippets_run_and_print_what_the_readme_shows() -> None:
    namespace: dict[str, Any] = {"__name__": "readme"}
    for snippet in _snippets("python"):
        code = compile(
            snippet.code, f"README.md:{snippet.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = eval(code, namespace)
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        if snippet.expected_output is not None:
            assert out.getvalue() == snippet.expected_output, (
                f"README.md line {snippet.line}: the snippet printed\n{out.getvalue()}"
            )


def _pending(kernel: Any) -> str:
    return str(kernel.ok(PENDING_APPROVALS).stdout.strip())


def test_readme_notebook_cells_run_in_a_kernel_and_print_what_the_readme_shows(
    tmp_path: Path,
) -> None:
    from kernel.harness import Kernel  # tests/kernel/harness.py

    kernel = Kernel(tmp_path)
    clicks = 0
    try:
        for snippet in _snippets("ipython"):
            start = len(kernel.log)
            run = kernel.run(snippet.code)
            where = f"README.md line {snippet.line}"
            assert run.status == "ok", f"{where}: {run.error_text}"
            if snippet.expected_output is not None:
                assert run.stdout == snippet.expected_output, (
                    f"{where}: the cell printed\n{run.stdout}"
                )
            if _pending(kernel) != "0":
                kernel.click(kernel.button("Approve", start))
                clicks += 1
                kernel.wait_for(  # the call view's final refresh
                    lambda m, cell=run.msg_id: (
                        m["msg_type"] == "update_display_data"
                        and m["parent_header"].get("msg_id") == cell
                    )
                )
                assert _pending(kernel) == "0", where
    finally:
        kernel.close()
    assert clicks == 1  # the README's write_note call


@pytest.mark.parametrize(
    "command",
    ["bash scripts/dev.sh lab", "bash scripts/dev.sh test"],
)
def test_readme_shows_the_two_setup_commands(command: str) -> None:
    text = README.read_text(encoding="utf-8")
    first_block = _FENCE.search(text)
    assert first_block is not None
    assert command in first_block.group(2).splitlines()
