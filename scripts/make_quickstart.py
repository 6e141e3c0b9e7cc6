"""Build notebooks/01-quickstart.ipynb from the cells below and execute it, so the saved outputs
are exactly what the kernel sent (nbval then checks them, strictly, in ``dev.sh test``).

    .venv/bin/python scripts/make_quickstart.py            # rebuild + execute + write
    .venv/bin/python scripts/make_quickstart.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file.

Why a call takes two cells. ``h = %tool ...`` shows the call's live view and returns at once; the
call runs as a background task that starts only after that cell has finished. The view's saved
snapshot is therefore always the one taken when it was first shown (nbclient and nbval both
ignore the later refresh, which belongs to a cell that has already finished), and the next cell,
``await h``, shows the result. That keeps every saved output deterministic for nbval's strict
mode; call ids, durations and the working directory are masked by notebooks/nbval-sanitize.cfg.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _notebook_builder

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "01-quickstart.ipynb"

# (cell type, source); "md" = markdown, "py" = code
CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# kode_nb quickstart

kode_nb turns typed, documented Python functions into **tools** an LLM agent can call, and runs
each call the way a model makes it: arguments checked against a schema, policy, approval for
anything that changes things, timeouts, cancellation, and an event for every step.

This notebook is the tour from the notebook side. Run the cells from top to bottom
(<kbd>Shift</kbd>+<kbd>Enter</kbd>); two of them will ask you to click a button. It ends with an
agent run and its trace.""",
    ),
    (
        "md",
        "Load the extension. It adds the magics (`%%tool`, `%tool`, `%tools`, `%policy`, `%approval`, "
        "`%%ask`, `%%agent`, `%model`, `%expand_trace`, `%mcp`) and the live views:",
    ),
    ("py", "%load_ext kode_nb"),
    (
        "md",
        """\
## 1. A function becomes a tool

`%%tool` runs the cell and turns every function it defines into a tool. The type hints become
the argument schema, the docstring the descriptions the model reads. The card below shows the
parameters; open **JSON schema the model sees** to read the exact schema, in the format of each
provider.""",
    ),
    (
        "py",
        '''\
%%tool
from typing import Literal


def convert_temperature(value: float, to: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Convert a temperature between Celsius and Fahrenheit.

    Args:
        value: The temperature to convert.
        to: The unit to convert to.
    """
    if to == "celsius":
        return f"{(value - 32) * 5 / 9:.1f} °C"
    return f"{value * 9 / 5 + 32:.1f} °F"''',
    ),
    ("md", "It is still a plain function when you call it yourself:"),
    ("py", 'convert_temperature(212, to="celsius")'),
    (
        "md",
        """\
## 2. The schema the model sees

`%%tool` registered a `Tool` in the session's registry. Its `parameters` are the JSON Schema the
model is sent, exactly:""",
    ),
    (
        "py",
        """\
import json

import kode_nb

tool = kode_nb.default_registry().get("convert_temperature")
print(json.dumps(tool.parameters, indent=2))""",
    ),
    (
        "md",
        """\
`%tools show convert_temperature --format anthropic` shows the whole tool the way a provider wants
it (also `openai`, `openai-strict`, `gemini` and `mcp`); the card above has all of them under
**JSON schema the model sees**.""",
    ),
    (
        "md",
        """\
## 3. A call by hand

`%tool NAME key=value ...` calls the tool the way a model would: through the executor, which
validates the arguments, checks the policy, asks for approval if needed and runs the tool under
a timeout. The cell returns at once with a *handle* while the call runs in the background; its
live view fills in as it goes.""",
    ),
    ("py", "h = %tool convert_temperature value=212"),
    (
        "md",
        "`await` the handle for the result (`h.done()`, `h.result()` and `h.cancel()` work too):",
    ),
    ("py", "await h"),
    (
        "md",
        """\
## 4. A bad call and its error

Bad arguments never reach the function. The model gets a message naming each wrong field, so it
can correct itself on its next turn:""",
    ),
    ("py", "bad = %tool convert_temperature value=hot to=kelvin"),
    ("py", "result = await bad\nprint(result.status)\nprint(result.text)"),
    (
        "md",
        """\
## 5. Tools that change things ask first

Every tool has a **kind**: `read`, `search`, `fetch`, `think` and `other` run straight away;
`edit`, `delete`, `move` and `execute` change things, so a call **asks for approval** first.
`write_note` is an `edit` tool:""",
    ),
    (
        "py",
        '''\
%%tool --kind edit
NOTES: dict[str, str] = {}


def write_note(title: str, text: str) -> str:
    """Save a short note under a title.

    Args:
        title: The note's title.
        text: What to write.
    """
    NOTES[title] = text
    return f"Saved note {title!r} ({len(text)} characters)."''',
    ),
    ("py", 'h = %tool write_note title=groceries text="eggs, milk"'),
    (
        "md",
        """\
**Click Approve** in the call above: nothing is written until you do. *Deny* sends your
reason back to the model; *Always allow this tool* stops asking for the rest of the session.

Then run the next cell. If nobody has clicked yet — you used *Run All*, or the notebook is being
tested — it approves for you with `h.approve()` (the same decision the button makes; `h.deny(reason)`
is the other one), then waits for the result.""",
    ),
    (
        "py",
        """\
if h.status == "waiting for approval":
    h.approve()
await h""",
    ),
    ("py", "NOTES"),
    (
        "md",
        """\
## 6. Every step is an event

The executor reports each step of a call as a typed event: requested, approval asked and
answered (by whom), started, completed — or failed, timed out, cancelled. The live views are
drawn from these events, and `kode_nb.magics.get_session().bus.subscribe(...)` hands them to your
own code (an audit log, a test). The events of the `write_note` call:""",
    ),
    (
        "py",
        """\
for event in h.events:
    by = f" (by {event.decided_by})" if event.type == "approval_resolved" else ""
    print(event.type + by)""",
    ),
    (
        "md",
        """\
## 7. A streaming tool

A tool written as an async generator streams: every item it yields is an update, shown live as it
arrives; the last one is the result (shown as the result, not again in the stream). (A plain function can stream too: declare a `ctx: ToolContext`
parameter and call `ctx.on_update(...)`.) Updates are coalesced, so even 100,000 of them reach the
browser as a few dozen small messages.""",
    ),
    (
        "py",
        '''\
%%tool --kind read
import asyncio


async def count_down(start: int = 5):
    """Count down to lift-off, one number every 0.3 seconds.

    Args:
        start: The number to count down from.
    """
    for n in range(start, 0, -1):
        yield f"{n}… "
        await asyncio.sleep(0.3)
    yield "lift-off!"''',
    ),
    ("py", "countdown = %tool count_down start=5"),
    (
        "py",
        """\
await countdown
print("streamed:", countdown.view.text)
print("result:  ", countdown.result().text)""",
    ),
    (
        "md",
        """\
## 8. The registry and the policy

`%tools` lists the tools with their call statistics (`%tools show NAME`, `%tools remove NAME`,
`--kind` and `--group` filters):""",
    ),
    ("py", "%tools"),
    (
        "md",
        """\
`%policy` shows what may run: allow and deny lists (tool names, `group:`, `kind:`, `category:`),
profiles, which kinds ask, and the directories file tools may touch. `%policy deny kind:edit`
would refuse `write_note` outright; `%approval auto` runs what would ask, without asking.""",
    ),
    ("py", "%policy"),
    (
        "md",
        """\
## 9. An agent calls the tools

`%%ask` runs an agent on the cell's text with the tools named in `--tools`; every call it makes
goes through the same executor, so `write_note` asks again. The model here is offline: a
`ScriptedModel` whose turns are written in advance (a function makes a fresh one for each run;
`--model test` is the other offline model). The cell returns at once with the run's live view,
and `--out run` keeps its handle.""",
    ),
    (
        "py",
        """\
from kode_nb.models import ScriptedModel, call


def fever_model():
    return ScriptedModel([
        call("convert_temperature", value=101.3),
        call("write_note", title="fever", text="101.3 °F is 38.5 °C"),
        "101.3 °F is 38.5 °C; I saved it in the note 'fever'.",
    ])""",
    ),
    (
        "py",
        """\
%%ask --model $fever_model --tools convert_temperature,write_note --out run
Convert 101.3 °F to Celsius and save the answer as a note.""",
    ),
    (
        "md",
        """\
**Click Approve** on the `write_note` call in the run above. The next cell approves for you if
nobody has (`run.approval()` waits until a call of the run asks), then waits for the answer:""",
    ),
    (
        "py",
        """\
if await run.approval(timeout=30):
    run.approve()
result = await run
print(result.status, "->", result.output)
print(NOTES["fever"])""",
    ),
    (
        "md",
        """\
The run's view is now its record: the answer, the tokens, and its **trace**. The trace is the
run as a tree — each turn, each model call with what the model was sent, each tool call with its
arguments, approval and result — drawn by the trace viewer in JupyterLab and Notebook 7 (click a
span for its details). Save the notebook and reopen it, even without a kernel: the records and
the trace are still there.""",
    ),
    ("py", "result.trace"),
    (
        "md",
        """\
## Next

Settings live in `%config KodeMagics` (approval timeout, concurrency limit, update rate, display
style). Everything here also works without Jupyter: `kode_nb.tool`, `Executor`, `Agent` and the
event bus are plain Python — see the README. Subagents, teaching mode, many runs, MCP and other
agent frameworks each have a notebook of their own in this folder.""",
    ),
]


def build() -> object:
    return _notebook_builder.build(CELLS)


def main(argv: list[str] | None = None) -> int:
    return _notebook_builder.main(CELLS, NOTEBOOK, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
