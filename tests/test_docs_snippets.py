"""Every code snippet in README.md and the documentation pages (docs/*.md) runs, and prints exactly
what the page says it prints.

* ``python`` blocks of a page run in order in one namespace in this process, as a script would
  run them (a block whose code uses top-level ``await`` runs in a fresh event loop).
* ``ipython`` blocks of a page are notebook cells: they run in order in a real kernel (one per
  page), magics and all. When a cell leaves a call waiting for approval, the test clicks
  **Approve** the way the browser does (a ``comm_msg`` to the button) and waits for the call to
  finish, as the page tells its reader to.
* A block directly followed by a ``text`` block must print that text.
* ``json``, ``toml`` and ``yaml`` blocks must parse.
* A block preceded by ``<!-- not run: REASON -->`` is not run (it needs a server, say); the
  reason must be given. Shell commands (``bash``), ``text`` and diagrams are not code to run.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
_NOT_RUN = re.compile(r"<!--\s*not run:(.*?)-->\s*\Z", re.DOTALL)
_RUNNABLE = ("python", "ipython")
_PARSED = ("json", "toml", "yaml")
_NOT_CODE = ("", "text", "bash", "mermaid")

PENDING_APPROVALS = """\
try:
    from kode_nb.magics import get_session as _kode_session
    from kode_nb.ui.agent_handle import AgentHandle as _KodeRun
    _kode_runs = [v for v in get_ipython().user_ns.values() if isinstance(v, _KodeRun)]
    print(sum(h.status == "waiting for approval"
              for h in [*_kode_session().handles.values(), *_kode_runs]))
