"""Secret redaction for traces, exports and displays.

:func:`redact` returns a copy of a JSON-shaped value (dicts, lists, strings, numbers) in which
secrets are replaced by ``[REDACTED]``:

* values of environment variables whose name looks secret (ends in ``KEY``, ``TOKEN``,
  ``SECRET``, ``_PAT`` or ``_PASS``, or contains ``PASSWORD``, ``PASSWD``, ``SECRET``,
  ``CREDENTIAL``, ``PRIVATE`` or ``API_KEY``; case-insensitive), read from ``os.environ`` when
  ``redact`` is called, wherever they occur inside a string (values shorter than 6 characters
  are left alone: redacting ``"1"`` everywhere would destroy the text, not protect a secret);
* values this session registered with :func:`register_secret` (API keys given to models, MCP
  bearer tokens; at least 8 characters), wherever they occur, whatever their name;
* the password of a URL's ``scheme://user:password@host``;
* anything that looks like a provider key (``sk-…``, ``sk-ant-…``, ``ghp_…``, ``xox…-…``, AWS
  ``AKIA…``), a ``Bearer …`` credential, or an ``Authorization: …`` header line;
* in text (JSON, a dict's repr), the quoted value after a quoted credential key:
  ``"password": "…"``, ``'Authorization': '…'``;
* the whole value of a mapping key that names a credential (``api_key``, ``apiKey``,
  ``authorization``, ``password``, ``secret``, ``token``, ``access_token``, ``x-api-key``, …),
  and the ``value`` of a mapping whose ``key``/``name`` is a secret-looking name (``set_env``'s
  ``{"key": "DB_PASSWORD", "value": …}``, ``{"name": "Authorization", "value": …}``).

In a Jupyter kernel, what code prints goes out on IOPub: :func:`redact_kernel_output` puts a
:class:`RedactingStream` in front of the kernel's ``sys.stdout``/``sys.stderr`` (every
:class:`~kode_nb.Executor` made in a kernel does), so what a tool prints passes through
:func:`redact_stream` — a tail that may be the start of a known secret is held until the next
write or flush — before it is sent. Outside a kernel nothing is wrapped.

What it cannot catch: a secret the session was never told about, whose name matches nothing
and whose text has no known shape (a password passed as ``text=...``), and a secret split
across two streamed chunks.

The trace recorder (:mod:`kode_nb.traces._trace`) and :class:`~kode_nb.JsonlAuditLog` run every
value through :func:`redact` before storing it, so traces, their JSON and OpenTelemetry exports
and audit logs never hold a secret; the notebook displays (:mod:`kode_nb.ui.html`'s escaping,
JSON and clipping helpers, streamed updates) and magic error messages pass what they show
through :func:`redact` / :func:`redact_text`.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from collections.abc import Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "Redacted",
    "RedactingStream",
    "environment_secrets",
    "is_secret_key",
    "known_secrets",
    "redact",
    "redact_kernel_output",
    "redact_text",
    "redact_stream",
    "redacted",
    "register_secret",
    "unregister_secret",
]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

_MIN_ENV_SECRET = 6
_MIN_REGISTERED = 8
_ENV_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|_PAT|_PASS)$|PASSWORD|PASSWD|SECRET|CREDENTIAL|PRIVATE|API_?KEY",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:\[\]]*:)([^\s/?#@]+)@")
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
_KEY_NAMES = (
    r"(x[-_])?(api[-_]?key|apikey|auth|authorization|proxy[-_]authorization|password|"
    r"passwd|secret|client[-_]secret|token|access[-_]token|refresh[-_]token|id[-_]token|"
    r"session[-_]token|private[-_]key|cookie|set[-_]cookie)"
)
_SECRET_KEY = re.compile(rf"(?i)^{_KEY_NAMES}$")
_QUOTED_PAIR = re.compile(
    rf"""(?i)(?P<head>(?P<q>["']){_KEY_NAMES}(?P=q)\s*:\s*(?P<v>["']))(?:\\.|(?!(?P=v)).)+(?P=v)"""
)
"""``"password": "..."`` / ``'token': '...'`` in JSON text or a Python dict's repr."""


@functools.lru_cache(maxsize=2048)
def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a credential (its whole value is redacted)."""
    known = _SECRET_KEYS.get(key)
    if known is None:
        if len(_SECRET_KEYS) > 4096:
            _SECRET_KEYS.clear()
        known = _SECRET_KEYS[key] = bool(_SECRET_KEY.match(key.strip()))
    return known


_SECRET_KEYS: dict[str, bool] = {}
"""Memo of :func:`is_secret_key` (a trace's mappings repeat the same few keys)."""


_SECRET_NAMES: dict[str, bool] = {}
"""Memo of ``_ENV_NAME.search`` per variable name (names repeat; values are always read fresh)."""

_HINT = re.compile(
    r"authorization|bearer|sk-|gh[pousr]_|github_pat_|xox|akia|aiza|://", re.IGNORECASE
)
"""Something every pattern match contains: one cheap search before the substitutions."""
_PAIR_HINT = re.compile(
    r"""["'](?:x[-_])?(?:api|auth|pass|secret|client|token|access|refresh|id[-_]|session|"""
    r"""private|cookie|set[-_]|proxy)""",
    re.IGNORECASE,
)
"""What a ``_QUOTED_PAIR`` match starts with."""


def _is_secret_name(name: str) -> bool:
    known = _SECRET_NAMES.get(name)
    if known is None:
        if len(_SECRET_NAMES) > 4096:
            _SECRET_NAMES.clear()
        known = _SECRET_NAMES[name] = bool(_ENV_NAME.search(name))
    return known


_Environ = type(os.environ)


def _secret_names(env: Mapping[str, str]) -> tuple[str, ...]:
    """Names of secret-looking variables in ``env``."""
    return tuple(name for name in env if _is_secret_name(name))


def _secret_values(values: Any) -> list[str]:
    """The values long enough to be secrets, longest first (so overlaps redact fully)."""
    found = {v for v in values if v is not None and len(v.strip()) >= _MIN_ENV_SECRET}
    return sorted(found, key=len, reverse=True)


_env_seen: tuple[tuple[Any, ...], tuple[tuple[Any, Any], ...], list[str]] = ((), (), [])
"""For ``os.environ``: its raw (undecoded) names when last read, the raw name and value of
each secret-looking one, and the list of secrets made from them (the same list object is
returned while they stay the same)."""


def _os_environ_secrets(env: Any, raw: dict[Any, Any]) -> list[str]:
    """:func:`environment_secrets` of ``os.environ``, read from its raw table (what every change
    to it writes): names are decoded and scanned again only when the set of names changed, and
    the secret-looking ones' values are compared by identity, so each call reads them fresh
    without decoding every entry."""
    global _env_seen
    names, pairs, result = _env_seen
    keys = tuple(raw)
    if keys == names:
        get = raw.get
        for key, value in pairs:
            if get(key) is not value:
                break
        else:
            return result
    else:
        decode = env.decodekey
        pairs = tuple((key, None) for key in keys if _is_secret_name(decode(key)))
    pairs = tuple((key, raw.get(key)) for key, _ in pairs)
    decode_value = env.decodevalue
    result = _secret_values(decode_value(v) for _, v in pairs if v is not None)
    _env_seen = (keys, pairs, result)
    return result


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values in the environment now (longest first, so overlaps redact fully)."""
    env = os.environ if environ is None else environ
    if type(env) is _Environ:
        raw = getattr(env, "_data", None)
        if type(raw) is dict:
            return _os_environ_secrets(env, raw)
    return _secret_values(env.get(name) for name in _secret_names(env))


_registered: set[str] = set()
_registered_lock = threading.Lock()
_registered_sorted: list[str] = []


def register_secret(value: object) -> bool:
    """Redact ``value`` wherever it appears from now on (this process); returns whether it was
    taken (strings of at least 8 non-blank characters: shorter ones would redact ordinary text).

    Model adapters register the API keys they are given; anything holding a credential that no
    name or pattern gives away should register it too.
    """
    global _registered_sorted
    if not isinstance(value, str) or len(value.strip()) < _MIN_REGISTERED:
        return False
    with _registered_lock:
        if value not in _registered:
            _registered.add(value)
            _registered_sorted = sorted(_registered, key=len, reverse=True)
    return True


def unregister_secret(value: object) -> None:
    """Stop redacting ``value`` (given to :func:`register_secret`): for a credential that no
    longer works, such as the token of an MCP server that was stopped."""
    global _registered_sorted
    with _registered_lock:
        if value in _registered:
            _registered.discard(value)
            _registered_sorted = sorted(_registered, key=len, reverse=True)


def known_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values redacted now: the environment's and the registered ones (longest
    first)."""
    global _union
    env = os.environ
    raw = getattr(env, "_data", None) if environ is None and type(env) is _Environ else None
    found = _os_environ_secrets(env, raw) if type(raw) is dict else environment_secrets(environ)
    registered = _registered_sorted
    if not registered:
        return _current(found)
    last = _union
    if last[0] is found and last[1] is registered:  # the same lists: the same union
        return _current(last[2])
    secrets = sorted(set(found).union(registered), key=len, reverse=True)
    _union = (found, registered, secrets)
    return _current(secrets)


_union: tuple[list[str], list[str], list[str]] = ([], [], [])


# Redacted short strings, for the secrets they were redacted against: a trace stores the same
# schema and message strings at every model call. The cache belongs to one list of secrets (the
# very object ``known_secrets()`` returns while the secrets stay the same), and the pair is read
# and replaced as one reference, so no thread ever uses results made for other secrets.
_cache: tuple[list[str], dict[str, str]] = ([], {})
_CACHE_ENTRIES = 8192
_CACHE_CHARS = 256


def _current(secrets: list[str]) -> list[str]:
    global _cache
    cached_for = _cache[0]
    if secrets == cached_for:
        return cached_for
    _cache = (secrets, {})
    return secrets


def _sub_patterns(text: str) -> str:
    if _PAIR_HINT.search(text) is not None:
        text = _QUOTED_PAIR.sub(lambda m: m.group("head") + REDACTED + m.group("v"), text)
    if _HINT.search(text) is None:
        return text
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + "@", text)
    text = _PATTERNS[0].sub(lambda m: m.group(1) + REDACTED, text)
    text = _PATTERNS[1].sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    for pattern in _PATTERNS[2:]:
        text = pattern.sub(REDACTED, text)
    return text


_SHORTEST = 6
"""No secret fits in fewer characters: a known value has at least 6 (an environment variable's;
8 for :func:`register_secret`), and every pattern above needs more (``sk-`` + 8, ``a://b:c@``,
``"auth":"x"``, ...)."""


def _redact_str(text: str, secrets: list[str]) -> str:
    if len(text) < _SHORTEST:  # most keys and values of a JSON schema or a message: unchanged
        return text
    cached_for, cache = _cache
    if len(text) > _CACHE_CHARS or secrets is not cached_for:
        return _redact_uncached(text, secrets)
    done = cache.get(text)
    if done is None:
        done = _redact_uncached(text, secrets)
        if len(cache) >= _CACHE_ENTRIES:
            cache.clear()
        cache[text] = done
    return done


def _redact_uncached(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _sub_patterns(text)


def redact_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED]`` (see the module docstring)."""
    return _redact_str(text, known_secrets(environ))


def redact(value: Any, *, environ: Mapping[str, str] | None = None) -> Any:
    """A redacted copy of a JSON-shaped ``value``; other objects are redacted as their ``str``.

    Mapping keys are kept (a key naming a credential gets its whole value replaced); tuples
    and sets become lists; ``bool``/``int``/``float``/``None`` pass through unchanged.
    """
    return _walk(value, known_secrets(environ), 0)


class Redacted:
    """A value already redacted (made by :func:`redacted`), with the secrets it was redacted
    against. :func:`redact` takes its value as it is while the known secrets are still those
    (the very list :func:`known_secrets` returns while they stay the same), and redacts it again
    otherwise. For data recorded again and again, such as a run's earlier messages and its tool
    schemas at every model call."""

    __slots__ = ("secrets", "value")

    def __init__(self, value: Any, secrets: list[str]) -> None:
        self.value = value
        self.secrets = secrets

    def __repr__(self) -> str:
        return f"Redacted({self.value!r})"


def redacted(value: Any) -> Redacted:
    """``redact(value)``, kept as a :class:`Redacted` for recording again (not to be changed)."""
    secrets = known_secrets()
    return Redacted(_walk(value, secrets, 0), secrets)


_PLAIN = frozenset({type(None), bool, int, float})


def _walk(value: Any, secrets: list[str], depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return _redact_str(value, secrets)
    if kind is Redacted:
        return value.value if value.secrets is secrets else _walk(value.value, secrets, depth)
    if kind in _PLAIN or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _redact_str(value, secrets)
    if depth > 50:
        return "[too deep]"
    if kind is dict or isinstance(value, Mapping):
        return _walk_mapping(value, secrets, depth)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        depth += 1
        return [
            _redact_str(item, secrets)
            if type(item) is str
            else item
            if type(item) in _PLAIN
            else _walk(item, secrets, depth)
            for item in items
        ]
    if isinstance(value, bytes):
        return _redact_str(value.decode("utf-8", "replace"), secrets)
    return _redact_str(str(value), secrets)


def _walk_mapping(value: Mapping[Any, Any], secrets: list[str], depth: int) -> dict[str, Any]:
    """A mapping's redacted copy (``_walk``'s for mappings; the leaves of the usual types are
    handled here, without a call each)."""
    out: dict[str, Any] = {}
    hidden = "value" in value and _names_a_secret(value)
    depth += 1
    for key, item in value.items():
        text = key if type(key) is str else str(key)
        name = text if len(text) < _SHORTEST else _redact_str(text, secrets)
        if (is_secret_key(text) or (hidden and key == "value")) and (
            item not in (None, "") and not isinstance(item, bool)
        ):
            out[name] = REDACTED
            continue
        kind = type(item)
        if kind is str:
            out[name] = item if len(item) < _SHORTEST else _redact_str(item, secrets)
        elif kind in _PLAIN:
            out[name] = item
        else:
            out[name] = _walk(item, secrets, depth)
    return out


_NAMING_KEYS = ("key", "name", "header", "variable", "var")


def _names_a_secret(mapping: Mapping[Any, Any]) -> bool:
    """Whether ``mapping`` is a ``{"key"|"name": <a secret-looking name>, "value": ...}`` pair."""
    if "value" not in mapping:
        return False
    for key in _NAMING_KEYS:
        named = mapping.get(key)
        if isinstance(named, str) and (is_secret_key(named) or _is_secret_name(named)):
            return True
    return False


def redact_stream(text: str, *, final: bool = False) -> tuple[str, str]:
    """``(shown, held)`` for streamed ``text``: ``shown`` is redacted and safe to send now;
    ``held`` is a tail that may be the start of a known secret, to be prepended to the next
    chunk (or, with ``final``, nothing is held). A secret split across chunks is so never
    shown in parts.

    The whole text is redacted first and the tail is looked for in what that left: a secret
    that is all there is replaced, even when its own last characters could also begin a secret
    (``"A...A"`` ends with the start of itself), so no cut ever falls inside a whole secret."""
    if not text:
        return "", ""
    shown = redact_text(text)
    if final:
        return shown, ""
    hold = _secret_start_at_end(shown, known_secrets())
    if hold == 0:
        return shown, ""
    return shown[: len(shown) - hold], shown[len(shown) - hold :]


def _secret_start_at_end(text: str, secrets: list[str]) -> int:
    """The length of the longest tail of ``text`` that is a proper start of one of
    ``secrets`` (0: none)."""
    hold = 0
    for secret in secrets:
        first = secret[0]
        start = max(len(text) - len(secret) + 1, 0)
        i = text.find(first, start)
        while i != -1:
            k = len(text) - i
            if k <= hold:
                break
            if secret.startswith(text[i:]):
                hold = k
                break
            i = text.find(first, i + 1)
    return hold


class RedactingStream:
    """A text stream that redacts what it passes on to ``inner`` (other attributes: inner's)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._held = ""
        self._lock = threading.Lock()

    def write(self, text: Any) -> int:
        if not isinstance(text, str):
            return int(self._inner.write(text))
        with self._lock:
            shown, self._held = redact_stream(self._held + text)
            if shown:
                self._inner.write(shown)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            if self._held:
                self._inner.write(redact_text(self._held))
                self._held = ""
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _is_kernel_stream(stream: Any) -> bool:
    return type(stream).__module__.startswith("ipykernel.")


def redact_kernel_output() -> bool:
    """Wrap the kernel's ``sys.stdout``/``sys.stderr`` (see the module docstring); True when
    they are (now or already) redacted."""
    done = False
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, RedactingStream):
            done = True
        elif _is_kernel_stream(stream):
            setattr(sys, name, RedactingStream(stream))
            done = True
    return done
