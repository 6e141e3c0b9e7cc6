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
