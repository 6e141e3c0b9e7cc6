"""Build notebooks/06-frameworks.ipynb from the cells below and execute it, so the saved outputs
are exactly what the kernel sent (nbval checks them, strictly).

    .venv/bin/python scripts/make_frameworks_notebook.py            # rebuild + execute + write
    .venv/bin/python scripts/make_frameworks_notebook.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file. Offline and deterministic: the pydantic-ai agent
runs on a ``FunctionModel`` and the OpenAI Agents SDK agent on kode_nb's ``ScriptedAgentsModel``,
both answering from the prompt alone. Each run starts in one cell and a later cell approves its
tool call when nobody has clicked (``if await run.approval(...): run.approve()``, the same
decision the button makes), then waits for it and shows its final record.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _notebook_builder

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "06-frameworks.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# kode_nb with pydantic-ai and the OpenAI Agents SDK

Your agent already runs on a framework? Keep it. `kode_nb.interop` gives it kode_nb's tools —
each call validated, checked by the policy, **approved with the buttons in this notebook**,
timed out, cancelled, shown live — and `kode_nb.capture()` records its runs as kode_nb
traces: the same trace viewer, "what the model saw", `run_many`, JSON and OpenTelemetry export.

Everything here runs offline: the models are scripted (`pip install 'kode_nb[pydantic-ai,openai-agents]'`).""",
    ),
    (
        "py",
        """\
%load_ext kode_nb
import json

import kode_nb
from kode_nb.interop import openai_agents_tools, pydantic_ai_toolset, start""",
    ),
    (
        "md",
        "One kode_nb tool. Its kind is `edit`, so every call asks for approval first — whoever calls it.",
    ),
    (
        "py",
        '''\
%%tool --kind edit
NOTES = {}


def save_note(title: str, text: str) -> str:
    """Save a note.

    Args:
        title: A short title.
        text: What to remember.
    """
    NOTES[title] = text
    return f"Saved {title!r}."''',
    ),
    (
        "md",
        """\
## 1. A pydantic-ai agent

`pydantic_ai_toolset([...])` turns registered kode_nb tools (names, `group:...`, `kind:...`) into
a pydantic-ai toolset. The model is a `FunctionModel`: it saves the prompt as a note, then
answers. `start(...)` runs the agent as a task on the kernel's loop and returns at once, so the
kernel stays free while the call waits for your click; the call's live view (with **Approve** /
**Deny**) appears below.""",
    ),
    (
        "py",
        """\
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel


def note_taker(messages, info):
    prompt = messages[0].parts[-1].content
    if len(messages) == 1:  # first request: save the prompt as a note
        args = {"title": prompt.split()[-1], "text": prompt}
        return ModelResponse(parts=[ToolCallPart("save_note", args, tool_call_id="pa_1")])
    return ModelResponse(parts=[TextPart(f"Noted: {prompt}")])


pa_agent = Agent(FunctionModel(note_taker), name="pa_note_taker",
                 toolsets=[pydantic_ai_toolset(["save_note"])])
pa = start(pa_agent.run("Remember to buy eggs"))""",
    ),
    (
        "md",
        """\
**Click Approve** above. If nobody has clicked — *Run All*, or the notebook is being tested — the
next cell approves with `pa.approve()` (the button's decision; `pa.deny(reason)` is the other,
and the reason reaches the model). Then it waits for the run. The run's line above is now its
record: the same run record and trace viewer as a kode_nb agent's.""",
    ),
    (
        "py",
        """\
if await pa.approval(timeout=30):
    pa.approve()
result = await pa
print(result.output, NOTES)""",
    ),
    (
        "md",
        """\
## 2. What the model saw

`kode_nb.capture()` (used by `start`) recorded the run through pydantic-ai's own OpenTelemetry
instrumentation. Each model call keeps the messages it was sent and what it answered:""",
    ),
    (
        "py",
        """\
second = pa.trace.root.find("model_call")[1]
print(json.dumps(pa.trace.request(second)["body"]["messages"], indent=1))""",
    ),
    (
        "md",
        """\
## 3. An OpenAI Agents SDK agent

`openai_agents_tools([...])` gives the same tool to the SDK, as function tools; the SDK's trace
processor interface feeds the capture. `ScriptedAgentsModel` is an SDK `Model` that answers
offline (here a function of the conversation).""",
    ),
    (
        "py",
        """\
from agents import Agent as SdkAgent
from agents import Runner

from kode_nb.interop import ScriptedAgentsModel


def sdk_answer(conversation):
    if len(conversation) == 1:
        prompt = conversation[0]["content"]
        return ("save_note", {"title": prompt.split()[-1], "text": prompt})
    return "Saved it."


sdk_agent = SdkAgent(name="sdk_note_taker", instructions="You save notes.",
                     model=ScriptedAgentsModel(sdk_answer), tools=openai_agents_tools(["save_note"]))
oa = start(Runner.run(sdk_agent, "Call the plumber"), name="sdk_note_taker")""",
    ),
    (
        "py",
        """\
if await oa.approval(timeout=30):
    oa.approve()
print((await oa).final_output, NOTES)""",
    ),
    (
        "md",
        """\
## 4. Many runs

`kode_nb.run_many` takes either agent: each row runs the agent on its prompt, captured, and the
tool calls' approvals go to the batch's inbox (here a policy approves them all).""",
    ),
    (
        "py",
        """\
rows = [{"prompt": "Water the plants"}, {"prompt": "Book the dentist"}]
for agent in (pa_agent, sdk_agent):
    batch = kode_nb.run_many(agent, rows, cache=False, show=False, max_concurrency=1,
                             policy=lambda request, row: True)
    frame = await batch
    print(batch.target.name, list(frame["status"]), list(frame["output"]))
print(sorted(NOTES))""",
    ),
    (
        "md",
        """\
## Next

Every captured run is a kode_nb trace: `run.trace.to_json()`, `run.trace.to_otel()`, or
`kode_nb.interop.export_otlp(run.trace, endpoint=...)` to send it to an OpenTelemetry collector.
`kode_nb.interop.replay_model(trace)` re-runs a captured pydantic-ai or SDK run with its
recorded answers. LangChain: `kode_nb.interop.langchain_tools([...])`. See `docs/frameworks.md`.""",
    ),
]


def build() -> object:
    return _notebook_builder.build(CELLS)


def main(argv: list[str] | None = None) -> int:
    return _notebook_builder.main(CELLS, NOTEBOOK, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
