"""Built-in ``system`` tools (``group:system``): the clock, waiting, environment variables.

============ ======= ============================================================================
current_time read    now, as a timestamp and ISO text, in a given IANA time zone or local time
sleep        read    wait ``seconds`` (cancellable)
get_env      read    one environment variable
set_env      edit    set one environment variable of this process (asks by default)
============ ======= ============================================================================

Values of secret-looking names (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``, see
:func:`~kode_nb.builtins._common.is_secret_name`) are shown as ``<redacted>`` in results and in
the approval preview: the model never reads a secret back. ``set_env``'s value for such a
name is also redacted in the arguments shown to approvers and in events (traces).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from kode_nb.builtins._common import REDACTED, is_secret_name, make_tool
from kode_nb.errors import ToolError
from kode_nb.tools._model import Tool
from kode_nb.types import ToolContext

__all__ = ["MAX_SLEEP", "system_tools"]

MAX_SLEEP = 300.0
"""The longest ``sleep`` accepted, in seconds."""


def _shown(key: str, value: str | None) -> str | None:
    return REDACTED if value is not None and is_secret_name(key) else value


def _check_key(tool: str, key: str) -> str:
    if not key or "=" in key or "\x00" in key:
        raise ToolError(
            tool,
            f"Invalid environment variable name {key!r}: it must be non-empty and "
            "contain no '=' or NUL character.",
        )
    return key


def current_time(timezone: str | None = None) -> dict[str, Any]:
    """The current date and time.

    Args:
        timezone: An IANA time zone such as "Europe/Paris" or "UTC"; default: local time.
    """
    if timezone is None:
        now = datetime.now().astimezone()
        name = now.tzname() or "local"
    else:
        try:
            zone = dt_timezone.utc if timezone.upper() == "UTC" else ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "Europe" is a folder
            raise ToolError(
                "current_time",
                f"Unknown time zone {timezone!r}: use an IANA name such as "
                "'UTC', 'Europe/Paris' or 'America/New_York'.",
            ) from None
        now = datetime.now(zone)
        name = timezone
    return {"timestamp": round(now.timestamp(), 3), "iso": now.isoformat(), "timezone": name}


async def sleep(seconds: Annotated[float, Field(ge=0, le=MAX_SLEEP)]) -> dict[str, float]:
    """Wait a number of seconds, then return.

    Args:
        seconds: How long to wait (0 to 300).
    """
    await asyncio.sleep(seconds)
    return {"slept": seconds}


def get_env(key: str, ctx: ToolContext) -> dict[str, Any]:
    """Read an environment variable. Values of secret-looking names are redacted.

    Args:
        key: The variable's name, e.g. "HOME".
    """
    value = os.environ.get(_check_key(ctx.tool, key))
    result: dict[str, Any] = {"key": key, "value": _shown(key, value), "set": value is not None}
    if value is not None and is_secret_name(key):
        result["redacted"] = True
    return result


def set_env(key: str, value: str, ctx: ToolContext) -> dict[str, Any]:
    """Set an environment variable for this process (and programs it starts later).

    Args:
        key: The variable's name.
        value: The new value.
    """
    _check_key(ctx.tool, key)
    if "\x00" in value:
        raise ToolError(ctx.tool, f"The value for {key!r} contains a NUL character.")
    previous = os.environ.get(key)
    os.environ[key] = value
    return {"key": key, "value": _shown(key, value), "previous": _shown(key, previous)}


def _set_env_preview(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    key = str(arguments.get("key", ""))
    value = _shown(key, str(arguments.get("value", "")))
    previous = os.environ.get(key)
    was = "unset" if previous is None else repr(_shown(key, previous))
    return f"set {key}={value!r} (currently {was})"


def _redact_set_env(arguments: dict[str, Any]) -> dict[str, Any]:
    key = str(arguments.get("key", ""))
    if is_secret_name(key) and "value" in arguments:
        return {**arguments, "value": REDACTED}
    return arguments


def system_tools() -> list[Tool]:
    """New ``current_time``, ``sleep``, ``get_env`` and ``set_env`` tools (not registered)."""
    return [
        make_tool(current_time, "system", kind="read", category="system"),
        make_tool(sleep, "system", kind="read", category="system", timeout=MAX_SLEEP + 10),
        make_tool(get_env, "system", kind="read", category="system"),
        make_tool(
            set_env,
            "system",
            kind="edit",
            category="system",
            preview=_set_env_preview,
            redact=_redact_set_env,
        ),
    ]
