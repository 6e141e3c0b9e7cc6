"""Do the executor's micro-optimisations pay on whole agent runs? Paired A/B rounds.

Each optimisation is compared with its plain form, switched in by monkeypatching at run time
(here only; the package is not changed). An optimisation the package no longer has (it did not
pay) is patched back in as A, from the copy kept here, so its row can still be re-measured:

* ``builders``: ``ToolResult``/``TextBlock``/``JsonBlock`` built positionally through their
  slots' descriptors (``_new_result``, ``_text_block``, ``_json_block`` in ``kode_nb/types.py``,
  called by ``CallSteps.finish`` and ``convert_value``); plain = the dataclasses' keyword
  constructors. (An earlier form, a writable twin class and a ``__class__`` swap, was removed
  when its row did not pay on an agent run; the batch row below is what keeps this one.)
* ``limit``: the executor takes a free concurrency slot inline (``limit.free -= 1``, no
  ``await``) in ``CallSteps.run`` of ``kode_nb/execution/_pipeline.py``, and gives slots back
  inline (``free += 1``) in ``release_limits`` of ``_control.py``; plain = always ``await
  limit.take()`` (the method has the same free-slot test, behind a coroutine) and
  ``Limit.release()`` for each slot.
* ``inline-steps``: the first, usual case of several steps written inline in
  ``CallSteps.run``/``finish`` (``kode_nb/execution/_pipeline.py``) and around them, each
  switched back to its plain form for B: the validator's JSON-text validation called directly
  (``Plan.validate_json``; plain: ``plan.validate``, two calls more); the policy's checks for a
  plain :class:`~kode_nb.Policy` (no deny list, profile or allow list: no ``is_allowed`` call;
  a rule-free tool whose kind runs without asking: no ``approval_for`` call); a ``str``/number/
  ``dict`` result converted without ``convert_value``; one slot given back without
  ``release_limits``; the stats counter kept in the plan (``Plan.counter``; plain:
  ``registry.record_call`` looks it up); the loop's clock read as ``time.monotonic`` (plain:
  ``loop.time()``); the caller's task read from asyncio's table (plain:
  ``asyncio.current_task``); and ``ToolResult.text`` of one block without ``_block_text``.
  (The JSON-text shortcut was once measured alone inside ``SimpleParamsValidator.validate``,
  the row ``validate-shortcut``, removing one call: +0.10 µs a call, it did not pay.)
* ``simple-validator``: simple signatures get a second validator besides the pydantic model, a
  pydantic-core typed-dict ``SchemaValidator`` written by ``kode_nb/tools/_simple_schema.py``
  (the model is built only if asked for); plain = the model's validator (``_FAST_PATH =
  False`` in ``kode_nb/tools/_schema.py``). Its main purpose is defining tools fast
  (target 3), so the definition time is measured too.

* ``redact-walk``: ``_walk_mapping`` (``kode_nb/_redact.py``) read the memo of
  ``is_secret_key`` and the cache of short redacted strings itself; plain = a call of each per
  key and string. It did not pay (+1.9 % of an agent run, its spread below zero) and was
  removed: A is the copy kept here.

* ``span-ids``: a span's id drawn from a generator seeded by the OS (as OpenTelemetry's SDK
  draws them); plain = 8 bytes read from the OS for each (``secrets.token_hex(8)`` in
  ``kode_nb/traces/_trace.py``). It did not pay and was not kept: A patches the generator in.

* ``stats-inbox``: a finished call is recorded without the registry's lock: the duration goes
  to its tool's ``deque`` inbox (``append`` is atomic), settled into the counts under the lock
  every ``SETTLE_AT`` (256) calls and when stats are read (``kode_nb/tools/_stats.py``); plain =
  ``SETTLE_AT`` 1, every call settled under the lock as it finishes. (An earlier form, measured
  through ``record_call`` rather than the executor's own path, did not pay; this one does.)

Workloads: one validated call ``await executor.call(name, '{"a": 1, "b": 2}')`` (target 1) of an
async and of a sync (worker thread) ``add``; whole agent runs on a ``ScriptedModel`` with 1 and
with 5 tool calls per run (the 5 in one turn), async and sync tools, tracing on (target 7); and a
batch, ``executor.call_many`` of 100 calls of the async ``add`` (what ``run_many`` rows and an
agent's parallel calls go through).

Method: the machine is shared, so A (optimised) and B (plain) alternate: each round times one
batch of each (~``--batch-ms`` long, order flipped every round, GC collected before), and the
gain is the median of the per-round differences B - A; the spread is their 25th-75th
percentile. Times are the process's CPU time (``time.process_time``, worker threads included), so
waiting for a core behind other jobs is not counted (``--wall``: wall time).
``.venv/bin/python benchmarks/micro_opts.py`` (~3 min); the report goes to
``results/micro_opts.txt`` (``--out -``: nowhere).

Verdict (STYLE: plain code unless a whole-run benchmark pays): an optimisation pays only when it
saves at least 1 % of a whole agent run (1 async tool call, tracing on) or of the batch, its
25th percentile above zero too; the per-call gain is shown but does not decide (readability over
microseconds).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import os
import platform
import random
import secrets
import statistics
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _funcs import ARGS_JSON, add, add_sync

import kode_nb
from kode_nb import Agent, Executor, ToolRegistry, _redact, define_tool
from kode_nb import types as _types
from kode_nb.execution import _control, _executor, _pipeline, _results
from kode_nb.models import ScriptedModel, call
from kode_nb.tools import _schema
from kode_nb.traces import _trace
from kode_nb.types import JsonBlock, TextBlock, ToolResult

Op = Callable[[], Awaitable[Any]]


# --------------------------------------------------------------------------- plain variants


def _plain_result(
    content: Any, details: Any, is_error: bool, status: Any, tool: str, call_id: str,
    error_type: str | None, started_at: float, ended_at: float, duration: float,
) -> ToolResult:  # fmt: skip
    """``_new_result`` as the dataclass's keyword constructor."""
    return ToolResult(
        content=content, details=details, is_error=is_error, status=status, tool=tool,
        call_id=call_id, error_type=error_type, started_at=started_at, ended_at=ended_at,
        duration=duration,
    )  # fmt: skip


