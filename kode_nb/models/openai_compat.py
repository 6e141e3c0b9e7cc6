"""OpenAI-compatible Chat Completions over httpx, streaming (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

Neutral messages become Chat Completions messages: the system prompt a ``system`` message,
assistant tool calls ``tool_calls`` entries (``function.name``/``function.arguments``), tool results
``role: "tool"`` messages with their ``tool_call_id``. Tool messages carry text only, so an image
in a tool result becomes a placeholder there and, when ``supports_images`` is true, is attached
in a ``user`` message (``image_url`` data URI) after the turn's tool messages. For a server whose
template drops ``tool`` messages (``ServerProfile.tool_results_as_user``: llama-cpp-python) a
turn's results go in one ``user`` message instead, each under ``Result of NAME (call ID):``.

The stream (``stream: true`` with ``stream_options.include_usage``) is ``data: {chunk}`` events
ending with ``data: [DONE]``: text from ``choices[0].delta.content``; tool calls assembled per
``delta.tool_calls[].index`` from their ``id``, ``function.name`` and ``function.arguments``
pieces; usage from the final chunk (``None`` counts when the server sends none). Arguments are
passed through as text, even when malformed. A whole JSON answer (``stream=False``, or a server
that answers a streamed request with JSON) gives the same events from ``choices[0].message``.

Servers differ (:mod:`kode_nb.models._profiles`, ``docs/model-servers.md``): ``tool_choice`` is
always sent with tools (``"auto"`` unless set; a form the server does not honour is replaced by
the closest one it does, with a :class:`~kode_nb.models.Notice`, never dropped); an assistant turn
with only tool calls has ``"content": ""``; a streamed request answered with no events at all is
retried once without streaming, with a notice, and the model then sends its requests with tools
unstreamed.

A server that is not a hosted provider is identified before the first request, once per base URL
for the process (:mod:`kode_nb.models._servers`): its ``GET /models`` listing names the profile
(when none was given) and the model ids it serves; asking a server whose profile checks ids for
one it does not list raises :class:`~kode_nb.models.ModelNotFoundError` naming those it does.

Tool calls written as text (:mod:`kode_nb.models._text_calls`): when the server returned no
``tool_calls`` and the answer text is nothing but calls to offered tools, the text is taken back
(:class:`~kode_nb.models.TextCallsRecovered`, with the raw text) and the calls are yielded as
calls; ``text_calls=False`` (or a profile without ``text_calls``) turns this off, and a request
whose ``tool_choice`` is ``"none"`` keeps such text as its answer. A recovered call
whose arguments do not fit its tool is asked for again with that tool forced where the server can
force one, so that its grammar writes fitting arguments (``refit_calls=False`` turns this off;
a notice says what happened). An answer with
neither text nor calls to a request offering tools gets a notice naming the server's limitation.

Rounds of calls (:meth:`OpenAIChatModel._after_results`): after tool results, a model that wrote
its calls as text or runs under a profile's tool strategy is asked for the answer with no tools
once ``max_tool_rounds`` rounds of calls were made — after the first by default, which small
models complete most reliably. With more rounds allowed it is offered the tools again (a run can
make the next call it needs); a call that repeats one answered above, whose values appear
nowhere in the question or the results, or that feeds a tool's results back into it with nothing
new from the question, is not made and the answer is asked for without tools.

Answers that are neither a call to an offered tool nor an answer (:mod:`._answers`): a call
named by a tool's schema title is read as a call to that tool; an answer that is nothing but
calls to tools not offered, or the tools' description, is asked for once more naming the tools;
an argument copied from its own description in the schema does not fit (asked for again like
any misfit); after results, an answer that restates the calls without their results is asked
for once more. On a server that keeps one call per answer, an answer is read no further than
its first call written as text once another begins (small models write calls until the length
limit).

Strict function calling: with ``strict`` (default: on for :data:`OPENAI_BASE_URL`, off for other
servers, which often reject or ignore it; ``OpenAIChatModel(..., strict=...)`` or
``resolve_model("openai-compatible:<url>#<model>", strict=True)`` decides) each tool is offered
with its schema rewritten by :func:`~kode_nb.tools._schema_dialects.openai_strict_schema` (every
property required, optional ones nullable) and ``strict: true``. A tool whose schema strict mode
cannot express (a free-form ``dict``, an untyped value) is offered as it is, without ``strict``
(logged at INFO on ``kode_nb.models``); the other tools stay strict. A model in strict mode sends
``null`` for each optional argument it leaves out, so the arguments of a call to a tool that was
offered strict go through :func:`~kode_nb.tools._schema_dialects.drop_strict_nulls` (against the tool's
own schema) before the call is handed on: defaults apply, a nullable argument keeps its
``null``. Arguments that are not a JSON object (malformed ones too) are left as they came.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx

from kode_nb.errors import ConfigurationError, KodeError, ToolValidationError
from kode_nb.models._answers import (
    copied_description,
    describes_tools,
    schema_titles,
    unoffered_calls,
)
from kode_nb.models._content import block_text
from kode_nb.models._http import HttpModel, parse_json
from kode_nb.models._profiles import ServerProfile, detect_profile, get_profile
from kode_nb.models._prompted import call_schema, with_tools_prompt
from kode_nb.models._servers import identify, known_server
from kode_nb.models._text_calls import read_text_calls
from kode_nb.models.base import (
    TOOL_CHOICES,
    AssistantMessage,
    Finish,
    ModelEvent,
    ModelRequest,
    Notice,
    RequestSent,
    TextCallsRecovered,
    TextChunk,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UsageInfo,
    UserMessage,
    check_tool_choice,
)
from kode_nb.models.errors import ModelError, ModelNotFoundError, ModelProtocolError
from kode_nb.tools._schema_dialects import drop_strict_nulls, openai_strict_schema
from kode_nb.types import ImageBlock

__all__ = ["OpenAIChatModel", "openai_messages", "openai_tools"]

OPENAI_BASE_URL = "https://api.openai.com/v1"

logger = logging.getLogger("kode_nb.models")

ANSWER_NUDGE = "Answer my question using the tool result above, in plain words."
"""Sent (on the wire only) after the tool results to a model that writes its calls as text."""

NEXT_NUDGE = (
    "Use the tool result above. If my question needs another tool call, make it now with the "
    "values from the results; otherwise answer my question in plain words."
)
"""Sent (on the wire only) after the tool results when the tools are offered again to a model
that writes its calls as text (or under a profile's tool strategy): small models otherwise
repeat the call they just made."""

_PROMPT_FREE_TOKENS = 500
"""Prompt tokens the plain first-response limit covers; longer prompts get more time (the
profile's ``prompt_rate``)."""

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
}


_UNSET: Any = object()


class OpenAIChatModel(HttpModel):
    """A Chat Completions model: OpenAI itself, or any server speaking its API.

    ``profile`` names the kind of server (see :data:`~kode_nb.models._profiles.PROFILES`:
    ``openai``, ``azure``, ``ollama``, ``vllm``, ``llama-server``, ``llama-cpp-python``,
    ``lmstudio``, ``openrouter``, ``gemini``, ``generic``); ``None`` detects it from
    ``base_url``. The profile decides the defaults of ``strict``, ``max_tokens_field``,
    ``stream_usage`` and the key's variable, and which quirks to absorb.

    ``api_key`` defaults to the ``api_key_env`` variable (``OPENAI_API_KEY`` unless the profile
    names another), read at the first request; ``api_key_env=None`` (local servers) sends no key.
    ``tool_choice`` (``"auto"``, ``"required"``, ``"none"`` or a tool name) is sent whenever
    tools are offered (``"auto"`` by default: some servers read a missing one as ``"none"``);
    a request's ``ModelSettings.tool_choice`` wins. ``stream=False`` asks for whole answers.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        api_key_env: str | None = _UNSET,
        http_client: httpx.AsyncClient | None = None,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
        name: str | None = None,
        supports_images: bool = True,
        max_tokens_field: str | None = None,
        stream_usage: bool | None = None,
        parallel_tool_calls: bool | None = None,
        extra_body: dict[str, Any] | None = None,
        strict: bool | None = None,
        profile: str | None = None,
        tool_choice: str | None = None,
        stream: bool = True,
        api_version: str | None = None,
        text_calls: bool | None = None,
        refit_calls: bool = True,
        max_tool_rounds: int | None = 1,
    ) -> None:
        found = detect_profile(base_url) if profile is None else get_profile(profile)
        if api_key_env is _UNSET:
            api_key_env = found.api_key_env or "OPENAI_API_KEY"
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            http_client=http_client,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            name=name,
        )
        self.supports_images = supports_images
        """Send images as ``image_url`` parts (else as text placeholders)."""
        self.parallel_tool_calls = parallel_tool_calls
        """Sent as ``parallel_tool_calls`` when not ``None`` (and tools are offered)."""
        self.extra_body = dict(extra_body or {})
        """Extra fields merged into every request body."""
        if strict is not None and not isinstance(strict, bool):
            raise ConfigurationError(
                f"{self.name}: strict must be True, False or None, got {strict!r}"
            )
        if tool_choice is not None:
            tool_choice = check_tool_choice(tool_choice, self.name)
        self.tool_choice = tool_choice
        """The default ``tool_choice`` (``None``: ``"auto"``)."""
        if not isinstance(stream, bool):
            raise ConfigurationError(f"{self.name}: stream must be True or False, got {stream!r}")
        self.stream_answers = stream
        """Ask for streamed answers (``False``: whole JSON answers)."""
        self._given_max_tokens_field = max_tokens_field
        self._given_stream_usage = stream_usage
        self._given_strict = strict
        self._given_api_version = api_version
        if text_calls is not None and not isinstance(text_calls, bool):
            raise ConfigurationError(
                f"{self.name}: text_calls must be True, False or None, got {text_calls!r}"
            )
        self._given_text_calls = text_calls
        if not isinstance(refit_calls, bool):
            raise ConfigurationError(
                f"{self.name}: refit_calls must be True or False, got {refit_calls!r}"
            )
        self.refit_calls = refit_calls
        """A call read from text whose arguments do not fit its tool is asked for again with
        that tool forced, where the server can force one (see :meth:`_refit`)."""
        if max_tool_rounds is not None and (
            isinstance(max_tool_rounds, bool)
            or not isinstance(max_tool_rounds, int)
            or max_tool_rounds < 1
        ):
            raise ConfigurationError(
                f"{self.name}: max_tool_rounds must be a positive integer or None, "
                f"got {max_tool_rounds!r}"
            )
        self.max_tool_rounds = max_tool_rounds
        """Rounds of tool calls (answers that made calls, since the last user message) after
        which a model that writes its calls as text, or a profile with a tool strategy, is asked
        for the answer without tools (``None``: no budget; repeated calls still end the
        rounds)."""
        self._profile_given = profile is not None
        self.identified = found.hosted
        """The server has been asked what it is (``GET /models``, before the first request;
        hosted providers never are)."""
        self.calls_as_text = False
        """The model has written its tool calls as text (they were recovered): after tool
        results it is offered the tools again, and a call it repeats (same tool, same arguments)
        is answered by asking for the answer without tools (small models call again instead of
        answering); see :meth:`_after_results`."""
        self._use_profile(found)

    def _use_profile(self, found: ServerProfile) -> None:
        """Take ``found``'s defaults for every setting not given to the constructor."""
        self.profile = found
        """The server profile in use (detected from ``base_url`` unless given)."""
        self.max_tokens_field = self._given_max_tokens_field or found.max_tokens_field
        """``max_completion_tokens`` (OpenAI) or ``max_tokens`` (most compatible servers)."""
        stream_usage = self._given_stream_usage
        self.stream_usage = found.stream_usage if stream_usage is None else stream_usage
        """Ask for usage in the final chunk (``stream_options.include_usage``)."""
        self.strict = found.strict if self._given_strict is None else self._given_strict
        """Offer tools in OpenAI strict mode where their schema allows (see the module docstring)."""
        self.api_version = self._given_api_version or found.api_version
        """Sent as the ``api-version`` query parameter (Azure)."""
        self.no_stream_with_tools = not found.stream_tools
        """Requests offering tools go unstreamed (the profile says so, or the server answered a
        streamed one with nothing)."""
        given = self._given_text_calls
        self.text_calls = found.text_calls if given is None else given
        """Read tool calls written as text as calls (see the module docstring)."""

    def __repr__(self) -> str:  # never shows the key
        return (
            f"OpenAIChatModel(name={self.name!r}, base_url={self.base_url!r}, "
            f"profile={self.profile.name!r}, tool_choice={self.tool_choice or 'auto'!r}, "
            f"stream={self.stream_answers!r})"
        )

    def describe(self) -> dict[str, Any]:
        """The model's settings as a plain dict (for traces and views)."""
        return {
            "name": self.name,
            "profile": self.profile.name,
            "tool_choice": self.tool_choice or "auto",
            "stream": self.stream_answers,
            "stream_with_tools": self.stream_answers and not self.no_stream_with_tools,
            "tool_strategy": self.profile.tool_strategy,
            "text_calls": self.text_calls,
            "refit_calls": self.refit_calls,
            "max_tool_rounds": self.max_tool_rounds,
        }

    async def prepare(self) -> None:
        """Identify the server now (once per base URL for the process; never raises), so its
        profile is known before the first request and shows on the run."""
        if not self.identified:
            await self._identify(self._headers(None))

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if key:
            if self.profile.api_key_header.lower() == "authorization":
                headers["Authorization"] = f"Bearer {key}"
            else:
                headers[self.profile.api_key_header] = key
        return headers

    def _tool_choice(self, request: ModelRequest) -> tuple[Any, str | None, bool]:
        """``(value to send, notice, prompted)`` for the request's tool choice: a form the
        server does not honour becomes the closest one it does (never nothing: some servers read
        a missing ``tool_choice`` as ``"none"``), and the notice says so. ``prompted``: the
        tools go in the system prompt and ``"none"`` is sent (:mod:`._prompted`)."""
        choice = self._requested_choice(request) or "auto"
        names = [spec.name for spec in request.tools]
        form = choice if choice in TOOL_CHOICES else "named"
        if form == "named" and choice not in names:
            raise ConfigurationError(
                f"{self.name}: tool_choice {choice!r} names no offered tool; offered: "
                f"{', '.join(names) or 'none'}"
            )
        notes = []
        if self._left_to_strategy(request):
            choice, form, note = _named_then_none(
                request, names, self.profile.tool_choices, prompted=self.text_calls
            )
            notes.append(note)
            if form == "prompted":
                if self.profile.response_schema and call_schema(request.tools) is not None:
                    note += (
                        "; the answer is constrained (response_format schema) to one call of "
                        "an offered tool"
                    )
                return "none", note, True
        supported = self.profile.tool_choices
        if form not in supported:
            fallback = _fallback(form, names, supported)
            notes.append(
                f"tool_choice {choice!r} is not supported by {self.profile.title}; sent "
                f"{fallback if isinstance(fallback, str) else names[0]!r} instead"
            )
            choice = fallback
            form = choice if choice in TOOL_CHOICES else "named"
        if form == "named":
            named = {"type": "function", "function": {"name": choice}}
            return named, "; ".join(notes) or None, False
        return choice, "; ".join(notes) or None, False

    def _requested_choice(self, request: ModelRequest) -> str | None:
        """The ``tool_choice`` asked for: the request's, else this model's (``None``: none)."""
        return request.settings.tool_choice or self.tool_choice

    def _left_to_strategy(self, request: ModelRequest) -> bool:
        """No ``tool_choice`` was asked for, and the profile's strategy is ``named-then-none``."""
        return (
            self.profile.tool_strategy == "named-then-none"
            and self._requested_choice(request) is None
        )

    def wants_stream(self, request: ModelRequest) -> bool:
        """Whether ``request`` goes out streamed."""
        if not self.stream_answers:
            return False
        if request.tools and self.no_stream_with_tools:
            choice, _, _ = self._tool_choice(request)  # as sent: the strategy's, if any
            return choice not in ("auto", "required")  # forced calls and "none" stream fine
        return True

    def request_body(self, request: ModelRequest, *, stream: bool | None = None) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        streamed = self.wants_stream(request) if stream is None else stream
        choice, _, prompted = self._tool_choice(request) if request.tools else (None, None, False)
        constrain = prompted and self.profile.response_schema and not _answered(request.messages)
        schema = call_schema(request.tools) if constrain else None
        if prompted:  # the tools described in the system prompt, the calls read from the text
            plain = schema is not None or self.profile.escapes_messages
            system = with_tools_prompt(
                request.system, request.tools, plain=plain, keys=plain and schema is None
            )
            request = dataclasses.replace(request, system=system)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(
                request,
                images=self.supports_images,
                results_as_user=self.profile.tool_results_as_user,
            ),
            "stream": streamed,
        }
        if streamed and self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools and self._rounds_guarded(request):
            body["messages"].append({"role": "user", "content": NEXT_NUDGE})
        if request.tools:
            body["tools"] = openai_tools(request, strict=self.strict)
            if choice is not None:
                body["tool_choice"] = choice
            if self.parallel_tool_calls is not None and self.profile.parallel_tool_calls:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        settings = request.settings
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        max_tokens = settings.max_tokens or self.profile.default_max_tokens
        if max_tokens is not None:
            body[self.max_tokens_field] = max_tokens
        if streamed and self.profile.progress:
            body["return_progress"] = True
        if schema is not None:  # the answer can only be one call to an offered tool
            body["response_format"] = {"type": "json_object", "schema": schema}
        body.update(self.extra_body)
        return body

    def _allowance(self, body: Mapping[str, Any]) -> float:
        """Extra seconds for the answer to start: the time a local server may take to read a
        prompt longer than the plain limit covers (about 4 characters a token)."""
        rate = self.profile.prompt_rate
        if not rate:
            return 0.0
        size = sum(len(json.dumps(body.get(k) or "")) for k in ("messages", "tools"))
        return max(size / 4 - _PROMPT_FREE_TOKENS, 0.0) / rate

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.tools and self._rounds_guarded(request):
            return self._after_results(request)
        if request.tools and self.text_calls and self._requested_choice(request) != "none":
            return self._answer_or_call(request)
        return self._stream(request)

    async def _answer_or_call(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """A request offering tools to a model whose calls written as text are read: an answer
        that is nothing but calls to tools not offered (a name made up, or copied from another
        conversation), or the tools' description itself, is neither a call nor an answer. The
        request is sent once more with :func:`_offered_nudge` last (on the wire only), naming
        the tools there are; that answer stands. Text that starts like plain words streams as
        it comes; text that starts like JSON or a tag is held until the answer is whole."""
        held: list[ModelEvent] = []
        holding = True
        async for event in self._stream(request):
            if not holding:
                yield event
                continue
            held.append(event)
            said = "".join(e.text for e in held if isinstance(e, TextChunk)).lstrip()
            if said and said[0] not in _CALL_STARTS:
                holding = False
                for kept in held:
                    yield kept
                held.clear()
        if not holding:
            return
        text = _answer_text(held)
        said = " ".join(text.split())
        unknown = unoffered_calls(text, {spec.name for spec in request.tools})
        if unknown:
            why = f"called only tools that are not offered ({', '.join(unknown)})"
        elif describes_tools(said):
            why = "repeated the tools' description"
        else:
            for event in held:
                yield event
            return
        for event in held:
            if isinstance(event, (UsageInfo, Notice)):
                yield event
        yield Notice(
            text=f"the answer {why} instead of calling a tool or answering; asked once more, "
            "naming the tools offered"
        )
        nudge = _offered_nudge(request, unknown)
        again = dataclasses.replace(
            request, messages=(*request.messages, UserMessage(content=nudge))
        )
        async for event in self._stream(again):
            yield event

    def _one_call_kept(self, request: ModelRequest) -> frozenset[str] | None:
        """For a request whose calls written as text are read, on a server that keeps one call
        per answer (``parallel_tool_calls`` not on): the names a first call may have (the
        offered tools and their schema titles); ``None`` otherwise. Small models go on writing
        calls after the first until the length limit (2,048 tokens, minutes on a CPU); once
        another call begins after a complete first one, the rest is not read (the connection
        is closed, so the server stops generating)."""
        if not (request.tools and self.text_calls) or self._requested_choice(request) == "none":
            return None
        parallel = self.parallel_tool_calls
        if parallel is None or not self.profile.parallel_tool_calls:
            parallel = self.profile.parallel_by_default
        if parallel:
            return None
        return frozenset({spec.name for spec in request.tools} | set(schema_titles(request.tools)))

    def _rounds_guarded(self, request: ModelRequest) -> bool:
        """The request follows successful tool results, to a model that writes its calls as
        text or under the profile's tool strategy: :meth:`_after_results` keeps it from
        calling for ever."""
        return _answered(request.messages) and (
            self.calls_as_text or self._left_to_strategy(request)
        )

    async def _after_results(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """A request after tool results, to a small model that calls again instead of
        answering: the tools are offered again, so that a run can make the next call it needs
        (a chain: the second call uses the first call's result). Loops are kept out three ways:

        - a call that repeats one already answered in this conversation (same tool, same
          arguments) is not made again: its result is above, so the answer is asked for, with
          no tools and :data:`ANSWER_NUDGE` (a notice names the call); new calls of the same
          answer are kept. So is a call whose argument values appear nowhere in the user's
          messages or the tool results (made up: small models offered tools again call one with
          an example value, ``get_weather("Paris")``, after an addition);
        - after ``max_tool_rounds`` rounds of calls the answer is asked for straight away;
        - an answer that repeats an earlier message, or the tools' own description, word for
          word is no answer: it is asked for (:meth:`_answer_not_echoed`).

        The first answer is received whole before anything is yielded."""
        rounds = _rounds(request.messages)
        if self.max_tool_rounds is not None and rounds >= self.max_tool_rounds:
            yield Notice(
                text=f"tool rounds: {rounds} rounds of calls (max_tool_rounds="
                f"{self.max_tool_rounds}); this request offers no tools and asks for the answer"
            )
            async for event in self._answer_not_echoed(_nudged(request)):
                yield event
            return
        first = [event async for event in self._stream(request)]
        calls = [e for e in first if isinstance(e, ToolCallPart)]
        if calls:
            done = _answered_calls(request.messages)
            sources = _sources(request.messages)
            repeats = [c for c in calls if _call_key(c.name, c.arguments) in done]
            made_up = [c for c in calls if c not in repeats and not _grounded(c.arguments, sources)]
            fed_back = [
                c for c in calls if c not in repeats + made_up and _fed_back(c, request.messages)
            ]
            stale = repeats + made_up + fed_back
            if not stale:
                for event in first:
                    yield event
                return
            why = "; ".join(
                [
                    *(
                        [f"{_calls_named(repeats)} again with the same arguments (answered above)"]
                        if repeats
                        else []
                    ),
                    *(
                        [
                            f"{_calls_named(made_up)} with values found neither in the "
                            "conversation's messages nor in its tool results (made up)"
                        ]
                        if made_up
                        else []
                    ),
                    *(
                        [
                            f"{_calls_named(fed_back)} again with nothing new from the question "
                            "(its values come from the results and the earlier calls: fed back)"
                        ]
                        if fed_back
                        else []
                    ),
                ]
            )
            if len(stale) < len(calls):
                for event in first:
                    if not (isinstance(event, ToolCallPart) and event in stale):
                        yield event
                yield Notice(text=f"tool rounds: dropped the call(s) {why}; the others kept")
                return
            for event in first:
                if isinstance(event, (UsageInfo, RequestSent, Notice)):
                    yield event
            yield Notice(
                text=f"tool rounds: the model called {why}, so this request offers no tools "
                "and asks for the answer"
            )
            async for event in self._answer_not_echoed(_nudged(request)):
                yield event
            return
        echoed = _echo(_answer_text(first), request)
        if echoed is None:
            for event in first:
                yield event
            return
        for event in first:
            if isinstance(event, (UsageInfo, Notice)):
                yield event
        yield Notice(
            text=f"the answer {echoed} instead of answering; asked for the answer without tools"
        )
        async for event in self._answer_not_echoed(_nudged(request), once=True):
            yield event

    async def _answer_not_echoed(
        self, request: ModelRequest, *, once: bool = False
    ) -> AsyncIterator[ModelEvent]:
        """The answer to a request that asks for it after tool results (no tools,
        :data:`ANSWER_NUDGE` last), received whole first: a small model sometimes answers it by
        repeating an earlier message of the conversation word for word (its task as the caller
        wrote it, a subagent's inputs) instead of using the results. Such an echo is not the
        answer: the request is sent once more (its usage counted, a notice saying why), and the
        second answer stands, whatever it is (``once``: the first answer stands, an echo having
        been asked about already)."""
        yield Notice(
            text="tool strategy answer-after-text-calls: this request offers no tools and asks "
            "for the answer"
        )
        if once:  # an echo was asked about already: this answer stands
            async for event in self._stream(request):
                yield event
            return
        first = [event async for event in self._stream(request)]
        echoed = _echo(_answer_text(first), request)
        if echoed is None:
            for event in first:
                yield event
            return
        for event in first:
            if isinstance(event, UsageInfo):
                yield event
        yield Notice(text=f"the answer {echoed} instead of answering; asked once more")
        async for event in self._stream(request):
            yield event

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        key = self._key()
        headers = self._headers(key)
        if not self.identified:
            notice = await self._identify(headers)
            if notice:
                yield Notice(text=notice)
        info = known_server(self.base_url, self.http_client)
        if info is not None and not info.serves(self.model):
            assert info.model_ids is not None
            if self.profile.checks_model_id:
                raise ModelNotFoundError(self.model, self.base_url, info.model_ids)
            yield Notice(
                text=f"the server does not list the model {self.model!r} "
                f"(it lists {', '.join(info.model_ids)})"
            )
        if request.tools:
            _, notice, _ = self._tool_choice(request)
            if notice:
                yield Notice(text=notice)
        body = self.request_body(request)
        streamed = bool(body.get("stream"))
        if request.tools and self.no_stream_with_tools and not streamed and self.stream_answers:
            yield Notice(
                text=f"{self.profile.title} does not stream answers with tools; "
                "asked for a whole answer"
            )
        state = _StreamState(strict=_strict_schemas(request, body))
        outcome: list[str] = []
        async for event in self._exchange(body, headers, key, request, state, outcome):
            yield event
        if outcome == ["empty"]:  # a streamed request answered with nothing at all
            if request.tools:
                self.no_stream_with_tools = True
            yield Notice(
                text="the server sent an empty answer to a streamed request; "
                "retried once without streaming"
            )
            body = self.request_body(request, stream=False)
            streamed = False
            state = _StreamState(strict=_strict_schemas(request, body))
            outcome.clear()
            async for event in self._exchange(body, headers, key, request, state, outcome):
                yield event
            if outcome == ["empty"]:
                raise ModelProtocolError(
                    f"{self.name}: the server answered with an empty body, streamed and not "
                    "streamed; check the server's log"
                )
        if outcome == ["json"] and streamed:
            yield Notice(text="the server answered a streamed request with a whole JSON answer")
        for part in state.pending_calls():
            yield part
        if request.tools and not state.calls:
            cut = state.finish_reason == "length"
            answer = self._text_answer(request, "".join(state.text), cut=cut)
            state.recovered = any(isinstance(e, TextCallsRecovered) for e in answer)
            if state.recovered:
                answer = await self._refit(request, headers, key, answer, state)
            for event in answer:
                yield event
            self.calls_as_text = self.calls_as_text or state.recovered
            if state.recovered:
                state.finish_reason = "tool_calls"
            if state.stopped_early:
                yield Notice(
                    text="the answer was read no further than its first call written as text: "
                    f"another call began after it, and {self.profile.title} keeps one call per "
                    "answer (the server's token counts of this request are unknown)"
                )
        yield state.usage  # None counts when the server sent none: shown as unknown, never 0
        yield Finish(stop_reason=state.stop_reason())

    def _text_answer(
        self, request: ModelRequest, text: str, *, cut: bool = False
    ) -> list[ModelEvent]:
        """For an answer without tool calls to a request offering tools: the calls written as
        its text (taken back, then yielded as calls), or a notice when it is empty. ``cut``: the
        answer ended at the length limit."""
        if not text.strip():
            return [
                Notice(
                    text=f"{self.profile.title} returned neither text nor a tool call: "
                    f"{_EMPTY_HINTS.get(self.profile.name, _EMPTY_HINT)}"
                )
            ]
        if not self.text_calls or self._requested_choice(request) == "none":
            return []  # off, or asked for no calls: what looks like a call is the answer
        offered_names = {spec.name for spec in request.tools}
        titles = schema_titles(request.tools)
        found = read_text_calls(text, offered_names | set(titles), cut=cut)
        if found is None:
            return []
        retitled = sorted(
            {c.name for c in found.calls if c.name not in offered_names and c.name in titles}
        )
        calls = [
            dataclasses.replace(c, name=titles[c.name]) if c.name in retitled else c
            for c in found.calls
        ]
        parallel = self.parallel_tool_calls
        if parallel is None or not self.profile.parallel_tool_calls:
            parallel = self.profile.parallel_by_default
        dropped = len(calls) - 1 if not parallel and len(calls) > 1 else 0
        if dropped:  # as the server's own parser would: one call per answer, to an offered tool
            offered = {spec.name for spec in request.tools}
            calls = [next(c for c in calls if c.name in offered)]
        out: list[ModelEvent] = [TextCallsRecovered(text=text)]
        made = sum(
            len(m.tool_calls) for m in request.messages if isinstance(m, AssistantMessage)
        )  # ids unique in the conversation: frameworks match results to calls by id
        out.extend(
            ToolCallPart(id=f"text_call_{made + i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(calls, 1)
        )
        mended = [
            *(["written HTML-escaped, read unescaped"] if found.unescaped else []),
            *(
                ["written with Python's quotes or unquoted words, read as JSON"]
                if found.requoted
                else []
            ),
            *(["the last call's missing closing brackets added"] if found.repaired else []),
            *(
                ["the answer was cut at the length limit: its incomplete last call dropped"]
                if found.truncated
                else []
            ),
            *([f"{found.repeats} identical repeat(s) dropped"] if found.repeats else []),
            *(
                [
                    "a call named by its tool's schema title read as a call to that tool: "
                    + ", ".join(f"{t} -> {titles[t]}" for t in retitled)
                ]
                if retitled
                else []
            ),
            *(
                [f"{found.malformed} call-shaped object(s) that are no valid call dropped"]
                if found.malformed
                else []
            ),
            *(
                [
                    f"the {dropped} call(s) written after the first dropped: "
                    f"{self.profile.title} makes one call per answer unless parallel_tool_calls "
                    "is sent (OpenAIChatModel(parallel_tool_calls=True) keeps them)"
                ]
                if dropped
                else []
            ),
        ]
        out.append(
            Notice(
                text=f"{len(calls)} tool call(s) recovered from the answer text "
                f"{'(' + '; '.join(mended) + ') ' if mended else ''}"
                "(the server returned none; OpenAIChatModel(text_calls=False) "
                "turns this off)"
            )
        )
        return out

    async def _refit(
        self,
        request: ModelRequest,
        headers: dict[str, str],
        key: str | None,
        answer: list[ModelEvent],
        state: _StreamState,
    ) -> list[ModelEvent]:
        """``answer`` (calls recovered from text) with each call whose arguments do not fit its
        tool asked for again with that tool forced, where the server can force one
        (:meth:`_refit_form`): the server then writes arguments that fit the schema. A small
        model that wrote ``{"task": "add", "value1": 1}`` otherwise repeats it after the
        validation error until ``max_repeated_calls``. An answer to the forced request that is
        no call to that tool, or a failed request, leaves the call as written (its validation
        error then goes to the model); the notices say which happened. The forced requests'
        usage is added to ``state``'s; their bodies are not the call's recorded request (the
        notice names the form)."""
        form = self._refit_form()
        if form is None:
            return answer
        specs = {spec.name: spec for spec in request.tools}
        out: list[ModelEvent] = []
        refits = 0
        for event in answer:
            if not isinstance(event, ToolCallPart) or event.name not in specs:
                out.append(event)
                continue
            spec = specs[event.name]
            problem = _misfit(spec, event.arguments)
            if problem is None or refits >= _MAX_REFITS:
                out.append(event)
                continue
            refits += 1
            what = (
                f"the call to {spec.name} written as text does not fit its schema ({problem}); "
                f"asked again with {spec.name} forced ({_REFIT_FORMS[form]}) so that the server "
                "fits the arguments to the schema"
            )
            try:
                arguments = await self._forced_arguments(form, request, spec, headers, key, state)
            except ModelError as exc:
                out += [
                    event,
                    Notice(text=f"{what}, but that request failed ({exc}); kept as written"),
                ]
                continue
            still = "no call to it" if arguments is None else _misfit(spec, arguments)
            if still is not None:
                if arguments is not None:
                    still = f"a call that does not fit either ({still})"
                out += [event, Notice(text=f"{what}, but the answer was {still}; kept as written")]
                continue
            assert arguments is not None
            out += [
                dataclasses.replace(event, arguments=arguments),
                Notice(text=f"{what}: {_short(arguments)}"),
            ]
        return out

    def _refit_form(self) -> str | None:
        """How this server can be made to call one given tool with fitting arguments:
        ``"named"`` (a named ``tool_choice``), ``"schema"`` (``response_format`` with the call's
        schema, ``tool_choice: "none"``), ``"required"`` (with that tool alone), or ``None``."""
        if not self.refit_calls:
            return None
        supported = self.profile.tool_choices
        if "named" in supported:
            return "named"
        if self.profile.response_schema and "none" in supported:
            return "schema"
        return "required" if "required" in supported else None

    async def _forced_arguments(
        self,
        form: str,
        request: ModelRequest,
        spec: ToolSpec,
        headers: dict[str, str],
        key: str | None,
        state: _StreamState,
    ) -> str | None:
        """The arguments of a call to ``spec`` asked for with ``request`` in ``form``
        (:meth:`_refit_form`); ``None`` when the answer holds no call to it."""
        choice = {"named": spec.name, "schema": "none", "required": "required"}[form]
        tools = request.tools if form == "schema" else (spec,)
        settings = dataclasses.replace(request.settings, tool_choice=choice)
        forced = dataclasses.replace(request, tools=tools, settings=settings)
        body = self.request_body(forced)
        if form == "schema":
            body["response_format"] = {"type": "json_object", "schema": call_schema([spec])}
        own = _StreamState(strict=_strict_schemas(forced, body))
        outcome: list[str] = []
        events = [e async for e in self._exchange(body, headers, key, forced, own, outcome)]
        state.usage = state.usage + own.usage
        if form == "schema":
            return _schema_call_arguments("".join(own.text), spec.name)
        calls = [e for e in [*events, *own.pending_calls()] if isinstance(e, ToolCallPart)]
        return next((c.arguments for c in calls if c.name == spec.name), None)

    async def _identify(self, headers: Mapping[str, str]) -> str | None:
        """Ask the server what it is (``GET /models``, once per base URL for the process); a
        profile it names is taken when none was given. Returns the notice for the trace when
        that changes what is sent."""
        self.identified = True
        info = await identify(
            await self._client(), self.base_url, headers, own_client=self.http_client
        )
        found = info.profile
        if found is None or self._profile_given or found is self.profile:
            return None
        self._use_profile(found)
        note = f"the server is a {found.title} (from its GET /models answer)"
        if found.tool_results_as_user:
            note += (
                "; its prompt template drops tool messages, so tool results are sent as a "
                "user message naming each call"
            )
        return note

    async def _exchange(
        self,
        body: dict[str, Any],
        headers: dict[str, str],
        key: str | None,
        request: ModelRequest,
        state: _StreamState,
        outcome: list[str],
    ) -> AsyncIterator[ModelEvent]:
        """One request; its text and completed calls are yielded, the rest stays in ``state``;
        ``outcome`` gets ``"empty"`` (no events at all), ``"json"`` or ``"stream"``."""
        params = {"api-version": self.api_version} if self.api_version else None
        yield RequestSent(
            provider=self.provider, path="/chat/completions", model=self.model, body=body
        )
        done = False
        watch = self._one_call_kept(request)
        sse = self._sse(
            "/chat/completions",
            body,
            headers,
            request.settings,
            [key or ""],
            params=params,
            allowance=self._allowance(body),
        )
        async with aclosing(sse) as events:  # closes the response at [DONE] and on errors
            async for event in events:
                if event.event == "json":
                    text = event.data.strip()
                    if not text:
                        outcome.append("empty")
                        return
                    payload = parse_json(text, "answer", self.name)
                    for out in state.feed_whole(payload, self.name):
                        yield out
                    outcome.append("json")
                    return
                if event.data.strip() == "[DONE]":
                    done = True
                    break
                chunk = parse_json(event.data, "stream chunk", self.name)
                for out in state.feed(chunk, self.name):
                    yield out
                if watch and not state.calls and (first := _first_of_more(state.text, watch)):
                    state.text[:] = [first]  # the rest is a call the server would not keep
                    state.finish_reason = "stop"
                    state.stopped_early = True
                    done = True
                    break
        if state.chunks == 0 and not done:
            outcome.append("empty")
            return
        if not done:
            raise ModelProtocolError(
                f"{self.name}: the response stream ended before 'data: [DONE]' "
                f"(after {state.chunks} chunk(s)); the answer is incomplete"
            )
        outcome.append("stream")


@dataclass
class _ToolCallBuffer:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    emitted: bool = False


@dataclass
class _StreamState:
    chunks: int = 0
    calls: dict[int, _ToolCallBuffer] = field(default_factory=dict)
    finish_reason: str = ""
    usage: UsageInfo = field(default_factory=UsageInfo)
    strict: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """The own schema of each tool offered in strict mode, by name."""
    text: list[str] = field(default_factory=list)
    """The answer text received."""
    recovered: bool = False
    """Tool calls were read from the answer text."""
    stopped_early: bool = False
    """The answer was read no further than its first call written as text, another call having
    begun after it (:meth:`OpenAIChatModel._one_call_kept`)."""

    def feed(self, chunk: Any, model: str) -> list[ModelEvent]:
        self.chunks += 1
        if not isinstance(chunk, dict):
            raise ModelProtocolError(f"{model}: expected a JSON object chunk, got {chunk!r:.200}")
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ModelProtocolError(f"{model}: the stream reported an error: {message}")
        self._usage(chunk.get("usage"))
        out: list[ModelEvent] = []
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return out
        choice = choices[0]
        delta = choice.get("delta") or {}
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            out.append(TextChunk(text=content))
        for fragment in delta.get("tool_calls") or []:
            self._add_fragment(fragment)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
            out.extend(self.pending_calls())
        return out

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.usage = UsageInfo(
                input_tokens=_count(usage.get("prompt_tokens")),
                output_tokens=_count(usage.get("completion_tokens")),
            )

    def feed_whole(self, payload: Any, model: str) -> list[ModelEvent]:
        """A non-streamed answer (``choices[0].message``) as the same events."""
        if not isinstance(payload, dict):
            raise ModelProtocolError(
                f"{model}: expected a JSON object answer, got {payload!r:.200}"
            )
        if payload.get("error"):
            error = payload["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ModelProtocolError(f"{model}: the server reported an error: {message}")
        self.chunks += 1
        self._usage(payload.get("usage"))
        choices = payload.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            raise ModelProtocolError(f"{model}: the answer has no choices: {payload!r:.200}")
        choice = choices[0]
        message = choice.get("message") or {}
        out: list[ModelEvent] = []
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and content:
            self.text.append(content)
            out.append(TextChunk(text=content))
        for index, call in enumerate((message.get("tool_calls") or []) if message else []):
            if isinstance(call, dict):
                self._add_fragment({**call, "index": index})
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        out.extend(self.pending_calls())
        return out

    def _add_fragment(self, fragment: Any) -> None:
        if not isinstance(fragment, dict):
            return
        index = fragment.get("index")
        if not isinstance(index, int):  # some servers omit it: an id starts a new call
            index = len(self.calls) if fragment.get("id") or not self.calls else max(self.calls)
        buffer = self.calls.setdefault(index, _ToolCallBuffer())
        if fragment.get("id"):
            buffer.id = str(fragment["id"])
        function = fragment.get("function") or {}
        if function.get("name") and not buffer.name:
            buffer.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            buffer.arguments.append(arguments)
        elif arguments is not None:  # a few servers send an object instead of a string
            buffer.arguments.append(json.dumps(arguments))

    def pending_calls(self) -> list[ToolCallPart]:
        out = []
        for index in sorted(self.calls):
            buffer = self.calls[index]
            if buffer.emitted:
                continue
            buffer.emitted = True
            arguments = "".join(buffer.arguments) or "{}"
            schema = self.strict.get(buffer.name)
            if schema is not None:
                arguments = _drop_strict_nulls(schema, arguments)
            out.append(
                ToolCallPart(id=buffer.id or f"call_{index}", name=buffer.name, arguments=arguments)
            )
        return out

    def stop_reason(self) -> str:
        reason = _STOP_REASONS.get(self.finish_reason, self.finish_reason or "end_turn")
        if self.calls and reason == "end_turn":  # Ollama and others say "stop" with tool calls
            return "tool_calls"
        return reason


_EMPTY_HINT = (
    "small models on local servers do this when they cannot decide between answering and "
    "calling a tool; try a larger model, or Agent(tool_choice=...) to force the first call"
)
_EMPTY_HINTS = {
    "llama-cpp-python": (
        "its chatml-function-calling 'auto' step asks the model to choose between a message and "
        "a function first, and small models often choose neither; the profile's "
        "'named-then-none' strategy forces the call when one tool is offered"
    ),
}


_MAX_REFITS = 3
"""Calls of one answer asked for again with their tool forced (:meth:`OpenAIChatModel._refit`)."""


def _misfit(spec: ToolSpec, arguments: str) -> str | None:
    """``None`` when ``arguments`` fit ``spec``; else its first problem, in words."""
    try:
        spec.validate(arguments, strict=True)
    except ToolValidationError as exc:
        return "; ".join(issue.render() for issue in exc.issues[:2]) or str(exc)
    except KodeError:  # an unusable schema: nothing to fit to
        return None
    copied = copied_description(spec, arguments)
    if copied is not None:
        return f"the value of {copied!r} is its description in the schema, copied"
    return None


_REFIT_FORMS = {
    "named": "by name",
    "schema": "tool_choice 'none' and the answer constrained to a call of it by response_format",
    "required": "'required' with it alone",
}


def _schema_call_arguments(text: str, name: str) -> str | None:
    """The arguments (JSON text) of ``{"name": name, "arguments": {...}}`` answered under a
    ``response_format`` schema; ``None`` for anything else."""
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("name") != name:
        return None
    arguments = answer.get("arguments")
    return json.dumps(arguments, ensure_ascii=False) if isinstance(arguments, dict) else None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_ECHO_MIN = 16
"""Characters an answer needs for :func:`_echo` to call it a repeat (a short answer such as
"140090" may well appear earlier)."""
_ECHO_LONG = 200
"""Characters of an earlier message past which an answer copying them is a repeat, however
long that message is."""


def _answer_text(events: list[ModelEvent]) -> str:
    """The text answer of a model call's events (none when it made calls)."""
    if any(isinstance(e, ToolCallPart) for e in events):
        return ""
    return "".join(e.text for e in events if isinstance(e, TextChunk))


def _repeats(said: str, earlier: str) -> bool:
    """``said`` (spaces collapsed) copies ``earlier``: all of it or at least half, or a long
    stretch of it. A short quote (a path, a choice, a sentence of a longer question) answers."""
    source = " ".join(earlier.split())
    return said in source and (2 * len(said) >= len(source) or len(said) >= _ECHO_LONG)


def _echo(text: str, request: ModelRequest) -> str | None:
    """How ``text`` is no answer (``"repeated the system prompt word for word"``; see
    :func:`_repeats`), or ``None``: it is an answer of its own. Besides a repeat of an earlier
    message or of the tools' description, an answer that is nothing but calls to tools the
    request does not offer (:func:`~kode_nb.models._answers.unoffered_calls`) is none."""
    said = " ".join(text.split())
    if len(said) < _ECHO_MIN:
        return None
    unknown = unoffered_calls(text, {spec.name for spec in request.tools})
    if unknown:
        return f"called only tools that are not offered ({', '.join(unknown)})"
    if describes_tools(said):
        return "repeated the tools' description word for word"
    if _repeats(said, request.system):
        return "repeated the system prompt word for word"
    if _repeats(said, ANSWER_NUDGE):
        return "repeated the request for the answer word for word"
    for message in request.messages:
        if isinstance(message, UserMessage) and _repeats(said, message.content):
            return "repeated an earlier user message word for word"
    left_out = _left_out(said, request.messages)
    if left_out:
        return f"restated the calls without their results (none of {left_out})"
    return None


_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?![\d])")


def _numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(_THOUSANDS.sub("", text)))


def _left_out(said: str, messages: tuple[Any, ...]) -> str | None:
    """The numbers the current question's tool results found (held by no user message),
    when ``said`` states every number the calls were made with and none of those: it
    restates the calls without their outcome ("To find the sum of 48213 and 91877, I added
    them together."). ``None`` otherwise: an answer that names something else (a path, a
    choice) or states a result stands."""
    if messages and isinstance(messages[-1], UserMessage) and messages[-1].content == ANSWER_NUDGE:
        messages = messages[:-1]  # the closing request (:func:`_nudged`) asks; it is no question
    recent = _since_user(messages)
    ok = {m.call_id for m in recent if isinstance(m, ToolResultMessage) and not m.is_error}
    given = {
        n
        for m in recent
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.id in ok
        for n in _numbers(c.arguments)
    }
    results = " ".join(
        block_text(b)
        for m in recent
        if isinstance(m, ToolResultMessage) and m.call_id in ok
        for b in m.content
    )
    asked = _numbers(" ".join(m.content for m in messages if isinstance(m, UserMessage)))
    found = _numbers(results) - asked - given
    stated = _numbers(said)
    if not found or not given or stated & found or not given <= stated:
        return None
    return ", ".join(sorted(found)[:3])


_FIRST_CALL_OPENERS = re.compile(r"\s*(?:```[\w-]*\s*|<tool_call>\s*)?")
_NEXT_CALL = re.compile(r"(?:\s|```|</?tool_call>|[,;])*[{<]")
_decoder = json.JSONDecoder()


def _first_of_more(parts: list[str], names: frozenset[str]) -> str | None:
    """The text of ``parts`` up to the end of its first call (a JSON object naming a tool in
    ``names``, bare, fenced or tagged), when another call (or tag) has begun after it; else
    ``None`` (keep reading)."""
    text = "".join(parts)
    opened = _FIRST_CALL_OPENERS.match(text)
    start = opened.end() if opened else 0
    if not text.startswith("{", start):
        return None
    try:
        value, end = _decoder.raw_decode(text, start)
    except ValueError:
        return None
    name = value.get("name") if isinstance(value, dict) else None
    if not isinstance(name, str) or name not in names or not _NEXT_CALL.match(text, end):
        return None
    return text[:end]


_CALL_STARTS = "{[`<"
"""How an answer that may be calls or the tools' description starts (JSON, a fence, a tag)."""


def _offered_nudge(request: ModelRequest, unknown: list[str]) -> str:
    """Sent (on the wire only) after an answer that was no call to an offered tool and no
    answer (:meth:`OpenAIChatModel._answer_or_call`): the tools there are, by name."""
    named = ", ".join(spec.name for spec in request.tools)
    missing = f"There is no tool called {', '.join(unknown)}. " if unknown else ""
    return (
        f"{missing}The tools you can call are: {named}. Call one of them by its name with the "
        "values from my question, or answer my question in plain words."
    )


def _answered(messages: tuple[Any, ...]) -> bool:
    """The conversation ends with tool results, none of them an error (after an error the
    model keeps its tools, to call again with other arguments)."""
    results = []
    for message in reversed(messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.append(message)
    return bool(results) and not any(r.is_error for r in results)


def _nudged(request: ModelRequest) -> ModelRequest:
    """``request`` with no tools, ending by asking for the answer (:data:`ANSWER_NUDGE`)."""
    return dataclasses.replace(
        request, tools=(), messages=(*request.messages, UserMessage(content=ANSWER_NUDGE))
    )


def _since_user(messages: tuple[Any, ...]) -> list[Any]:
    """The messages after the last user message (the current question's rounds)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return list(messages[index + 1 :])
    return list(messages)


def _rounds(messages: tuple[Any, ...]) -> int:
    """Answers that made tool calls since the last user message."""
    return sum(1 for m in _since_user(messages) if isinstance(m, AssistantMessage) and m.tool_calls)


def _call_key(name: str, arguments: str) -> tuple[str, str]:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return name, arguments
    return name, json.dumps(parsed, sort_keys=True)


def _calls_named(calls: list[ToolCallPart]) -> str:
    return ", ".join(f"{c.name}({_short(c.arguments, 80)})" for c in calls)


def _sources(messages: tuple[Any, ...]) -> str:
    """The user's messages and the tool results of the conversation, lower-cased, numbers
    without thousands separators: where a later call's values must come from."""
    texts = []
    for m in messages:
        if isinstance(m, UserMessage):
            texts.append(m.content)
        elif isinstance(m, ToolResultMessage):
            texts.extend(block_text(b) for b in m.content)
    return _THOUSANDS.sub("", "\n".join(texts).lower())


_THOUSANDS = re.compile(r"(?<=\d)[,_](?=\d{3}\b)")


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _grounded(arguments: str, sources: str) -> bool:
    """Every value of ``arguments`` (JSON text) appears in ``sources`` (:func:`_sources`): a
    string as it is (case aside), a number as a number. Arguments that are no JSON are left
    to the tool's validation."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return True
    for leaf in _leaves(parsed):
        if leaf is None or isinstance(leaf, bool):
            continue
        if isinstance(leaf, (int, float)):
            forms = {str(leaf)}
            if isinstance(leaf, float) and leaf.is_integer():
                forms.add(str(int(leaf)))
            if not any(re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", sources) for f in forms):
                return False
        elif isinstance(leaf, str) and leaf.strip() and leaf.strip().lower() not in sources:
            return False
    return True


def _fed_back(call: ToolCallPart, messages: tuple[Any, ...]) -> bool:
    """``call`` is to a tool already called for the current question, and brings no value from
    the user's messages that an earlier call did not use: its values are results fed back into
    a tool (``calculator("140090")`` after the calculator answered 140090; ``add(84245, 12836)``
    after ``add(71409, 12836)`` gave 84245 for "71409 + 12836"). A next step the question asks
    for brings a value of its own ("then add 1234"); one that takes all its values from another
    tool's result (a name looked up, then its extension) is to another tool."""
    recent = _since_user(messages)
    earlier = [c for m in recent if isinstance(m, AssistantMessage) for c in m.tool_calls]
    if not any(c.name == call.name for c in earlier):
        return False
    try:
        parsed = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return False
    used: set[str] = set()
    for c in earlier:
        try:
            used.update(_leaf_key(v) for v in _leaves(json.loads(c.arguments or "{}")))
        except ValueError:
            continue
    asked = _sources(tuple(m for m in messages if isinstance(m, UserMessage)))
    for leaf in _leaves(parsed):
        if leaf is None or isinstance(leaf, bool) or _leaf_key(leaf) in used:
            continue
        if _grounded(json.dumps({"v": leaf}), asked):
            return False  # a value of the question's own, not used before
    return True


def _leaf_key(value: Any) -> str:
    """A value as compared between calls (``3`` and ``3.0`` alike, strings case aside)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip().lower()


def _answered_calls(messages: tuple[Any, ...]) -> set[tuple[str, str]]:
    """The calls of the current question answered without an error, as ``(tool, arguments)``."""
    recent = _since_user(messages)
    ok = {m.call_id for m in recent if isinstance(m, ToolResultMessage) and not m.is_error}
    return {
        _call_key(c.name, c.arguments)
        for m in recent
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.id in ok
    }


def _named_then_none(
    request: ModelRequest, names: list[str], supported: frozenset[str], *, prompted: bool
) -> tuple[str, str, str]:
    """The ``named-then-none`` strategy's ``(choice, form, note)`` for a request left to
    ``auto``: after tool results ``"none"``; before, the one offered tool by name; when several
    are offered, ``"required"`` where the server has it, else (``prompted``: calls written as
    text are read) the tools described in the system prompt with ``"none"`` (form
    ``"prompted"``), else ``"auto"``."""
    if request.messages and isinstance(request.messages[-1], ToolResultMessage):
        if prompted and "none" in supported:
            return (
                "none",
                "prompted",
                (
                    "tool strategy named-then-none: after the tool results the tools are "
                    "described in the system prompt again, tool_choice 'none' is sent (no call "
                    "is forced) and a call written in the answer text is read"
                ),
            )
        return "none", "none", "tool strategy named-then-none: 'none' after the tool results"
    if len(names) == 1 and "named" in supported:
        return names[0], "named", f"tool strategy named-then-none: forced {names[0]!r}"
    if "required" in supported:
        return (
            "required",
            "required",
            f"tool strategy named-then-none: 'required' ({len(names)} tools)",
        )
    if prompted and "none" in supported:
        return (
            "none",
            "prompted",
            (
                f"tool strategy named-then-none: {len(names)} tools, so none can be forced by name: "
                "they are described in the system prompt, tool_choice 'none' is sent and the calls "
                "are read from the answer text"
            ),
        )
    return "auto", "auto", f"tool strategy named-then-none: 'auto' ({len(names)} tools)"


def _fallback(form: str, names: list[str], supported: frozenset[str]) -> str:
    """The supported tool choice closest to ``form``: a forced choice stays forced where it
    can (one tool by name <-> ``required``), anything else becomes ``"auto"``."""
    if form == "named" and "required" in supported:
        return "required"
    if form == "required" and "named" in supported and len(names) == 1:
        return names[0]
    return "auto" if "auto" in supported else sorted(supported - {"named"})[0]


def _count(value: Any) -> int | None:
    """A token count as sent, ``None`` when absent or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


# --------------------------------------------------------------------------- conversion


def openai_tools(request: ModelRequest, *, strict: bool = False) -> list[dict[str, Any]]:
    """``request.tools`` as Chat Completions ``tools`` entries; with ``strict``, each tool whose
    schema strict mode can express is offered strict, any other as it is."""
    return [_tool(spec, strict) for spec in request.tools]


def _tool(spec: ToolSpec, strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
    }
    if strict:
        try:
            function["parameters"] = openai_strict_schema(spec.parameters, tool=spec.name)
            function["strict"] = True
        except ConfigurationError as exc:  # e.g. a free-form dict: only this tool goes loose
            logger.info("%s; offering it without strict mode", exc)
    return {"type": "function", "function": function}


def _strict_schemas(request: ModelRequest, body: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The own schema of each tool ``body`` offers in strict mode (as sent: ``extra_body`` wins)."""
    names = {
        entry["function"].get("name")
        for entry in body.get("tools") or ()
        if isinstance(entry, dict)
        and isinstance(entry.get("function"), dict)
        and entry["function"].get("strict") is True
    }
    return {spec.name: spec.parameters for spec in request.tools if spec.name in names}


def _drop_strict_nulls(schema: dict[str, Any], arguments: str) -> str:
    """``arguments`` without the ``null`` strict mode sends for an optional argument left out."""
    try:
        parsed = json.loads(arguments)
    except ValueError:  # malformed: passed on as it is, the agent loop reports it
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    cleaned = drop_strict_nulls(schema, parsed)
    return arguments if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)


def openai_messages(
    request: ModelRequest, *, images: bool = True, results_as_user: bool = False
) -> list[dict[str, Any]]:
    """The system prompt and neutral messages as Chat Completions messages.

    ``results_as_user``: a turn's tool results go in one ``user`` message, each under a line
    naming its call (for servers whose template drops ``tool`` messages)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    pending_images: list[dict[str, Any]] = []
    results: list[str] = []

    def flush() -> None:
        nonlocal pending_images
        if results:
            out.append({"role": "user", "content": "\n\n".join(results)})
            results.clear()
        if pending_images:
            out.append({"role": "user", "content": pending_images})
            pending_images = []

    for message in request.messages:
        if not isinstance(message, ToolResultMessage):
            flush()
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message))
        else:
            text, attached = _tool_result(message, images)
            if results_as_user:
                results.append(f"Result of {message.name} (call {message.call_id}):\n{text}")
            else:
                out.append({"role": "tool", "tool_call_id": message.call_id, "content": text})
            pending_images.extend(attached)
    flush()
    return out


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:  # "" rather than null: some servers answer null with HTTP 500
        entry["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in message.tool_calls
        ]
    return entry


def _tool_result(message: ToolResultMessage, images: bool) -> tuple[str, list[dict[str, Any]]]:
    texts: list[str] = []
    attached: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ImageBlock) and images:
            if not attached:
                attached.append(
                    {
                        "type": "text",
                        "text": f"Image(s) returned by tool '{message.name}' "
                        f"(call {message.call_id}):",
                    }
                )
            attached.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"},
                }
            )
            texts.append(block_text(block) + " (attached in the next message)")
        else:
            texts.append(block_text(block))
    return "\n".join(texts), attached
