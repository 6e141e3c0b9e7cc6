"""Cells that several real-kernel tests run: tools defined with ``%%tool`` as a user writes them."""

from __future__ import annotations

NOTE_TOOL = '''%%tool --kind edit
RAN = []

def write_note(path: str, text: str) -> str:
    """Write a note.

    Args:
        path: Where.
        text: What.
    """
    RAN.append(path)
    return f"wrote {path}"
'''
"""An edit tool (calling it asks for approval) that only records the paths it was called with in
``RAN``: a test reads ``RAN`` to know whether it ran."""

WAIT_FOR_CANCEL = '''%%tool --kind read
import time
from kode_nb import ToolContext

def wait_for_cancel(seconds: float, ctx: ToolContext) -> str:
    """Wait, noticing cancellation.

    Args:
        seconds: How long.
    """
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if ctx.cancelled:
            return "noticed"
        time.sleep(0.01)
    return "finished"
'''
"""A read tool that waits up to ``seconds``, returning ``"noticed"`` as soon as it is cancelled."""

PYDANTIC_AI = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from kode_nb.interop import pydantic_ai_toolset, start
from kode_nb.magics import get_session

def scripted(*answers):
    seen = []
    def fn(messages, info):
        seen.append(messages)
        a = answers[len(seen) - 1]
        return ModelResponse(parts=[TextPart(a) if isinstance(a, str) else ToolCallPart(*a)])
    return FunctionModel(fn), seen
"""

LANGCHAIN = """
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from kode_nb.interop import langchain_tools

def note_chain(replies):
    model = GenericFakeChatModel(messages=iter(replies))
    (tool,) = langchain_tools(["write_note"])
    async def run(prompt):
        messages = [HumanMessage(prompt)]
        while True:
            reply = await model.ainvoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:
                messages.append(await tool.ainvoke(call))
    return RunnableLambda(run, name="lc_writer")
"""

OPENAI_AGENTS = """
from agents import Agent as SdkAgent, Runner
from kode_nb.interop import ScriptedAgentsModel, openai_agents_tools
"""

FRAMEWORKS = PYDANTIC_AI + OPENAI_AGENTS + LANGCHAIN
"""pydantic-ai's ``scripted(*answers)`` (a FunctionModel), the OpenAI Agents SDK with
kode_nb's ``ScriptedAgentsModel``, and a LangChain ``note_chain(replies)`` calling ``write_note``."""
