"""A call whose arguments arrive as raw JSON text (another framework's call, e.g. the OpenAI
Agents SDK's under run_many) shows and saves them as JSON, never as one escaped string."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kode_nb.magics import get_session

TOOL = '''
def save_note(title: str, text: str) -> str:
    """Save a note."""
    return f"Saved {title!r}."
'''


def test_raw_json_arguments_show_as_json(kode_ip: Any) -> None:
    kode_ip.run_cell_magic("tool", "--kind read", TOOL)
    session = get_session(kode_ip)
    tool = session.registry.get("save_note")
    assert tool is not None
    raw = json.dumps({"title": "plants", "text": "Water the plants"})
    handle = session.call(tool, raw)
    assert handle.result().text == "Saved 'plants'."
    assert handle.view.arguments == {"title": "plants", "text": "Water the plants"}
    record = handle.view.record()
    assert record.data["arguments"] == {"title": "plants", "text": "Water the plants"}
    assert '\\"' not in record.html


def test_text_that_is_no_json_object_is_shown_as_given(kode_ip: Any) -> None:
    kode_ip.run_cell_magic("tool", "--kind read", TOOL)
    session = get_session(kode_ip)
    tool = session.registry.get("save_note")
    assert tool is not None
    handle = session.call(tool, "[1, 2]")
    assert handle.result().status == "invalid_arguments"
    assert handle.view.arguments == "[1, 2]"


def test_a_framework_calls_raw_arguments_show_as_json(kode_ip: Any) -> None:
    kode_ip.run_cell_magic("tool", "--kind read", TOOL)
    session = get_session(kode_ip)
    made: list[Any] = []
    make = session._make_view

    def keep(*args: Any, **kwargs: Any) -> Any:
        made.append(make(*args, **kwargs))
        return made[-1]

    session._make_view = keep  # type: ignore[method-assign]
    raw = '{"title": "plants", "text": "Water the plants"}'
    result = asyncio.run(session.run_call("save_note", raw, call_id="fw_1", run_id=None))
    assert result.text == "Saved 'plants'."
    (view,) = made
    assert view.record().data["arguments"] == {"title": "plants", "text": "Water the plants"}