def _plain_text(text: str) -> TextBlock:
    return TextBlock(text=text)


def _plain_json(data: Any) -> JsonBlock:
    return JsonBlock(data=data)


def _builders_plain() -> list[tuple[Any, dict[str, Any]]]:
    for module, names in ((_pipeline, ("_new_result", "_text_block")),
                          (_results, ("_text_block", "_json_block"))):  # fmt: skip
        missing = [n for n in names if not hasattr(module, n)]
        if missing:
            raise SystemExit(f"{module.__name__} no longer uses {missing}: update this benchmark")
    return [
        (_pipeline, {"_new_result": _plain_result, "_text_block": _plain_text}),
        (_results, {"_text_block": _plain_text, "_json_block": _plain_json}),
    ]


@contextmanager
def _patched(obj: Any, **values: Any) -> Iterator[None]:
    old = {k: getattr(obj, k) for k in values}
    for k, v in values.items():
        setattr(obj, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(obj, k, v)


_INLINED_TAKE = "if limit.free > 0 and not limit.waiters:"
"""``CallSteps.run``'s inline take of a free slot (``if False:`` makes it the plain form)."""


def _always_await_run() -> Any:
    """``CallSteps.run`` with the inlined free-slot test replaced by ``if False:``: CPython drops
    the dead branch at compile time, so this is exactly the plain form (always ``await
    limit.take()``)."""
    return _recompiled(_pipeline.CallSteps.run, _pipeline, {_INLINED_TAKE: "if False:"})


def _plain_release_limits(limits: tuple[Any, ...], taken: int) -> None:
    for limit in reversed(limits[:taken]):
        limit.release()


def _limit_plain() -> list[tuple[Any, dict[str, Any]]]:
    if "limit.free += 1" not in inspect.getsource(_control.release_limits):
        raise SystemExit("release_limits no longer gives slots back inline: update this benchmark")
    return [
        (_pipeline.CallSteps, {"run": _always_await_run()}),
        (_pipeline, {"release_limits": _plain_release_limits}),
        (_control, {"release_limits": _plain_release_limits}),
    ]


def _recompiled(function: Any, module: Any, replacements: dict[str, str]) -> Any:
    """``function`` compiled again in ``module``'s namespace with each replacement made once
    (each must be found exactly once: the benchmark is out of date otherwise)."""
    source = textwrap.dedent(inspect.getsource(function))
    for old, new in replacements.items():
        if source.count(old) != 1:
            raise SystemExit(
                f"{function.__qualname__} no longer has {old!r}: update this benchmark"
            )
        source = source.replace(old, new)
    namespace: dict[str, Any] = {}
    exec(compile(source, module.__file__, "exec"), module.__dict__, namespace)
    return namespace[function.__name__]


_PLAIN_RUN = {
    "if plan.validate_json is not None and type(arguments) is str:": "if False:",
    '"is_allowed" in own': "True",
    'and policy.kind_approval[tool.kind] == "auto"': "and False",
    "if kind is str:  # convert_value's first cases, without its call": "if False:",
    "if kind is int or kind is dict or kind is float or kind is bool:": "if False:",
    "elif taken == 1 and not limits[0].waiters:": "elif False:",
    "now = deadlines.clock()": "now = st.loop.time()",
}
"""``CallSteps.run``'s inline first cases, each made dead code (``if False:``: CPython drops the
branch at compile time) or its plain form."""


def _plain_text_property(self: ToolResult) -> str:
    return "\n".join(_types._block_text(b) for b in self.content)


def _inline_steps_plain() -> list[tuple[Any, dict[str, Any]]]:
    finish = _recompiled(
        _pipeline.CallSteps.finish, _pipeline,
        {"if counted is not None:  # what record_call does, without looking it up or a lock":
         "if False:"},
    )  # fmt: skip
    return [
        (_pipeline.CallSteps, {"run": _recompiled(_pipeline.CallSteps.run, _pipeline, _PLAIN_RUN),
                               "finish": finish}),
        (_executor, {"_current_task": asyncio.current_task}),
        (ToolResult, {"text": property(_plain_text_property)}),
    ]  # fmt: skip


class _SeededIds:
    """``secrets`` as ``kode_nb/traces/_trace.py`` sees it, with ``token_hex`` drawn from a
    generator seeded by the OS (OpenTelemetry's SDK draws its ids so)."""

    def __init__(self) -> None:
        self._bits = random.Random(secrets.randbits(128)).getrandbits

    def token_hex(self, nbytes: int) -> str:
        return f"{self._bits(nbytes * 8) or 1:0{nbytes * 2}x}"


def _inline_walk_mapping(value: Any, secrets: list[str], depth: int) -> dict[str, Any]:
    """``_walk_mapping`` reading the memo of ``is_secret_key`` and the cache of short redacted
    strings itself, instead of a call each."""
    out: dict[str, Any] = {}
    hidden = "value" in value and _redact._names_a_secret(value)
    depth += 1
    cached_for, cache = _redact._cache
    if secrets is not cached_for:
        cache = {}
    memo = _redact._SECRET_KEYS
    shortest = _redact._SHORTEST
    for key, item in value.items():
        text = key if type(key) is str else str(key)
        if len(text) < shortest:
            name = text
        else:
            found = cache.get(text)
            name = found if found is not None else _redact._redact_str(text, secrets)
        secret = memo.get(text)
        if secret is None:
            secret = _redact.is_secret_key(text)
        if (secret or (hidden and key == "value")) and (
            item not in (None, "") and not isinstance(item, bool)
        ):
            out[name] = _redact.REDACTED
            continue
        kind = type(item)
        if kind is str:
            if len(item) < shortest:
                out[name] = item
            else:
                done = cache.get(item)
                out[name] = done if done is not None else _redact._redact_str(item, secrets)
        elif kind in _redact._PLAIN:
            out[name] = item
        else:
            out[name] = _redact._walk(item, secrets, depth)
    return out


# --------------------------------------------------------------------------- workloads


WORKLOADS = ("call async", "call sync", "agent 1 async", "agent 1 sync", "agent 5 async",
             "agent 5 sync", "batch 100 async")  # fmt: skip
CALLS = {"call async": 1, "call sync": 1, "agent 1 async": 1, "agent 1 sync": 1,
         "agent 5 async": 5, "agent 5 sync": 5, "batch 100 async": 100}  # fmt: skip
BATCH = [("add", ARGS_JSON)] * 100


def _setup(*, model_path: bool = False) -> dict[str, Op]:
    """Fresh tools, executors and agents; one op per workload."""
    old = _schema._FAST_PATH
    _schema._FAST_PATH = not model_path
    try:
        registry = ToolRegistry()
        for fn in (add, add_sync):
            tool = define_tool(fn, registry=registry)
            expected = "ParamsValidator" if model_path else "SimpleParamsValidator"
            assert type(tool.validator).__name__ == expected, tool.validator
    finally:
        _schema._FAST_PATH = old
    executor = Executor(registry)
    ops: dict[str, Op] = {}
    for kind, name in (("async", "add"), ("sync", "add_sync")):

        async def one_call(name: str = name) -> Any:
            result = await executor.call(name, ARGS_JSON)
            if result.text != "3":
                raise AssertionError(result)
            return result

        ops[f"call {kind}"] = one_call
        if kind == "async":

            async def batch() -> Any:
                results = await executor.call_many(BATCH)
                if [r.text for r in results] != ["3"] * len(BATCH):
                    raise AssertionError(results)
                return results

            ops["batch 100 async"] = batch
        for n in (1, 5):
            # different arguments: the same call repeated in one turn would end the run
            # (Agent.max_repeated_calls)
            calls = [call(name, a=1 + i, b=2) for i in range(n)]
            model = ScriptedModel([calls, "The sum is 3."])
            agent = Agent("bench", model=model, tools=[name], executor=executor)

            async def run(model: ScriptedModel = model, agent: Agent = agent, n: int = n) -> Any:
                model.reset()
                result = await agent.run("What is 1 + 2?")
                if result.output != "The sum is 3." or len(result.trace.spans()) < n:
                    raise AssertionError(result)
                return result

            ops[f"agent {n} {kind}"] = run
    return ops


# --------------------------------------------------------------------------- paired rounds


@dataclass
class Variant:
    ops: dict[str, Op]
    patches: list[tuple[Any, dict[str, Any]]]

    @contextmanager
    def active(self) -> Iterator[None]:
        with _patched_all(self.patches):
            yield


@contextmanager
def _patched_all(patches: list[tuple[Any, dict[str, Any]]]) -> Iterator[None]:
    if not patches:
        yield
        return
    (obj, values), *rest = patches
    with _patched(obj, **values), _patched_all(rest):
        yield


_clock = time.process_time
"""CPU time of the whole process (worker threads included): time this process waits for a
core while other jobs run is not counted. ``--wall`` uses ``time.perf_counter`` instead."""


async def _batch(op: Op, n: int) -> float:
    gc.collect()
    t0 = _clock()
    for _ in range(n):
        await op()
    return (_clock() - t0) / n


@dataclass
class Paired:
    a: float
    """Median time per op, optimised (s)."""
    b: float
    diffs: list[float]
    """Per round: plain - optimised (s per op)."""

    @property
    def gain(self) -> float:
        return statistics.median(self.diffs)

    @property
    def spread(self) -> tuple[float, float]:
        q = statistics.quantiles(self.diffs, n=4)
        return q[0], q[2]

    @property
    def wins(self) -> float:
        return sum(d > 0 for d in self.diffs) / len(self.diffs)


async def paired(a: Variant, b: Variant, workload: str, rounds: int, batch_s: float) -> Paired:
    for v in (a, b):  # warm up, check, calibrate
        with v.active():
            for _ in range(20):
                await v.ops[workload]()
    with a.active():
        per_op = await _batch(a.ops[workload], 50)
    n = max(5, int(batch_s / per_op))
    ta: list[float] = []
    tb: list[float] = []
    for r in range(rounds):
        order = ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta))
        for v, out in order:
            with v.active():
                out.append(await _batch(v.ops[workload], n))
    return Paired(statistics.median(ta), statistics.median(tb),
                  [y - x for x, y in zip(ta, tb, strict=True)])  # fmt: skip


