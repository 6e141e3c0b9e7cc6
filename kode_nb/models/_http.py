"""HTTP plumbing shared by the provider adapters: keys, retries, Server-Sent Events, redaction.

:class:`HttpModel` is the base of the adapters. :meth:`HttpModel._sse` POSTs a JSON body and yields
the response's SSE events. Before any event has been yielded it retries HTTP 429 and 5xx
responses and connection failures, waiting ``retry_base_delay * 2**attempt`` (capped by
``retry_max_delay``), or what the server's ``Retry-After``/``retry-after-ms`` header asks for;
other 4xx raise :class:`ModelHTTPError` at once with the provider's message. Once the stream
has started nothing is retried (events may already be on screen): a connection lost or a
stream ending early raises :class:`ModelProtocolError`.

Time limits (``ModelSettings``): ``first_byte_timeout`` for a streamed answer to start (a
non-streamed one gets ``timeout``), ``timeout`` between received lines, ``deadline`` for the
whole wait for the answer to start across retries and backoff, and ``total_timeout`` for the
whole call, streaming included. They are enforced here, on any transport; an answer that did not
start in time is not retried. SSE comment lines (``: keep-alive``, ``: ping``) and blank lines
are not progress: they neither start the answer nor restart the idle timer. ``allowance`` (the
time a server may need to read a long prompt, from the profile's ``prompt_rate``) is added to
the first-response limit and the deadline. A JSON answer (by ``Content-Type``) is yielded whole
as one ``SSEEvent("json", body)``.

Each model keeps one ``httpx.AsyncClient`` per event loop (connections are reused across calls),
closed by :meth:`HttpModel.aclose`, or at interpreter exit for those still open.

API keys are read from the environment at first use, never stored in reprs, and scrubbed from
every error message and body.
"""

from __future__ import annotations

import asyncio
import atexit
import email.utils
import json
import logging
import os
import random
import re
import time
import weakref
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from kode_nb._redact import register_secret
from kode_nb.errors import ConfigurationError
from kode_nb.models.base import ModelSettings
from kode_nb.models.errors import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelProtocolError,
)

__all__ = ["HttpModel", "SSEEvent", "close_models", "redact"]

logger = logging.getLogger("kode_nb.models")

