"""The notebook's MCP endpoint (``%mcp serve``): a :class:`NotebookServer` and its panel.

:class:`NotebookServer` draws a :class:`~kode_nb.mcp._served.ServedEndpoint`, which serves the
session's registry with :func:`kode_nb.mcp.serve` on the kernel's loop and runs every call from
an MCP client through the session's executor (so policy, approval, limits and the session's
event bus apply) under a call id ``mcp_<hex>``. Each outside call's live
:class:`~kode_nb.ui.call_view.CallView` is added to the *panel* that ``%mcp serve`` displayed:
no cell runs when an outside client calls, so that cell's output is where its approval prompt
and progress appear (the session's approver finds the view through ``session.views``).

Clients must send the server's bearer token (``Authorization: Bearer ...``, see
:mod:`kode_nb.mcp.server`): the panel shows it with a client config to copy, once it listens,
and nowhere else (it is redacted from traces and event logs). With widgets, the token is in an
output of its own under the panel, never in a widget's state (which a saved notebook keeps). ``%mcp serve --no-auth`` serves
without one, and the panel says so in red.

Imported when a command needs it (it imports ipywidgets); see :mod:`kode_nb.magics.mcp_magics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import ipywidgets as W  # type: ignore[import-untyped]

from kode_nb._format import shorten
from kode_nb.types import ToolResult
from kode_nb.ui.call_view import CallView
from kode_nb.ui.html import took

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

    from kode_nb.execution._executor import Executor
    from kode_nb.mcp.server import McpServerHandle
    from kode_nb.tools._registry import ToolRegistry
    from kode_nb.ui.approval import ApprovalPrompt
    from kode_nb.ui.records import Record

__all__ = ["NotebookServer", "ServingSession", "StatusLine"]


class ServingSession(Protocol):
    """What the panel reads of the notebook session that serves (its ``ServingSession``)."""

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def executor(self) -> Executor:
        """The session's executor now (a new one after ``%config`` changed its limits)."""

    @property
    def shell(self) -> Any: ...

    @property
    def style(self) -> str: ...

    @property
    def settings(self) -> Any:
        """The magics' settings (``update_rate``)."""

    @property
    def views(self) -> dict[str, Any]:
        """Live views of calls in flight, by call id (the approver puts prompts there)."""

    def remember(self, view: Any) -> None:
        """Keep ``view`` until its final record is delivered."""


class StatusLine:
    """One line of output, replaced in place (``update_display_data``) when the state changes."""

    def __init__(self, session: ServingSession, text: str) -> None:
        self.text = text
        self.display_handle: DisplayHandle | None = None
        self.final = False
        """True once :meth:`set` gave the last state."""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": f"<code>{html.escape(self.text)}</code>"}

    def show(self) -> None:
        from IPython.display import display

        self.display_handle = display(self, display_id=True)

    def set(self, text: str, *, final: bool = True) -> None:
        self.text = text
        self.final = final
        if self.display_handle is not None:
            self.display_handle.update(self)


class _ServedCallView(CallView):
    """A call view that tells its server when an approval prompt appears in it."""

    server: NotebookServer | None = None

    def show_approval(self, prompt: ApprovalPrompt) -> None:
        super().show_approval(prompt)
        if self.server is not None:
            self.server._asked()

    def on_event(self, event: Any) -> None:
        super().on_event(event)
        if event.type == "approval_resolved" and self.server is not None:
            self.server._decided += 1


