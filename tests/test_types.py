"""Core value types: results and their text, the cancel token, the context, names, NOT_GIVEN."""

from __future__ import annotations

import base64
import dataclasses
import threading
from pathlib import Path

import pytest

from kode_nb import (
    NOT_GIVEN,
    CancelToken,
    ImageBlock,
    JsonBlock,
    TextBlock,
    ToolCancelledError,
    ToolCategory,
    ToolContext,
    ToolKind,
    ToolPermissionError,
    ToolResult,
)
from kode_nb.types import MUTATING_KINDS, NotGiven, normalize_name, validate_name

# --------------------------------------------------------------------------- results


def test_text_of_each_block_kind() -> None:
    assert ToolResult(content=(TextBlock(text="plain *md*"),)).text == "plain *md*"
    assert ToolResult(content=(JsonBlock(data={"b": [1, None], "é": True}),)).text == (
        '{"b": [1, null], "é": true}'
    )
    image = ImageBlock.from_bytes(b"\x89PNG" + b"\x00" * 5, "image/png")  # 9 bytes
    assert ToolResult(content=(image,)).text == "[image: image/png, 9 bytes]"


def test_text_joins_blocks_with_newlines_and_is_empty_without_content() -> None:
    result = ToolResult(content=(TextBlock(text="a"), JsonBlock(data=1), TextBlock(text="b")))
    assert result.text == "a\n1\nb"
    assert ToolResult().text == ""


def test_json_text_falls_back_to_str_for_non_json_values() -> None:
    assert ToolResult.from_json({"p": Path("/tmp/x")}).text == '{"p": "/tmp/x"}'


def test_image_size_ignores_base64_padding() -> None:
    image = ImageBlock.from_bytes(b"12345678", "image/gif")  # base64 ends in "="
    assert ToolResult(content=(image,)).text == "[image: image/gif, 8 bytes]"


def test_image_block_from_bytes_is_base64() -> None:
    block = ImageBlock.from_bytes(b"\x00\x01", "image/webp")
    assert (block.type, block.mime_type) == ("image", "image/webp")
    assert base64.b64decode(block.data) == b"\x00\x01"


def test_result_constructors() -> None:
    ok = ToolResult.from_text("hi", tool="t", call_id="c")
    assert (ok.status, ok.is_error, ok.text, ok.tool, ok.call_id) == ("ok", False, "hi", "t", "c")
    assert ToolResult.from_json([1]).content == (JsonBlock(data=[1]),)
    err = ToolResult.error("broke")
    assert (err.status, err.is_error, err.text) == ("error", True, "broke")
    denied = ToolResult.error("no", status="denied")
    assert denied.status == "denied"


def test_results_and_blocks_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ToolResult().status = "error"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        TextBlock(text="a").text = "b"  # type: ignore[misc]


# --------------------------------------------------------------------------- cancel token


def test_cancel_token_reason_callbacks_and_idempotence() -> None:
    token = CancelToken()
    calls: list[str] = []
    token.on_cancel(lambda: calls.append("first"))
    token.on_cancel(lambda: calls.append("second"))
    assert not token.cancelled
    token.raise_if_cancelled()
    token.cancel("user stop")
    token.cancel("again")
    assert token.cancelled
    assert token.reason == "user stop"
    assert calls == ["first", "second"]
    token.on_cancel(lambda: calls.append("late"))  # already cancelled: runs at once
    assert calls == ["first", "second", "late"]


def test_cancel_token_raise_and_wait() -> None:
    token = CancelToken()
    assert token.wait(0.001) is False
    token.cancel("enough")
    assert token.wait(0) is True
    with pytest.raises(ToolCancelledError, match="enough"):
        token.raise_if_cancelled()


def test_cancel_token_is_thread_safe() -> None:
    token = CancelToken()
    fired: list[int] = []
    lock = threading.Lock()

    def record() -> None:
        with lock:
            fired.append(1)

    for _ in range(50):
        token.on_cancel(record)
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        barrier.wait()
        token.cancel(f"thread {i}")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fired) == 50  # every callback exactly once, whichever thread won
    assert token.reason.startswith("thread ")


def test_a_waiting_thread_wakes_on_cancel() -> None:
    token = CancelToken()
    woke = threading.Event()

    def wait() -> None:
        if token.wait(10):
            woke.set()

    thread = threading.Thread(target=wait)
    thread.start()
    token.cancel()
    thread.join(5)
    assert woke.is_set()


# --------------------------------------------------------------------------- context


def test_context_defaults_and_cancellation() -> None:
    ctx = ToolContext(tool="t", call_id="c")
    assert (ctx.run_id, ctx.parent_call_id, ctx.user, ctx.deps) == (None, None, None, None)
    assert ctx.on_update("ignored") is None
    assert not ctx.cancelled
    ctx.cancel.cancel("bye")
    assert ctx.cancelled
    with pytest.raises(ToolCancelledError):
        ctx.raise_if_cancelled()


def test_context_resolves_paths_inside_the_roots_only(tmp_path: Path) -> None:
    ctx = ToolContext(tool="reader", call_id="c", allowed_paths=(tmp_path,))
    assert ctx.resolve_path("notes/a.txt") == tmp_path.resolve() / "notes" / "a.txt"
    with pytest.raises(ToolPermissionError, match="outside the allowed paths"):
        ctx.resolve_path("../escape.txt")
    with pytest.raises(ToolPermissionError, match="no allowed paths"):
        ToolContext(tool="reader", call_id="c").resolve_path("a.txt")


# --------------------------------------------------------------------------- names, kinds, NOT_GIVEN


@pytest.mark.parametrize(
    ("name", "key"),
    [("read_file", "read_file"), ("Read-File", "read_file"), ("  Web Search ", "web_search")],
)
def test_normalize_name(name: str, key: str) -> None:
    assert normalize_name(name) == key


@pytest.mark.parametrize("name", ["read_file", "A", "x-1", "  padded  ", "a" * 64])
def test_valid_names(name: str) -> None:
    assert validate_name(name) == name.strip()


@pytest.mark.parametrize("name", ["", "1st", "_private", "has space", "dot.name", "a" * 65, "é"])
def test_invalid_names_say_what_is_allowed(name: str) -> None:
    with pytest.raises(ValueError, match="use a letter followed by up to 63"):
        validate_name(name)


def test_a_non_string_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="must be a string, not int"):
        validate_name(3)  # type: ignore[arg-type]


def test_not_given_is_a_falsy_singleton_distinct_from_none() -> None:
    assert NotGiven() is NOT_GIVEN
    assert not NOT_GIVEN
    assert NOT_GIVEN is not None
    assert repr(NOT_GIVEN) == "NOT_GIVEN"


def test_kinds_and_categories() -> None:
    assert {k for k in ToolKind if k.is_mutating} == MUTATING_KINDS
    assert {ToolKind.EDIT, ToolKind.DELETE, ToolKind.MOVE, ToolKind.EXECUTE} == MUTATING_KINDS
    assert str(ToolKind.READ) == "read"
    assert ToolKind("fetch") is ToolKind.FETCH
    assert str(ToolCategory.NETWORK) == "network"
    with pytest.raises(ValueError, match="'nope' is not a valid ToolKind"):
        ToolKind("nope")
