"""Secret redaction for traces, exports and displays.

:func:`redact` returns a copy of a JSON-shaped value (dicts, lists, strings, numbers) in which
secrets are replaced by ``[REDACTED]``:

* values of environment variables whose name ends in ``_KEY``, ``_TOKEN`` or ``_SECRET``, or
  contains ``PASSWORD`` (case-insensitive), that are present in ``os.environ`` when ``redact``
  is called, wherever they occur inside a string (values shorter than 6 characters are left
  alone: redacting ``"1"`` everywhere would destroy the text, not protect a secret);
* anything that looks like a provider key (``sk-…``, ``sk-ant-…``, ``ghp_…``, ``xox…-…``, AWS
  ``AKIA…``), a ``Bearer …`` credential, or an ``Authorization: …`` header line;
* the whole value of a mapping key that names a credential (``api_key``, ``apiKey``,
  ``authorization``, ``password``, ``secret``, ``token``, ``access_token``, ``x-api-key``, …).

The trace recorder (:mod:`kode_nb.agents.trace`) and :class:`~kode_nb.JsonlAuditLog` run every
value through :func:`redact` before storing it, so traces, their JSON and OpenTelemetry exports
and audit logs never hold a secret; displays should pass any text they show through
:func:`redact_text`.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "add_secret",
    "discard_secret",
    "environment_secrets",
    "is_secret_key",
    "redact",
    "redact_text",
]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

_MIN_ENV_SECRET = 6
_ENV_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)
_PATTERNS: tuple[re.Pattern[str], ...] = (
    # "Authorization: <anything up to the end of the line>" (headers in logs and error bodies)
    re.compile(r"(?i)(?<![\w-])((?:proxy-)?authorization\s*[:=]\s*)[^\r\n]+"),
    re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=-]{12,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
)
_SECRET_KEY = re.compile(
    r"(?i)^(x[-_])?(api[-_]?key|apikey|auth|authorization|proxy[-_]authorization|password|"
    r"passwd|secret|client[-_]secret|token|access[-_]token|refresh[-_]token|id[-_]token|"
    r"session[-_]token|private[-_]key|cookie|set[-_]cookie)$"
)


@functools.lru_cache(maxsize=2048)
def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a credential (its whole value is redacted)."""
    return bool(_SECRET_KEY.match(key.strip()))


_SECRET_NAMES: dict[str, bool] = {}
"""Memo of ``_ENV_NAME.search`` per variable name (names repeat; values are always read fresh)."""

_HINT = re.compile(r"authorization|bearer|sk-|gh[pousr]_|github_pat_|xox|akia|aiza", re.IGNORECASE)
"""Something every pattern match contains: one cheap search before the substitutions."""


def _is_secret_name(name: str) -> bool:
    known = _SECRET_NAMES.get(name)
    if known is None:
        if len(_SECRET_NAMES) > 4096:
            _SECRET_NAMES.clear()
        known = _SECRET_NAMES[name] = bool(_ENV_NAME.search(name))
    return known


_NAMES_TTL = 1.0
"""Seconds a scan of ``os.environ``'s names is reused while its length is unchanged."""
_names_cache: tuple[int, float, tuple[str, ...]] | None = None


def _secret_names(env: Mapping[str, str]) -> tuple[str, ...]:
    """Names of secret-looking variables. Iterating ``os.environ`` decodes every entry, so for
    it the scan is reused until a variable is added or removed, or for at most ``_NAMES_TTL``
    seconds; values are always read fresh, so a changed value is never missed."""
    global _names_cache
    if env is not os.environ:
        return tuple(name for name in env if _is_secret_name(name))
    now, size = time.monotonic(), len(env)
    cached = _names_cache
    if cached is not None and cached[0] == size and now - cached[1] < _NAMES_TTL:
        return cached[2]
    names = tuple(name for name in env if _is_secret_name(name))
    _names_cache = (size, now, names)
    return names


_ADDED: set[str] = set()
"""Secrets made here rather than read from the environment (:func:`add_secret`)."""


def add_secret(value: str) -> None:
    """Redact ``value`` everywhere from now on, like an environment secret (e.g. the bearer
    token of an MCP server this process serves)."""
    if isinstance(value, str) and len(value.strip()) >= _MIN_ENV_SECRET:
        _ADDED.add(value)


def discard_secret(value: str) -> None:
    """Stop treating ``value`` (given to :func:`add_secret`) as a secret."""
    _ADDED.discard(value)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values in the environment now, and those given to :func:`add_secret`
    (longest first, so overlaps redact fully)."""
    env = os.environ if environ is None else environ
    found = set(_ADDED)
    for name in _secret_names(env):
        value = env.get(name)
        if value is not None and len(value.strip()) >= _MIN_ENV_SECRET:
            found.add(value)
    return sorted(found, key=len, reverse=True)


def _sub_patterns(text: str) -> str:
    if _HINT.search(text) is None:
        return text
    text = _PATTERNS[0].sub(lambda m: m.group(1) + REDACTED, text)
    text = _PATTERNS[1].sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    for pattern in _PATTERNS[2:]:
        text = pattern.sub(REDACTED, text)
    return text


def _redact_str(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _sub_patterns(text)


def redact_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED]`` (see the module docstring)."""
    return _redact_str(text, environment_secrets(environ))


def redact(value: Any, *, environ: Mapping[str, str] | None = None) -> Any:
    """A redacted copy of a JSON-shaped ``value``; other objects are redacted as their ``str``.

    Mapping keys are kept (a key naming a credential gets its whole value replaced); tuples
    and sets become lists; ``bool``/``int``/``float``/``None`` pass through unchanged.
    """
    return _walk(value, environment_secrets(environ), 0)


def _walk(value: Any, secrets: list[str], depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _redact_str(value, secrets)
    if depth > 50:
        return "[too deep]"
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _redact_str(str(key), secrets)
            if is_secret_key(str(key)) and item not in (None, "") and not isinstance(item, bool):
                out[name] = REDACTED
            else:
                out[name] = _walk(item, secrets, depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_walk(item, secrets, depth + 1) for item in items]
    if isinstance(value, bytes):
        return _redact_str(value.decode("utf-8", "replace"), secrets)
    return _redact_str(str(value), secrets)