_BODY_LIMIT = 2000
_DRAIN_WAIT = 0.5
"""Seconds to read the rest of a body after the end marker, to keep the connection."""
_SECRET_PATTERNS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 [redacted]"),
    (re.compile(r"\bsk-[A-Za-z0-9_*-]{6,}"), "sk-[redacted]"),
    (
        re.compile(r"(?i)\b((?:x-)?api[-_]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{6,}"),
        r"\1[redacted]",
    ),
)


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with the given secrets and anything shaped like a key or token replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One Server-Sent Event."""

    event: str
    """The ``event:`` field (``"message"`` when absent)."""
    data: str
    """The ``data:`` lines joined by newlines."""


class HttpModel:
    """Base of the provider adapters: configuration, keys, and the retrying SSE request."""

    provider = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        api_key_env: str | None,
        http_client: httpx.AsyncClient | None,
        retry_base_delay: float,
        retry_max_delay: float,
        name: str | None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"{type(self).__name__}: model must be a non-empty string")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"{type(self).__name__}: base_url must start with http:// or https://, "
                f"got {base_url!r}"
            )
        if retry_base_delay < 0 or retry_max_delay < 0:
            raise ConfigurationError("retry_base_delay and retry_max_delay must be >= 0")
        if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
            raise ConfigurationError(
                f"http_client must be an httpx.AsyncClient, got {type(http_client).__name__}"
            )
        self.model = model.strip()
        """The provider's model id (``gpt-4.1-mini``)."""
        self.name = name or f"{self.provider}:{self.model}"
        self.base_url = base_url.rstrip("/")
        """Where requests go (``…/v1``)."""
        self.api_key_env = api_key_env
        """The environment variable the key is read from at first use (``None``: no key)."""
        self.http_client = http_client
        """The client to use; ``None`` = the model's own (one per event loop, reused)."""
        self._own: httpx.AsyncClient | None = None
        self._own_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self.retry_base_delay = retry_base_delay
        """First backoff delay in seconds (doubled on each retry)."""
        self.retry_max_delay = retry_max_delay
        """Longest wait between retries, also for ``Retry-After``."""
        self._api_key = api_key
        register_secret(api_key)  # shown nowhere: not in views, traces or error messages

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    async def _client(self) -> httpx.AsyncClient:
        """The client for this call: the one given, or the model's own for the running loop
        (made at first use; a client made on another loop is left behind, as it cannot be used
        there). The own client is closed when the loop shuts down its async generators
        (``asyncio.run`` and runners do), if not before."""
        if self.http_client is not None:
            return self.http_client
        loop = asyncio.get_running_loop()
        own_loop = self._own_loop() if self._own_loop is not None else None
        if self._own is None or self._own.is_closed or own_loop is not loop:
            self._own = client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=None))
            self._own_loop = weakref.ref(loop)
            self._guard = _close_at_loop_end(client)
            await self._guard.__anext__()  # the loop now tracks it (shutdown_asyncgens)
            _OPEN.add(self)
        return self._own

    async def aclose(self) -> None:
        """Close the model's own HTTP client (a client given to it stays open); the next call
        makes a new one."""
        own, self._own = self._own, None
        guard, self._guard = self._guard, None
        _OPEN.discard(self)
        if own is not None and not own.is_closed:
            await own.aclose()
        if guard is not None:
            await guard.aclose()

    def close(self) -> None:
        """:meth:`aclose` from synchronous code (e.g. at kernel shutdown): runs it on the
        client's loop when that loop is not running, schedules it when it is."""
        own_loop = self._own_loop() if self._own_loop is not None else None
        if self._own is None:
            return
        if own_loop is None or own_loop.is_closed():
            self._own = self._guard = None  # its loop is gone, and closed it at its end
            _OPEN.discard(self)
            return
        if own_loop.is_running():
            own_loop.call_soon_threadsafe(lambda: own_loop.create_task(self.aclose()))
        else:
            own_loop.run_until_complete(self.aclose())

    def _key(self) -> str | None:
        """The API key: given, or read from ``api_key_env`` now; missing -> ConfigurationError."""
        if self._api_key:
            return self._api_key
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise ConfigurationError(
                f"{self.name}: no API key. Set the environment variable {self.api_key_env} "
                f"(e.g. with %env {self.api_key_env}=...) or pass api_key=... to resolve_model()."
            )
        register_secret(key)  # whatever the variable's name
        return key

    async def _sse(
        self,
        path: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        settings: ModelSettings,
        secrets: Sequence[str] = (),
        params: Mapping[str, str] | None = None,
        allowance: float = 0.0,
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST ``body``; yield the answer's SSE events, or one ``SSEEvent("json", body)`` when
        the server answered ``application/json`` (a non-streamed answer). ``allowance``: extra
        seconds for the answer to start (a long prompt to read)."""
        url = self.base_url + path
        streamed = bool(body.get("stream"))
        # the waits are enforced here, so they hold on any transport; httpx only backs them up
        timeout = httpx.Timeout(settings.timeout, read=None)
        wait = (settings.first_byte_timeout if streamed else settings.timeout) + allowance
        limit = None if settings.deadline is None else settings.deadline + allowance
        started = time.monotonic()
        total = settings.total_timeout
        until = None if total is None else started + total
        client = await self._client()
        attempt = 0
        while True:
            left = None if limit is None else limit - (time.monotonic() - started)
            if until is not None:
                rest = until - time.monotonic()
                left = rest if left is None else min(left, rest)
            this_wait = wait if left is None else max(min(wait, left), 0.001)
            request = client.build_request(
                "POST", url, json=body, headers=dict(headers), params=params, timeout=timeout
            )
            response: httpx.Response | None = None
            lines: _Lines | None = None
            try:
                try:
                    with anyio.fail_after(this_wait):
                        response = await client.send(request, stream=True)
                        if response.status_code >= 400:
                            text = (await response.aread()).decode("utf-8", "replace")
                        else:
                            lines = _Lines(response, streamed)
                            await lines.start()
                except TimeoutError:
                    if response is not None:
                        await response.aclose()
                    comments = lines.comments if lines is not None else 0
                    raise ModelConnectionError(
                        self._silence(
                            url,
                            this_wait,
                            wait,
                            attempt,
                            response is not None,
                            comments,
                            total
                            if until is not None and time.monotonic() >= until - 0.01
                            else None,
                            "first_byte_timeout" if streamed else "timeout",
                        )
                    ) from None
                if lines is not None:
                    try:
                        async for event in self._events(
                            lines, secrets, settings.timeout, until, total
                        ):
                            yield event
                    except GeneratorExit:  # the reader stopped at its end marker ([DONE])
                        await lines.drain(_DRAIN_WAIT)  # so the connection can be reused
                        raise
                    return
                assert response is not None
                status = response.status_code
                text = redact(text, secrets)[:_BODY_LIMIT]
                if not (status == 429 or status >= 500) or attempt >= settings.max_retries:
                    raise ModelHTTPError(
                        status,
                        text,
                        model=self.name,
                        message=error_message(text),
                        attempts=attempt + 1,
                    )
                delay = self._delay(response.headers, attempt)
                why = f"HTTP {status}"
                failure: ModelError = ModelHTTPError(
                    status,
                    text,
                    model=self.name,
                    message=error_message(text),
                    attempts=attempt + 1,
                )
            except httpx.TransportError as exc:  # no response (errors mid-stream are converted)
                detail = redact(str(exc), secrets) or type(exc).__name__
                failure = ModelConnectionError(
                    f"{self.name}: no response from {url}: {detail} "
                    f"(after {attempt + 1} attempt(s))"
                )
                if attempt >= settings.max_retries:
                    raise failure from None
                delay = self._delay(httpx.Headers(), attempt)
                why = type(exc).__name__
            finally:
                if response is not None:
                    await response.aclose()
            if until is not None and time.monotonic() + delay >= until:
                raise failure from None
            if limit is not None and time.monotonic() - started + delay >= limit:
                logger.info("%s: no retry, the deadline of %g s would pass", self.name, limit)
                raise failure from None
            attempt += 1
            logger.info(
                "%s: %s, retry %d of %d in %.2f s",
                self.name,
                why,
                attempt,
                settings.max_retries,
                delay,
            )
            await anyio.sleep(delay)

    def _silence(
        self,
        url: str,
        waited: float,
        wait: float,
        attempt: int,
        headers: bool,
        comments: int = 0,
        total: float | None = None,
        first: str = "first_byte_timeout",
    ) -> str:
        """Why no answer came in time; ``first``: the setting that limits the wait for the
        first response (``timeout`` for a whole JSON answer)."""
        what = "no answer started" if headers else "no response"
        if comments:
            what += f" (only {comments} keep-alive comment line(s))"
        cap = "total_timeout" if total is not None else (first if waited >= wait else "deadline")
        return (
            f"{self.name}: {what} from {url} within {waited:.3g} s ({cap}, attempt "
            f"{attempt + 1}); a slow local model may need a longer ModelSettings({cap}=...)"
        )

    async def _events(
        self,
        lines: _Lines,
        secrets: Sequence[str],
        idle: float,
        until: float | None = None,
        total: float | None = None,
    ) -> AsyncIterator[SSEEvent]:
        count = 0
        if lines.json_body is not None:
            yield SSEEvent("json", lines.json_body)
            return
        try:
            async for event in iter_sse(lines.iterate(idle, until)):
                count += 1
                yield event
        except (httpx.TransportError, httpx.StreamError) as exc:
            detail = redact(str(exc), secrets) or type(exc).__name__
            raise ModelProtocolError(
                f"{self.name}: the response stream was cut off after {count} event(s): {detail}"
            ) from None
        except TimeoutError:
            if until is not None and time.monotonic() >= until - 0.01:
                raise ModelConnectionError(
                    f"{self.name}: the model call did not finish within {total:g} s "
                    f"(ModelSettings.total_timeout), after {count} event(s)"
                ) from None
            only = f", only {lines.comments} keep-alive comment(s)," if lines.comments else ""
            raise ModelProtocolError(
                f"{self.name}: the response stream stalled: nothing{only} arrived for {idle:g} s "
                f"after {count} event(s) (ModelSettings.timeout)"
            ) from None

    def _delay(self, headers: httpx.Headers, attempt: int) -> float:
        asked = retry_after(headers)
        if asked is not None:
            return min(asked, self.retry_max_delay)
        delay = self.retry_base_delay * (2.0**attempt) * random.uniform(0.8, 1.2)
        return min(delay, self.retry_max_delay)


class _Lines:
    """The body of a successful answer: its first data line read (or the whole JSON body), then
    the rest line by line. Only data lines are progress: comment lines (``: keep-alive``) and
    blank lines neither start the answer nor restart the idle timer. The body is read in the
    chunks the server sends (one time limit per chunk, not per line)."""

    def __init__(self, response: httpx.Response, streamed: bool) -> None:
        self.response = response
        self.streamed = streamed
        self.json_body: str | None = None
        self.comments = 0
        """Comment lines received so far."""
        self._chunks = response.aiter_text().__aiter__()
        self._lines: deque[str] = deque()
        self._tail = ""
        self._ended = False
        self._progressed = False

    def _progress(self, line: str) -> bool:
        if line.startswith(":"):
            self.comments += 1
            return False
        return bool(line.strip())

    async def _read(self) -> bool:
        """Read one chunk into whole lines; ``False`` at the end of the body. Whether the chunk
        held a data line is in ``_progressed``."""
        try:
            text = self._tail + await self._chunks.__anext__()
        except StopAsyncIteration:
            self._ended = True
            if self._tail:
                self._lines.append(self._tail)
                self._progressed = self._progress(self._tail)
                self._tail = ""
            return False
        hold = text.endswith("\r")  # may be the first half of a \r\n split across chunks
        if hold:
            text = text[:-1]
        parts = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._tail = parts.pop() + ("\r" if hold else "")
        self._progressed = False
        for line in parts:
            if self._progress(line):
                self._progressed = True
        self._lines.extend(parts)
        return True

    async def start(self) -> None:
        """Wait for the first data line; a JSON answer (by Content-Type, or to a non-streamed
        request) is read whole."""
        kind = self.response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind.endswith("json") or (not self.streamed and kind != "text/event-stream"):
            self.json_body = (await self.response.aread()).decode("utf-8", "replace")
            return
        while await self._read():  # up to a chunk with a data line; iterate() reads the rest
            if self._progressed:
                return

    async def drain(self, wait: float) -> None:
        """Read what is left of the body (at most ``wait`` seconds): a response read to its end
        gives its connection back to the pool, one closed early loses it."""
        with anyio.move_on_after(wait):
            try:
                while not self._ended and await self._read():
                    pass
            except (httpx.TransportError, httpx.StreamError):
                pass

    async def iterate(self, idle: float, until: float | None = None) -> AsyncIterator[str]:
        """The lines; TimeoutError when no data line came for ``idle`` seconds, or at the
        monotonic time ``until``."""
        last = time.monotonic()
        while True:
            while self._lines:
                yield self._lines.popleft()
            if self._ended:
                return
            now = time.monotonic()
            wait = last + idle - now
            if until is not None:
                wait = min(wait, until - now)
            with anyio.fail_after(max(wait, 0.0)):
                more = await self._read()
            if self._progressed:
                last = time.monotonic()
            if not more and not self._lines:
                return


async def _close_at_loop_end(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Started once and left suspended: the loop closes it (and so ``client``) when it shuts
    down its async generators, before it closes."""
    try:
        yield
    finally:
        if not client.is_closed:
            await client.aclose()


_OPEN: weakref.WeakSet[HttpModel] = weakref.WeakSet()
"""Models with an HTTP client of their own, closed at exit."""


@atexit.register
def close_models() -> None:
    """Close the HTTP client of every model that has one (:meth:`HttpModel.close`): at
    interpreter exit, when the kernel extension is unloaded, between tests."""
    for model in list(_OPEN):
        try:
            model.close()
        except Exception:  # shutting down goes on whatever a transport does
            _OPEN.discard(model)


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks to wait (``retry-after-ms``, ``Retry-After`` seconds or date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[SSEEvent]:
    """Parse SSE lines into events (``event:``/``data:`` fields; comments and ids ignored)."""
    event = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
    if data:
        yield SSEEvent(event or "message", "\n".join(data))


def error_message(body: str) -> str:
    """The provider's error message from an error body (OpenAI, Anthropic, Ollama shapes)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return body.strip()[:500]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        kind = error.get("type") or error.get("code")
        return f"{kind}: {message}" if kind and message else message or json.dumps(error)
    if isinstance(error, str):
        return error
    if isinstance(payload, dict) and isinstance(payload.get("message"), str):
        return str(payload["message"])
    return body.strip()[:500]


def parse_json(data: str, what: str, model: str) -> Any:
    """``json.loads(data)``, or :class:`ModelProtocolError` naming the model and the event."""
    try:
        return json.loads(data)
    except ValueError:
        raise ModelProtocolError(f"{model}: malformed JSON in the {what}: {data[:200]!r}") from None
