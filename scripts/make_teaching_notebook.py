"""Build notebooks/02-teaching.ipynb from the cells below and execute it, so the saved outputs
are exactly what the kernel sent (nbval checks them, strictly).

    .venv/bin/python scripts/make_teaching_notebook.py            # rebuild + execute + write
    .venv/bin/python scripts/make_teaching_notebook.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file. The model is kode_nb's ``TestModel``: offline,
deterministic, stateless (one instance serves every run and fork) and it follows the prompt, so
an edited question or tool result changes the answer the way a real model's would. A stepped run
is started by ``%%ask --step --out h`` and decided from the next cells through ``h.step`` —
exactly what its buttons do when the notebook is run by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _notebook_builder

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "02-teaching.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# Teaching mode: see what the model sees, step through a run, fork it

An agent run usually goes from prompt to answer in one go. This notebook slows one down:

1. **what the model sees** — the exact request of each model call, and what each turn added;
2. **stepping** — pause before every model request and tool call, look, edit, go on;
3. **a result given by hand** — answer a tool call yourself instead of running the tool;
4. **forking** — take a finished run, change one thing at one step, and continue from there
   without paying again for the model calls before it;
5. **cost** — tokens and money of each branch.

The model is `TestModel`: offline and deterministic, it calls the tools it is offered with
arguments taken from the question where it can, then sums up what the tools returned. Swap in a
real one with `%model openai:gpt-4.1-mini` (or `anthropic:...`, `openai-compatible:...`).""",
    ),
    ("py", "%load_ext kode_nb"),
    (
        "md",
        """\
## A tool and a price

One read-only tool over a small sales table, and a price for the model (US dollars per million
input and output tokens), so runs have a cost. A model with no price shows its cost as *unknown*,
never as $0.""",
    ),
    (
        "py",
        '''\
%%tool --kind read
from typing import Literal

SALES = {
    ("north", 2023): (1.64, -3), ("north", 2024): (1.84, 12),
    ("south", 2023): (1.05, 4), ("south", 2024): (0.97, -8),
}

def summarize_sales(region: Literal["north", "south", "east", "west"], year: int) -> str:
    """Total sales of one region in one year, and the change on the year before.

    Args:
        region: One of the four sales regions.
        year: A calendar year, e.g. 2024.
    """
    if (region, year) not in SALES:
        return f"no sales figures for {region} in {year}"
    total, change = SALES[region, year]
    return f"{region} {year}: ${total}M, {change:+d}% on the year before"''',
    ),
    (
        "py",
        """\
from kode_nb.models import TestModel

model = TestModel()
kode_nb.set_price(model.name, input=0.40, output=1.60)""",
    ),
    (
        "md",
        """\
## 1. What the model sees

Run the question once, straight through:""",
    ),
    (
        "py",
        """\
%%ask --model $model --tools summarize_sales --out first
How did the north region do in 2024?""",
    ),
    ("py", "result = await first\nprint(result.output)"),
    (
        "md",
        """\
Every model call in the trace keeps the request **as it went to the model**: the system prompt,
every message so far, and the tools' schemas in the provider's format (`TestModel` gets the
provider-neutral request; an OpenAI-compatible server gets its JSON body). The trace stores what
each call added to the one before; `result.trace.request(span)` gives it whole. The second call
is the one that reads the tool's result:""",
    ),
    (
        "py",
        """\
import json

calls = result.trace.root.find(kind="model_call")
second = calls[1].attributes
print(json.dumps(result.trace.request(calls[1])["body"]["messages"], indent=2))""",
    ),
    (
        "md",
        """\
What the second turn **added** to the conversation — the model's own tool call and the tool's
answer — and the size of the request:""",
    ),
    (
        "py",
        """\
for message in second["messages"]:
    print(message["role"], "->", json.dumps(message.get("content") or message.get("tool_calls")))
print("request size:", second["request_tokens_estimate"], "tokens (estimate)")
print("reported usage:", second["usage"])""",
    ),
    (
        "md",
        """\
The trace viewer shows the same for every model call (open a `model_call` row: *Request*,
*New this turn*, tokens and cost), and its **Fork from here** and **Expand into cells** buttons
work on it in JupyterLab:""",
    ),
    ("py", "first.show_trace()"),
    (
        "md",
        """\
## 2. Step through a run

`%%ask --step` pauses **before each model request** and **before each tool call**. In JupyterLab
the live view shows the buttons **Next**, **Edit**, **Give result**, **Run to end** and **Stop**;
here the cells below decide through `h.step`, which does exactly what the buttons do. Waiting
never blocks the kernel: other cells run while the run is paused.""",
    ),
    (
        "py",
        """\
%%ask --step --model $model --tools summarize_sales --out h
How did the north region do in 2024?""",
    ),
    (
        "md",
        """\
The first pause is before the first model request. This is everything the model is about to
receive:""",
    ),
    (
        "py",
        """\
point = await h.step.paused()
print(point.kind)
body = point.body()
print("system:", body["system"])
print("messages:", [(m["role"], m["content"]) for m in body["messages"]])
print("tools:", [(t["name"], list(t["parameters"]["properties"])) for t in body["tools"]])""",
    ),
    (
        "py",
        "point.next()\npoint = await h.step.paused()\nprint(point.kind, point.tool, point.arguments)",
    ),
    (
        "md",
        """\
The model wants the north region. **Edit** the arguments before the tool runs. An edit is
validated against the tool's schema like the model's own arguments: a bad one is refused with
the reason, and the run stays paused.""",
    ),
    (
        "py",
        """\
from kode_nb.debug import StepEditError

try:
    point.edit({"region": "north-east", "year": 2024})
except StepEditError as exc:
    print(exc)""",
    ),
    (
        "py",
        """\
point.edit({"region": "south", "year": 2024})
(await h.step.paused()).run_to_end()  # the next pause is the answer's model request
edited = await h
print(edited.output)""",
    ),
    (
        "md",
        """\
The edit is in the trace, with what was there before and after:""",
    ),
    (
        "py",
        """\
events = [e for span in edited.trace.root.walk() for e in span.events]
print([e["attributes"] for e in events if e["name"] == "step_edit"])""",
    ),
    (
        "md",
        """\
## 3. A result given by hand

**Give result** answers a tool call without running the tool — to show what the model does with
an answer it did not expect, or to stand in for a tool that is slow, costly or not written yet.""",
    ),
    (
        "py",
        """\
%%ask --step --model $model --tools summarize_sales --out g
How did the north region do in 2025?""",
    ),
    (
        "py",
        """\
(await g.step.paused()).next()  # the first model request goes as it is
point = await g.step.paused()
print(point.tool, point.arguments)
point.give_result("north 2025: $2.10M, +14% on the year before (preliminary)")
(await g.step.paused()).run_to_end()
given = await g
print(given.output)""",
    ),
    (
        "md",
        """\
## 4. Fork a finished run

`kode_nb.fork(result, at=..., edit=...)` continues a finished run from one of its steps with one thing
changed. Everything **before** the fork point is answered from the recording — no model calls,
no tool runs, no cost — and the run goes on live from there. `at` is a turn number or a span id
from the trace (the trace viewer's **Fork from here** button inserts that cell for you).

Fork at the tool call, with a different tool result:""",
    ),
    (
        "py",
        """\
tool_call = result.trace.root.find(kind="tool_call")[0]
worse = await kode_nb.fork(
    result,
    at=tool_call.span_id,
    edit={"result": "north 2024: $0.40M, -78% on the year before (two stores closed)"},
)
print(worse.output)
print(worse.trace.root.attributes["forked_from"]["replayed_requests"], "model request(s) replayed")""",
    ),
    (
        "md",
        """\
Fork at turn 1 with another question:""",
    ),
    (
        "py",
        """\
south = await kode_nb.fork(result, at=1, edit="How did the south region do in 2023?")
print(south.output)""",
    ),
    (
        "md",
        """\
`kode_nb.diverge(a, b)` puts two runs side by side, turn by turn, and marks where they first
differ (◆):""",
    ),
    ("py", 'kode_nb.diverge(result, worse, labels=("original", "fork"))'),
    (
        "md",
        """\
## 5. What each branch cost

Each run's cost is the sum of its model calls at the price set above. A fork's trace keeps the
calls it replayed (with their recorded tokens and cost, marked `replayed`), but they were not made
again: what the fork **spent** is only its new requests. `diverge` counts both for each branch:""",
    ),
    (
        "py",
        """\
branches = {"edited step": edited, "given result": given,
            "fork: tool result": worse, "fork: question": south}
print(f"{'branch':18} {'tokens in/out':>13} {'requests':>8} {'cost':>10} {'new requests':>12} {'spent':>10}")
for label, run in branches.items():
    b = kode_nb.diverge(result, run).b
    tokens = f"{b.usage['input_tokens']}/{b.usage['output_tokens']}"
    print(f"{label:18} {tokens:>13} {b.requests:>8} ${b.cost:.7f} {b.new_requests:>12} ${b.new_cost:.7f}")""",
    ),
    (
        "md",
        """\
## Next

`%%ask?` lists the options (`--step top` lets subagent runs go through without pausing);
`kode_nb.replay(result)` re-runs a recorded run offline; `%expand_trace first` (or the viewer's
**Expand into cells**) turns a run into collapsible cells you can re-run step by step.""",
    ),
]


def build() -> object:
    return _notebook_builder.build(CELLS)


def main(argv: list[str] | None = None) -> int:
    return _notebook_builder.main(CELLS, NOTEBOOK, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
