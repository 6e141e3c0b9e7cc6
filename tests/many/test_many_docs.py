"""Every ``python`` snippet of docs/many-runs.md runs, in order, in one namespace (as one
script), and prints exactly the ``text`` block that follows it. Runs in a scratch folder (the
snippets write a cache); the Ray snippet starts and stops a local Ray."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "many-runs.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def snippets() -> list[tuple[str, str | None]]:
    """``(code, expected output or None)`` of each python block, in order."""
    blocks = [
        (m.group(1), m.group(2), m.end(), m.start()) for m in _FENCE.finditer(DOC.read_text())
    ]
    out = []
    for i, (lang, code, end, _) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if i + 1 < len(blocks) and blocks[i + 1][0] == "text" and blocks[i + 1][3] == end + 1:
            expected = blocks[i + 1][1]
        out.append((code, expected))
    return out


def test_the_snippets_run_and_print_what_the_page_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed", reason="a snippet runs on a Dask LocalCluster")
    pytest.importorskip("ray", reason="a snippet runs on a local Ray")
    monkeypatch.chdir(tmp_path)
    found = snippets()
    assert len(found) >= 6
    namespace: dict[str, object] = {"__name__": "__main__"}
    for code, expected in found:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(DOC), "exec"), namespace)
        if expected is not None:
            assert printed.getvalue() == expected, code
