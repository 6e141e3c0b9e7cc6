"""What the demo-notebook generators (scripts/make_*.py) share: build a notebook from a list of
``("md" | "py", source)`` cells, execute it in a real kernel with nbclient so the saved outputs
are exactly what the kernel sent, and write it.

A call or agent run started by a cell ends in the background, after nbclient has moved on to
later cells; the kernel sends each view's final record again from the cell that runs next
(kode_nb/ui/_finals.py), so every view that ends before the last cell does is saved final, as in
any notebook executed headless. No extra cell is run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Cells = Sequence[tuple[str, str]]

SAVE_NOTE_TOOL = '''\
%%tool --kind edit
NOTES: dict[str, str] = {}


def save_note(title: str, text: str) -> str:
    """Save a note under a title.

    Args:
        title: The note's title.
        text: What to write.
    """
    NOTES[title] = text
    return f"Saved {title!r}."'''
"""The cell that defines ``save_note``, an edit tool (calling it asks for approval)."""


def build(cells: Cells) -> Any:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    for kind, source in cells:
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(source))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(source))
    # stable cell ids keep diffs of the saved notebook small
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


def execute(nb: Any, notebook: Path) -> None:
    from nbclient import NotebookClient

    # Kernel state stays out of ~/.ipython and ~/.local/share/jupyter.
    with tempfile.TemporaryDirectory(prefix=f"kode_nb-{notebook.stem}-") as state:
        os.environ["IPYTHONDIR"] = os.path.join(state, "ipython")
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(state, "runtime")
        # kernel "python3" with argv[0] "python" runs as sys.executable: this venv's Python.
        client = NotebookClient(
            nb,
            kernel_name="python3",
            timeout=60,
            # The widget models' state would only be a stale copy of what the outputs' text/html
            # snapshots already show (a call's later updates belong to a finished cell).
            store_widget_state=False,
            resources={"metadata": {"path": str(notebook.parent)}},
        )
        client.execute()


def main(cells: Cells, notebook: Path, description: str, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--no-run", action="store_true", help="write the cells without outputs")
    parser.add_argument("--output", type=Path, default=notebook, help="where to write")
    args = parser.parse_args(argv)

    import nbformat

    nb = build(cells)
    if not args.no_run:
        execute(nb, notebook)
    nbformat.validate(nb)
    args.output.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
