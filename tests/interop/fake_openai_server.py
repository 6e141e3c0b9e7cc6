"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for checking what a
framework's captured trace says against what the server received.

Each reply of the script answers one ``POST .../chat/completions``: a string (the final text)
or a list of ``(tool_name, arguments)`` pairs (tool calls). Every request body is kept in
``requests``, every usage the server reported in ``usage`` (one entry per request; ``None``
when the request did not ask for usage: a stream without ``stream_options.include_usage``).
Token counts differ per reply (``10 * n + 7`` in, ``n + 3`` out for the n-th reply, from 1), so
a trace that loses or repeats a model call cannot add up to the same totals by chance.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "fake_openai"]

Reply = str | Sequence[tuple[str, dict[str, Any]]]


class FakeOpenAI:
    """The script, what was received, and the server's address (``base_url``)."""

    def __init__(self, script: Sequence[Reply], model: str = "fake-model") -> None:
        self.script = list(script)
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.usage: list[dict[str, int] | None] = []
        self.base_url = ""
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ what was received

    def tool_names(self, n: int) -> list[str]:
        """The names of the tools offered in request ``n``."""
        return [t["function"]["name"] for t in self.requests[n].get("tools") or []]

    def reported(self) -> tuple[int | None, int | None]:
        """Total input and output tokens the server reported (``None``: some were unknown)."""
        if any(u is None for u in self.usage):
            return None, None
        return (
            sum(u["prompt_tokens"] for u in self.usage if u),
            sum(u["completion_tokens"] for u in self.usage if u),
        )

    # ------------------------------------------------------------------ answering

    def answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        with self.lock:
            self.requests.append(body)
            n = len(self.requests)
            if not self.script:
                raise AssertionError(f"unexpected request #{n}: the script is used up")
            reply = self.script.pop(0)
        usage = {"prompt_tokens": 10 * n + 7, "completion_tokens": n + 3}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        stream = bool(body.get("stream"))
        wants_usage = not stream or bool((body.get("stream_options") or {}).get("include_usage"))
        with self.lock:
            self.usage.append(usage if wants_usage else None)
        if isinstance(reply, str):
            message: dict[str, Any] = {"role": "assistant", "content": reply}
            finish = "stop"
        else:
            calls = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(reply)
            ]
            message, finish = (
                {"role": "assistant", "content": None, "tool_calls": calls},
                "tool_calls",
            )
        out = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1700000000,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if wants_usage:
            out["usage"] = usage
        return out, stream


def _chunks(full: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A chat completion as the stream of chunks a server sends."""
    base = {k: full[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = full["choices"][0]
    message = choice["message"]
    yield base | {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    if message.get("content"):
        delta = {"content": message["content"]}
        yield base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    for i, call in enumerate(message.get("tool_calls") or []):
        delta = {"tool_calls": [{"index": i, **call}]}
        yield base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    if "usage" in full:
        yield base | {"choices": [], "usage": full["usage"]}


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                full, stream = server.answer(body)
            except AssertionError as exc:
                self._send(500, {"error": {"message": str(exc)}})
                return
            if not stream:
                self._send(200, full)
                return
            data = (
                b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in _chunks(full))
                + b"data: [DONE]\n\n"
            )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def fake_openai(script: Sequence[Reply], model: str = "fake-model") -> Iterator[FakeOpenAI]:
    """Serve ``script`` on 127.0.0.1 (a free port) for the block."""
    fake = FakeOpenAI(script, model)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
