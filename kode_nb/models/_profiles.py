"""Server profiles: what each OpenAI-compatible server documents differently (data, no logic).

:func:`detect_profile` picks a profile from the base URL (host names, then well-known local
ports); ``OpenAIChatModel(profile="...")`` names one explicitly. An unknown server gets
``generic``, whose defaults are the safe ones: ``tool_choice`` sent explicitly, usage asked for,
``""`` (not ``null``) as the content of an assistant message that only calls tools, and a
streamed request that comes back empty retried once without streaming. ``docs/model-servers.md``
lists each quirk with its source.

A server that is not a hosted provider is identified once per base URL, before the first request
(:mod:`kode_nb.models._servers`): :func:`profile_from_models` reads its ``GET /models`` answer
(llama-cpp-python lists its models as ``owned_by: "me"``, llama-server as ``"llamacpp"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from kode_nb.errors import ConfigurationError

__all__ = ["PROFILES", "ServerProfile", "detect_profile", "get_profile", "profile_from_models"]


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """How to talk to one kind of Chat Completions server."""

    name: str
    """The profile's name (``"ollama"``)."""
    title: str
    """What it is, for reprs and docs."""
    strict: bool = False
    """Offer tools in OpenAI strict mode by default."""
    max_tokens_field: str = "max_tokens"
    """``max_completion_tokens`` (OpenAI) or ``max_tokens``."""
    stream_usage: bool = True
    """Send ``stream_options.include_usage`` (rejected by some servers)."""
    stream_tools: bool = True
    """The server streams answers to requests that offer tools with ``tool_choice: "auto"``;
    ``False``: such requests are sent with ``stream: false`` from the start."""
    tool_choices: frozenset[str] = frozenset({"auto", "required", "none", "named"})
    """The ``tool_choice`` forms the server honours (``"named"``: one tool by name); any other
    is not sent, with a notice in the trace."""
    api_key_header: str = "Authorization"
    """``Authorization`` (``Bearer`` key) or ``api-key`` (Azure)."""
    api_key_env: str | None = None
    """The environment variable the key is read from when none is given."""
    api_version: str | None = None
    """Sent as the ``api-version`` query parameter (Azure)."""
    parallel_tool_calls: bool = True
    """The server accepts the ``parallel_tool_calls`` field."""
    parallel_by_default: bool = True
    """With ``parallel_tool_calls`` not sent, the server's own parser returns several calls of
    one answer (llama-server returns only the first). Calls read from text follow it: only the
    first is kept where the server would keep only the first."""
    tool_results_as_user: bool = False
    """Send tool results as a ``user`` message naming each call, not as ``tool`` messages (the
    server's prompt template drops ``tool`` messages, so the model would never see a result)."""
    hosted: bool = False
    """A hosted provider: never asked ``GET /models`` (it needs a key and lists hundreds)."""
    text_calls: bool = True
    """Read tool calls the model wrote as text (when the server returned none) as calls."""
    default_max_tokens: int | None = None
    """``max_tokens`` sent when the settings give none (``None``: the server's default; some
    local servers generate until the context is full)."""
    checks_model_id: bool = False
    """A model id missing from ``GET /models`` is an error (the server would silently answer
    with the one model it has, or fail later)."""
    progress: bool = False
    """Ask for progress events while the server reads a long prompt (llama-server's
    ``return_progress``): they count as the answer being under way."""
    prompt_rate: float | None = None
    """Slowest prompt reading expected, in tokens per second: the first-response limit and
    the deadline grow by ``prompt tokens / prompt_rate`` (``None``: fixed limits)."""
    tool_strategy: str = "native"
    """How tools are asked for: ``"native"`` (``tool_choice`` as set), or ``"named-then-none"``
    (a server whose ``auto`` decision step is unreliable: the first call of a turn forces the
    one tool offered, or ``required``; after a tool result, the tools described again under
    ``"none"``, nothing forced, so that the next call can be written or the answer given)."""
    response_schema: bool = False
    """The server constrains an answer to the JSON Schema sent as ``response_format:
    {"type": "json_object", "schema": ...}`` (a grammar). The prompted form of ``named-then-none``
    uses it (the answer can only be one call to one offered tool, with arguments that fit), and
    so does a call read from text whose arguments do not fit, asked for again."""
    escapes_messages: bool = False
    """The server's chat template HTML-escapes message text (``"`` reaches the model as
    ``&#34;``), which small models copy into their calls; prompts kode_nb writes avoid quotes and
    angle brackets there."""


_LOCAL_RATE = 20.0
"""Tokens per second a local server reads a prompt at, at worst (llama.cpp on 2 busy CPU cores
with a 0.5B model: 30 to 145; larger models are slower)."""
_LOCAL_MAX_TOKENS = 2048
"""The default answer length on local servers that otherwise generate until the context is
full (a cut-off answer is a warning on the run)."""

