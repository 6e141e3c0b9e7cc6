"""The code of the cell the trace viewer's "Fork from here" inserts (:func:`fork_cell`).

The cell runs as written, in this kernel and after a restart (Restart & Run All, nbconvert):

* it holds the trace itself, as the notebook saved it (the run record's ``trace``, in the
  compact form of :mod:`kode_nb.traces._compact`): ``TRACE = {...}``, then
  ``forked = await kode_nb.fork(TRACE, at="<span id>", edit=None, model=...)``. A kernel-memory
  id would be gone after a restart. A trace whose saved form is over :data:`MAX_EMBED`
  characters is named by its id instead (this kernel's known traces), with a note;
* it names the live model (``model=``), chosen in this order:

  1. the run's model object, when a variable of the notebook holds it (``model=llm``), unless it
     is a ScriptedModel (its script is used up by the run) or a replay;
  2. a :class:`~kode_nb.models.TestModel` with the run's settings (``model=TestModel(seed=3)``);
  3. a model string that rebuilds the run's model (``model="openai:gpt-4.1-mini"``,
     ``"openai-compatible:http://127.0.0.1:11434/v1#llama3.2"``), checked by building it;
  4. else a :class:`~kode_nb.models.ScriptedModel` of the run's recorded answers from the fork
     point on (``model=ScriptedModel([call("add", a=5, b=4), "It is 9."])``): a scripted run
     answers in the fork as it did in the run (edit the answers to try others); for another
     model (one no variable holds and no string names) a comment says to put it there.

Only a run kode_nb itself ran can be forked: a captured framework run, an unknown span or one
inside a subagent's run is refused here, before any cell is made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kode_nb.debug._expand import _line, _printable, _python
from kode_nb.debug._fork_point import ForkPoint, fork_point
from kode_nb.debug._replay import _model_calls, recorded_agent
from kode_nb.errors import ConfigurationError
from kode_nb.traces._compact import compact, is_compact
from kode_nb.traces._trace import Span, Trace

__all__ = ["MAX_EMBED", "ForkCell", "fork_cell", "recorded_script"]

MAX_EMBED = 2_000_000
"""Characters of saved trace the fork cell holds, at most; a bigger one is named by its id."""

_HTTP_PREFIXES = ("openai:", "anthropic:", "openai-compatible:")
_HTTP_SAME = (
    "name",
    "model",
    "base_url",
    "api_key_env",
    "http_client",
    "stream_answers",
    "tool_choice",
    "refit_calls",
    "parallel_tool_calls",
    "extra_body",
    "supports_images",
    "strict",
    "api_version",
    "max_tokens",
)
"""Settings a model rebuilt from a string must share with the run's (those it has)."""


@dataclass(frozen=True, kw_only=True)
class ForkCell:
    """The fork cell's code and what the front end should say about it."""

    source: str
    trace_id: str
    span_id: str
    model: str
    """The ``model=`` expression written in the cell."""
    notes: list[str] = field(default_factory=list)


