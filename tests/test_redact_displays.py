"""Secrets the session knows (registered, in the environment) or whose shape gives them away
never reach a display: notebook renderings, streamed text, magic error messages."""

from __future__ import annotations

import asyncio
import itertools
import secrets
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from kode_nb._redact import (
    REDACTED,
    RedactingStream,
    known_secrets,
    redact,
    redact_stream,
    redact_text,
    register_secret,
    unregister_secret,
)
from kode_nb.policy import ApprovalRequest
from kode_nb.types import TextBlock, ToolResult
from kode_nb.ui import html as H
from kode_nb.ui.coalesce import Coalescer


def fresh(prefix: str = "val") -> str:
    return f"{prefix}-{secrets.token_hex(10)}"


def test_registered_values_are_redacted_whatever_their_name() -> None:
    value = fresh("plain")
    assert redact_text(f"a {value} b") == f"a {value} b"
    assert register_secret(value) is True
    assert redact_text(f"a {value} b") == f"a {REDACTED} b"
    assert redact({"note": [f"x{value}y"]}) == {"note": [f"x{REDACTED}y"]}
    assert value in known_secrets()


@pytest.mark.parametrize("value", ["short", "       spaces     ", None, 12345678, b"bytes-secret"])
def test_short_blank_and_non_text_values_are_not_registered(value: Any) -> None:
    assert register_secret(value) is False


