"""The run cache is right or empty: its key covers the tools' code and the policy, planted or
broken entries are skipped with a note and run again, symlinks are never followed, temporary
files do not outlive a killed writer, large results are stored once and capped."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from many_helpers import call_log, square_agent

from kode_nb import Agent, Executor, Policy, ToolRegistry, define_tool
from kode_nb.many import RunCache, as_target, run_many
from kode_nb.models import ScriptedModel, call

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _cache_keys_apart(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The caches' key files of each test in a state folder of its own, not in ``~``."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def _cube_agent(calls: list[int]) -> Agent:
    """Like square_agent, but the tool's body differs (same name, same schema)."""
    reg = ToolRegistry()
    record = call_log(calls)

    def square(x: int) -> int:
        """Square a number."""
        record(x)
        return x * x * x

    define_tool(square, registry=reg)
    model = ScriptedModel([
        lambda r: call("square", x=int(r.messages[-1].content.split()[-1])),
        lambda r: f"squared: {r.messages[-1].content[0].data}",
    ])  # fmt: skip
    return Agent("squarer", model=model, tools=["square"], executor=Executor(reg))


async def test_a_changed_tool_body_is_not_served_from_the_cache(tmp_path: Path) -> None:
    rows = [{"n": 2}, {"n": 3}]
    first = await run_many(square_agent(), rows, prompt="square {n}", cache=tmp_path)
    assert list(first["output"]) == ["squared: 4", "squared: 9"]
    calls: list[int] = []
    again = await run_many(_cube_agent(calls), rows, prompt="square {n}", cache=tmp_path)
    assert calls == [2, 3]
    assert list(again["cached"]) == [False, False]
    assert list(again["output"]) == ["squared: 8", "squared: 27"]


async def test_a_policy_change_after_a_cached_run_runs_the_rows_again(tmp_path: Path) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    agent = square_agent(calls)
    await run_many(agent, rows, prompt="square {n}", cache=tmp_path)
    assert calls == [2, 3]
    agent.executor.policy = Policy(deny=["square"])  # the tool is denied from now on
    df = await run_many(agent, rows, prompt="square {n}", cache=tmp_path)
    assert calls == [2, 3]  # not run again: denied
    assert list(df["cached"]) == [False, False]
    assert list(df["status"]) == ["error", "error"]  # the denied tool is not even offered
    assert all("no such tool was offered" in e for e in df["error"])


async def test_cached_rows_are_rechecked_against_the_inbox_policy(tmp_path: Path) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    approve_all = lambda request, row: True  # noqa: E731
    await run_many(square_agent(calls, kind="edit"), rows, prompt="square {n}", cache=tmp_path,
                   policy=approve_all)  # fmt: skip
    assert calls == [2, 3]
    # the same decisions (or none: a person would be asked) keep the cached rows
    df = await run_many(square_agent(calls, kind="edit"), rows, prompt="square {n}",
                        cache=tmp_path, policy=lambda request, row: True if row == 0 else None)  # fmt: skip
    assert list(df["cached"]) == [True, True]
    # a policy that now denies row 1's call: that row runs again, denied
    df = await run_many(square_agent(calls, kind="edit"), rows, prompt="square {n}",
                        cache=tmp_path, policy=lambda request, row: row != 1 or "no 3s")  # fmt: skip
    assert list(df["cached"]) == [True, False]
    assert calls == [2, 3]
    assert "no 3s" in df["output"][1]


def _entry(tmp_path: Path, rows: list[dict[str, Any]]) -> tuple[RunCache, list[Path]]:
    target = as_target(square_agent(), prompt="square {n}")
    cache = RunCache(tmp_path, target.key())
    from kode_nb.many.rows import row_key

    return cache, [cache.path(row_key(r)) for r in rows]


def _body(path: Path) -> str:
    """An entry's JSON without its seal (its last member)."""
    text = path.read_text()
    sealed = re.search(r', "__kode_nb_seal__": "[0-9a-f]{64}"\}\Z', text)
    assert sealed is not None, text[-200:]
    return text[: sealed.start()] + "}"


