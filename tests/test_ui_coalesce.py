"""Coalescer: many pushes, few flushes, every character exactly once and in order."""

from __future__ import annotations

import asyncio

import pytest

from kode_nb.ui.coalesce import Coalescer, update_text


def test_update_text_appends_strings_as_is_and_other_data_as_json_lines() -> None:
    assert update_text("tok ") == "tok "
    assert update_text(b"caf\xc3\xa9") == "café"
    assert update_text({"progress": 0.5}) == '{"progress": 0.5}\n'
    assert update_text([1, "é"]) == '[1, "é"]\n'


def test_rate_must_be_positive() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError, match="rate must be a positive number"):
            Coalescer(print, rate=0, loop=loop)
    finally:
        loop.close()


@pytest.mark.anyio
async def test_first_chunk_flushes_at_once_then_at_most_rate_per_second() -> None:
    sent: list[str] = []
    c = Coalescer(sent.append, rate=20)
    c.push("a")
    await asyncio.sleep(0)  # the first flush is scheduled with no delay
    await asyncio.sleep(0)
    assert sent == ["a"]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    n = 0
    while loop.time() - t0 < 0.5:  # ~0.5 s of pushes, 1 per ms
        c.push(f"{n},")
        n += 1
        await asyncio.sleep(0.001)
    c.close()
    assert "".join(sent) == "a" + "".join(f"{i}," for i in range(n))
    # 20/s over 0.5 s: ~10 flushes (+ the first and the final one), never one per push
    assert len(sent) <= 14
    assert c.pushes == n + 1
    assert c.flushes == len(sent)


@pytest.mark.anyio
async def test_pushes_from_threads_arrive_in_order_and_close_flushes_the_rest() -> None:
    sent: list[str] = []
    c = Coalescer(sent.append, rate=50)

    def worker() -> None:
        for i in range(20_000):
            c.push(f"{i};")

    await asyncio.to_thread(worker)  # pushes from a worker thread while the loop runs
    c.close()
    assert "".join(sent) == "".join(f"{i};" for i in range(20_000))
    assert len(sent) < 100
    c.push("late")  # after close: ignored
    await asyncio.sleep(0.05)
    assert "late" not in "".join(sent)


@pytest.mark.anyio
async def test_empty_chunks_are_ignored_and_flush_without_data_sends_nothing() -> None:
    sent: list[str] = []
    c = Coalescer(sent.append)
    c.push("")
    c.flush()
    c.close()
    assert sent == []
    assert c.pushes == 0
