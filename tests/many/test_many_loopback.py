"""Everything kode_nb (or these tests) starts listens on 127.0.0.1 only: a local Ray that
``run_many(engine="ray")`` starts, a Dask ``LocalCluster`` as the tests start it, and the MCP
server. Each test lists the listening sockets of the processes involved (psutil) and checks
every address is a loopback one."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil", reason="lists listening sockets")

pytestmark = pytest.mark.anyio


def listening(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """``(pid, process name, address, port)`` of every listening TCP socket of ``pids``."""
    out = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            try:
                name = psutil.Process(conn.pid).name()
            except psutil.NoSuchProcess:
                name = "?"
            out.append((conn.pid, name, conn.laddr.ip, conn.laddr.port))
    return out


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def family() -> set[int]:
    me = psutil.Process()
    return {me.pid} | {p.pid for p in me.children(recursive=True)}


_RAY = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import psutil
from many_helpers import square_agent
from kode_nb.many import run_many
from test_many_loopback import family, listening

async def main():
    h = run_many(square_agent(), [{"n": 3}], prompt="square {n}", engine="ray", cache=False)
    df = await h
    print(json.dumps({"output": df["output"][0], "sockets": listening(family())}), flush=True)

asyncio.run(main())
import ray
ray.shutdown()
"""


def test_a_ray_that_run_many_starts_listens_on_loopback_only() -> None:
    pytest.importorskip("ray", reason="needs the ray extra")
    here = str(Path(__file__).parent)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_RAY), here],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["output"] == "squared: 9"
    names = {s[1] for s in report["sockets"]}
    assert {"gcs_server", "raylet"} <= names, report["sockets"]  # it did list Ray's servers
    wide = [s for s in report["sockets"] if not is_loopback(s[2])]
    assert not wide, f"listening beyond loopback: {wide}"


def test_a_dask_cluster_as_the_tests_start_it_listens_on_loopback_only() -> None:
    distributed = pytest.importorskip("distributed", reason="needs the dask extra")
    from many_helpers import local_cluster

    with local_cluster(distributed) as cluster, distributed.Client(cluster) as client:
        assert client.submit(lambda: 2 + 2).result(60) == 4
        sockets = listening(family())
    assert len({s[0] for s in sockets}) >= 3, sockets  # the scheduler and both workers' processes
    wide = [s for s in sockets if not is_loopback(s[2])]
    assert not wide, f"listening beyond loopback: {wide}"


async def test_the_mcp_server_listens_on_loopback_only() -> None:
    from kode_nb import ToolRegistry, define_tool
    from kode_nb.mcp import serve

    registry = ToolRegistry(name="probe")

    def ping() -> str:
        """Answer."""
        return "pong"

    define_tool(ping, registry=registry)
    handle = await serve(registry, port=0)
    try:
        sockets = [s for s in listening(family()) if s[3] == handle.port]
    finally:
        await handle.aclose()
    assert sockets, "the server's socket was not found"
    assert all(is_loopback(s[2]) for s in sockets), sockets