def fork_cell(
    saved: Mapping[str, Any],
    at: str,
    *,
    known_model: Any = None,
    model_variable: str | None = None,
) -> ForkCell:
    """The cell that forks the run of ``saved`` (the trace JSON a notebook saved: compact or
    plain) at span ``at`` (a turn, model call or tool call of the top-level run).

    ``known_model``: the model object this kernel ran the run with (if it still has it);
    ``model_variable``: the notebook variable that holds that object, if one does. Raises
    :class:`~kode_nb.errors.ConfigurationError` for a trace or span that cannot be forked."""
    try:
        trace = Trace.from_dict(saved)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"not a usable kode_nb trace: {exc}") from None
    recorded_agent(trace, None, what="fork")  # a framework run or no agent run: refused now
    point = fork_point(trace, at)
    model, imports, why = _model(trace, point, known_model, model_variable)
    notes: list[str] = []
    kept = saved if is_compact(saved) else compact(saved)
    literal = _python(dict(kept))
    if len(literal) > MAX_EMBED:
        tid = _printable(trace.trace_id)
        notes.append(
            f"the saved trace is {len(literal):,} characters: the fork cell names it by its id "
            "(kode_nb.traces.known_trace) instead of holding a copy, so after a restart it needs "
            "the trace loaded again (kode_nb.traces.remember_trace(<its JSON>))"
        )
        load = [
            "# The trace is too large to hold here: this kernel's copy, by its id.",
            f"TRACE = {json.dumps(tid)}",
        ]
    else:
        load = [
            "# The run as this notebook saved it, so the cell also runs after a restart.",
            f"TRACE = {literal}",
        ]
    edit_hint = (
        'edit: "text" (or {"result": "text", "is_error": True}) is the call\'s new result; '
        "None runs it again."
        if point.kind == "tool_call"
        else 'edit: "new prompt" replaces the prompt; None asks the model again.'
    )
    agent = trace.root.attributes.get("agent") or trace.root.name
    span = _span(trace.root, point.span_id)
    where = span.name if span.kind == "turn" else f"{span.name} (turn {point.turn})"
    about = _line(f"Fork of run {agent} (trace {trace.trace_id[:8]}) at {where}")
    lines = [
        f"# {about}: change what should differ, then run.",
        f"# {edit_hint}",
        *(f"# {_line(w)}" for w in why),
        "import kode_nb",
        *sorted(imports),
        "",
        *load,
        "forked = await kode_nb.fork(",
        "    TRACE,",
        f"    at={json.dumps(_printable(point.span_id))},",
        "    edit=None,",
        f"    model={model},",
        ")",
        "forked",
    ]
    return ForkCell(
        source=_printable("\n".join(lines)),
        trace_id=trace.trace_id,
        span_id=point.span_id,
        model=model,
        notes=notes,
    )


def _span(run: Span, span_id: str) -> Span:
    return next(s for s in run.walk() if s.span_id == span_id)


def _model(
    trace: Trace, point: ForkPoint, known: Any, variable: str | None
) -> tuple[str, set[str], list[str]]:
    """The ``model=`` expression, the imports it needs, and the comment lines explaining it."""
    live = getattr(known, "live", None)
    if type(known).__name__ == "_ForkModel" and live is not None:
        known = live  # a fork's trace: the model it went on with
    recorded = str(trace.root.attributes.get("model") or "")
    kind = type(known).__name__
    scripted = kind in ("ScriptedModel", "ReplayModel") or (
        known is None and (recorded == "scripted" or recorded.startswith("replay:"))
    )
    if variable and known is not None and not scripted:
        return variable, set(), [f"model: the run's model, as this notebook names it ({variable})."]
    if kind == "TestModel" or (known is None and recorded == "test"):
        return (
            _test_model(known),
            {"from kode_nb.models import TestModel"},
            [
                "model: a TestModel as the run's (stateless: it calls the tools again, then sums up)."
            ],
        )
    spec = _model_string(known, recorded)
    if spec is not None:
        return (
            json.dumps(_printable(spec)),
            set(),
            [f"model: the run's model, rebuilt from its name {spec!r}."],
        )
    own = getattr(known, "name", None) if kind == "ScriptedModel" else None
    script, imports = recorded_script(trace, point, name=own if own != "scripted" else None)
    if scripted:
        why = [
            "model: the run's ScriptedModel answers as it did in the run from here (its recorded",
            "answers, one per turn): edit them to try others.",
        ]
    else:
        why = [
            f"model: the run's model {recorded!r} is held by no variable of this notebook and no",
            "model string rebuilds it: these are its recorded answers from here, one per turn.",
            "Put the model to ask here (a Model object or a model string) to ask it again.",
        ]
    return script, imports | {"from kode_nb.models import ScriptedModel"}, why


def _test_model(known: Any) -> str:
    defaults: dict[str, Any] = {
        "seed": 0,
        "calls_per_tool": 1,
        "tools": None,
        "text": None,
        "name": "test",
    }
    given = []
    for key, default in defaults.items():
        value = getattr(known, key, default) if known is not None else default
        if isinstance(value, tuple):
            value = list(value)
        if value != default:
            given.append(f"{key}={_python(value)}")
    return f"TestModel({', '.join(given)})"


