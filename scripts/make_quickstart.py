"""Build notebooks/01-quickstart.ipynb from the cells below and execute it, so the saved outputs
are exactly what the code prints (nbval then checks them, strictly, in ``dev.sh test``).

    .venv/bin/python scripts/make_quickstart.py            # rebuild + execute + write
    .venv/bin/python scripts/make_quickstart.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "01-quickstart.ipynb"

# (cell type, source); "md" = markdown, "py" = code
CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# kode_nb quickstart

kode_nb turns typed, documented Python functions into tools an LLM agent can call, and runs them
under validation, policy, approval, timeouts and cancellation — with a typed event for every step.

This notebook uses the kernel-free core directly (`@kode_nb.tool`, `Executor`), exactly as you would
in a script. The `%%tool` magic, live widgets and agents come with the notebook layer.""",
    ),
    ("py", "import json\n\nimport kode_nb\nfrom kode_nb import CallbackApprover, Executor"),
    (
        "md",
        """\
## 1. A function becomes a tool

Type hints give the argument schema, the docstring gives the descriptions. The decorator returns a
`Tool` and registers it in the current registry (define = register).""",
    ),
    (
        "py",
        '''\
from typing import Literal


@kode_nb.tool
def convert_temperature(value: float, to: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Convert a temperature between Celsius and Fahrenheit.

    Args:
        value: The temperature to convert.
        to: The unit to convert to.
    """
    if to == "celsius":
        return f"{(value - 32) * 5 / 9:.1f} °C"
    return f"{value * 9 / 5 + 32:.1f} °F"


convert_temperature''',
    ),
    ("md", "The tool is still a plain function when you call it yourself:"),
    ("py", 'convert_temperature(212, to="celsius")'),
    (
        "md",
        """\
## 2. The schema the model sees

`tool.parameters` is the JSON Schema sent to the model, exactly.""",
    ),
    ("py", "print(json.dumps(convert_temperature.parameters, indent=2))"),
    (
        "md",
        "The registry exports every tool in each provider's format — OpenAI (here in strict mode) "
        "and Anthropic:",
    ),
    (
        "py",
        """\
registry = kode_nb.default_registry()
print(json.dumps(registry.to_openai(strict=True), indent=2))""",
    ),
    ("py", "print(json.dumps(registry.to_anthropic(), indent=2))"),
    (
        "md",
        """\
## 3. Calling it like a model would

An `Executor` looks the tool up, validates the arguments, checks policy and approval, and runs it
under a timeout. `call` never raises because a tool failed: it returns a `ToolResult`. The notebook
runs an event loop, so `await` works at the top level of a cell.""",
    ),
    (
        "py",
        """\
executor = Executor()
result = await executor.call("convert_temperature", {"value": 212})
print(result.status, "->", result.text)""",
    ),
    ("md", "Models send arguments as a JSON string; that works too:"),
    (
        "py",
        """\
result = await executor.call("convert_temperature", '{"value": 37, "to": "fahrenheit"}')
print(result.status, "->", result.text)""",
    ),
    (
        "md",
        """\
Bad arguments never reach the function. The model gets a message naming each wrong field, so it can
correct itself on the next turn:""",
    ),
    (
        "py",
        """\
result = await executor.call("convert_temperature", {"value": "hot", "to": "kelvin"})
print(result.status, result.is_error)
print(result.text)""",
    ),
    ("md", "A misspelled tool name gets a hint:"),
    (
        "py",
        """\
result = await executor.call("convert_temprature", {"value": 0})
print(result.status, "->", result.text)""",
    ),
    (
        "md",
        """\
## 4. Tools that change things ask first

Tools of a mutating kind (`edit`, `delete`, `move`, `execute`) ask for approval by default. An
approver decides: here a plain function wrapped in `CallbackApprover` — it returns `True` to approve
or a string to deny with that reason, which the model sees.""",
    ),
    (
        "py",
        '''\
notes: dict[str, str] = {}


@kode_nb.tool(kind="edit")
def save_note(title: str, text: str) -> str:
    """Save a short note under a title.

    Args:
        title: The note's title.
        text: What to write.
    """
    notes[title] = text
    return f"Saved note {title!r} ({len(text)} characters)."


def reviewer(request):
    print(f"asked to approve {request.tool}({json.dumps(request.arguments)})")
    if "password" in request.arguments["text"].lower():
        return "Notes must not contain passwords."
    return True


careful = Executor(approver=CallbackApprover(reviewer))''',
    ),
    (
        "py",
        """\
result = await careful.call("save_note", {"title": "groceries", "text": "eggs, milk"})
print(result.status, "->", result.text)""",
    ),
    (
        "py",
        """\
result = await careful.call("save_note", {"title": "wifi", "text": "password: hunter2"})
print(result.status, "->", result.text)
print(notes)""",
    ),
    ("md", "With no approver at all, a call that must ask is refused — never run silently:"),
    (
        "py",
        """\
result = await Executor().call("save_note", {"title": "todo", "text": "write tests"})
print(result.status, "->", result.text)""",
    ),
    (
        "md",
        """\
## 5. Streaming updates

A tool written as an async generator streams: every item it yields is an update, the last one is
the result. Updates travel as events on the executor's bus, which is how the notebook widgets will
show them live.""",
    ),
    (
        "py",
        '''\
import asyncio


@kode_nb.tool
async def count_down(start: int = 3):
    """Count down to lift-off.

    Args:
        start: The number to count down from.
    """
    for n in range(start, 0, -1):
        yield f"{n}..."
        await asyncio.sleep(0)
    yield "lift-off!"


updates = []
subscription = executor.bus.subscribe(lambda event: updates.append(event.data), types=["update"])
result = await executor.call("count_down", {"start": 3})
subscription.close()
print("updates:", updates)
print("result: ", result.text)''',
    ),
    (
        "md",
        """\
## 6. Every step is an event

Subscribing to the bus shows the life of a call. Here, the denied `save_note` call again: requested,
approval asked, approval resolved, failed. The same events feed the audit log (`JsonlAuditLog`) and,
soon, the notebook's live views.""",
    ),
    (
        "py",
        """\
events = []
subscription = careful.bus.subscribe(events.append)
await careful.call("save_note", {"title": "wifi", "text": "password: hunter2"})
subscription.close()
for event in events:
    note = getattr(event, "reason", None) or getattr(event, "message", "")
    print(f"{event.type:<19} {note}".rstrip())""",
    ),
    (
        "md",
        """\
## Next

The rest of what works today — tools from raw JSON Schema and `inputConfig`, groups and profiles,
policies, timeouts, concurrency limits, cancellation and the JSONL audit log — is described in the
README. Notebook magics, widgets, agents and MCP are coming.""",
    ),
]


def build() -> object:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    for kind, source in CELLS:
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(source))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(source))
    # stable cell ids keep diffs of the saved notebook small
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


def execute(nb: object) -> None:
    from nbclient import NotebookClient

    # Kernel state stays out of ~/.ipython and ~/.local/share/jupyter.
    with tempfile.TemporaryDirectory(prefix="kode_nb-quickstart-") as state:
        os.environ["IPYTHONDIR"] = os.path.join(state, "ipython")
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(state, "runtime")
        # kernel "python3" with argv[0] "python" runs as sys.executable: this venv's Python.
        client = NotebookClient(
            nb, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
        )
        client.execute()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-run", action="store_true", help="write the cells without outputs")
    parser.add_argument("--output", type=Path, default=NOTEBOOK, help="where to write")
    args = parser.parse_args(argv)

    import nbformat

    nb = build()
    if not args.no_run:
        execute(nb)
    nbformat.validate(nb)
    args.output.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
