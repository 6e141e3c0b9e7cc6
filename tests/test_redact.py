"""Secret redaction: environment values, key-like patterns, credential keys, nesting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kode_nb._redact import REDACTED, environment_secrets, is_secret_key, redact, redact_text

ENV = {
    "OPENAI_API_KEY": "sk-live-0123456789abcdef",
    "GITHUB_TOKEN": "tok-ABCDEFGHIJ",
    "AWS_SECRET": "aws-secret-value",
    "DB_PASSWORD_FILE": "hunter2hunter2",
    "my_key": "lowercase-secret",
    "SHORT_KEY": "abc",
    "KEYBOARD": "not-a-secret-name",
    "HOME": "/home/user",
}


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET", "DB_PASSWORD_FILE", "my_key"]
)
def test_environment_values_with_secret_names_are_redacted(name: str) -> None:
    value = ENV[name]
    assert redact_text(f"value={value}!", environ=ENV) == f"value={REDACTED}!"


def test_other_environment_values_and_short_ones_are_kept() -> None:
    text = "not-a-secret-name /home/user abc"
    assert redact_text(text, environ=ENV) == text
    assert "abc" not in environment_secrets(ENV)


def test_the_live_environment_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    assert redact_text("x rotating-value-42 x") == "x rotating-value-42 x"
    monkeypatch.setenv("ROTATING_TOKEN", "rotating-value-42")
    assert redact_text("x rotating-value-42 x") == f"x {REDACTED} x"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-abcdefgh12345678 end", f"key {REDACTED} end"),
        ("anthropic sk-ant-api03-AAAAAAAAAAAA", f"anthropic {REDACTED}"),
        ("Authorization: Bearer abc.def.ghi\nnext line", f"Authorization: {REDACTED}\nnext line"),
        ("use bearer abcdefghijklmnop now", f"use bearer {REDACTED} now"),
        ("gh ghp_abcdefghijklmnopqrstuvwxyz012345", f"gh {REDACTED}"),
        ("aws AKIAABCDEFGHIJKLMNOP", f"aws {REDACTED}"),
        ("slack xoxb-1234567890-abcdef", f"slack {REDACTED}"),
        ("the bearer of news", "the bearer of news"),
        ("max_tokens=100 input_tokens", "max_tokens=100 input_tokens"),
        ("ask-me-anything", "ask-me-anything"),
    ],
)
def test_key_like_patterns(text: str, expected: str) -> None:
    assert redact_text(text, environ={}) == expected


def test_credential_keys_lose_their_whole_value_and_nesting_is_followed() -> None:
    data = {
        "headers": {"Authorization": "anything at all", "X-Api-Key": "k1", "Accept": "json"},
        "api_key": "plain",
        "password": 12345,
        "token": None,
        "max_tokens": 10,
        "items": ["ok", ("sk-abcdefghijklmnop",)],
        "flag": True,
        "ratio": 0.5,
    }
    assert redact(data, environ={}) == {
        "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "json"},
        "api_key": REDACTED,
        "password": REDACTED,
        "token": None,
        "max_tokens": 10,
        "items": ["ok", [REDACTED]],
        "flag": True,
        "ratio": 0.5,
    }


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "API-KEY",
        "x-api-key",
        "authorization",
        "access_token",
        "client_secret",
        "Cookie",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "tokenizer", "keyword", "author", "secrets_count"])
def test_ordinary_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_other_objects_are_redacted_as_text() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing with sk-abcdefghijklmnop"

    assert redact(Thing(), environ={}) == f"thing with {REDACTED}"
    assert redact(b"bytes sk-abcdefghijklmnop", environ={}) == f"bytes {REDACTED}"
    assert redact({"s": {3, 1}}, environ={}) == {"s": [1, 3]}


def test_environment_secrets_follow_added_changed_and_removed_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    environment_secrets()  # warm the scan of names
    monkeypatch.setenv("LATE_API_KEY", "first-secret-value")
    assert "first-secret-value" in environment_secrets()  # a new name is seen at once
    monkeypatch.setenv("LATE_API_KEY", "second-secret-value")
    secrets = environment_secrets()
    assert "second-secret-value" in secrets  # a changed value is read fresh
    assert "first-secret-value" not in secrets
    monkeypatch.delenv("LATE_API_KEY")
    assert "second-secret-value" not in environment_secrets()
    assert redact_text("x second-secret-value") == "x second-secret-value"


def test_the_shortest_environment_secret_is_still_redacted() -> None:
    """Strings shorter than any secret skip the work; a 6-character one is not that short."""
    environ = {"SHOP_TOKEN": "q7w9e2"}
    assert redact_text("pay with q7w9e2", environ=environ) == "pay with [REDACTED]"
    assert redact_text("q7w9e2", environ=environ) == "[REDACTED]"


def test_a_cached_string_is_redacted_again_once_it_holds_a_new_secret() -> None:
    from kode_nb._redact import register_secret

    text = "note: zq8-late-secret-77"
    assert redact_text(text, environ={}) == text  # cached as clean for these secrets
    register_secret("zq8-late-secret-77")
    assert redact_text(text, environ={}) == "note: [REDACTED]"


# ----------------------------------------------------------------- the walk, against a plain one


def _plain_walk(value: Any, secrets: list[str], depth: int = 0) -> Any:
    """The walk written plainly: one call per value, every key checked in full."""
    from kode_nb._redact import _names_a_secret, _redact_str

    if isinstance(value, str):
        return _redact_str(value, secrets)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth > 50:
        return "[too deep]"
    if isinstance(value, Mapping):
        hidden = "value" in value and _names_a_secret(value)
        out: dict[str, Any] = {}
        for key, item in value.items():
            text = key if isinstance(key, str) else str(key)
            secret = is_secret_key(text) or (hidden and key == "value")
            if secret and item not in (None, "") and not isinstance(item, bool):
                out[_redact_str(text, secrets)] = REDACTED
            else:
                out[_redact_str(text, secrets)] = _plain_walk(item, secrets, depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_plain_walk(item, secrets, depth + 1) for item in items]
    if isinstance(value, bytes):
        return _redact_str(value.decode("utf-8", "replace"), secrets)
    return _redact_str(str(value), secrets)


_SECRET_WORD = "s3cr3t-value-42"
_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "short", _SECRET_WORD, f"key {_SECRET_WORD}!", "sk-" + "a" * 24])
    | st.sampled_from(["OPENAI_API_KEY", "password", "Authorization"])
    | st.text(max_size=12)
)
_keys = st.sampled_from(["api_key", "token", "name", "value", "key", "content", "x", "password"])
_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_keys | st.text(max_size=8), inner, max_size=4)
        | st.fixed_dictionaries(
            {"name": st.sampled_from(["OPENAI_API_KEY", "city", "DB_PASSWORD"]), "value": inner}
        )
    ),
    max_leaves=30,
)


@given(_values)
def test_the_walk_gives_what_the_plain_walk_gives(value: Any) -> None:
    from kode_nb._redact import _walk

    secrets = [_SECRET_WORD]
    assert _walk(value, secrets, 0) == _plain_walk(value, secrets)


def test_the_walk_stops_at_the_same_depth_as_the_plain_walk() -> None:
    from kode_nb._redact import _walk

    deep: Any = "leaf"
    for i in range(60):
        deep = {"k": [deep]} if i % 2 else [{"v": deep}]
    assert _walk(deep, [], 0) == _plain_walk(deep, [])
    assert "[too deep]" in repr(_walk(deep, [], 0))