PROFILES: dict[str, ServerProfile] = {
    p.name: p
    for p in (
        ServerProfile("generic", "an OpenAI-compatible server", prompt_rate=_LOCAL_RATE),
        ServerProfile(
            "openai",
            "OpenAI",
            strict=True,
            max_tokens_field="max_completion_tokens",
            api_key_env="OPENAI_API_KEY",
            hosted=True,
            text_calls=False,
        ),
        ServerProfile(
            "azure",
            "Azure OpenAI",
            max_tokens_field="max_completion_tokens",
            api_key_header="api-key",
            api_key_env="AZURE_OPENAI_API_KEY",
            api_version="2024-10-21",
            parallel_tool_calls=False,
            hosted=True,
            text_calls=False,
        ),
        ServerProfile(
            "ollama",
            "Ollama",
            tool_choices=frozenset({"auto"}),
            checks_model_id=True,
            prompt_rate=_LOCAL_RATE,
        ),
        ServerProfile("vllm", "vLLM", checks_model_id=True, prompt_rate=_LOCAL_RATE),
        # llama-server ignores a named tool_choice ("Wrong type supplied for parameter
        # 'tool_choice'") and answers any model id with the model it has; under "required" the
        # model may write text before the call (the grammar waits for <tool_call>), while a
        # response_format schema constrains the whole answer; parallel_tool_calls is off unless
        # sent (its README: "Default: false").
        ServerProfile(
            "llama-server",
            "llama.cpp llama-server",
            tool_choices=frozenset({"auto", "required", "none"}),
            default_max_tokens=_LOCAL_MAX_TOKENS,
            checks_model_id=True,
            progress=True,
            prompt_rate=_LOCAL_RATE,
            response_schema=True,
            parallel_by_default=False,
        ),
        # chatml-function-calling: "auto" is a grammar-constrained decision step that small
        # models fail (junk or nothing); "required" is not implemented (read as "none"); under
        # "none" the template renders no tools, escapes the messages (autoescape) and honours
        # response_format's schema.
        ServerProfile(
            "llama-cpp-python",
            "llama-cpp-python server",
            stream_tools=False,
            tool_choices=frozenset({"auto", "none", "named"}),
            tool_results_as_user=True,
            default_max_tokens=_LOCAL_MAX_TOKENS,
            checks_model_id=True,
            prompt_rate=_LOCAL_RATE,
            tool_strategy="named-then-none",
            response_schema=True,
            escapes_messages=True,
        ),
        ServerProfile("lmstudio", "LM Studio", prompt_rate=_LOCAL_RATE),
        ServerProfile("openrouter", "OpenRouter", api_key_env="OPENROUTER_API_KEY", hosted=True),
        ServerProfile(
            "gemini",
            "Gemini (OpenAI-compatible endpoint)",
            api_key_env="GEMINI_API_KEY",
            parallel_tool_calls=False,
            hosted=True,
        ),
    )
}
"""The known profiles by name."""

_HOSTS = (
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure"),
    (".cognitiveservices.azure.com", "azure"),
    (".services.ai.azure.com", "azure"),
    ("openrouter.ai", "openrouter"),
    ("generativelanguage.googleapis.com", "gemini"),
)
_PORTS = {11434: "ollama", 1234: "lmstudio", 8080: "llama-server"}
"""Default ports; vLLM and llama-cpp-python share 8000, so that port says nothing."""


_OWNERS = {"me": "llama-cpp-python", "llamacpp": "llama-server", "vllm": "vllm"}
"""``owned_by`` of the models a server lists at ``GET /models`` -> its profile (each server's own
source sets these; docs/model-servers.md)."""


def profile_from_models(payload: object) -> ServerProfile | None:
    """The profile a ``GET /models`` answer identifies (every listed model owned by the same
    well-known owner), else ``None``."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or not data:
        return None
    owners = {m.get("owned_by") if isinstance(m, dict) else None for m in data}
    if len(owners) != 1:
        return None
    name = _OWNERS.get(str(owners.pop()))
    return PROFILES[name] if name else None


def get_profile(name: str) -> ServerProfile:
    """The profile called ``name``; ConfigurationError listing the known ones otherwise."""
    profile = PROFILES.get(name) if isinstance(name, str) else None
    if profile is None:
        raise ConfigurationError(
            f"unknown server profile {name!r}; known profiles: {', '.join(PROFILES)}"
        )
    return profile


def detect_profile(base_url: str) -> ServerProfile:
    """The profile for ``base_url``: by host name, then by a well-known local port."""
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    for suffix, name in _HOSTS:
        if host == suffix.lstrip(".") or host.endswith(suffix):
            return PROFILES[name]
    try:
        port = parts.port
    except ValueError:
        port = None
    local = host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.endswith(".local")
    if local and port in _PORTS:
        return PROFILES[_PORTS[port]]
    return PROFILES["generic"]
