"""Per-call overhead of kode_nb's OpenAI-compatible adapter over a raw request with a shared client.

Usage (dev venv, from the repository root)::

    .venv/bin/python benchmarks/model_calls.py                      # instant local server only
    .venv/bin/python benchmarks/model_calls.py --live URL           # also a real llama-server
    .venv/bin/python benchmarks/model_calls.py --out -              # print, save nothing

1. **Instant local server** (a real socket on 127.0.0.1 answering every request at once with a
   recorded SSE answer): ``raw`` is one ``client.stream("POST", ...)`` with a shared
   ``httpx.AsyncClient``, reading every line; ``kode_nb`` is ``collect(model.stream(request))``
   with one ``OpenAIChatModel`` (its own client, reused). Calls alternate raw / kode_nb; the
   overhead is the median of the paired differences (robust to a loaded machine). Also shown: a whole
   one-turn ``Agent.run`` (tracing on) for reference. Target: overhead ≤ 1 ms.
2. **llama-server** (``--live URL``, e.g. what ``scripts/llama_server.sh start`` prints): the
   same two paths, each call's wall time minus the server's own reported ``timings``
   (``prompt_ms + predicted_ms``, read from the stream by a transport wrapper used by both
   paths), so the model's work cancels out. Target: the same ≤ 1 ms, within the noise of a
   shared 2-core machine.

Saves the report to ``benchmarks/results/model_calls.txt`` (``--out FILE`` elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kode_nb.models import ModelRequest, ModelSettings, OpenAIChatModel, UserMessage, collect  # noqa: E402

ANSWER = (ROOT / "tests" / "models" / "payloads" / "openai_text.txt").read_bytes()
MODELS = json.dumps(
    {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "llamacpp"}]}
).encode()
TARGET_MS = 1.0


async def instant_server() -> tuple[asyncio.Server, str]:
    """Answers POSTs with a recorded SSE answer and GET /models with a listing, at once."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                if head.startswith(b"GET"):
                    body, kind = MODELS, b"application/json"
                else:
                    body, kind = ANSWER, b"text/event-stream"
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + kind + b"\r\ncontent-length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)  # fmt: skip
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"


