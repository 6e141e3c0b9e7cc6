"""An LLM judge: a rubric, judged by any kode_nb model, giving pass, score and reason.

The judge sends one request — a system prompt with the rubric and the answer format, then the
case's inputs (``include_input``), the expected output (``include_expected``) and the run's
output — and reads the reply's first JSON object: ``{"pass": bool, "score": 0..1, "reason":
str}``. A reply with no JSON is read as PASS/FAIL words; one that says neither is not judged.
Offline, a :class:`~kode_nb.models.ScriptedModel` or ``TestModel(text=...)`` plays the judge;
any model kode_nb speaks to (OpenAI, Anthropic, llama-server...) judges for real.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kode_nb.evals._scorers import CaseRun, Score, Scorer

__all__ = ["JUDGE_SYSTEM", "LLMJudge", "read_verdict"]

JUDGE_SYSTEM = """You grade the output of an AI system against a rubric.
Rubric: {rubric}

Answer with one JSON object and nothing else:
{{"pass": true or false, "score": a number from 0 to 1, "reason": "one sentence"}}"""
"""The judge's system prompt (``{rubric}`` is filled in)."""

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def read_verdict(text: str, threshold: float = 0.5) -> Score:
    """The judge's reply as a :class:`Score` (see the module docstring)."""
    for candidate in _objects(text):
        passed = candidate.get("pass", candidate.get("passed"))
        score = candidate.get("score", candidate.get("value"))
        reason = str(candidate.get("reason") or "")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            value = max(0.0, min(1.0, float(score)))
            if not isinstance(passed, bool):
                passed = value >= threshold
            return Score(passed=passed, value=value, reason=reason)
        if isinstance(passed, bool):
            return Score.of(passed, reason)
    upper = text.upper()
    said_pass, said_fail = "PASS" in upper, "FAIL" in upper
    if said_pass != said_fail:
        return Score.of(said_pass, text.strip()[:200])
    return Score(reason=f"the judge's reply has no verdict: {text.strip()[:200]!r}")


def _objects(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        i = text.find("{", end)
    return found


class LLMJudge(Scorer):
    """Judge each run by ``rubric`` with ``model`` (a kode_nb model or a model name for
    :func:`kode_nb.models.resolve_model`). ``threshold``: the score that passes when the
    judge gives a score and no pass."""

    def __init__(
        self,
        rubric: str,
        model: Any,
        *,
        include_input: bool = True,
        include_expected: bool = False,
        threshold: float = 0.5,
        name: str = "judge",
    ) -> None:
        if not rubric or not isinstance(rubric, str):
            raise ValueError("LLMJudge needs a rubric (a string)")
        self.rubric, self.model, self.name = rubric, model, name
        self.include_input, self.include_expected = include_input, include_expected
        self.threshold = threshold
        self.kind = "pass"

    def prompt(self, run: CaseRun) -> str:
        """The user message the judge gets."""
        parts = []
        if self.include_input:
            parts.append(f"<input>\n{_text(run.case.inputs)}\n</input>")
        if self.include_expected and run.expected is not None:
            parts.append(f"<expected_output>\n{_text(run.expected)}\n</expected_output>")
        shown = run.output if run.ok else f"(the run failed: {run.status}: {run.error})"
        parts.append(f"<output>\n{_text(shown)}\n</output>")
        return "\n".join(parts)

    async def score(self, run: CaseRun) -> Score:
        from kode_nb.many.target import fresh_model
        from kode_nb.models import ModelRequest, UserMessage, collect, resolve_model

        model = self.model
        model = resolve_model(model) if isinstance(model, str) else fresh_model(model)
        request = ModelRequest(
            system=JUDGE_SYSTEM.format(rubric=self.rubric),
            messages=(UserMessage(content=self.prompt(run)),),
        )
        response = await collect(model.stream(request))
        return read_verdict(response.text, self.threshold)

    def describe(self) -> str:
        return f"judge: {self.rubric}"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, indent=1)