def _model_string(known: Any, recorded: str) -> str | None:
    """A model string that builds a model like the run's (checked by building it), or None."""
    from kode_nb.models.resolve import resolve_model

    candidates = [recorded] if recorded.startswith(_HTTP_PREFIXES) else []
    base_url, model = getattr(known, "base_url", None), getattr(known, "model", None)
    if type(known).__name__ == "OpenAIChatModel" and base_url and model:
        candidates.append(f"openai-compatible:{base_url}#{model}")
    if known is None:
        return candidates[0] if candidates and _builds(candidates[0]) else None
    for spec in candidates:
        try:
            fresh = resolve_model(spec)
        except (ConfigurationError, ImportError):
            continue
        same = [k for k in _HTTP_SAME if k != "name" or spec == recorded]  # a new name: fine
        if type(fresh) is type(known) and all(
            getattr(fresh, key, None) == getattr(known, key, None) for key in same
        ):
            return spec
    return None


def _builds(spec: str) -> bool:
    from kode_nb.models.resolve import resolve_model

    try:
        resolve_model(spec)
    except (ConfigurationError, ImportError):
        return False
    return True


def recorded_script(
    trace: Trace, point: ForkPoint, *, name: str | None = None
) -> tuple[str, set[str]]:
    """``ScriptedModel([...])`` of the run's recorded answers after the fork point (the model
    calls the fork asks live), as Python source, and the names it imports. A failed model call
    ends the script (the fork then runs out of turns where the run failed)."""
    run = trace.root
    replayed = point.turn if point.kind == "tool_call" else point.turn - 1
    invalid = {
        str(s.attributes.get("call_id", ""))
        for t in run.children
        for s in t.children
        if s.kind == "tool_call"
        and (s.status.startswith("invalid") or _error_type(s) == "ToolValidationError")
    }
    items: list[str] = []
    names: set[str] = set()
    for c in _model_calls(run)[replayed:]:
        response = c.get("response")
        if "error" in c or not isinstance(response, Mapping):
            break
        items.append(_turn(response, invalid, names))
    body = "".join(f"        {item},\n" for item in items)
    named = f", name={_python(str(name))}" if name else ""
    script = f"ScriptedModel([\n{body}    ]{named})" if items else f"ScriptedModel([]{named})"
    imports = (
        {f"from kode_nb.models.scripted import {', '.join(sorted(names))}"} if names else set()
    )
    return script, imports


def _error_type(span: Span) -> Any:
    result = span.attributes.get("result")
    return result.get("error_type") if isinstance(result, Mapping) else None


def _turn(response: Mapping[str, Any], invalid: set[str], names: set[str]) -> str:
    text = str(response.get("text") or "")
    calls = [
        _call(c, invalid, names) for c in response.get("tool_calls") or () if isinstance(c, Mapping)
    ]
    if not calls:
        return _python(text)
    if text:
        names.add("Turn")
        return f"Turn(text={_python(text)}, calls=[{', '.join(calls)}])"
    return calls[0] if len(calls) == 1 else f"[{', '.join(calls)}]"


def _call(c: Mapping[str, Any], invalid: set[str], names: set[str]) -> str:
    name = _python(str(c.get("name", "")))
    raw = c.get("arguments")
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
    try:
        arguments = json.loads(text) if text else {}
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict) or str(c.get("id", "")) in invalid:
        names.add("raw_call")  # sent as recorded, unchecked (the run's call did not validate)
        return f"raw_call({name}, {_python(text)})"
    names.add("call")
    if all(k.isidentifier() and not _keyword(k) for k in arguments):
        pairs = ", ".join(f"{k}={_python(v)}" for k, v in arguments.items())
        return f"call({name}{', ' if pairs else ''}{pairs})"
    return f"call({name}, **{_python(arguments)})"


def _keyword(word: str) -> bool:
    import keyword

    return keyword.iskeyword(word)