def _define_pair(rounds: int) -> Paired:
    """Defining ``forecast`` (target 3's function) on the fast path vs the model path."""
    src = '''
def forecast{i}(city: str, days: int = 3, units: str = "metric", include_hourly: bool = False):
    """Forecast the weather.

    Args:
        city: Name of the city.
        days: How many days to forecast.
    """
'''
    counter = iter(range(10**9))

    def fresh() -> Callable[..., Any]:
        i = next(counter)
        ns: dict[str, Any] = {}
        exec(src.format(i=i), ns)
        return ns[f"forecast{i}"]  # type: ignore[no-any-return]

    def batch(fast: bool, n: int = 40) -> float:
        fns = [fresh() for _ in range(n)]
        _schema._FAST_PATH = fast
        try:
            gc.collect()
            t0 = _clock()
            for fn in fns:
                define_tool(fn, registry=None).parameters  # noqa: B018
            return (_clock() - t0) / n
        finally:
            _schema._FAST_PATH = True

    batch(True), batch(False)
    ta: list[float] = []
    tb: list[float] = []
    for r in range(rounds):
        for fast in (True, False) if r % 2 == 0 else (False, True):
            (ta if fast else tb).append(batch(fast))
    return Paired(statistics.median(ta), statistics.median(tb),
                  [y - x for x, y in zip(ta, tb, strict=True)])  # fmt: skip


