"""Write labextension/test/fixtures/v3-requests.json: a kode_nb.trace/v3 record whose model
calls store their requests as what they added, and (``wholes``) each request whole as
:meth:`kode_nb.traces.Trace.request` rebuilds it. The viewer's TypeScript tests rebuild the same
requests from the record; ``tests/agents/test_trace_growth.py`` checks the file against Python.

    .venv/bin/python scripts/make_request_fixture.py

It holds a scripted run's neutral requests and, in the run's last turn, four wire bodies made by
hand: one that grows, one whose first message and keys change, one for another provider.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

OUT = (
    Path(__file__).resolve().parents[1] / "labextension" / "test" / "fixtures" / "v3-requests.json"
)

SYSTEM = {"role": "system", "content": "S"}
HI = {"role": "user", "content": "hi"}
TOOLS = [{"type": "function", "function": {"name": "t"}}]
BODIES: list[tuple[str, dict[str, Any]]] = [
    ("openai", {"model": "m", "messages": [SYSTEM, HI], "tools": TOOLS, "stream": True,
                "temperature": 1.0}),
    ("openai", {"model": "m", "messages": [SYSTEM, HI, {"role": "assistant", "content": "yo"}],
                "tools": TOOLS, "stream": True, "temperature": 1}),
    ("openai", {"model": "m", "messages": [{"role": "system", "content": "S2"}, HI],
                "stream": False, "tools": TOOLS}),
    ("anthropic", {"model": "m", "system": "S2", "messages": [HI]}),
]  # fmt: skip


async def main() -> None:
    from kode_nb import define_tool
    from kode_nb.agents import Agent
    from kode_nb.models import ScriptedModel
    from kode_nb.models.scripted import call
    from kode_nb.traces._requests import RequestChain

    def note(text: str) -> str:
        """Keep a note."""
        return f"kept {text}"

    define_tool(note, inline=True)
    model = ScriptedModel([call("note", text="a"), call("note", text="b"), "done"])
    result = await Agent(model=model, tools=["note"], system_prompt="Take notes.").run("go")
    trace = result.trace
    turn = trace.root.children[-1]
    chain = RequestChain()
    for i, (provider, body) in enumerate(BODIES):
        span = turn.child("model_call", f"chat wire {i}")
        span.span_id = f"wire{i:012d}"
        span.attributes["request"] = {
            "provider": provider, "path": "/x", "model": "m", "body": copy.deepcopy(body),
        }  # fmt: skip
        chain.store(span)
        span.finish("ok")
    wholes = {s.span_id: trace.request(s) for s in trace.spans() if s.kind == "model_call"}
    text = json.dumps({"trace": trace.to_dict(), "wholes": wholes}, indent=1, ensure_ascii=False)
    OUT.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(text):,} characters)")


if __name__ == "__main__":
    asyncio.run(main())
