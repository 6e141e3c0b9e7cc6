"""The micro-optimisation benchmark's workloads still run on today's package: each op of
``benchmarks/micro_opts.py`` (one call, whole agent runs with 1 and 5 calls, async and sync tools,
a batch of 100 calls) completes once with the answer it checks, under each optimisation's
optimised and plain forms. Nothing is timed here (speed is the benchmark's job)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _benchmark(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks/<name>.py`` imported as a module (with its neighbours importable)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # they import their neighbours (_funcs, ...)
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def micro_opts(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return _benchmark("micro_opts", monkeypatch)


def test_every_micro_opts_workload_completes(micro_opts: ModuleType) -> None:
    ops = micro_opts._setup()
    assert set(ops) == set(micro_opts.WORKLOADS)

    async def run_all() -> None:
        for op in ops.values():
            await op()  # each raises AssertionError with the result when it went wrong

    asyncio.run(run_all())


def test_every_micro_opts_variant_builds_and_runs_every_workload(micro_opts: ModuleType) -> None:
    """Each optimisation's optimised (A) and plain (B) forms still patch today's package (a
    form the package changed fails with "update this benchmark"), and give the checked answers."""

    async def run_all() -> None:
        for opt in micro_opts.OPTS:
            for variant in micro_opts._variants(opt):
                with variant.active():
                    for op in variant.ops.values():
                        await op()

    asyncio.run(run_all())


def _load(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def test_a_saved_result_names_its_commit_date_and_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    provenance = _load(monkeypatch, "_provenance")
    saved = provenance.save(tmp_path / "r.txt", "title\nnumbers").read_text().splitlines()
    assert [line.split(":")[0] for line in saved[:4]] == ["date", "commit", "machine", "load"]
    assert saved[-2:] == ["title", "numbers"]
    again = provenance.save(tmp_path / "r.txt", "\n".join(saved)).read_text().splitlines()
    assert again == saved  # a header already there is kept, not doubled


def test_the_compare_worker_imports_its_own_tree_and_times_each_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compare = _load(monkeypatch, "compare")
    side = compare.Side("HEAD", BENCHMARKS.parent)  # exits unless it imported this tree's kode_nb
    try:
        for op in compare.WORKLOADS:
            side.calibrate(op, 0.002)
            assert side.n[op] >= 1
            assert side.batch(op) > 0
    finally:
        side.close()


def test_the_long_runs_benchmark_runs_both_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks/long_runs.py``: both estimates give the run's answer, and the same estimate."""
    module = _benchmark("long_runs", monkeypatch)
    monkeypatch.setattr(module, "TURNS", (3,))
    report = asyncio.run(module.main(2))
    assert "µs/turn" in report

    async def estimates(plain: bool) -> list[int]:
        agent, model = module._agent(3)
        model.reset()
        if plain:
            with module._plain():
                result = await agent.run("go")
        else:
            result = await agent.run("go")
        calls = result.trace.root.find("model_call")
        return [s.attributes["request_tokens_estimate"] for s in calls]

    assert asyncio.run(estimates(False)) == asyncio.run(estimates(True))