@pytest.mark.parametrize(
    "name",
    ["SERVICE_PASSWD", "GITHUB_PAT", "SMTP_PASS", "DB_CREDENTIALS", "MY_PRIVATE", "X_APIKEY"],
)
def test_more_secret_looking_variable_names(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    value = fresh()
    monkeypatch.setenv(name, value)
    assert redact_text(f"<{value}>") == f"<{REDACTED}>"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "postgres://admin:pa55-word@db.local:5432/x",
            f"postgres://admin:{REDACTED}@db.local:5432/x",
        ),
        ("see https://u:p%40ss@example.test/a?b=c", f"see https://u:{REDACTED}@example.test/a?b=c"),
        ("redis://:only-password@cache:6379", f"redis://:{REDACTED}@cache:6379"),
        ("https://user@example.test/ (no password)", "https://user@example.test/ (no password)"),
        ("mailto:someone@example.test", "mailto:someone@example.test"),
    ],
)
def test_url_passwords_are_redacted(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_the_value_next_to_a_secret_name_is_redacted() -> None:
    value = fresh()
    assert redact({"key": "DB_PASSWORD", "value": value}) == {
        "key": "DB_PASSWORD",
        "value": REDACTED,
    }
    assert redact({"name": "Authorization", "value": value})["value"] == REDACTED
    assert redact({"key": "HOME_DIR", "value": value}) == {"key": "HOME_DIR", "value": value}


def test_streamed_text_holds_back_a_possible_start_of_a_secret() -> None:
    value = fresh("stream")
    register_secret(value)
    shown, held = redact_stream("the key is " + value[:5])
    assert shown == "the key is "
    assert held == value[:5]
    shown, held = redact_stream(held + value[5:] + " ok")
    assert (shown, held) == (f"{REDACTED} ok", "")
    assert redact_stream("tail " + value[:3], final=True) == ("tail " + value[:3], "")


def test_a_whole_secret_that_ends_with_its_own_start_is_redacted() -> None:
    """A token such as ``A...A`` ends with a character that begins it: what is held back for
    the next chunk must never be cut out of a whole secret, or both halves go out as they are
    (a printed MCP token once did)."""
    value = "A" + secrets.token_hex(12) + "A"
    register_secret(value)
    try:
        assert redact_stream(value) == (REDACTED, "")
        assert redact_stream("x " + value + " y " + value[:4]) == (f"x {REDACTED} y ", value[:4])
        out: list[str] = []

        class Sink:
            def write(self, text: str) -> int:
                out.append(text)
                return len(text)

            def flush(self) -> None:
                pass

        stream = RedactingStream(Sink())
        print(value, file=stream)  # what print(srv.token) does: the value, then "\n"
        stream.flush()
        assert "".join(out) == f"{REDACTED}\n"
    finally:
        unregister_secret(value)


_PIECES = st.text(alphabet="AB-", max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    secret_list=st.lists(st.text(alphabet="AB", min_size=8, max_size=12), min_size=1, max_size=3),
    parts=st.lists(st.one_of(_PIECES, st.integers(0, 2)), max_size=8),
    cuts=st.lists(st.integers(0, 200), max_size=6),
)
def test_no_chunking_of_a_stream_shows_a_secret(
    secret_list: list[str], parts: list[str | int], cuts: list[int]
) -> None:
    """Secrets made of two letters overlap themselves and each other in every way; whatever
    the text and wherever it is cut into chunks, the chunks shown never hold a secret, and
    nothing but secrets is lost."""
    for value in secret_list:
        register_secret(value)
    try:
        text = "".join(
            p if isinstance(p, str) else secret_list[p % len(secret_list)] for p in parts
        )
        bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
        shown, held = [], ""
        for a, b in itertools.pairwise(bounds):
            piece, held = redact_stream(held + text[a:b])
            shown.append(piece)
        shown.append(redact_stream(held, final=True)[0])
        out = "".join(shown)
        for value in secret_list:
            assert value not in out.replace(REDACTED, "|")
        assert out.count("-") == text.count("-")  # no secret has one: all of them are shown
    finally:
        for value in secret_list:
            unregister_secret(value)


@pytest.mark.anyio
async def test_a_coalescer_never_sends_a_split_secret() -> None:
    value = fresh("split")
    register_secret(value)
    sent: list[str] = []
    coalescer = Coalescer(sent.append, rate=1000)
    for i in range(0, len(value), 3):  # the secret in pieces, flushed between them
        coalescer.push(("before " if i == 0 else "") + value[i : i + 3])
        await asyncio.sleep(0.005)
    coalescer.push(" after")
    coalescer.close()
    assert len(sent) > 1
    assert "".join(sent) == f"before {REDACTED} after"
    assert all(value[:3] not in chunk for chunk in sent)


def _result(text: str) -> ToolResult:
    return ToolResult(content=(TextBlock(text=text),), tool="t", is_error=True, status="error")


def test_every_html_and_text_rendering_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-" + secrets.token_hex(12)
    monkeypatch.setenv("FAKE_API_KEY", key)
    plain = fresh("plain")
    register_secret(plain)
    url = "https://admin:" + (password := fresh("pw")) + "@db.example.test/"
    arguments = {"url": url, "headers": {"Authorization": "Bearer " + plain}, "note": key}
    result = _result(f"RuntimeError: rejected {key} at {url} with {plain}")
    request = ApprovalRequest(
        tool="t", kind="edit", arguments=arguments, call_id="c1", reason=f"asks ({plain})",
        preview=f"+{key}",
    )  # fmt: skip
    rendered = [
        H.call_args_html(arguments), H.result_html(result), H.result_text(result),
        H.call_html("<b>t</b>", arguments, f"streamed {key}", H.approval_html(request), result),
        H.call_text("t", "c1", "error", result), H.approval_text(request), H.esc(key),
        H.clip(key), H.clip_head(plain), H.pretty_json(arguments),
    ]  # fmt: skip
    for text in rendered:
        for secret in (key, plain, password):
            assert secret not in text
        assert REDACTED in text


def test_magic_usage_errors_do_not_echo_secrets(
    kode_ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-test-" + secrets.token_hex(12)
    monkeypatch.setenv("FAKE_API_KEY", key)
    kode_ip.run_cell_magic(
        "tool", "", 'def add(a: int, b: int = 2) -> int:\n    """Add."""\n    return a + b\n'
    )
    for line in (f'add {{"a": "{key}"', f"add {key}", f"add a='{key}"):
        with pytest.raises(UsageError) as info:
            kode_ip.run_line_magic("tool", line)
        assert key not in str(info.value)
        assert REDACTED in str(info.value)
    with pytest.raises(UsageError) as info:
        kode_ip.run_line_magic("agent", f"nobody x={key}")
    assert key not in str(info.value)


def test_model_api_keys_are_registered_at_construction() -> None:
    from kode_nb.models.openai_compat import OpenAIChatModel

    key = fresh("given-key")
    OpenAIChatModel("gpt-test", api_key=key, base_url="http://127.0.0.1:9/v1")
    assert redact_text(f"echo {key}") == f"echo {REDACTED}"


def test_a_schema_with_credential_named_parameters_is_shown_whole(registry: Any) -> None:
    from kode_nb import define_tool
    from kode_nb.ui.tool_html import tool_html

    def login(user: str, password: str, token: str = "") -> str:
        """Log in."""
        return user

    shown = tool_html(define_tool(login))
    assert "&quot;password&quot;: {" in shown
    assert "&quot;token&quot;: {" in shown
    assert REDACTED not in shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"password": "hunter2", "user": "bob"}', f'{{"password": "{REDACTED}", "user": "bob"}}'),
        (
            "{'Authorization': 'Basic abc', 'X': '1'}",
            f"{{'Authorization': '{REDACTED}', 'X': '1'}}",
        ),
        ('{"token": "a\\"b", "n": 1}', f'{{"token": "{REDACTED}", "n": 1}}'),
        ('{"x-api-key": "k"}', f'{{"x-api-key": "{REDACTED}"}}'),
        ('{"tokens": "5", "api_key": ""}', '{"tokens": "5", "api_key": ""}'),
    ],
)
def test_credential_pairs_in_json_text_and_reprs_are_redacted(text: str, shown: str) -> None:
    assert redact_text(text) == shown