class NotebookServer:
    """The notebook's tools served over streamable HTTP on 127.0.0.1 (``%mcp serve``): the
    panel of a :class:`~kode_nb.mcp._served.ServedEndpoint`, which serves and runs the calls."""

    def __init__(
        self,
        session: ServingSession,
        *,
        port: int,
        patterns: list[str] | None,
        name: str,
        auth: bool = True,
    ) -> None:
        from kode_nb.mcp._served import ServedEndpoint

        self.session = session
        self.endpoint = ServedEndpoint(
            session.registry,
            lambda: session.executor,  # the current one, also after %config rebuilt it
            port=port,
            patterns=patterns,
            name=name,
            auth=auth,
            hooks=self,
        )
        """What is served, its lifecycle and the outside calls."""
        self.endpoint.on_stop.append(self._stopped)
        self.views: dict[str, Any] = {}
        """Live views of outside calls in flight, by call id."""
        self.on_stop: Callable[[NotebookServer], None] | None = None
        self._waiters: list[asyncio.Future[bool]] = []
        self._decided = 0  # approvals of outside calls decided so far
        self._decided_before = 0  # ... when the last cell ended
        self._widgets = session.style == "widget"
        self._header: Any = None
        self._panel: Any = None
        self._display: DisplayHandle | None = None
        self._access_display: DisplayHandle | None = None
        self._shown_in: object = None

    # ------------------------------------------------------------------ the endpoint's facts

    @property
    def auth(self) -> bool:
        """Clients must send the bearer token (False: ``--no-auth``)."""
        return self.endpoint.auth

    @property
    def port(self) -> int:
        """The port it listens on (127.0.0.1)."""
        return self.endpoint.port

    @property
    def url(self) -> str:
        """The endpoint to give MCP clients."""
        return self.endpoint.url

    @property
    def name(self) -> str:
        return self.endpoint.name

    @property
    def handle(self) -> McpServerHandle | None:
        """The running :class:`~kode_nb.mcp.McpServerHandle` once started."""
        return self.endpoint.handle

    @property
    def error(self) -> BaseException | None:
        """Why it could not start."""
        return self.endpoint.error

    @property
    def results(self) -> list[ToolResult]:
        """The results of finished outside calls, oldest first."""
        return self.endpoint.results

    @property
    def stopped(self) -> bool:
        return self.endpoint.stopped

    @property
    def token(self) -> str | None:
        """The bearer token clients must send (``None`` before it listens, or with
        ``--no-auth``)."""
        return self.endpoint.token

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers an MCP client must send (the token)."""
        return self.endpoint.headers

    def tool_names(self) -> list[str]:
        """The names served right now."""
        return self.endpoint.tool_names()

    def client_config(self) -> dict[str, Any]:
        """The ``mcpServers`` entry an MCP client needs (URL and token)."""
        return self.endpoint.client_config()

    def describe(self) -> str:
        return self.endpoint.describe()

    def __repr__(self) -> str:
        return f"<NotebookServer {self.url} {self.endpoint.status}>"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.session.shell.events.register("post_run_cell", self._cell_ended)
        self.endpoint.start()

    def __await__(self) -> Any:
        return self._wait_started().__await__()

    async def _wait_started(self) -> NotebookServer:
        """Wait until it listens; raise why it could not start."""
        await self.endpoint
        return self

    def stop(self) -> None:
        """Stop listening (the port is free when this returns) and cancel outside calls in
        flight. Idempotent."""
        self.endpoint.stop()

    def _stopped(self, _endpoint: Any) -> None:
        with contextlib.suppress(ValueError):
            self.session.shell.events.unregister("post_run_cell", self._cell_ended)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(False)
        if self.on_stop is not None:
            self.on_stop(self)

    # ------------------------------------------------------------------ outside calls (hooks)

    def call_started(self, call_id: str, tool: str, arguments: Any) -> Callable[[Any], object]:
        """An outside call starts: its live view goes into the panel (the session's approver
        finds it through ``session.views`` and puts its prompt there)."""
        found = self.session.registry.get(tool)
        if not self._widgets or found is None:
            return lambda _data: None
        view = _ServedCallView(
            tool=found.name,
            kind=found.kind.value,
            arguments=arguments,
            call_id=call_id,
            rate=self.session.settings.update_rate,
        )
        view.server = self
        self.views[call_id] = view
        self.session.views[call_id] = view
        self._panel.children = (*self._panel.children, view)
        return view.on_update

    def call_ended(self, call_id: str, result: ToolResult) -> None:
        self.session.views.pop(call_id, None)
        view = self.views.pop(call_id, None)
        if view is not None:
            view.finish(result)

    def status_changed(self, status: str) -> None:
        self._set_status(status)

    # ------------------------------------------------------------------ approvals

    def waiting_prompt(self) -> ApprovalPrompt | None:
        """The oldest approval prompt of an outside call still waiting for a decision."""
        for view in self.views.values():
            prompt = getattr(view, "prompt", None)
            if prompt is not None and not prompt.future.done():
                return prompt  # type: ignore[no-any-return]
        return None

    def _asked(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(True)
        self._waiters.clear()

    def _cell_ended(self, result: Any = None) -> None:
        self._decided_before = self._decided

    async def approval(self, timeout: float | None = None) -> bool:
        """Wait until an outside call waits for approval: True. False at once when an approval
        was decided since the last cell ended (someone clicked before running this cell), or
        once stopped."""
        if self.waiting_prompt() is not None:
            return True
        if self._decided > self._decided_before or self.stopped or not self._widgets:
            return False
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return await asyncio.wait_for(future, timeout)

    def approve(self, *, always: bool = False) -> bool:
        """Approve the oldest waiting outside call, as its Approve button does."""
        from kode_nb.policy._approval import approve

        prompt = self.waiting_prompt()
        return prompt is not None and prompt.decide(approve(always=always, by="notebook"))

    def deny(self, reason: str | None = None) -> bool:
        """Deny the oldest waiting outside call (the client gets ``isError`` with ``reason``)."""
        from kode_nb.policy._approval import deny

        prompt = self.waiting_prompt()
        return prompt is not None and prompt.decide(deny(reason, by="notebook"))

    # ------------------------------------------------------------------ display

    def _access(self) -> tuple[str, str]:
        """What a client needs (text, HTML): the token and a config, or the --no-auth warning."""
        if not self.auth:
            warning = (
                "Warning: no authentication (--no-auth): any process on this machine that can "
                "connect to 127.0.0.1 can call these tools."
            )
            return warning, f"<br><b style='color:#c53030'>{html.escape(warning)}</b>"
        if self.endpoint.status != "listening" or self.handle is None:
            return "", ""
        config = json.dumps(self.client_config(), indent=2)
        text = (
            f"Clients must send: Authorization: Bearer {self.token}\n"
            f"Client config (the token is shown only here):\n{config}"
        )
        page = (
            f"<br><small>Clients must send <code>Authorization: Bearer {html.escape(str(self.token))}"
            "</code> (shown only here). Client config:</small>"
            f"<pre style='margin:2px 0'>{html.escape(config)}</pre>"
        )
        return text, page

    def _header_html(self, *, token: bool = True) -> str:
        """The header; ``token=False`` (a widget's, which saved widget state would keep): the
        token and config are left out, shown in an output of their own below the panel."""
        status = self.endpoint.status
        colour = {"listening": "#2f855a", "starting": "#b7791f"}.get(status, "#c53030")
        access = self._access()[1] if token or not self.auth else ""
        return (
            f"<b>MCP server</b> <span style='color:{colour}'>{html.escape(status)}</span>"
            f" — {html.escape(self.describe())}{access}<br><small>Calls from MCP "
            "clients appear below; those that need approval wait for your click.</small>"
        )

    def _bundle(self) -> dict[str, Any]:
        if self.stopped:  # final: the static record of what was served (no token in it)
            return self.record().bundle()
        access = self._access()[0]
        return {
            "text/plain": f"MCP server {self.endpoint.status}: {self.describe()}"
            + (f"\n{access}" if access else ""),
            "text/html": self._header_html(),
        }

    def record(self) -> Record:
        """The panel's static record: the endpoint, how it ended, and the outside calls."""
        from kode_nb.ui.records import call_status, table_record

        rows = [
            {
                "tool": r.tool,
                "status": call_status(r),
                "duration": took(r),
                "call_id": r.call_id,
                "result": shorten(r.text, 80),
            }
            for r in self.results
        ]
        columns = [
            ("tool", "tool"),
            ("status", "status"),
            ("duration", "duration", "right"),
            ("call_id", "call id"),
            ("result", "result"),
        ]
        return table_record(
            f"MCP server {self.endpoint.status}: {self.describe()}",
            columns,
            rows,
            empty="No calls from MCP clients.",
            note=f"{len(rows)} call{'s' if len(rows) != 1 else ''} from MCP clients",
        )

    @property
    def final(self) -> bool:
        """True once the server has stopped (its panel shows its static record)."""
        return self.stopped

    @property
    def display_handle(self) -> DisplayHandle | None:
        return self._display

    def show(self) -> None:
        """Display the panel (once per cell; ``%mcp serve`` does)."""
        from IPython.display import display

        from kode_nb.ui.cell_display import display_in_cell

        self._shown_in = getattr(self.session.shell, "execution_count", None)
        if self._display is not None:
            display(self._panel or _Static(self), display_id=self._display.display_id)
            return
        if self._widgets and self._panel is None:
            self._header = W.HTML(self._header_html(token=False))
            self._panel = _Panel(self, [self._header])
        self._display = display_in_cell(self._panel or _Static(self))
        if self._widgets and self.auth:  # the token: an output, never widget state
            self._access_display = display(_Access(self), display_id=True)
        self.session.remember(_Static(self))

    def _ipython_display_(self) -> None:
        if getattr(self.session.shell, "execution_count", None) != self._shown_in:
            self.show()  # shown by the magic in this cell already otherwise

    def _set_status(self, status: str) -> None:
        if self._header is not None:
            self._header.value = self._header_html(token=False)
        if self._access_display is not None:
            with contextlib.suppress(Exception):
                self._access_display.update(_Access(self))
        if self._display is not None and (self.stopped or not self._widgets):
            with contextlib.suppress(Exception):  # widgets: only the final record replaces them
                self._display.update(_Static(self))


class _Static:
    """What displays a server's panel without widgets, or once it has stopped."""

    def __init__(self, server: NotebookServer) -> None:
        self.server = server

    @property
    def final(self) -> bool:
        return self.server.stopped

    @property
    def display_handle(self) -> DisplayHandle | None:
        return self.server.display_handle

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.server._bundle()


class _Access:
    """The token and client config of a panel with widgets, as an output of its own (saved
    widget state never holds them); once stopped, a line saying the token is void."""

    def __init__(self, server: NotebookServer) -> None:
        self.server = server

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        server = self.server
        if server.stopped:
            note = "The MCP server has stopped; its token no longer works."
            return {"text/plain": note, "text/html": f"<small>{html.escape(note)}</small>"}
        text, page = server._access()
        if not text:
            text = "The token and client config appear here once the server listens."
            page = f"<small>{html.escape(text)}</small>"
        return {"text/plain": text, "text/html": page.removeprefix("<br>")}


class _Panel(W.VBox):  # type: ignore[misc]
    """The served endpoint's header and the views of the calls made to it."""

    def __init__(self, server: NotebookServer, children: list[Any]) -> None:
        self.server = server
        super().__init__(children, layout=W.Layout(border="1px solid #9ab", padding="4px 8px"))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.server.stopped:  # final: the static record, no widget
            return self.server._bundle()
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        data.update(self.server._bundle())
        return data
