"""The two MCP failures: a server that cannot be reached, and a tool whose server went away.

:class:`McpConnectionError` is raised to the developer by ``connect()`` / ``list_tools()``;
:class:`McpServerUnavailableError` is a :class:`~kode_nb.errors.ToolError`, so the executor
turns it into an error result the model can read.
"""

from __future__ import annotations

from kode_nb.errors import KodeError, ToolError

__all__ = ["McpConnectionError", "McpServerUnavailableError"]


class McpConnectionError(KodeError, ConnectionError):
    """An MCP server could not be started, reached or listed."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"Could not connect to MCP server '{server}': {reason}")
        self.server = server
        """The server's name."""
        self.reason = reason
        """What went wrong."""


class McpServerUnavailableError(ToolError):
    """A call found its MCP server gone (crashed, unreachable, disconnected)."""

    def __init__(self, tool: str, server: str, reason: str, *, disconnected: bool = False) -> None:
        if disconnected:
            message = (
                f"MCP server '{server}' is disconnected ({reason}). Connect it again to use its "
                "tools."
            )
        else:
            message = (
                f"MCP server '{server}' is unavailable: {reason}. It will be reconnected on the "
                "next call."
            )
        super().__init__(tool, message)
        self.server = server
        """The server's name."""
        self.reason = reason
        """Why it is unavailable."""
