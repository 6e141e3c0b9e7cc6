"""Cases and datasets: what an evaluation runs, read from and written to JSON, YAML and JSONL.

A :class:`Case` has inputs (a dict of the run's inputs, or a string: the prompt), an expected
output, metadata and tags. A :class:`Dataset` is a named list of cases with unique names::

    ds = Dataset.from_file("questions.yaml")     # .json, .yaml/.yml, .jsonl
    ds = Dataset.from_frame(df, inputs=["question"], expected="answer")
    ds.to_file("questions.jsonl")

The file forms: JSON and YAML hold ``{"name", "cases": [CASE]}``; JSONL one CASE a line.
CASE = ``{"name", "inputs", "expected_output", "metadata", "tags"}`` (only ``inputs`` is
required). A pydantic-evals dataset file (YAML or JSON: ``cases`` with ``inputs``,
``expected_output``, ``metadata`` and ``evaluators``) reads the same way; its evaluators
are kept as :attr:`Dataset.evaluator_specs` and turned into scorers by
:func:`kode_nb.evals.scorers_from_specs`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kode_nb.errors import ConfigurationError

__all__ = ["Case", "Dataset"]

_CASE_KEYS = {"name", "inputs", "expected_output", "metadata", "tags", "evaluators"}


@dataclass(kw_only=True)
class Case:
    """One case: the inputs of a run and what to expect of it."""

    inputs: Any
    """A dict (the run's inputs: an agent's prompt template fields, a tool's arguments, an
    async function's row) or a string (an agent's prompt). Other values are passed as
    ``{"inputs": value}``."""
    name: str = ""
    """Unique in its dataset (``case 1``, ``case 2``... when not given)."""
    expected_output: Any = None
    """What the run should answer (``None``: nothing expected)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Anything else about the case (difficulty, source...); scorers can read it."""
    tags: list[str] = field(default_factory=list)
    """Labels to filter the report by."""
    evaluators: list[Any] = field(default_factory=list)
    """A pydantic-evals case's own evaluator specs (from a file), kept as read."""

    def row(self) -> dict[str, Any]:
        """The inputs as one row of :func:`~kode_nb.many.run_many`."""
        if isinstance(self.inputs, Mapping):
            return {str(k): v for k, v in self.inputs.items()}
        if isinstance(self.inputs, str):
            return {"prompt": self.inputs}
        return {"inputs": self.inputs}

    def to_dict(self) -> dict[str, Any]:
        """JSON-shaped; empty fields are left out."""
        out: dict[str, Any] = {"name": self.name, "inputs": self.inputs}
        if self.expected_output is not None:
            out["expected_output"] = self.expected_output
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        if self.tags:
            out["tags"] = list(self.tags)
        if self.evaluators:
            out["evaluators"] = list(self.evaluators)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "a case") -> Case:
        if not isinstance(data, Mapping) or "inputs" not in data:
            raise ConfigurationError(f"{where}: a case needs 'inputs', got {_short(data)}")
        unknown = set(data) - _CASE_KEYS
        if unknown:
            raise ConfigurationError(
                f"{where}: unknown keys {sorted(unknown)}; a case has {sorted(_CASE_KEYS)}"
            )
        tags = data.get("tags") or []
        if isinstance(tags, str) or not isinstance(tags, Sequence):
            raise ConfigurationError(f"{where}: 'tags' must be a list of strings, got {tags!r}")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ConfigurationError(f"{where}: 'metadata' must be an object, got {metadata!r}")
        return cls(
            name=str(data.get("name") or ""),
            inputs=data["inputs"],
            expected_output=data.get("expected_output"),
            metadata=dict(metadata),
            tags=[str(t) for t in tags],
            evaluators=list(data.get("evaluators") or []),
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Dataset:
    """A named list of :class:`Case` with unique names (see the module docstring)."""

    def __init__(
        self,
        cases: Iterable[Case | Mapping[str, Any]],
        *,
        name: str = "dataset",
        evaluator_specs: Sequence[Any] = (),
    ) -> None:
        self.name = name
        self.cases: list[Case] = []
        """The cases, in order."""
        self.evaluator_specs = list(evaluator_specs)
        """A pydantic-evals file's dataset-level evaluators, as read (see
        :func:`kode_nb.evals.scorers_from_specs`)."""
        seen: set[str] = set()
        for i, item in enumerate(cases):
            case = item if isinstance(item, Case) else Case.from_dict(item, where=f"case {i + 1}")
            if not case.name:
                case.name = f"case {i + 1}"
            if case.name in seen:
                raise ConfigurationError(f"dataset {name!r}: two cases are named {case.name!r}")
            seen.add(case.name)
            self.cases.append(case)

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __getitem__(self, key: int | str) -> Case:
        if isinstance(key, str):
            for case in self.cases:
                if case.name == key:
                    return case
            raise KeyError(key)
        return self.cases[key]

    def __repr__(self) -> str:
        return f"<Dataset {self.name!r}: {len(self.cases)} cases>"

    def filter(self, *, tags: Iterable[str] = ()) -> Dataset:
        """The cases that have every one of ``tags``."""
        wanted = set(tags)
        return Dataset(
            [c for c in self.cases if wanted <= set(c.tags)],
            name=self.name,
            evaluator_specs=self.evaluator_specs,
        )

    # ------------------------------------------------------------ JSON-shaped

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "cases": [c.to_dict() for c in self.cases]}
        if self.evaluator_specs:
            out["evaluators"] = list(self.evaluator_specs)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Sequence[Any], *, name: str = "") -> Dataset:
        """From ``{"name", "cases"}`` (kode_nb's or pydantic-evals' form) or a list of cases."""
        if isinstance(data, Mapping):
            if not isinstance(data.get("cases"), list):
                raise ConfigurationError("a dataset needs 'cases': a list of cases")
            known = {"name", "cases", "evaluators", "report_evaluators", "$schema"}
            unknown = set(data) - known
            if unknown:
                raise ConfigurationError(f"a dataset has unknown keys {sorted(unknown)}")
            return cls(
                data["cases"],
                name=str(data.get("name") or name or "dataset"),
                evaluator_specs=list(data.get("evaluators") or []),
            )
        if isinstance(data, Sequence) and not isinstance(data, str):
            return cls(list(data), name=name or "dataset")
        raise ConfigurationError(f"a dataset is an object with 'cases' or a list, got {data!r}")

    # ------------------------------------------------------------ files

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Dataset:
        """Read ``.json``, ``.yaml``/``.yml`` or ``.jsonl`` (kode_nb's or pydantic-evals' form)."""
        p = Path(path)
        text = p.read_text(encoding="utf-8")
        suffix = p.suffix.lower()
        if suffix == ".jsonl":
            return cls.from_jsonl(text, name=p.stem)
        if suffix in (".yaml", ".yml"):
            import yaml  # type: ignore[import-untyped]

            return cls.from_dict(yaml.safe_load(text), name=p.stem)
        if suffix == ".json":
            return cls.from_dict(json.loads(text), name=p.stem)
        raise ConfigurationError(f"{p}: a dataset file is .json, .yaml, .yml or .jsonl")

    @classmethod
    def from_jsonl(cls, text: str, *, name: str = "dataset") -> Dataset:
        """One case a line (blank lines skipped)."""
        cases = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    cases.append(Case.from_dict(json.loads(line), where=f"line {n}"))
                except json.JSONDecodeError as exc:
                    raise ConfigurationError(f"line {n}: not JSON: {exc}") from None
        return cls(cases, name=name)

    def to_file(self, path: str | os.PathLike[str]) -> Path:
        """Write ``.json``, ``.yaml``/``.yml`` or ``.jsonl`` (by the suffix)."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix == ".jsonl":
            lines = (json.dumps(c.to_dict(), ensure_ascii=False, default=str) for c in self.cases)
            p.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        elif suffix in (".yaml", ".yml"):
            import yaml

            plain = json.loads(json.dumps(self.to_dict(), default=str))
            p.write_text(
                yaml.safe_dump(plain, sort_keys=False, allow_unicode=True), encoding="utf-8"
            )
        elif suffix == ".json":
            text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str)
            p.write_text(text + "\n", encoding="utf-8")
        else:
            raise ConfigurationError(f"{p}: a dataset file is .json, .yaml, .yml or .jsonl")
        return p

    # ------------------------------------------------------------ frames

    @classmethod
    def from_frame(
        cls,
        frame: Any,
        *,
        inputs: Sequence[str] | None = None,
        expected: str | None = "expected_output",
        name_column: str | None = "name",
        tags: str | None = "tags",
        name: str = "dataset",
    ) -> Dataset:
        """One case per row of a pandas DataFrame: ``inputs`` are its input columns (default:
        every column that is not ``expected``, ``name_column`` or ``tags``); the other columns
        are the case's metadata."""
        if not hasattr(frame, "to_dict") or not hasattr(frame, "columns"):
            raise ConfigurationError(f"from_frame needs a pandas DataFrame, got {type(frame)}")
        columns = [str(c) for c in frame.columns]
        special = {c for c in (expected, name_column, tags) if c}
        chosen = list(inputs) if inputs is not None else [c for c in columns if c not in special]
        missing = [c for c in chosen if c not in columns]
        if missing:
            raise ConfigurationError(f"from_frame: no column {missing} (columns: {columns})")
        cases = []
        for record in frame.to_dict(orient="records"):
            row = {str(k): _plain(v) for k, v in record.items()}
            label = row.get(name_column) if name_column else None
            raw_tags = row.get(tags) if tags else None
            cases.append(
                Case(
                    name=str(label) if label not in (None, "") else "",
                    inputs={c: row[c] for c in chosen},
                    expected_output=row.get(expected) if expected else None,
                    metadata={k: v for k, v in row.items() if k not in special and k not in chosen},
                    tags=_tag_list(raw_tags),
                )
            )
        return cls(cases, name=name)

    def to_frame(self) -> Any:
        """A DataFrame: ``name``, the inputs' columns (``inputs`` for a non-dict), then
        ``expected_output``, ``tags`` and the metadata's columns."""
        from kode_nb.many.frame import import_pandas

        pd = import_pandas()
        records = []
        for c in self.cases:
            rec: dict[str, Any] = {"name": c.name, **c.row()}
            rec["expected_output"] = c.expected_output
            rec["tags"] = list(c.tags)
            rec.update({k: v for k, v in c.metadata.items() if k not in rec})
            records.append(rec)
        return pd.DataFrame.from_records(records)


def _tag_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, Iterable):
        return [str(t) for t in value]
    return [str(value)]


def _plain(value: Any) -> Any:
    from kode_nb.many.rows import _plain as plain

    return plain(value)