def _sealed(cache: RunCache, path: Path, text: str) -> None:
    """Write ``text`` as the entry ``path``, sealed with the cache's own key (as if kode_nb had
    written it): what the entry's field checks must still catch."""
    from kode_nb.many.cache import seal

    path.write_bytes(seal(text.encode(), cache._mac(cache.secret(), path.stem)))


@pytest.mark.parametrize(
    "plant",
    ["nan_cost", "deep", "truncated", "not_an_object", "bad_tokens", "symlink", "big"],
)
async def test_a_planted_or_broken_entry_is_skipped_with_a_note_and_run_again(
    tmp_path: Path, plant: str
) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    await run_many(square_agent(calls), rows, prompt="square {n}", cache=tmp_path / "c")
    cache, paths = _entry(tmp_path / "c", rows)
    good = json.loads(_body(paths[1]))
    bad = paths[0]
    if plant == "nan_cost":
        _sealed(cache, bad, json.dumps({**good, "index": 0, "cost": "NaN"}))
    elif plant == "deep":
        _sealed(cache, bad, '{"status": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif plant == "truncated":  # a torn write: its seal is gone with its end
        bad.write_text(paths[1].read_text()[:50])
    elif plant == "not_an_object":
        bad.write_text("[1, 2]")
    elif plant == "bad_tokens":
        _sealed(cache, bad, json.dumps({**good, "index": 0, "input_tokens": "many"}))
    elif plant == "symlink":
        outside = tmp_path / "outside.json"
        outside.write_text(json.dumps({**good, "index": 0, "output": "planted from outside"}))
        bad.unlink()
        bad.symlink_to(outside)
    elif plant == "big":
        _sealed(cache, bad, json.dumps({**good, "output": "x" * 200_000}))
    calls.clear()
    store = tmp_path / "c"
    h = run_many(square_agent(calls), rows, prompt="square {n}", cache=store)
    if plant == "big":  # an entry over the cap is not read either
        h.cache.max_entry_bytes = 100_000  # type: ignore[union-attr]
    df = await h
    assert calls == [2]  # the bad row ran again; the good one came from the cache
    assert list(df["output"]) == ["squared: 4", "squared: 9"]
    assert list(df["cached"]) == [False, True]
    assert len(h.notes) == 1, h.notes
    assert h.notes[0].startswith(f"skipped the cache entry {bad.name} (its row runs again): ")
    assert "planted from outside" not in json.dumps(list(df["output"]))
    if plant == "symlink":
        assert "symbolic link" in h.notes[0]
        assert (tmp_path / "outside.json").read_text().count("planted") == 1  # untouched
        assert not bad.is_symlink()  # replaced by a real entry
    from kode_nb.ui.many_view import record_bundle

    assert "skipped the cache entry" in record_bundle(h)["text/html"]


async def test_a_symlinked_target_folder_is_not_followed(tmp_path: Path) -> None:
    rows = [{"n": 2}]
    target = as_target(square_agent(), prompt="square {n}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / target.key()).symlink_to(elsewhere, target_is_directory=True)
    h = run_many(square_agent(), rows, prompt="square {n}", cache=tmp_path / "c")
    df = await h
    assert list(df["output"]) == ["squared: 4"]
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    assert "not cached" in str(df["note"][0])


_KILLED_WRITER = r"""
import os, sys, time
from kode_nb.many.cache import RunCache
from kode_nb.many.rows import RowResult
cache = RunCache(sys.argv[1], "target")
cache.secret()  # the key file first: the write stalled below is the entry's
real = os.fdopen
def slow_fdopen(fd, *a, **k):
    fh = real(fd, *a, **k)
    write = fh.write
    def stalled(text):
        write(text[: len(text) // 2]); fh.flush()
        print("writing", flush=True)
        time.sleep(60)
    fh.write = stalled
    return fh
os.fdopen = slow_fdopen
cache.put("row", RowResult(index=0, status="completed", output="y" * 100_000))
"""


def test_kill_9_during_a_write_leaves_no_temporary_file_behind(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED_WRITER), str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "writing\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    folder = tmp_path / "target"
    left = os.listdir(folder)
    assert len(left) == 1
    assert left[0].startswith(".row.")
    assert left[0].endswith(".tmp")
    cache = RunCache(tmp_path, "target")  # opening the cache removes it: its writer is dead
    assert os.listdir(folder) == []
    assert cache.get("row") is None
    # clear() removes temporary files too, whoever left them
    (folder / f".row.{os.getpid()}.abcd.tmp").write_text("{")
    (folder / "row.json").write_text("{}")
    assert cache.clear() == 2
    assert os.listdir(folder) == []


async def test_a_large_result_is_stored_once_and_capped(tmp_path: Path) -> None:
    reg = ToolRegistry()

    def blob(n: int) -> str:
        """A long text."""
        return "z" * n

    tool = define_tool(blob, registry=reg)
    size = 3_000_000
    h = run_many(tool, [{"n": size}, {"n": 10}], cache=tmp_path)
    df = await h
    assert df["output"][0] == "z" * size  # the result itself is whole
    entry = Path(df["trace"][0])
    stored = os.stat(entry).st_size
    assert size < stored < size + 20_000, stored  # once, not once per copy in the trace
    again = await run_many(tool, [{"n": size}], cache=tmp_path)
    assert again["cached"][0]
    assert again["output"][0] == "z" * size
    # over the cap: not cached, and the row says so
    capped = run_many(tool, [{"n": size}], cache=tmp_path / "small")
    capped.cache.max_entry_bytes = 1_000_000  # type: ignore[union-attr]
    df = await capped
    assert df["output"][0] == "z" * size
    assert df["trace"][0] is None
    assert "not cached: the result is larger than the cache's cap" in df["note"][0]


async def test_a_tool_rows_trace_records_its_approval_and_is_rechecked(tmp_path: Path) -> None:
    from kode_nb.many.runner import TRACE_SCHEMA
    from kode_nb.traces import SCHEMA

    assert TRACE_SCHEMA == SCHEMA
    reg = ToolRegistry()
    ran: list[str] = []
    record = call_log(ran)

    def note(text: str) -> str:
        """Keep a note."""
        record(text)
        return "noted " + text

    tool = define_tool(note, registry=reg, kind="edit")
    rows = [{"text": "a"}, {"text": "b"}]
    h = run_many(tool, rows, cache=tmp_path, policy=lambda request, row: True)
    await h
    spans = h.trace(1).spans()
    assert [s.kind for s in spans] == ["run", "tool_call"]
    assert [e["name"] for e in spans[1].events] == ["approval_requested", "approval_resolved"]
    assert spans[1].events[1]["attributes"]["approved"] is True
    assert spans[1].attributes["arguments"] == {"text": "b"}
    assert ran == ["a", "b"]
    df = await run_many(tool, rows, cache=tmp_path, policy=lambda request, row: row == 0 or "no")
    assert list(df["cached"]) == [True, False]
    assert ran == ["a", "b"]  # row 1 ran again and was denied this time
    assert df["status"][1] != "ok"


# ------------------------------------------------------------------ what the key covers

RATE = 2
"""A module global the `rated` tool reads (through a helper)."""


def _rate() -> int:
    return RATE


def _tool_agent(fn: Any, name: str) -> Agent:
    """An agent that calls the tool ``fn`` (named ``name``) with x = the prompt's number, then
    answers ``"got: <result>"``."""
    reg = ToolRegistry()
    define_tool(fn, registry=reg, name=name)
    model = ScriptedModel([
        lambda r: call(name, x=int(r.messages[-1].content.split()[-1])),
        lambda r: f"got: {r.messages[-1].content[0].data}",
    ])  # fmt: skip
    return Agent("tooler", model=model, tools=[name], executor=Executor(reg))


def _times_agent(factor: int, calls: list[int]) -> Agent:
    record = call_log(calls)

    def times(x: int) -> int:
        """Multiply by the factor."""
        record(x)
        return x * factor

    return _tool_agent(times, "times")


async def test_a_changed_closure_value_is_not_served_from_the_cache(tmp_path: Path) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    df = await run_many(_times_agent(2, calls), rows, prompt="n {n}", cache=tmp_path)
    assert list(df["output"]) == ["got: 4", "got: 6"]
    df = await run_many(_times_agent(10, calls), rows, prompt="n {n}", cache=tmp_path)
    assert list(df["output"]) == ["got: 20", "got: 30"]  # not the answers of factor 2
    assert list(df["cached"]) == [False, False]
    assert calls == [2, 3, 2, 3]
    df = await run_many(_times_agent(2, calls), rows, prompt="n {n}", cache=tmp_path)
    assert list(df["cached"]) == [True, True]  # factor 2's own entries are still there
    assert list(df["output"]) == ["got: 4", "got: 6"]
    assert calls == [2, 3, 2, 3]


async def test_a_changed_global_read_by_a_helper_is_not_served_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    record = call_log(calls)

    def rated(x: int) -> int:
        """Multiply by the rate."""
        record(x)
        return x * _rate()  # RATE is read by the helper, not by this function

    df = await run_many(_tool_agent(rated, "rated"), rows, prompt="n {n}", cache=tmp_path)
    assert list(df["output"]) == ["got: 4", "got: 6"]
    monkeypatch.setitem(globals(), "RATE", 5)
    df = await run_many(_tool_agent(rated, "rated"), rows, prompt="n {n}", cache=tmp_path)
    assert list(df["output"]) == ["got: 10", "got: 15"]
    assert list(df["cached"]) == [False, False]
    df = await run_many(_tool_agent(rated, "rated"), rows, prompt="n {n}", cache=tmp_path)
    assert list(df["cached"]) == [True, True]
    assert calls == [2, 3, 2, 3]


async def test_a_tool_reading_a_value_that_cannot_be_hashed_is_not_cached_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import threading

    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    record = call_log(calls)
    guard = threading.Lock()

    def locked(x: int) -> int:
        """Square a number under a lock."""
        with guard:
            record(x)
            return x * x

    for _ in range(2):
        with caplog.at_level(logging.WARNING, logger="kode_nb.many"):
            h = run_many(_tool_agent(locked, "locked"), rows, prompt="n {n}", cache=tmp_path)
        df = await h
        assert list(df["output"]) == ["got: 4", "got: 9"]
        assert list(df["cached"]) == [False, False]
        assert h.cache is None
        assert h.notes[0].startswith(
            "not cached: tool 'locked': the variable `guard` that "
            "`test_a_tool_reading_a_value_that_cannot_be_hashed_is_not_cached_and_says_why."
            "<locals>.locked` closes over is a _thread.lock object, which kode_nb cannot hash by "
            "content; "
        ), h.notes
    assert calls == [2, 3, 2, 3]  # run both times
    assert os.listdir(tmp_path) == []  # nothing written
    assert "`guard`" in caplog.text
    from kode_nb.ui.many_view import record_bundle

    assert "not cached: tool" in record_bundle(h)["text/html"]


async def _cached_once(tmp_path: Path) -> tuple[RunCache, list[Path], list[int]]:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    await run_many(square_agent(calls), rows, prompt="square {n}", cache=tmp_path)
    cache, paths = _entry(tmp_path, rows)
    assert calls == [2, 3]
    calls.clear()
    return cache, paths, calls


async def _again(tmp_path: Path, calls: list[int]) -> Any:
    rows = [{"n": 2}, {"n": 3}]
    h = run_many(square_agent(calls), rows, prompt="square {n}", cache=tmp_path)
    df = await h
    assert list(df["output"]) == ["squared: 4", "squared: 9"]
    return h, df


@pytest.mark.parametrize("how", ["unsealed", "sealed with another key", "moved from row 1"])
async def test_a_planted_well_formed_entry_is_skipped_with_a_note(tmp_path: Path, how: str) -> None:
    cache, paths, calls = await _cached_once(tmp_path)
    planted = {**json.loads(_body(paths[0])), "output": "planted answer"}
    text = json.dumps(planted)
    if how == "unsealed":
        paths[0].write_text(text)
    elif how == "sealed with another key":
        from kode_nb.many.cache import seal

        other = RunCache(tmp_path, cache.target_key, key_file=tmp_path.parent / "other.key")
        paths[0].write_bytes(seal(text.encode(), other._mac(other.secret(), paths[0].stem)))
    else:
        paths[0].write_bytes(paths[1].read_bytes())  # row 1's own sealed entry, as row 0's
    h, df = await _again(tmp_path, calls)
    assert calls == [2]  # row 0 ran again
    assert list(df["cached"]) == [False, True]
    assert len(h.notes) == 1
    why = "not sealed by this cache" if how == "unsealed" else "its seal does not match"
    assert h.notes[0].startswith(f"skipped the cache entry {paths[0].name} (its row runs again)")
    assert why in h.notes[0]
    assert "planted answer" not in paths[0].read_text()  # replaced by the row's own, sealed
    _, df = await _again(tmp_path, calls)
    assert list(df["cached"]) == [True, True]


@pytest.mark.parametrize("edit", ["output", "seal"])
async def test_a_tampered_entry_is_skipped(tmp_path: Path, edit: str) -> None:
    _, paths, calls = await _cached_once(tmp_path)
    text = paths[1].read_text()
    if edit == "output":
        assert text.count("squared: 9") >= 1
        text = text.replace("squared: 9", "squared: 8")
    else:
        end = text.rindex('"}')
        text = text[: end - 1] + ("0" if text[end - 1] != "0" else "1") + text[end:]
    paths[1].write_text(text)
    h, df = await _again(tmp_path, calls)
    assert calls == [3]
    assert list(df["cached"]) == [True, False]
    assert ["its seal does not match" in n for n in h.notes] == [True]


_RESUME = r"""
import sys
from kode_nb import Agent, Executor, ToolRegistry, define_tool
from kode_nb.many import run_many
from kode_nb.models import ScriptedModel, call

OFFSET = 1
reg = ToolRegistry()

def bump(x: int) -> int:
    '''Add the offset.'''
    print("ran", x, file=sys.stderr)
    return x + OFFSET

define_tool(bump, registry=reg)
model = ScriptedModel([
    lambda r: call("bump", x=int(r.messages[-1].content.split()[-1])),
    lambda r: f"got: {r.messages[-1].content[0].data}",
])
agent = Agent("bumper", model=model, tools=["bump"], executor=Executor(reg))
h = run_many(agent, [{"n": n} for n in range(int(sys.argv[2]))], prompt="n {n}", cache=sys.argv[1])
df = h.frame()
print(list(df["output"]), list(df["cached"]), h.notes)
"""


def test_a_resumed_run_in_a_new_process_hits_its_own_entries(tmp_path: Path) -> None:
    script = tmp_path / "resume.py"
    script.write_text(_RESUME)

    def run(rows: int) -> tuple[str, str]:
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "cache"), str(rows)],
            capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        return done.stdout.strip(), done.stderr

    out, err = run(2)  # the first two rows, then "interrupted"
    assert out == "['got: 1', 'got: 2'] [False, False] []"
    out, err = run(3)  # resumed: the two finished rows come from the cache
    assert out == "['got: 1', 'got: 2', 'got: 3'] [True, True, False] []"
    assert err.count("ran ") == 1
    key_files = list((Path(os.environ["XDG_STATE_HOME"]) / "kode_nb" / "cache-keys").iterdir())
    assert len(key_files) == 1  # one key for the cache, outside its folder
    assert stat.S_IMODE(key_files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(key_files[0].parent.stat().st_mode) == 0o700
    assert not any(p.name.endswith(".key") for p in (tmp_path / "cache").rglob("*"))


async def test_a_key_file_others_can_read_is_not_used(tmp_path: Path) -> None:
    cache, _, calls = await _cached_once(tmp_path)
    assert cache.key_file is None
    cache.secret()
    assert cache.key_file is not None
    cache.key_file.chmod(0o644)
    h, df = await _again(tmp_path, calls)
    assert calls == [2, 3]
    assert list(df["cached"]) == [False, False]
    assert h.notes == [
        f"the cache was not read: its key file {cache.key_file} can be read or written by "
        "others (mode 644); remove it to start the cache afresh"
    ]
    assert all("not cached" in str(n) for n in df["note"])