class Timings(httpx.AsyncBaseTransport):
    """Passes requests through, noting the server's ``timings`` (llama-server) of each answer."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.last_ms: float | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        outer = self

        class Scan(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for chunk in response.stream:  # type: ignore[union-attr]
                    if b'"timings"' in chunk:
                        found = re.search(rb'"prompt_ms":([\d.]+).*?"predicted_ms":([\d.]+)', chunk)
                        if found:
                            outer.last_ms = float(found.group(1)) + float(found.group(2))
                    yield chunk

            async def aclose(self) -> None:
                await response.aclose()

        return httpx.Response(response.status_code, headers=response.headers, stream=Scan(),
                              extensions=response.extensions)  # fmt: skip

    async def aclose(self) -> None:
        await self.inner.aclose()


def request_body(model: str, stream_usage: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hi."}],
        "stream": True,
        "max_tokens": 8,
    }
    if stream_usage:
        body["stream_options"] = {"include_usage": True}
    return body


async def paired(
    raw: Callable[[], Awaitable[float]], kode: Callable[[], Awaitable[float]], n: int
) -> tuple[list[float], list[float]]:
    for _ in range(5):  # warm up both (connections, caches)
        await raw()
        await kode()
    a, b = [], []
    for _ in range(n):
        a.append(await raw())
        b.append(await kode())
    return a, b


def line(name: str, samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=10)
    return (f"  {name:<28} median {statistics.median(samples) * 1e3:8.3f} ms   "
            f"p10 {q[0] * 1e3:8.3f}   p90 {q[-1] * 1e3:8.3f}   (n={len(samples)})")  # fmt: skip


async def bench_instant(out: Callable[[str], None], n: int) -> bool:
    server, url = await instant_server()
    client = httpx.AsyncClient()
    model = OpenAIChatModel("m", base_url=url, api_key_env=None)
    req = ModelRequest(system="", messages=(UserMessage(content="Say hi."),),
                       settings=ModelSettings(max_tokens=8))  # fmt: skip
    body = model.request_body(req)

    async def raw() -> float:
        t0 = time.perf_counter()
        async with client.stream("POST", url + "/chat/completions", json=body) as response:
            async for _ in response.aiter_lines():
                pass
        return time.perf_counter() - t0

    async def kode() -> float:
        t0 = time.perf_counter()
        await collect(model.stream(req))
        return time.perf_counter() - t0

    a, b = await paired(raw, kode, n)
    from kode_nb import ToolRegistry, define_tool
    from kode_nb.agents import Agent

    registry = ToolRegistry()

    def noop() -> str:
        """Do nothing."""
        return "ok"

    define_tool(noop, registry=registry, inline=True)
    agent = Agent(model=model, tools=[])
    runs = []
    for _ in range(n // 2):
        t0 = time.perf_counter()
        await agent.run("Say hi.")
        runs.append(time.perf_counter() - t0)
    overhead = statistics.median(y - x for x, y in zip(a, b, strict=True))
    p10 = statistics.quantiles(b, n=10)[0] - statistics.quantiles(a, n=10)[0]
    out("== 1. instant local server (127.0.0.1, recorded SSE answer, keep-alive)")
    out(line("raw request, shared client", a))
    out(line("kode_nb model.stream()", b))
    out(line("kode_nb Agent.run (1 turn)", runs))
    out(f"  difference of the p10s (least disturbed calls): {p10 * 1e3:.3f} ms")
    ok = overhead <= TARGET_MS / 1e3
    out(f"  overhead per call (median of paired differences): {overhead * 1e3:.3f} ms "
        f"(target <= {TARGET_MS} ms): "
        f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    await model.aclose()
    await client.aclose()
    server.close()
    return ok


async def bench_live(out: Callable[[str], None], url: str, n: int) -> bool:
    async with httpx.AsyncClient() as probe:
        model_id = (await probe.get(url + "/models")).json()["data"][0]["id"]
    raw_t, kode_t = Timings(), Timings()
    client = httpx.AsyncClient(transport=raw_t, timeout=120)
    model = OpenAIChatModel(model_id, base_url=url, api_key_env=None,
                            http_client=httpx.AsyncClient(transport=kode_t, timeout=120))  # fmt: skip
    req = ModelRequest(system="", messages=(UserMessage(content="Say hi."),),
                       settings=ModelSettings(max_tokens=8, temperature=0))  # fmt: skip
    body = model.request_body(req)
    walls: dict[str, list[float]] = {"raw": [], "kode": []}

    async def raw() -> float:
        t0 = time.perf_counter()
        async with client.stream("POST", url + "/chat/completions", json=body) as response:
            async for _ in response.aiter_lines():
                pass
        wall = time.perf_counter() - t0
        walls["raw"].append(wall)
        return wall - (raw_t.last_ms or 0) / 1e3

    async def kode() -> float:
        t0 = time.perf_counter()
        await collect(model.stream(req))
        wall = time.perf_counter() - t0
        walls["kode"].append(wall)
        return wall - (kode_t.last_ms or 0) / 1e3

    a, b = await paired(raw, kode, n)
    overhead = statistics.median(y - x for x, y in zip(a, b, strict=True))
    out(f"== 2. llama-server at {url} (model {model_id!r}, 8 tokens, temperature 0)")
    out(line("raw wall", walls["raw"][5:]))
    out(line("kode_nb wall", walls["kode"][5:]))
    out(line("raw wall - server timings", a))
    out(line("kode_nb wall - server timings", b))
    ok = overhead <= TARGET_MS / 1e3
    out(f"  overhead per call (median of paired differences): {overhead * 1e3:.3f} ms "
        f"(target <= {TARGET_MS} ms): "
        f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    await client.aclose()
    assert model.http_client is not None
    await model.http_client.aclose()
    return ok


async def main() -> tuple[list[str], str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", help="base URL of a running llama-server (…/v1)")
    parser.add_argument("-n", type=int, default=400, help="calls per path (instant server)")
    parser.add_argument("--live-n", type=int, default=30, help="calls per path (llama-server)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "model_calls.txt"))
    args = parser.parse_args()
    lines: list[str] = []

    def out(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    out(f"kode_nb model-call overhead, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"Python {platform.python_version()}, httpx {httpx.__version__}, "
        f"{platform.machine()} x{__import__('os').cpu_count()}")  # fmt: skip
    verdicts = [await bench_instant(out, args.n)]
    if args.live:
        verdicts.append(await bench_live(out, args.live.rstrip("/"), args.live_n))
    out(f"SUMMARY: {sum(verdicts)}/{len(verdicts)} targets passed")
    return lines, args.out


if __name__ == "__main__":
    report, where = asyncio.run(main())
    if where != "-":
        from _provenance import save

        save(where, "\n".join(report))
