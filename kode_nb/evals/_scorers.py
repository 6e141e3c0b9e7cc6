"""Scorers: what makes a case's run pass, or how good it was.

A scorer takes one :class:`CaseRun` (a case, one epoch's output, its status, trace, duration,
tokens and cost) and gives a :class:`Score`: ``passed`` (True/False, or None when it does not
judge pass or fail), ``value`` (a number; 1.0/0.0 for a pass/fail scorer) and ``reason``.

* Deterministic: :class:`EqualsExpected`, :class:`Equals`, :class:`Contains`,
  :class:`Regex`, :class:`MatchesSchema` (a JSON schema), :class:`IsInstance`,
  :class:`MaxDuration`, :class:`MaxTokens`, :class:`MaxCost`, :class:`Succeeded`.
* Trace-based: :class:`ToolCalled` (with matching arguments, a number of times),
  :class:`ToolNotCalled`, :class:`Turns`, :class:`NoDeniedCalls`, :class:`NoToolErrors`.
* :class:`~kode_nb.evals.LLMJudge` (:mod:`._judge`): a rubric judged by any kode_nb model.
* Any function of the run (:func:`scorer` / :func:`as_scorer`): it returns a bool, a number,
  a ``(bool | number, reason)`` pair, a dict with ``passed``/``value``/``reason`` or a
  :class:`Score`; it may be async.
"""

from __future__ import annotations

import contextlib
import fnmatch
import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from kode_nb.errors import ConfigurationError

__all__ = [
    "CaseRun",
    "Contains",
    "Equals",
    "EqualsExpected",
    "IsInstance",
    "MatchesSchema",
    "MaxCost",
    "MaxDuration",
    "MaxTokens",
    "NoDeniedCalls",
    "NoToolErrors",
    "Regex",
    "Score",
    "Scorer",
    "Succeeded",
    "ToolCalled",
    "ToolNotCalled",
    "Turns",
    "as_scorer",
    "run_scorer",
    "scorer",
]


@dataclass(frozen=True, kw_only=True)
class Score:
    """One scorer's verdict on one run."""

    passed: bool | None = None
    """Pass or fail; ``None``: this scorer gives a number only."""
    value: float | None = None
    """A number (a pass/fail scorer: 1.0 or 0.0); ``None``: it could not score (an error)."""
    reason: str = ""
    """Why, in a line."""

    @classmethod
    def of(cls, passed: bool, reason: str = "") -> Score:
        return cls(passed=bool(passed), value=1.0 if passed else 0.0, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "value": self.value, "reason": self.reason}


@dataclass(kw_only=True)
class CaseRun:
    """One run of one case (one epoch), as scorers see it."""

    case: Any
    """The :class:`~kode_nb.evals.Case`."""
    epoch: int
    output: Any
    status: str
    """``completed``/``ok`` when the run succeeded (see :attr:`ok`)."""
    error: str | None = None
    duration: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    turns: int | None = None
    trace_data: Any = None
    """The run's trace as it came: a :class:`~kode_nb.traces.Trace` or its JSON (plain or
    compact); :attr:`trace` reads it when a scorer first asks."""
    row: dict[str, Any] = field(default_factory=dict)
    """The inputs as the run got them."""
    _trace: Any = field(default=None, init=False, repr=False)

    @property
    def trace(self) -> Any:
        """The run's :class:`~kode_nb.traces.Trace` (``None``: the target records none)."""
        if self._trace is None and self.trace_data is not None:
            data = self.trace_data
            if hasattr(data, "root"):
                self._trace = data
            else:
                from kode_nb.traces import Trace

                self._trace = Trace.from_dict(data)
        return self._trace

    @property
    def ok(self) -> bool:
        return self.status in ("completed", "ok")

    @property
    def expected(self) -> Any:
        return self.case.expected_output

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def tool_calls(self) -> list[dict[str, Any]]:
        """The trace's tool calls, in order: ``{"tool", "arguments", "status", "denied",
        "is_error", "text"}``."""
        return list(_tool_calls(self.trace))


