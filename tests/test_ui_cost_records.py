"""The HTML and text fallbacks of run and trace records: costs, what is new this turn, the text
a cut tool result was sent as; the whole request stays out of the fallback."""

from __future__ import annotations

import pytest

from kode_nb import define_tool
from kode_nb._format import format_cost
from kode_nb.agents import Agent
from kode_nb.models import ScriptedModel, set_price
from kode_nb.models.scripted import call
from kode_nb.tools import ToolRegistry
from kode_nb.ui.records import run_record, trace_record

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_prices")]


async def test_fallbacks_show_cost_and_only_the_new_messages(registry: ToolRegistry) -> None:
    define_tool(lambda: "y" * 300, name="long", description="Long text.", inline=True)
    set_price("priced", input=2.0, output=4.0)
    system = "SYSTEM-PROMPT-MARKER " * 3
    model = ScriptedModel([call("long"), "done"], name="priced")
    result = await Agent(model=model, tools=["long"], system_prompt=system,
                         max_result_chars=100).run("go")  # fmt: skip
    assert result.cost is not None
    record = run_record(agent="main", model="priced", result=result)
    assert format_cost(result.cost) in record.html
    assert format_cost(result.cost) in record.text
    trace = trace_record(result.trace)
    assert "new this turn (2 messages, request ≈ " in trace.html
    assert "what the model got (200 characters cut)" in trace.html
    # the request itself (with the system prompt) is in the JSON, not in the fallback
    assert "SYSTEM-PROMPT-MARKER" in str(trace.data)
    assert "SYSTEM-PROMPT-MARKER" not in trace.html