# --------------------------------------------------------------------------- report


def _us(s: float) -> str:
    return f"{s * 1e6:+.2f} µs" if abs(s) < 1e-3 else f"{s * 1e3:+.2f} ms"


OPTS = {
    "builders": "positional slot builders (types.py) vs the dataclasses' keyword constructors",
    "limit": "inlined slot take/give-back (_pipeline.py, _control.py) vs take() + release()",
    "inline-steps": "first cases inline in CallSteps.run/finish (_pipeline.py) vs their calls",
    "redact-walk": "memo and cache read inline in _redact._walk_mapping vs a call each",
    "span-ids": "span ids from a generator seeded by the OS vs 8 bytes from the OS each",
    "simple-validator": "simple-schema SchemaValidator (second validator) vs the model's validator",
    "stats-inbox": "lock-free stats inbox (_stats.py) vs counting under the registry's lock",
}


def _variants(opt: str) -> tuple[Variant, Variant]:
    if opt == "builders":
        ops = _setup()
        return Variant(ops, []), Variant(ops, _builders_plain())
    if opt == "limit":
        ops = _setup()
        return Variant(ops, []), Variant(ops, _limit_plain())
    if opt == "inline-steps":
        ops = _setup()
        return Variant(ops, []), Variant(ops, _inline_steps_plain())
    if opt == "redact-walk":
        ops = _setup()
        return Variant(ops, [(_redact, {"_walk_mapping": _inline_walk_mapping})]), Variant(ops, [])
    if opt == "span-ids":
        ops = _setup()
        return Variant(ops, [(_trace, {"secrets": _SeededIds()})]), Variant(ops, [])
    if opt == "stats-inbox":
        ops = _setup()
        return Variant(ops, []), Variant(ops, [(_pipeline, {"SETTLE_AT": 1})])
    return Variant(_setup(), []), Variant(_setup(model_path=True), [])


