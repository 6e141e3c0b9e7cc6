"""HTTP plumbing shared by the provider adapters: keys, retries, Server-Sent Events, redaction.

:class:`HttpModel` is the base of the adapters. :meth:`HttpModel._sse` POSTs a JSON body and yields
the response's SSE events. Before any event has been yielded it retries HTTP 429 and 5xx
responses and connection failures, waiting ``retry_base_delay * 2**attempt`` (capped by
``retry_max_delay``), or what the server's ``Retry-After``/``retry-after-ms`` header asks for;
other 4xx raise :class:`ModelHTTPError` at once with the provider's message. Once the stream
has started nothing is retried (events may already be on screen): a connection lost or a
stream ending early raises :class:`ModelProtocolError`.

API keys are read from the environment at first use, never stored in reprs, and scrubbed from
every error message and body.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from kode_nb._redact import register_secret
from kode_nb.errors import ConfigurationError
from kode_nb.models.base import ModelSettings
from kode_nb.models.errors import ModelConnectionError, ModelHTTPError, ModelProtocolError

__all__ = ["HttpModel", "SSEEvent", "redact"]

logger = logging.getLogger("kode_nb.models")

_BODY_LIMIT = 2000
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
        """The client to use; ``None`` = a new client per request."""
        self.retry_base_delay = retry_base_delay
        """First backoff delay in seconds (doubled on each retry)."""
        self.retry_max_delay = retry_max_delay
        """Longest wait between retries, also for ``Retry-After``."""
        self._api_key = api_key
        register_secret(api_key)  # shown nowhere: not in views, traces or error messages

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

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
    ) -> AsyncGenerator[SSEEvent, None]:
        url = self.base_url + path
        timeout = httpx.Timeout(settings.timeout)
        client = self.http_client or httpx.AsyncClient()
        attempt = 0
        try:
            while True:
                try:
                    async with client.stream(
                        "POST", url, json=body, headers=dict(headers), timeout=timeout
                    ) as response:
                        if response.status_code >= 400:
                            text = (await response.aread()).decode("utf-8", "replace")
                            text = redact(text, secrets)[:_BODY_LIMIT]
                            status = response.status_code
                            if (status == 429 or status >= 500) and attempt < settings.max_retries:
                                delay = self._delay(response.headers, attempt)
                                wait = f"HTTP {status}"
                            else:
                                raise ModelHTTPError(
                                    status, text, model=self.name, message=error_message(text)
                                )
                        else:
                            async for event in self._events(response, secrets):
                                yield event
                            return
                except httpx.TransportError as exc:  # no response (errors mid-stream are converted)
                    if attempt >= settings.max_retries:
                        raise ModelConnectionError(
                            f"{self.name}: no response from {url}: "
                            f"{redact(str(exc), secrets) or type(exc).__name__} (after {attempt + 1} attempt(s))"
                        ) from None
                    delay = self._delay(httpx.Headers(), attempt)
                    wait = type(exc).__name__
                attempt += 1
                logger.info(
                    "%s: %s, retry %d of %d in %.2f s",
                    self.name,
                    wait,
                    attempt,
                    settings.max_retries,
                    delay,
                )
                await anyio.sleep(delay)
        finally:
            if self.http_client is None:
                await client.aclose()

    async def _events(
        self, response: httpx.Response, secrets: Sequence[str]
    ) -> AsyncIterator[SSEEvent]:
        count = 0
        try:
            async for event in iter_sse(response.aiter_lines()):
                count += 1
                yield event
        except (httpx.TransportError, httpx.StreamError) as exc:
            detail = redact(str(exc), secrets) or type(exc).__name__
            raise ModelProtocolError(
                f"{self.name}: the response stream was cut off after {count} event(s): {detail}"
            ) from None

    def _delay(self, headers: httpx.Headers, attempt: int) -> float:
        asked = retry_after(headers)
        if asked is not None:
            return min(asked, self.retry_max_delay)
        delay = self.retry_base_delay * (2.0**attempt) * random.uniform(0.8, 1.2)
        return min(delay, self.retry_max_delay)


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
