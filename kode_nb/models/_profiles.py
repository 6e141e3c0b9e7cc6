"""Server profiles: what each OpenAI-compatible server documents differently (data, no logic).

:func:`detect_profile` picks a profile from the base URL (host names, then well-known local
ports); ``OpenAIChatModel(profile="...")`` names one explicitly. An unknown server gets
``generic``, whose defaults are the safe ones: ``tool_choice`` sent explicitly, usage asked for,
``""`` (not ``null``) as the content of an assistant message that only calls tools, and a
streamed request that comes back empty retried once without streaming. ``docs/MODEL-SERVERS.md``
lists each quirk with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from kode_nb.errors import ConfigurationError

__all__ = ["PROFILES", "ServerProfile", "detect_profile", "get_profile"]


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


PROFILES: dict[str, ServerProfile] = {
    p.name: p
    for p in (
        ServerProfile("generic", "an OpenAI-compatible server"),
        ServerProfile(
            "openai",
            "OpenAI",
            strict=True,
            max_tokens_field="max_completion_tokens",
            api_key_env="OPENAI_API_KEY",
        ),
        ServerProfile(
            "azure",
            "Azure OpenAI",
            max_tokens_field="max_completion_tokens",
            api_key_header="api-key",
            api_key_env="AZURE_OPENAI_API_KEY",
            api_version="2024-10-21",
            parallel_tool_calls=False,
        ),
        ServerProfile("ollama", "Ollama", tool_choices=frozenset({"auto"})),
        ServerProfile("vllm", "vLLM"),
        ServerProfile("llama-server", "llama.cpp llama-server"),
        ServerProfile(
            "llama-cpp-python",
            "llama-cpp-python server",
            stream_tools=False,
            tool_choices=frozenset({"auto", "none", "named"}),
        ),
        ServerProfile("lmstudio", "LM Studio"),
        ServerProfile("openrouter", "OpenRouter", api_key_env="OPENROUTER_API_KEY"),
        ServerProfile(
            "gemini",
            "Gemini (OpenAI-compatible endpoint)",
            api_key_env="GEMINI_API_KEY",
            parallel_tool_calls=False,
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
