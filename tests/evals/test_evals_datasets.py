"""Cases and datasets: files (JSON, YAML, JSONL, pydantic-evals), DataFrames, validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kode_nb.errors import ConfigurationError
from kode_nb.evals import (
    Case,
    Contains,
    Dataset,
    EqualsExpected,
    IsInstance,
    LLMJudge,
    MaxDuration,
    scorers_from_specs,
)

HERE = Path(__file__).parent


def sample() -> Dataset:
    return Dataset(
        [
            Case(name="a", inputs={"q": "2+2"}, expected_output="4", tags=["math"]),
            Case(
                inputs="What is the capital of France?", expected_output="Paris", metadata={"k": 1}
            ),
            {"inputs": {"q": "x"}, "tags": ["misc", "math"]},
        ],
        name="sample",
    )


def test_cases_are_named_and_rows_made() -> None:
    ds = sample()
    assert [c.name for c in ds] == ["a", "case 2", "case 3"]
    assert ds[1].row() == {"prompt": "What is the capital of France?"}
    assert ds["a"].row() == {"q": "2+2"}
    assert Case(inputs=3).row() == {"inputs": 3}
    assert len(ds.filter(tags=["math"])) == 2


def test_duplicate_names_and_bad_cases_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="two cases are named"):
        Dataset([Case(name="x", inputs="a"), Case(name="x", inputs="b")])
    with pytest.raises(ConfigurationError, match="needs 'inputs'"):
        Dataset([{"expected_output": 1}])
    with pytest.raises(ConfigurationError, match="unknown keys"):
        Dataset([{"inputs": 1, "expectd": 2}])
    with pytest.raises(ConfigurationError, match="tags"):
        Dataset([{"inputs": 1, "tags": "a"}])


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml", ".jsonl"])
def test_files_round_trip(tmp_path: Path, suffix: str) -> None:
    ds = sample()
    path = ds.to_file(tmp_path / f"cases{suffix}")
    back = Dataset.from_file(path)
    assert [c.to_dict() for c in back] == [c.to_dict() for c in ds]
    if suffix != ".jsonl":
        assert back.name == "sample"


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"inputs": 1}\n\n{nope}\n')
    with pytest.raises(ConfigurationError, match="line 3"):
        Dataset.from_file(path)
    with pytest.raises(ConfigurationError, match=r"\.json, \.yaml"):
        sample().to_file(tmp_path / "x.csv")


def test_from_and_to_a_frame() -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {
            "name": ["one", "two"],
            "question": ["1+1", "2+2"],
            "expected_output": ["2", "4"],
            "tags": ["easy", "easy, math"],
            "source": ["book", None],
        }
    )
    ds = Dataset.from_frame(df, inputs=["question"])
    assert ds["two"].inputs == {"question": "2+2"}
    assert ds["two"].tags == ["easy", "math"]
    assert ds["one"].metadata == {"source": "book"}
    assert ds["two"].metadata == {"source": None}
    back = ds.to_frame()
    assert list(back["question"]) == ["1+1", "2+2"]
    with pytest.raises(ConfigurationError, match="no column"):
        Dataset.from_frame(df, inputs=["nope"])


def test_a_pydantic_evals_file_reads_with_its_evaluators() -> None:
    # written by pydantic-evals 2.62's Dataset.to_file (tests/evals/pydantic_evals_capitals.yaml)
    ds = Dataset.from_file(HERE / "pydantic_evals_capitals.yaml")
    assert ds.name == "capitals"
    assert [c.name for c in ds] == ["france", "japan", "australia"]
    assert ds["france"].expected_output == "Paris"
    assert ds["australia"].metadata == {"difficulty": "hard"}
    scorers = scorers_from_specs(ds.evaluator_specs)
    assert [type(s) for s in scorers] == [EqualsExpected, IsInstance, MaxDuration, LLMJudge]
    assert [s.name for s in scorers] == ["EqualsExpected", "IsInstance", "MaxDuration", "LLMJudge"]
    own = scorers_from_specs(ds["france"].evaluators)
    assert isinstance(own[0], Contains)
    assert own[0].value == "Par"


def test_unknown_evaluator_specs_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="not read by kode_nb"):
        scorers_from_specs(["HasMatchingSpan"])
    with pytest.raises(ConfigurationError, match="needs a model"):
        scorers_from_specs([{"LLMJudge": "rubric only"}])


def test_a_pydantic_evals_json_file_reads(tmp_path: Path) -> None:
    path = tmp_path / "ds.json"
    data = {"$schema": "x.json", "cases": [{"name": "n", "inputs": 1, "evaluators": []}]}
    path.write_text(json.dumps(data))
    ds = Dataset.from_file(path)
    assert ds["n"].row() == {"inputs": 1}