except Exception:  # the extension is not loaded yet
    print(0)"""
"""Prints how many calls and agent runs started from the notebook wait for a decision."""


@dataclass
class Snippet:
    lang: str
    code: str
    line: int
    expected_output: str | None
    not_run: str | None = None
    """Why the block is not run, from a ``<!-- not run: REASON -->`` comment just before it."""


def page_snippets(text: str) -> list[Snippet]:
    """The fenced blocks of a Markdown page, ``text`` blocks paired with the block before them."""
    blocks = [
        (m.group(1), m.group(2), text.count("\n", 0, m.start()) + 2, m.start(), m.end())
        for m in _FENCE.finditer(text)
    ]
    snippets = []
    previous_end = 0
    for i, (lang, body, line, start, end) in enumerate(blocks):
        marker = _NOT_RUN.search(text[previous_end:start])
        previous_end = end
        if lang == "text":
            continue
        expected = None
        if i + 1 < len(blocks):
            next_lang, next_body, _, next_start, _ = blocks[i + 1]
            if next_lang == "text" and not text[end:next_start].strip():
                expected = next_body
        not_run = marker.group(1).strip() if marker else None
        snippets.append(Snippet(lang, body, line, expected, not_run))
    return snippets


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _snippets(page: Path, *langs: str) -> list[Snippet]:
    return [s for s in page_snippets(page.read_text(encoding="utf-8")) if s.lang in langs]


def _pages_with(*langs: str) -> list[Any]:
    return [
        pytest.param(page, id=_name(page))
        for page in PAGES
        if any(s.not_run is None for s in _snippets(page, *langs))
    ]


def test_snippet_parser_pairs_code_with_the_following_output() -> None:
    text = (
        "x\n```python\nprint(1)\n```\n\n```text\n1\n```\nprose\n```ipython\n%load_ext x\n```\n"
        "```bash\nls\n```\n<!-- not run: needs a server -->\n\n```python\nconnect()\n```\n"
    )
    assert page_snippets(text) == [
        Snippet("python", "print(1)\n", 3, "1\n"),
        Snippet("ipython", "%load_ext x\n", 11, None),
        Snippet("bash", "ls\n", 14, None),
        Snippet("python", "connect()\n", 19, None, "needs a server"),
    ]


def test_a_not_run_marker_applies_only_to_the_block_right_after_it() -> None:
    text = "<!-- not run: needs a server -->\nprose\n```python\nx = 1\n```\n"
    assert page_snippets(text) == [Snippet("python", "x = 1\n", 4, None, None)]


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_block_has_a_known_language_and_every_skip_a_reason(page: Path) -> None:
    for snippet in page_snippets(page.read_text(encoding="utf-8")):
        where = f"{_name(page)} line {snippet.line}"
        assert snippet.lang in _RUNNABLE + _PARSED + _NOT_CODE, (
            f"{where}: a ```{snippet.lang} block; the snippet tests know "
            f"{_RUNNABLE + _PARSED + _NOT_CODE}"
        )
        assert snippet.not_run != "", f"{where}: `<!-- not run: -->` needs a reason"


def test_the_guide_runs_its_code() -> None:
    """Most snippets run: a skipped one is the exception."""
    snippets = [s for page in PAGES for s in _snippets(page, *_RUNNABLE)]
    skipped = [s for s in snippets if s.not_run is not None]
    assert len(snippets) >= 20
    assert len(skipped) <= len(snippets) // 10


def test_readme_shows_the_notebook_workflow() -> None:
    cells = [s.code for s in _snippets(README, "ipython")]
    assert cells[0] == "%load_ext kode_nb\n"
    assert any(c.startswith("%%tool\n") for c in cells)
    assert any(re.match(r"\w+ = %tool \w+ \w+=", c) for c in cells)


def test_readme_links_point_at_files_of_the_repository() -> None:
    """README.md is not part of the site, whose build checks the links of docs/: check its own."""
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link.split("#")[0] for link in links if "://" not in link]
    assert "docs/getting-started.md" in local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


@pytest.mark.parametrize(
    "command",
    ["bash scripts/dev.sh lab", "bash scripts/dev.sh test"],
)
def test_readme_shows_the_two_setup_commands(command: str) -> None:
    text = README.read_text(encoding="utf-8")
    first_block = _FENCE.search(text)
    assert first_block is not None
    assert first_block.group(2).splitlines() == [
        "bash scripts/dev.sh lab",
        "bash scripts/dev.sh test",
    ]
    assert command in first_block.group(2).splitlines()


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_data_snippets_parse(page: Path) -> None:
    loaders = {"json": json.loads, "toml": tomllib.loads, "yaml": yaml.safe_load}
    for snippet in _snippets(page, *_PARSED):
        if snippet.not_run is None:
            loaders[snippet.lang](snippet.code)


@pytest.mark.parametrize("page", _pages_with("python"))
def test_python_snippets_run_and_print_what_the_page_shows(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a snippet that writes files writes them here
    namespace: dict[str, Any] = {"__name__": "docs_snippet"}
    for snippet in _snippets(page, "python"):
        if snippet.not_run is not None:
            continue
        where = f"{_name(page)}:{snippet.line}"
        code = compile(snippet.code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = eval(code, namespace)
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        if snippet.expected_output is not None:
            assert out.getvalue() == snippet.expected_output, (
                f"{where}: the snippet printed\n{out.getvalue()}"
            )


def _pending(kernel: Any) -> str:
    return str(kernel.ok(PENDING_APPROVALS).stdout.strip())


@pytest.mark.parametrize("page", _pages_with("ipython"))
def test_notebook_cells_run_in_a_kernel_and_print_what_the_page_shows(
    page: Path, tmp_path: Path
) -> None:
    from kernel.harness import Kernel  # tests/kernel/harness.py

    text = page.read_text(encoding="utf-8")
    kernel = Kernel(tmp_path)
    clicks = clicked_at = 0
    try:
        for snippet in _snippets(page, "ipython"):
            if snippet.not_run is not None:
                continue
            run = kernel.run(snippet.code)
            where = f"{_name(page)} line {snippet.line}"
            assert run.status == "ok", f"{where}: {run.error_text}"
            if snippet.expected_output is not None:
                assert run.stdout == snippet.expected_output, (
                    f"{where}: the cell printed\n{run.stdout}"
                )
            if _pending(kernel) != "0":
                # the first Approve since the last click: an agent run's may have been drawn
                # while an earlier cell ran
                kernel.click(kernel.button("Approve", clicked_at))
                clicks += 1
                clicked_at = len(kernel.log)
                before = {id(m) for m in kernel.log}

                def refreshed(
                    m: dict[str, Any], cell: str = run.msg_id, before: set[int] = before
                ) -> bool:
                    """The view's final refresh: a call's (in its cell), or its run's."""
                    return m["msg_type"] == "update_display_data" and (
                        m["parent_header"].get("msg_id") == cell or id(m) not in before
                    )

                kernel.wait_for(refreshed)
                assert _pending(kernel) == "0", where
    finally:
        kernel.close()
    assert clicks == text.count("click on **Approve**"), "each click the page asks for, no more"
