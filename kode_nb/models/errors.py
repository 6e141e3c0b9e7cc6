"""Errors raised by models (kode_nb.models); all under :class:`~kode_nb.errors.KodeError`::

    KodeError
    └── ModelError                 a model call failed; the agent run stops with it
        ├── ModelHTTPError         the provider answered with an HTTP error (after retries on
        │                          429/5xx); carries ``status`` and the (redacted) ``body``
        ├── ModelConnectionError   no response: connection failed or timed out (after retries)
        ├── ModelProtocolError     the stream was malformed, reported an error, or was cut off
        ├── ModelNotFoundError     the server does not serve the model id asked for
        ├── ScriptExhausted        a ScriptedModel was asked for more turns than it was given
        ├── ScriptMismatch         a scripted tool call does not fit the request's tools
        └── ReplayDivergedError    a replayed run's request differs from the recorded one

A missing API key or an unknown model name is developer misuse, not a model failure: that is
:class:`~kode_nb.errors.ConfigurationError` (a ``KodeUsageError``).
"""

from __future__ import annotations

from kode_nb.errors import KodeError

__all__ = [
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelNotFoundError",
    "ModelProtocolError",
    "ReplayDivergedError",
    "ScriptExhausted",
    "ScriptMismatch",
]


class ModelError(KodeError):
    """A model call failed (HTTP, malformed stream, script exhausted or mismatched)."""


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status (after any retries)."""

    def __init__(
        self, status: int, body: str, *, model: str = "", message: str = "", attempts: int = 1
    ) -> None:
        self.status = status
        """The HTTP status code."""
        self.body = body
        """The response body, truncated, with anything that looks like a key redacted."""
        self.model = model
        """The model name (``openai:gpt-4.1-mini``), where known."""
        self.attempts = attempts
        """How many times the request was sent."""
        where = f" from {model}" if model else ""
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        detail = message or body
        super().__init__(
            f"HTTP {status}{where}{tries}: {detail}" if detail else f"HTTP {status}{where}{tries}"
        )


class ModelConnectionError(ModelError):
    """No response arrived: the connection failed or timed out (after any retries)."""


class ModelProtocolError(ModelError):
    """The response stream was malformed, reported an error, or ended before its end marker."""


class ModelNotFoundError(ModelError):
    """The server's ``GET /models`` list does not hold the model id a request asked for."""

    def __init__(self, model: str, base_url: str, listed: tuple[str, ...]) -> None:
        self.model = model
        """The model id asked for."""
        self.listed = listed
        """The ids the server lists."""
        super().__init__(
            f"the server at {base_url} does not serve the model {model!r}; it lists: "
            f"{', '.join(repr(i) for i in listed) or 'no models'} (use one of these as the "
            "model id, e.g. 'openai-compatible:URL#ID')"
        )


class ScriptExhausted(ModelError):
    """A :class:`~kode_nb.models.ScriptedModel` has no turn left for this request."""

    def __init__(self, turns: int, requested: int) -> None:
        self.turns = turns
        """How many turns were scripted."""
        self.requested = requested
        """The 1-based turn that was asked for."""
        super().__init__(
            f"ScriptedModel ran out of turns: the script has {turns} turn(s) and turn "
            f"{requested} was requested. Add a turn (a final answer string ends the run)."
        )


class ScriptMismatch(ModelError):
    """A scripted tool call names a tool not offered, or its arguments do not fit the schema."""

    def __init__(self, tool: str, turn: int, problem: str) -> None:
        self.tool = tool
        """The scripted call's tool name."""
        self.turn = turn
        """The 1-based turn of the script."""
        self.problem = problem
        """What does not fit."""
        super().__init__(f"ScriptedModel turn {turn}: call to '{tool}' does not fit: {problem}")


class ReplayDivergedError(ModelError):
    """A replayed run no longer matches its recording (see :class:`~kode_nb.models.ReplayModel`)."""

    def __init__(self, run: str, turn: int, problem: str, diff: str = "") -> None:
        self.run = run
        """The run that diverged (``main``, ``main > researcher``)."""
        self.turn = turn
        """The 1-based model call (turn) whose request differs."""
        self.problem = problem
        """What differs."""
        self.diff = diff
        """A short unified diff, recorded → now ("" when there is none)."""
        text = f"replay of run '{run}' diverged at turn {turn}: {problem}"
        super().__init__(f"{text}\n{diff}" if diff else text)
