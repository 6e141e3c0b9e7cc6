"""The magics in a real kernel: tool cards, errors as the front end sees them, live calls."""

from __future__ import annotations

import json

from .harness import Kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CARD = "application/vnd.kode-nb.card+json"
CALL = "application/vnd.kode-nb.call+json"

TOOLS = '''%%tool --kind read --group demo
import asyncio
from kode_nb import ToolContext

def echo(text: str, times: int = 1) -> str:
    """Repeat a text.

    Args:
        text: What to say.
        times: How often.
    """
    return text * times

async def slow_echo(text: str, delay: float, ctx: ToolContext) -> str:
    """Say it later.

    Args:
        text: What to say.
        delay: Seconds to wait.
    """
    ctx.on_update("waiting ")
    await asyncio.sleep(delay)
    return text
'''


def test_tool_cell_shows_a_card_record_with_a_static_html_fallback(kernel: Kernel) -> None:
    run = kernel.ok(TOOLS)
    cards = [o for o in run.outputs if CARD in o]
    assert len(cards) == 2
    assert not [o for o in run.outputs if WIDGET_VIEW in o]  # no widget: readable offline
    assert not [m for m in run.messages if m["msg_type"] == "comm_open"]
    assert cards[0][CARD]["name"] == "echo"
    assert list(cards[0][CARD]["schemas"]) == [
        "openai", "openai-strict", "anthropic", "gemini", "mcp",
    ]  # fmt: skip
    assert "<summary>anthropic</summary>" in cards[0]["text/html"]
    assert cards[0]["text/plain"].startswith("echo [read]")
    kernel.ok("from kode_nb.magics import get_session")
    assert kernel.value("get_session().registry.names()") == "['echo', 'slow_echo']"


def test_usage_errors_reach_the_front_end_as_errors(kernel: Kernel) -> None:
    run = kernel.run("%%tool\nx = 1\n")
    assert run.status == "error"
    assert run.reply["ename"] == "UsageError"
    assert run.stderr.startswith("UsageError: %%tool: the cell defines no function.")
    run = kernel.run("%tool echo texts=hi")
    assert run.status == "ok"  # unknown argument names are the model's problem: a result
    run = kernel.run("%tool ech text=hi")
    assert run.status == "error"
    assert "Did you mean echo?" in run.error_text
    run = kernel.run("%tools show echo --format yaml")
    assert run.status == "error"
    assert "invalid choice: 'yaml'" in run.error_text


def test_a_call_returns_at_once_and_the_view_ends_with_the_result(kernel: Kernel) -> None:
    run = kernel.ok("h = %tool slow_echo text=hello delay=0.3\nprint(h.done())")
    assert run.stdout.strip() == "False"  # the cell did not wait
    view = next(o for o in run.outputs if WIDGET_VIEW in o)
    assert "slow_echo" in view["text/html"]
    assert "starting" in view["text/plain"]
    final = kernel.wait_for(
        lambda m: (
            m["msg_type"] == "update_display_data" and "hello" in m["content"]["data"]["text/plain"]
        )
    )
    assert final["parent_header"]["msg_id"] == run.msg_id  # output lands in the starting cell
    assert "waiting " in final["content"]["data"]["text/html"]
    assert WIDGET_VIEW not in final["content"]["data"]  # final: the static record replaces it
    assert final["content"]["data"][CALL]["status"] == "ok"
    assert kernel.value("h.status, h.result().text, _kode_result is h.result()") == "ok hello True"


def test_a_later_cell_can_await_or_cancel_the_handle(kernel: Kernel) -> None:
    kernel.ok("h = %tool slow_echo text=later delay=0.2")
    assert kernel.ok("r = await h\nprint(r.text)").stdout.strip() == "later"
    kernel.ok("h = %tool slow_echo text=never delay=30")
    assert kernel.value("h.cancel('changed my mind')") == "True"
    assert (
        kernel.ok("r = await h\nprint(r.status, r.text)").stdout.strip()
        == "cancelled Tool 'slow_echo' was cancelled (changed my mind)."
    )


def test_displaying_the_handle_again_shows_the_same_view(kernel: Kernel) -> None:
    run = kernel.ok("%tool echo text=hi")  # the handle is the cell's value: shown once only
    shown = [m for m in run.messages if m["msg_type"] == "display_data"]
    assert len(shown) == 1
    assert WIDGET_VIEW in shown[0]["content"]["data"]
    assert not [m for m in run.messages if m["msg_type"] == "execute_result"]
    display_id = shown[0]["content"]["transient"]["display_id"]
    kernel.wait_for(
        lambda m: m["msg_type"] == "update_display_data" and "hi" in str(m["content"]["data"])
    )
    again = [m for m in kernel.ok("_").messages if m["msg_type"] == "display_data"]
    assert len(again) == 1
    assert again[0]["content"]["transient"]["display_id"] == display_id
    assert again[0]["content"]["data"]["text/plain"].startswith("echo: ok in ")


def test_tools_and_policy_display_html_and_text(kernel: Kernel) -> None:
    run = kernel.ok("%tools --group demo")
    assert "<table" in run.outputs[0]["text/html"]
    assert "slow_echo" in run.outputs[0]["text/plain"]
    run = kernel.ok("%tools show echo --format mcp")
    assert json.loads(json.dumps(run.outputs[0]["application/json"]))["name"] == "echo"
    run = kernel.ok("%policy")
    assert "approval_mode" in run.outputs[0]["text/html"]


def test_rerunning_a_cell_drops_the_tools_it_no_longer_defines(kernel: Kernel) -> None:
    def cell(*names: str) -> str:
        return "%%tool\n" + "".join(
            f'def {n}(x: int) -> int:\n    """{n}."""\n    return x\n' for n in names
        )

    kernel.ok(cell("first", "second"), cell_id="cell-A")
    kernel.ok(cell("third"), cell_id="cell-B")
    kernel.ok(cell("first"), cell_id="cell-A")  # the same cell, edited and run again
    names = kernel.value(
        "[n for n in get_session().registry.names() if n in ('first', 'second', 'third')]"
    )
    assert names == "['first', 'third']"
