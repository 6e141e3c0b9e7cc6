"""What the test servers share: ``--http``/``--port`` and running over stdio or HTTP.

Imported by the servers in this folder, which run as scripts (their folder is then first on
``sys.path``). Over HTTP a server binds 127.0.0.1 (port 0: any free one), prints ``PORT <n>``
and serves streamable HTTP at ``/mcp`` (answers as SSE streams; ``--json``: JSON bodies).
"""

from __future__ import annotations

import argparse
import socket

import anyio
from mcp.server.mcpserver import MCPServer


def transport_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="HTTP: answer with JSON, not SSE")


def run(server: MCPServer, args: argparse.Namespace) -> None:
    if args.http:
        anyio.run(_serve_http, server, args.port, args.json)
    else:
        server.run("stdio")


async def _serve_http(server: MCPServer, port: int, json_response: bool = False) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    app = server.streamable_http_app(json_response=json_response)
    config = uvicorn.Config(app, log_level="error", lifespan="on")
    # listening before the port is announced: a client that connects at once waits in the
    # backlog until uvicorn accepts, instead of being refused while the app starts up
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])
