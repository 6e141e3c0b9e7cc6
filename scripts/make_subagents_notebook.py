"""Build notebooks/03-subagents.ipynb from the cells below and execute it, so the saved outputs
are exactly what the kernel sent (nbval checks them, strictly).

    .venv/bin/python scripts/make_subagents_notebook.py            # rebuild + execute + write
    .venv/bin/python scripts/make_subagents_notebook.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file. As in the quickstart, a run takes two cells:
``%%ask --out h`` / ``h = %agent ...`` shows the live view and returns at once (its saved
snapshot is the one taken when it was first shown), and ``await h`` in the next cell gives the
result. Every model is a ``ScriptedModel``, so the outputs are the same on every run; run ids,
durations and call ids are masked by notebooks/nbval-sanitize.cfg.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _notebook_builder

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "03-subagents.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# Subagents

A **subagent** is an agent packaged as a tool: a parent agent calls it with typed inputs, it runs
with its *own* instructions, memory and allowlist of tools, and its final answer comes back as one
tool result. This notebook builds a *codebase investigator*, lets a main agent call it, reads the
nested trace, runs two investigators in parallel, and shows what the parent sees when a subagent
fails.

Every model here is a `ScriptedModel` — each turn of "the model" is written in the notebook — so
the notebook runs offline and gives the same results every time. Swap in a real model with
`%model openai:gpt-4.1-mini` (or `anthropic:...`, `openai-compatible:...`).""",
    ),
    ("py", "%load_ext kode_nb"),
    (
        "md",
        """\
## 1. A codebase and two read-only tools

The investigator may only *read*: list files and read one. (The codebase is a dict, so the notebook
does not depend on the files on your disk.)""",
    ),
    (
        "py",
        '''\
%%tool --kind read
import fnmatch

CODEBASE = {
    "app/config.py": "TIMEOUT = 30  # seconds, for every HTTP request\\nRETRIES = 3\\n",
    "app/client.py": "from app.config import RETRIES, TIMEOUT\\n\\ndef get(url): ...\\n",
    "app/retry.py": "def backoff(attempt):\\n    return min(2 ** attempt, 60)  # capped at a minute\\n",
    "README.md": "# demo app\\n",
}


def list_files(pattern: str = "*") -> str:
    """List the files of the codebase that match a glob pattern.

    Args:
        pattern: A glob such as app/*.py.
    """
    return "\\n".join(sorted(p for p in CODEBASE if fnmatch.fnmatch(p, pattern))) or "(no match)"


def read_file(path: str) -> str:
    """Read one file of the codebase.

    Args:
        path: The file's path, as list_files shows it.
    """
    if path not in CODEBASE:
        raise FileNotFoundError(f"no file {path!r}; use list_files")
    return CODEBASE[path]''',
    ),
    (
        "md",
        """\
## 2. The investigator: an input model, an allowlist, a model

Its **input model** is a pydantic class: the parent's model sees its JSON schema, and a call with
bad inputs never starts the subagent. Its **model** is a function returning a fresh
`ScriptedModel`, so each call plays the script from the start (a subagent called twice needs
that). The script lists the files, picks one from the objective, and answers with the line it
found:""",
    ),
    (
        "py",
        """\
import json

from pydantic import BaseModel, Field

from kode_nb.models import ScriptedModel, Turn, call


class Investigation(BaseModel):
    objective: str = Field(description="The question about the codebase to answer")
    max_files: int = Field(2, description="The most files to read")


def pick_file(request):
    wants_retry = "retr" in request.system.lower() or "backoff" in request.system.lower()
    return call("read_file", path="app/retry.py" if wants_retry else "app/config.py")


def answer_from_file(request):
    path = json.loads(request.messages[-2].tool_calls[0].arguments)["path"]
    first = request.messages[-1].content[0].text.splitlines()[0]
    return f"In `{path}`, line 1: `{first.strip()}`"


def make_investigator():
    return ScriptedModel([call("list_files", pattern="app/*.py"), pick_file, answer_from_file])""",
    ),
    (
        "md",
        """\
`%%agent NAME` registers the subagent. The YAML front matter holds its contract — `description`
(what the parent's model reads), `inputs`, the `tools` allowlist, `model`, `max_turns` — and the
rest of the cell is its system prompt, a template over the inputs:""",
    ),
    (
        "py",
        """\
%%agent investigator
---
description: Investigates the codebase to answer one question; reads files, never changes them.
inputs: $Investigation
tools: [list_files, read_file]
model: $make_investigator
max_turns: 4
---
You are a codebase investigator. Find out: {objective}
Read at most {max_files} files. Answer with the file and the line that shows it.""",
    ),
    (
        "md",
        """\
It is now a tool of kind `think`, with the input model as its parameters. Run it directly with
`%agent NAME key=value ...`; the cell returns at once with a handle and the live view (turns,
streamed text, tool calls):""",
    ),
    ("py", 'h = %agent investigator objective="Where is the HTTP timeout set?"'),
    ("py", "result = await h\nprint(result.status, '|', result.output)"),
    (
        "md",
        """\
## 3. A main agent calls it

`%%ask` runs an agent on the cell's text. The main agent gets the tools in `--tools` (here just the
investigator: it cannot read files itself) and the model from `%model`. Its script asks the
investigator, then answers with what came back:""",
    ),
    (
        "py",
        """\
def make_main():
    return ScriptedModel([
        Turn(text="I'll ask the investigator.", calls=[
            call("investigator", objective="Where is the HTTP timeout set?"),
        ]),
        lambda request: "The investigator found it. " + request.messages[-1].content[0].text,
    ])

%model $make_main""",
    ),
    (
        "py",
        """\
%%ask --tools investigator --out h
Where is the HTTP request timeout configured?""",
    ),
    (
        "md",
        """\
The investigator's run appears *inside* the main agent's tool call, and expands as it runs. Await
the result:""",
    ),
    ("py", "result = await h\nprint(result.output)"),
    (
        "md",
        """\
## 4. The nested trace

Every run records a trace: the main run, its turns, each model call (messages, response, tokens)
and tool call (arguments, result, approval events) — and the investigator's whole run nested under
the tool call that started it. The live view ends with it, collapsed; `h.show_trace()` shows it
open, with a text tree for plain front ends:""",
    ),
    ("py", "h.show_trace()"),
    (
        "md",
        """\
The same tree exports as JSON (`h.trace.to_json()`, schema `kode_nb.trace/v3`) and as
OpenTelemetry GenAI spans (`h.trace.to_otel()`, `to_otlp()` for a collector). Secrets are removed
before anything is stored:""",
    ),
    (
        "py",
        """\
for span in h.trace.to_otel():
    print(span["name"], "| parent:", "yes" if span["parent_span_id"] else "root")""",
    ),
    (
        "md",
        """\
## 5. Two investigators in parallel

When the model asks for several tool calls in one turn, they run together — subagents too, each
with its own fresh model and memory:""",
    ),
    (
        "py",
        """\
def make_parallel():
    return ScriptedModel([
        [
            call("investigator", objective="Where is the HTTP timeout set?"),
            call("investigator", objective="How long is the longest retry backoff?"),
        ],
        lambda request: "\\n".join(
            f"- {m.content[0].text}" for m in request.messages[-2:]
        ),
    ])""",
    ),
    (
        "py",
        """\
%%ask --model $make_parallel --tools investigator --out both
Answer both questions.""",
    ),
    (
        "py",
        """\
result = await both
print(result.output)
runs = [s for s in both.trace.spans() if s.kind == "run" and s.name == "investigator"]
a, b = runs
print("the two runs overlapped:", a.started_at < b.ended_at and b.started_at < a.ended_at)""",
    ),
    (
        "md",
        """\
## 6. A failing subagent is folded as *unavailable*

A subagent that errors, hits its turn or time limit, or gets bad inputs does not break the parent:
the parent's model gets one error result saying *why*, and goes on. This one has `max_turns: 1` but
its model never stops calling tools:""",
    ),
    (
        "py",
        """\
def make_restless():
    return ScriptedModel([call("list_files", pattern="*")] * 3)

def make_boss():
    return ScriptedModel([
        call("restless", task="survey the repository"),
        lambda request: "Noted, I'll go without it: " + request.messages[-1].content[0].text,
    ])""",
    ),
    (
        "py",
        """\
%%agent restless
---
description: Surveys the repository (but never finishes).
tools: [list_files]
model: $make_restless
max_turns: 1
---
Do this: {task}""",
    ),
    (
        "py",
        """\
%%ask --model $make_boss --tools restless --out failing
Survey the repository.""",
    ),
    (
        "py",
        """\
result = await failing
print(result.status, "|", result.output)
tool_span = next(s for s in failing.trace.spans() if s.kind == "tool_call")
print(tool_span.status, tool_span.attributes["result"]["details"]["unavailable"])""",
    ),
    (
        "md",
        """\
## 7. Approvals inside a subagent

A subagent's tool calls go through the same policy and approval as yours: an `edit` tool asks
first, and the prompt appears inside the subagent's nested view. `scribe` may only save notes:""",
    ),
    ("py", _notebook_builder.SAVE_NOTE_TOOL),
    (
        "py",
        """\
def make_scribe():
    return ScriptedModel([
        call("save_note", title="timeout", text="TIMEOUT = 30 s, in app/config.py"),
        lambda request: "Done: " + request.messages[-1].content[0].text,
    ])

def make_writer():
    return ScriptedModel([
        call("scribe", task="Note where the timeout is set."),
        lambda request: request.messages[-1].content[0].text,
    ])""",
    ),
    (
        "py",
        """\
%%agent scribe
---
description: Writes notes.
tools: [save_note]
model: $make_scribe
---
Write the note you are asked for: {task}""",
    ),
    (
        "py",
        """\
%%ask --model $make_writer --tools scribe --out writing
Write down where the timeout is set.""",
    ),
    (
        "md",
        """\
**Click Approve** in the scribe's view above. If nobody has clicked — *Run All*, or the notebook is
being tested — the next cell waits for the prompt and approves it with `writing.approve()`, the
same decision the button makes (`writing.deny(reason)` is the other one):""",
    ),
    (
        "py",
        """\
if await writing.approval(timeout=30):
    writing.approve()
result = await writing
print(result.output)
print(NOTES)""",
    ),
    (
        "md",
        """\
## Next

`%agent?`, `%%ask?` and `%model?` list the options. Everything here is plain Python underneath:
`kode_nb.agents.AgentDefinition`, `register_subagent` and `Agent(...).run(...)`, with `on_event=`
for your own views.""",
    ),
]


def build() -> object:
    return _notebook_builder.build(CELLS)


def main(argv: list[str] | None = None) -> int:
    return _notebook_builder.main(CELLS, NOTEBOOK, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
