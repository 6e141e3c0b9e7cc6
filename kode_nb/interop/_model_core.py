"""What kode_nb's model adapters for the frameworks share (no framework is imported here).

Each framework's model (:mod:`._pa_model`, :mod:`._sdk_model`, :mod:`._lc_model`) turns the
conversation its framework hands it into a kode_nb :class:`~kode_nb.models.ModelRequest` (system
prompt, neutral messages, tool specs, settings), runs one turn of a kode_nb model — an
:class:`~kode_nb.models.OpenAIChatModel` with its server profile, text-call recovery, refits,
time limits and its one HTTP client — and hands the answer back in the framework's own types.

:func:`kode_model` resolves what a user passes (a kode_nb model, or a model string such as
``"openai-compatible:http://127.0.0.1:8080/v1#qwen"``); :func:`one_turn` runs the turn and
returns the whole answer (text and calls, usage, the notices and the request as sent), and
:func:`kode_details` the part of it kept on the framework's response (``kode_nb`` in its
metadata): what kode_nb did to get it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.models.base import Model, ModelRequest, ModelResponse, ModelSettings, collect

__all__ = ["arguments_object", "kode_details", "kode_model", "one_turn", "settings_with"]


def kode_model(model: Model | str, **options: Any) -> Model:
    """``model`` as a kode_nb model: a model as it is, a string resolved by
    :func:`~kode_nb.models.resolve_model` with ``options``."""
    if isinstance(model, str):
        from kode_nb.models.resolve import resolve_model

        return resolve_model(model, **options)
    if options:
        raise ConfigurationError(
            f"options {', '.join(sorted(options))} apply to a model string, not to a model object"
        )
    if not isinstance(model, Model):
        raise ConfigurationError(
            f"expected a kode_nb model or a model string, got {type(model).__name__}"
        )
    return model


def settings_with(base: ModelSettings | None, **given: Any) -> ModelSettings:
    """``base`` (or the defaults) with each of ``given`` that is not ``None``."""
    chosen = {k: v for k, v in given.items() if v is not None}
    return dataclasses.replace(base or ModelSettings(), **chosen)


async def one_turn(model: Model, request: ModelRequest) -> ModelResponse:
    """One whole turn of ``model`` for ``request`` (the model identifies its server first)."""
    prepare = getattr(model, "prepare", None)
    if callable(prepare):
        await prepare()
    return await collect(model.stream(request))


def kode_details(model: Model, response: ModelResponse) -> dict[str, Any]:
    """What kode_nb did to get ``response``, for the framework response's metadata: the
    notices, the text its calls were read from, the server profile and the request as sent."""
    details: dict[str, Any] = {"model": model.name}
    describe = getattr(model, "describe", None)
    if callable(describe):
        details["profile"] = describe().get("profile")
    if response.notices:
        details["notices"] = list(response.notices)
    if response.recovered_text is not None:
        details["recovered_from_text"] = response.recovered_text
    if response.request is not None:
        details["request"] = response.request.as_dict()
    details["stop_reason"] = response.stop_reason
    return details


def arguments_object(arguments: str) -> dict[str, Any]:
    """A call's arguments (JSON text) as an object; text that is no JSON object is kept under
    ``"_raw"`` so the framework's validation reports it."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"_raw": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}


def text_of(content: Any) -> str:
    """Message content (a string, or a list of text parts) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
        return "\n".join(out)
    return "" if content is None else str(content)