async def main(args: argparse.Namespace) -> str:
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say("kode_nb micro-optimisations: optimised (A) vs plain (B), paired interleaved rounds")
    say(f"date:     {time.strftime('%Y-%m-%d %H:%M:%S %z', time.gmtime())}")
    say(f"machine:  {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}"
        f" ({sys.executable}); kode_nb {kode_nb.__version__}")  # fmt: skip
    say(f"load:     {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min, at start)")
    say(
        f"method:   {args.rounds} rounds per row; each round one batch of A and one of B (~"
        f"{args.batch_ms:.0f} ms each, order flipped every round, gc.collect() before each);"
    )
    clock = (
        "wall time (perf_counter)"
        if args.wall
        else (
            "process CPU time (process_time, all threads: waiting for a core behind other jobs "
            "is not counted)"
        )
    )
    say(f"clock:    {clock}")
    say("          gain = median over rounds of (B - A) per op; spread = 25th..75th percentile;")
    say("          wins = rounds where A was faster. Positive gain = the optimisation saves time.")
    verdicts: list[str] = []
    for opt in args.only or list(OPTS):
        a, b = _variants(opt)
        say()
        say(f"== {opt}: {OPTS[opt]}")
        say(f"   {'workload':<14} {'A (opt)':>11} {'B (plain)':>11} {'gain/op':>11} "
            f"{'spread':>23} {'wins':>5} {'gain/call':>11} {'% of op':>8}")  # fmt: skip
        rows: dict[str, Paired] = {}
        for w in WORKLOADS:
            p = await paired(a, b, w, args.rounds, args.batch_ms / 1e3)
            rows[w] = p
            lo, hi = p.spread
            say(f"   {w:<14} {p.a * 1e6:>8.2f} µs {p.b * 1e6:>8.2f} µs {_us(p.gain):>11} "
                f"[{_us(lo):>10}, {_us(hi):>10}] {p.wins:>5.0%} {_us(p.gain / CALLS[w]):>11} "
                f"{p.gain / p.a:>+8.2%}")  # fmt: skip
        if opt == "simple-validator":
            d = _define_pair(args.rounds)
            lo, hi = d.spread
            say(
                f"   {'define_tool':<14} {d.a * 1e6:>8.2f} µs {d.b * 1e6:>8.2f} µs "
                f"{_us(d.gain):>11} [{_us(lo):>10}, {_us(hi):>10}] {d.wins:>5.0%} "
                f"{'':>11} {d.gain / d.a:>+8.2%}   (target 3's forecast, new function each)"
            )
        one, run, batch = rows["call async"], rows["agent 1 async"], rows["batch 100 async"]
        pays = any(p.gain / p.a >= 0.01 and p.spread[0] > 0 for p in (run, batch))
        verdict = (f"{opt}: gain per tool call {_us(one.gain)} (call async; spread "
                   f"{_us(one.spread[0])}..{_us(one.spread[1])}), per agent run (1 async call) "
                   f"{_us(run.gain)} = {run.gain / run.a:+.2%} of {run.a * 1e6:.1f} µs (spread "
                   f"{_us(run.spread[0])}..{_us(run.spread[1])}), per batch of 100 calls "
                   f"{_us(batch.gain)} = {batch.gain / batch.a:+.2%} of {batch.a * 1e6:.1f} µs "
                   f"(spread {_us(batch.spread[0])}..{_us(batch.spread[1])}) -> "
                   f"{'PAYS' if pays else 'does not pay'}")  # fmt: skip
        if opt == "simple-validator":
            verdict += f"; defining a tool: {_us(d.gain)} ({d.gain / d.a:+.0%})"
        say(f"   verdict: {verdict}")
        verdicts.append(verdict)
    say()
    say(
        "== Summary (pays = saves >= 1 % of a whole agent run or of the batch, its 25th "
        "percentile above zero)"
    )
    for v in verdicts:
        say(f"   {v}")
    say(f"load at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--batch-ms", type=float, default=20.0)
    parser.add_argument("--wall", action="store_true", help="wall time instead of CPU time")
    parser.add_argument("--only", nargs="*", choices=list(OPTS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "micro_opts.txt"))
    ns = parser.parse_args()
    if ns.wall:
        _clock = time.perf_counter
    report = asyncio.run(main(ns))
    if ns.out != "-":
        from _provenance import save

        save(ns.out, report)
