"""One model call of a run: request, stream, usage, trace and events (internal).

The call is bounded by the run's time limit (``asyncio.wait_for`` on what is left of it). A
:class:`~kode_nb.models.ModelError` — or any other exception from a model object — ends the run
with status ``error``; developer mistakes (:class:`~kode_nb.errors.KodeUsageError`, e.g. a
missing API key) and cancellation propagate.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from kode_nb.agents._events import ModelResponded, TextDelta
from kode_nb.agents._run import RunState
from kode_nb.errors import KodeUsageError
from kode_nb.models._cost import (
    Price,
    catalog_price,
    cost_of,
    estimate_tokens,
    json_chars,
    own_price,
)
from kode_nb.models.base import (
    Message,
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    RequestSent,
    collect,
)
from kode_nb.models.errors import ModelError
from kode_nb.stepping._step_loop import pause_model_request
from kode_nb.traces._trace import Span

__all__ = ["model_turn", "time_up"]


def time_up(st: RunState) -> None:
    """End the run with status ``time_limit``."""
    st.status = "time_limit"
    st.error = f"the run reached its time limit of {st.agent.time_limit or 0:g} s"


def _failed(st: RunState, span: Span, kind: str, message: str) -> None:
    st.status = "error"
    name = st.model.name
    where = "" if name in message else f" from {name}"  # name the model once
    st.error = f"model error ({kind}){where}: {message}"
    span.finish("error", st.error)


async def model_turn(
    st: RunState, n: int, turn: Span, settings: ModelSettings
) -> ModelResponse | None:
    """One model call; ``None`` when it failed or hit the time limit (the run's status is set)."""
    new = st.messages[st.sent :]
    span = turn.child(
        "model_call",
        f"chat {st.model.name}",
        model=st.model.name,
        turn=n,
        messages=st.parts.messages(new),
        message_count=len(st.messages),
        tools=[s.name for s in st.specs],
    )
    st.sent = len(st.messages)
    try:
        return await _call(st, n, span, new, settings)
    finally:  # the trace keeps what this call added to the previous one (kode_nb.traces)
        st.requests.store(span)


async def _call(
    st: RunState, n: int, span: Span, new: list[Message], settings: ModelSettings
) -> ModelResponse | None:
    request = ModelRequest(
        system=st.system, messages=tuple(st.messages), tools=st.specs, settings=settings
    )

    def on_text(text: str) -> None:
        st.emit(TextDelta, turn=n, text=text)
        if st.on_text is not None:
            st.on_text(text)

    span.set(**_neutral(st, request))  # an adapter's wire body replaces it
    if st.stepper is not None:
        stepped = await pause_model_request(
            st, span, request, span.attributes["request"]["body"], n
        )
        if stepped is None:  # stopped: the run's task is being cancelled
            raise asyncio.CancelledError
        if stepped is not request:  # a message was edited: record what goes
            request = stepped
            span.set(
                messages=st.parts.messages(st.messages[len(st.messages) - len(new) :]),
                **_neutral(st, request),
            )

    def on_sent(sent: RequestSent) -> None:
        wire = sent.as_dict()
        span.set(request=wire, request_tokens_estimate=estimate_tokens(wire["body"]))

    t0 = time.perf_counter()
    try:
        response = await _with_deadline(
            _stream(st.model, request, on_text, on_sent), st.remaining()
        )
    except asyncio.TimeoutError:
        if st.deadline is None or st.loop.time() < st.deadline - 0.001:
            _failed(st, span, "TimeoutError", "the model call timed out")
            return None
        time_up(st)
        span.finish("cancelled", st.error)
        return None
    except ModelError as exc:
        _failed(st, span, type(exc).__name__, str(exc))
        return None
    except (asyncio.CancelledError, KeyboardInterrupt, KodeUsageError):
        raise
    except Exception as exc:  # a model object with a bug: the run ends, the kernel lives on
        _failed(st, span, type(exc).__name__, str(exc))
        return None
    latency = time.perf_counter() - t0
    st.usage = st.usage.with_model_call(response.usage, len(response.tool_calls))
    recovered = response.recovered_text is not None
    usage = {
        "input_tokens": response.usage.input_tokens,
        "output_tokens": response.usage.output_tokens,
    }
    span.set(
        response={
            "text": response.text,
            "tool_calls": [
                {
                    "id": c.id,
                    "name": c.name,
                    "arguments": c.arguments,
                    **({"recovered_from_text": True} if recovered else {}),
                }
                for c in response.tool_calls
            ],
        },
        usage=usage,
        stop_reason=response.stop_reason,
        latency=latency,
        cost=cost_of(_price(st.model, response), usage),
    )
    if recovered:
        span.set(recovered_from_text=response.recovered_text)
        span.event(
            "tool_calls_recovered",
            text=response.recovered_text,
            calls=[c.name for c in response.tool_calls],
        )
    if response.notices:
        span.set(notices=list(response.notices))
        for notice in response.notices:
            span.event("model_notice", text=notice)
    span.finish("ok")
    st.emit(
        ModelResponded,
        turn=n,
        text=response.text,
        tool_calls=response.tool_calls,
        usage=response.usage,
        stop_reason=response.stop_reason,
        latency=latency,
    )
    return response


def _neutral(st: RunState, request: ModelRequest) -> dict[str, Any]:
    """The provider-neutral request (what an offline model receives) as span attributes; the
    messages and tool schemas are the run's redacted forms (:mod:`._request_parts`)."""
    messages, tools, listed = st.parts.listed(request)
    rest = {"system": request.system, "settings": request.settings.describe()}
    body = {"system": rest["system"], "messages": messages, "tools": tools, **rest}
    # the compact JSON text of body: rest's, with the two lists and their keys and commas
    chars = json_chars(rest) + listed + len('"messages":,"tools":,')
    wire = {"provider": "neutral", "path": None, "model": st.model.name, "body": body}
    return {"request": wire, "request_tokens_estimate": math.ceil(chars / 4)}


def _price(model: Model, response: ModelResponse) -> Price | None:
    """The price of one model call: yours (:func:`set_price`) by the model's name or its wire
    id; else, for a call that went over HTTP, the catalog's for the wire id at the URL it went
    to (a local server's URL is no provider's: no price). An offline model has only yours."""
    found = own_price(model.name)
    sent = response.request
    if found is not None or sent is None:
        return found
    found = own_price(sent.model)
    url = getattr(model, "base_url", None)
    if found is None and isinstance(url, str):
        found = catalog_price(sent.model, api_url=url)
    return found


async def _watch(
    stream: AsyncIterator[ModelEvent], on_sent: Callable[[RequestSent], None]
) -> AsyncGenerator[ModelEvent, None]:
    async for event in stream:
        if isinstance(event, RequestSent):
            on_sent(event)
        yield event


async def _stream(
    model: Model, request: ModelRequest, on_text: Any, on_sent: Callable[[RequestSent], None]
) -> ModelResponse:
    stream = model.stream(request)
    watched = _watch(stream, on_sent)
    try:
        return await collect(watched, on_text=on_text)
    finally:
        await watched.aclose()
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _with_deadline(coro: Any, remaining: float | None) -> ModelResponse:
    if remaining is None:
        result: ModelResponse = await coro
        return result
    return await asyncio.wait_for(coro, max(remaining, 0.0))