def _tool_calls(trace: Any) -> Iterator[dict[str, Any]]:
    if trace is None:
        return
    for span in trace.root.walk():
        if span.kind != "tool_call":
            continue
        a = span.attributes
        result = a.get("result") or {}
        status = result.get("status") or span.status
        denied = status == "denied" or any(
            e.get("name") == "approval_resolved"
            and (e.get("attributes") or {}).get("approved") is False
            for e in span.events
        )
        args = a.get("arguments")
        if isinstance(args, str):
            with contextlib.suppress(ValueError):
                args = json.loads(args)
        yield {
            "tool": a.get("tool") or span.name,
            "arguments": args,
            "status": status,
            "denied": denied,
            "is_error": bool(result.get("is_error")),
            "text": result.get("text"),
        }


class Scorer:
    """A scorer: :attr:`name` and :meth:`score`. Subclass it, or wrap a function with
    :func:`scorer`."""

    name: str = "scorer"
    kind: str = "pass"
    """``pass`` (the report shows a pass rate) or ``score`` (a mean)."""

    def score(self, run: CaseRun) -> Score | Awaitable[Score]:
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """What the report says of it (``name``, ``kind``, a ``description``)."""
        return {"name": self.name, "kind": self.kind, "description": self.describe()}

    def describe(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def _show(value: Any, limit: int = 60) -> str:
    text = _text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _same(a: Any, b: Any, *, strip: bool, case_sensitive: bool) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        if strip:
            a, b = a.strip(), b.strip()
        if not case_sensitive:
            a, b = a.casefold(), b.casefold()
        return bool(a == b)
    if isinstance(a, str) and not isinstance(b, str):
        a = _parse(a)
    return bool(a == b)  # type: ignore[no-any-return, unused-ignore]


def _parse(value: Any) -> Any:
    """A JSON text's value (a string that is not JSON stays itself)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class EqualsExpected(Scorer):
    """The output equals the case's expected output (strings: stripped; ``case_sensitive``).
    A case with no expected output is not judged (``passed`` None)."""

    def __init__(
        self, *, case_sensitive: bool = True, strip: bool = True, name: str = "equals_expected"
    ) -> None:
        self.case_sensitive, self.strip, self.name = case_sensitive, strip, name

    def score(self, run: CaseRun) -> Score:
        if run.expected is None:
            return Score(reason="no expected output")
        ok = _same(run.output, run.expected, strip=self.strip, case_sensitive=self.case_sensitive)
        return Score.of(
            ok, "" if ok else f"expected {_show(run.expected)}, got {_show(run.output)}"
        )

    def describe(self) -> str:
        return "output equals the expected output"


class Equals(Scorer):
    """The output equals ``value``."""

    def __init__(self, value: Any, *, name: str = "equals") -> None:
        self.value, self.name = value, name

    def score(self, run: CaseRun) -> Score:
        ok = _same(run.output, self.value, strip=True, case_sensitive=True)
        return Score.of(ok, "" if ok else f"expected {_show(self.value)}, got {_show(run.output)}")

    def describe(self) -> str:
        return f"output equals {_show(self.value)}"


class Contains(Scorer):
    """The output contains ``value`` (default: the expected output) — a substring of a text,
    an item of a list, a key (or key/value subset) of an object."""

    def __init__(
        self, value: Any = None, *, case_sensitive: bool = True, name: str = "contains"
    ) -> None:
        self.value, self.case_sensitive, self.name = value, case_sensitive, name

    def score(self, run: CaseRun) -> Score:
        needle = self.value if self.value is not None else run.expected
        if needle is None:
            return Score(reason="nothing to look for")
        out = run.output
        if isinstance(out, str):
            hay, text = out, _text(needle)
            if not self.case_sensitive:
                hay, text = hay.casefold(), text.casefold()
            ok = text in hay
        elif isinstance(out, Mapping) and isinstance(needle, Mapping):
            ok = all(k in out and out[k] == v for k, v in needle.items())
        elif isinstance(out, (Mapping, list, tuple)):
            ok = needle in out
        else:
            ok = _text(needle) in _text(out)
        return Score.of(ok, "" if ok else f"{_show(needle)} not in {_show(out)}")

    def describe(self) -> str:
        what = "the expected output" if self.value is None else _show(self.value)
        return f"output contains {what}"


class Regex(Scorer):
    """The output (as text) matches ``pattern`` somewhere (``fullmatch``: as a whole)."""

    def __init__(
        self, pattern: str, *, flags: int = 0, fullmatch: bool = False, name: str = "regex"
    ) -> None:
        self.pattern = re.compile(pattern, flags)
        self.fullmatch, self.name = fullmatch, name

    def score(self, run: CaseRun) -> Score:
        text = _text(run.output) if run.output is not None else ""
        found = self.pattern.fullmatch(text) if self.fullmatch else self.pattern.search(text)
        return Score.of(
            found is not None, "" if found else f"/{self.pattern.pattern}/ not in {_show(text)}"
        )

    def describe(self) -> str:
        return f"output matches /{self.pattern.pattern}/"


class MatchesSchema(Scorer):
    """The output (a JSON text is parsed first) is valid against a JSON schema, or is an
    instance of a pydantic model given instead."""

    def __init__(self, schema: Any, *, name: str = "schema") -> None:
        self.name = name
        self.model = None
        if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
            self.model = schema
            schema = schema.model_json_schema()
        if not isinstance(schema, Mapping):
            raise ConfigurationError(
                f"MatchesSchema needs a JSON schema or a pydantic model, got {schema!r}"
            )
        import jsonschema  # type: ignore[import-untyped]

        jsonschema.validators.validator_for(schema).check_schema(schema)
        self.schema = dict(schema)
        self._validator = jsonschema.validators.validator_for(schema)(schema)

    def score(self, run: CaseRun) -> Score:
        value = _parse(run.output)
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if not errors:
            return Score.of(True)
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "the output"
        return Score.of(False, f"{where}: {first.message}"[:200])

    def describe(self) -> str:
        title = self.schema.get("title") or (self.model.__name__ if self.model else "")
        return f"output matches the JSON schema {title}".rstrip()


class IsInstance(Scorer):
    """The output is of type ``kind`` (a class, or a name such as ``"str"``, ``"dict"``)."""

    def __init__(self, kind: type | str, *, name: str = "is_instance") -> None:
        self.type, self.name = kind, name

    def score(self, run: CaseRun) -> Score:
        out = run.output
        if isinstance(self.type, type):
            ok = isinstance(out, self.type)
        else:
            ok = any(c.__name__ == self.type for c in type(out).__mro__)
        got = type(out).__name__
        return Score.of(ok, "" if ok else f"output is a {got}")

    def describe(self) -> str:
        name = self.type if isinstance(self.type, str) else self.type.__name__
        return f"output is a {name}"


class _Limit(Scorer):
    label = ""
    unit = ""

    def __init__(self, limit: float, *, name: str | None = None) -> None:
        self.limit = float(limit)
        self.name = name or type(self).__name__.replace("Max", "max_").lower()

    def measure(self, run: CaseRun) -> float | None:
        raise NotImplementedError

    def score(self, run: CaseRun) -> Score:
        got = self.measure(run)
        if got is None:
            return Score(reason=f"{self.label} unknown")
        ok = got <= self.limit
        return Score.of(ok, "" if ok else f"{self.label} {got:g}{self.unit} > {self.limit:g}")

    def describe(self) -> str:
        return f"{self.label} ≤ {self.limit:g}{self.unit}"


class MaxDuration(_Limit):
    """The run took at most ``seconds``."""

    label, unit = "duration", " s"

    def __init__(self, seconds: float, *, name: str = "max_duration") -> None:
        super().__init__(seconds, name=name)

    def measure(self, run: CaseRun) -> float | None:
        return run.duration


class MaxTokens(_Limit):
    """The run used at most ``tokens`` (input + output; unknown counts are not judged)."""

    label = "tokens"

    def __init__(self, tokens: int, *, name: str = "max_tokens") -> None:
        super().__init__(tokens, name=name)

    def measure(self, run: CaseRun) -> float | None:
        return None if run.tokens is None else float(run.tokens)


class MaxCost(_Limit):
    """The run cost at most ``usd`` (an unknown cost is not judged)."""

    label = "cost"

    def __init__(self, usd: float, *, name: str = "max_cost") -> None:
        super().__init__(usd, name=name)

    def measure(self, run: CaseRun) -> float | None:
        return run.cost


class Succeeded(Scorer):
    """The run ended ``completed``/``ok`` (not an error, the turn limit, a denial...)."""

    def __init__(self, *, name: str = "succeeded") -> None:
        self.name = name

    def score(self, run: CaseRun) -> Score:
        return Score.of(run.ok, "" if run.ok else f"{run.status}: {run.error or ''}".strip(": "))

    def describe(self) -> str:
        return "the run succeeded"


# --------------------------------------------------------------------------- trace-based


def _matches(expected: Any, got: Any) -> bool:
    """``got`` matches ``expected``: objects by the keys given (recursively), strings as
    glob patterns (``"A*"``), lists item by item, anything else by equality."""
    if isinstance(expected, Mapping):
        return isinstance(got, Mapping) and all(
            k in got and _matches(v, got[k]) for k, v in expected.items()
        )
    if isinstance(expected, str):
        return isinstance(got, str) and fnmatch.fnmatchcase(got, expected)
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(got, (list, tuple))
            and len(got) == len(expected)
            and all(_matches(e, g) for e, g in zip(expected, got, strict=True))
        )
    if callable(expected):
        return bool(expected(got))
    return bool(expected == got)


class ToolCalled(Scorer):
    """The run called ``tool`` (a name or glob), with arguments matching ``arguments`` (the
    keys given; strings are glob patterns; a function of the value checks it), at least
    ``min_times`` and at most ``max_times`` times."""

    def __init__(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        min_times: int = 1,
        max_times: int | None = None,
        name: str | None = None,
    ) -> None:
        self.tool, self.arguments = tool, dict(arguments) if arguments is not None else None
        self.min_times, self.max_times = min_times, max_times
        self.name = name or f"called {tool}"

    def count(self, run: CaseRun) -> int:
        return sum(
            1
            for c in run.tool_calls()
            if fnmatch.fnmatchcase(str(c["tool"]), self.tool)
            and (self.arguments is None or _matches(self.arguments, c["arguments"]))
        )

    def score(self, run: CaseRun) -> Score:
        if run.trace is None:
            return Score(reason="the run recorded no trace")
        n = self.count(run)
        ok = n >= self.min_times and (self.max_times is None or n <= self.max_times)
        return Score.of(ok, f"{n} matching call{'s' if n != 1 else ''}")

    def describe(self) -> str:
        args = f" with {_show(self.arguments)}" if self.arguments else ""
        return f"{self.tool} was called{args}"


class ToolNotCalled(ToolCalled):
    """The run never called ``tool`` (with arguments matching ``arguments``, when given)."""

    def __init__(
        self, tool: str, arguments: Mapping[str, Any] | None = None, *, name: str | None = None
    ) -> None:
        super().__init__(tool, arguments, min_times=0, max_times=0, name=name or f"no {tool}")

    def describe(self) -> str:
        args = f" with {_show(self.arguments)}" if self.arguments else ""
        return f"{self.tool} was not called{args}"


class Turns(Scorer):
    """The run took between ``min`` and ``max`` model turns."""

    def __init__(self, *, max: int | None = None, min: int = 0, name: str = "turns") -> None:
        self.max, self.min, self.name = max, min, name

    def score(self, run: CaseRun) -> Score:
        if run.turns is None:
            return Score(reason="turns unknown")
        ok = run.turns >= self.min and (self.max is None or run.turns <= self.max)
        return Score.of(ok, f"{run.turns} turn{'s' if run.turns != 1 else ''}")

    def describe(self) -> str:
        return f"{self.min} to {self.max if self.max is not None else '∞'} turns"


class NoDeniedCalls(Scorer):
    """No tool call of the run was denied (by the policy or a person)."""

    def __init__(self, *, name: str = "no_denied_calls") -> None:
        self.name = name

    def score(self, run: CaseRun) -> Score:
        if run.trace is None:
            return Score(reason="the run recorded no trace")
        denied = [c["tool"] for c in run.tool_calls() if c["denied"]]
        return Score.of(not denied, f"denied: {', '.join(map(str, denied))}" if denied else "")

    def describe(self) -> str:
        return "no tool call was denied"


class NoToolErrors(Scorer):
    """No tool call of the run ended in an error."""

    def __init__(self, *, name: str = "no_tool_errors") -> None:
        self.name = name

    def score(self, run: CaseRun) -> Score:
        if run.trace is None:
            return Score(reason="the run recorded no trace")
        bad = [c["tool"] for c in run.tool_calls() if c["is_error"] and not c["denied"]]
        return Score.of(not bad, f"errors: {', '.join(map(str, bad))}" if bad else "")

    def describe(self) -> str:
        return "no tool call failed"


# --------------------------------------------------------------------------- functions


class FunctionScorer(Scorer):
    """A scorer made of a function of the run (see the module docstring)."""

    def __init__(self, fn: Callable[[CaseRun], Any], *, name: str = "", kind: str = "") -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "custom")
        self.kind = kind or "pass"
        self._kind_given = bool(kind)

    def score(self, run: CaseRun) -> Score | Awaitable[Score]:
        out = self.fn(run)
        if inspect.isawaitable(out):
            return self._later(out)
        return to_score(out)

    async def _later(self, out: Awaitable[Any]) -> Score:
        return to_score(await out)

    def describe(self) -> str:
        doc = inspect.getdoc(self.fn) or ""
        return doc.splitlines()[0] if doc else self.name


def to_score(out: Any) -> Score:
    """A scorer function's answer as a :class:`Score` (see the module docstring)."""
    reason = ""
    if isinstance(out, Score):
        return out
    if isinstance(out, tuple) and len(out) == 2:
        out, reason = out[0], str(out[1])
    if isinstance(out, Mapping):
        passed = out.get("passed", out.get("pass"))
        value = out.get("value", out.get("score"))
        if value is None and passed is not None:
            value = 1.0 if passed else 0.0
        return Score(
            passed=None if passed is None else bool(passed),
            value=None if value is None else float(value),
            reason=str(out.get("reason", reason) or ""),
        )
    if isinstance(out, bool):
        return Score.of(out, reason)
    if isinstance(out, (int, float)) and not isinstance(out, bool):
        value = float(out)
        if math.isnan(value):
            return Score(reason=reason or "NaN")
        return Score(value=value, reason=reason)
    if out is None:
        return Score(reason=reason or "no score")
    raise TypeError(
        f"a scorer returned {type(out).__name__}; return a bool, a number, (value, reason), "
        "a dict with passed/value/reason, or a Score"
    )


@overload
def scorer(fn: Callable[[CaseRun], Any], *, name: str = "", kind: str = "") -> FunctionScorer: ...


@overload
def scorer(
    fn: None = None, *, name: str = "", kind: str = ""
) -> Callable[[Callable[[CaseRun], Any]], FunctionScorer]: ...


def scorer(
    fn: Callable[[CaseRun], Any] | None = None, *, name: str = "", kind: str = ""
) -> FunctionScorer | Callable[[Callable[[CaseRun], Any]], FunctionScorer]:
    """Make a scorer of a function (also as ``@scorer`` / ``@scorer(name=..., kind="score")``)."""
    if fn is None:
        return lambda f: FunctionScorer(f, name=name, kind=kind)
    return FunctionScorer(fn, name=name, kind=kind)


def as_scorer(obj: Any) -> Scorer:
    """A :class:`Scorer` as it is; a function wrapped by :func:`scorer`."""
    if isinstance(obj, Scorer):
        return obj
    if callable(obj):
        return FunctionScorer(obj)
    raise ConfigurationError(f"not a scorer: {obj!r} (a Scorer or a function of the run)")


async def run_scorer(s: Scorer, run: CaseRun) -> Score:
    """``s`` on ``run``; a scorer that raises gives a score with no value and the error as
    its reason (one broken scorer never stops an evaluation)."""
    try:
        out = s.score(run)
        if inspect.isawaitable(out):
            out = await out
    except Exception as exc:
        return Score(reason=f"scorer error: {type(exc).__name__}: {exc}"[:300])
    return out if isinstance(out, Score) else to_score(out)
