"""Build notebooks/05-mcp.ipynb from the cells below and execute it, so the saved outputs are
exactly what the kernel sent (nbval checks them, strictly).

    .venv/bin/python scripts/make_mcp_notebook.py            # rebuild + execute + write
    .venv/bin/python scripts/make_mcp_notebook.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file. The notebook starts ``notebooks/mcp_demo_server.py``
as a subprocess (stdio), then serves its own tools on 127.0.0.1 and calls them with an MCP client
in the same kernel. Connecting and serving return at once; the saved snapshot of a status line or
a live view is the one taken when it was first shown. Ports, call ids and the server's
bearer token are masked by notebooks/nbval-sanitize.cfg. The one approval is decided by ``srv.approve()`` when nobody clicks.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _notebook_builder

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "05-mcp.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# MCP: use a server's tools, serve your own

The [Model Context Protocol](https://modelcontextprotocol.io) lets any agent use any tool server.
This notebook connects to a small MCP server shipped next to it (`mcp_demo_server.py`, started as a
subprocess), calls its tools with progress shown live, then serves the notebook's *own* tools over
streamable HTTP on 127.0.0.1 and calls one from an MCP client — with the approval prompt appearing
here, in the notebook.""",
    ),
    ("py", "%load_ext kode_nb"),
    (
        "md",
        """\
## 1. Connect a server

`%mcp connect NAME -- CMD ARGS...` starts a stdio server (`%mcp connect NAME URL` reaches an HTTP
one). The cell waits until the server is up (at most 30 s) and lists its tools, so the next cell
can use them. Servers listed in `kode_nb.toml` (`[mcp.servers.NAME]`) connect by themselves at
`%load_ext`; the first cell after it waits for them the same way.""",
    ),
    ("py", "import sys\n%mcp connect demo -- {sys.executable} mcp_demo_server.py"),
    (
        "md",
        """\
Its tools are now kode_nb tools (category `mcp`); their kinds come from the server's annotations.
Annotations are the server's *claims*, though (any server can call `drop_database` read-only), so
until you trust a server every one of its tools asks first (`TRUSTED no`):""",
    ),
    ("py", "%mcp tools demo"),
    (
        "md",
        """This demo server ships next to the notebook, so trust it: its read-only tools then run at once,
and the destructive one still asks. (`trust = true` or `trusted_tools = [...]` in the config file
does the same; `%mcp untrust demo` takes it back.)""",
    ),
    ("py", "%mcp trust demo"),
    (
        "md",
        """\
## 2. Call a tool, with progress

`count_slowly` sends a progress notification at each step; they stream into the call's view as
they arrive:""",
    ),
    ("py", "h = %tool count_slowly steps=5 delay=0.3"),
    ("py", "r = await h\nprint(r.status, '|', r.text)\nprint(h.view.text)"),
    ("py", "%mcp list"),
    (
        "md",
        """\
## 3. Serve the notebook's tools

Two notebook tools: one reads, one writes.""",
    ),
    (
        "py",
        '''\
%%tool --kind read
def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: What to say.
    """
    return text.upper() + "!"''',
    ),
    ("py", _notebook_builder.SAVE_NOTE_TOOL),
    (
        "md",
        """\
`%mcp serve` serves them (`--tools` takes name patterns; without it, every tool) over streamable
HTTP on 127.0.0.1, from this kernel. Any local process can reach that port, so clients must send
a bearer token made for this server: the cell's output shows it, with a client config to copy
(`srv.headers` holds it too). Calls from MCP clients run through the notebook's executor —
policy, approval, timeouts — and each shows up **in this cell's output**, with its approval
prompt. `%mcp stop` (or shutting the kernel down) frees the port, and the token dies with it.""",
    ),
    ("py", "srv = %mcp serve --tools shout save_note"),
    (
        "md",
        """\
Any MCP client can now use `srv.url` with `srv.headers`. Here the client is kode_nb's own, in this same kernel, with
its own registry and executor. (The client approves automatically: the *server* side — this
notebook — is where a person decides.)""",
    ),
    (
        "py",
        """\
from kode_nb import AutoApprove, Executor, ToolRegistry
from kode_nb.mcp import connect

await srv
client = await connect("notebook", url=srv.url, headers=srv.headers)
outside = ToolRegistry()
client.register(outside)
caller = Executor(outside, approver=AutoApprove())
print(client.server_info.name, "offers:", [t.name for t in client.tools])""",
    ),
    ("py", 'r = await caller.call("shout", {"text": "hello from an MCP client"})\nprint(r.text)'),
    (
        "md",
        """\
`save_note` is an `edit` tool, so the notebook asks before running it. The client's call waits in
the background while the prompt appears in the `%mcp serve` cell's output above:""",
    ),
    (
        "py",
        """\
import asyncio

pending = asyncio.ensure_future(
    caller.call("save_note", {"title": "mcp", "text": "written by an MCP client"})
)""",
    ),
    (
        "md",
        """\
**Click Approve** in the `%mcp serve` output. If nobody has clicked — *Run All*, or the notebook is
being tested — the next cell waits for the prompt and approves it with `srv.approve()`, the same
decision the button makes (`srv.deny(reason)` sends the client an error result):""",
    ),
    (
        "py",
        """\
if await srv.approval(timeout=30):
    srv.approve()
r = await pending
print(r.status, "|", r.text)
print(NOTES)""",
    ),
    (
        "md",
        """\
## 4. Clean up

Close the client, stop serving (the port is free when `%mcp stop` returns) and stop the demo server.
Unloading the extension or shutting the kernel down does the same.""",
    ),
    (
        "py",
        "await client.disconnect()\n%mcp stop\n%mcp disconnect demo\n%mcp list",
    ),
]


def build() -> object:
    return _notebook_builder.build(CELLS)


def main(argv: list[str] | None = None) -> int:
    return _notebook_builder.main(CELLS, NOTEBOOK, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
