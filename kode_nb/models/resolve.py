"""Model names to models: ``resolve_model("openai:gpt-4.1-mini")``.

==========================================================  ======================================
``scripted`` (needs ``script=[...]``)                        :class:`ScriptedModel`
``test``                                                    :class:`TestModel`
``openai:<model>``                                          OpenAI (key: ``OPENAI_API_KEY``)
``anthropic:<model>``                                       Anthropic (key: ``ANTHROPIC_API_KEY``)
``openai-compatible:<base url>#<model>``                    any Chat Completions server (Ollama,
                                                            vLLM, llama.cpp, LM Studio); no key
                                                            unless ``api_key``/``api_key_env``
==========================================================  ======================================

Keyword options go to the model's constructor (``http_client=``, ``api_key=``, ``seed=``...). An
API key is looked up at the first request, not here, so a missing key shows up as a clear
:class:`~kode_nb.errors.ConfigurationError` when the model is used.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.models.base import Model

__all__ = ["resolve_model"]

_FORMS = (
    "'scripted', 'test', 'openai:<model>', 'anthropic:<model>', "
    "'openai-compatible:<base url>#<model>'"
)
_PREFIXES = ("scripted", "test", "openai", "anthropic", "openai-compatible")


def resolve_model(spec: str | Model, **options: Any) -> Model:
    """The model named by ``spec`` (a model object is returned as is)."""
    if not isinstance(spec, str):
        if isinstance(spec, Model):
            if options:
                raise ConfigurationError(
                    f"resolve_model(): options {sorted(options)} only apply to a model name, "
                    f"not to the model object {spec!r}"
                )
            return spec
        raise ConfigurationError(
            f"resolve_model(): expected a model name ({_FORMS}) or a model object with "
            f"name and stream(), got {type(spec).__name__}"
        )
    text = spec.strip()
    prefix, sep, rest = text.partition(":")
    prefix = prefix.lower()
    if text.lower() == "scripted":
        from kode_nb.models.scripted import ScriptedModel

        if "script" not in options:
            raise ConfigurationError(
                "resolve_model('scripted') needs script=[...]: the turns to play, e.g. "
                "script=[call('add', a=1, b=2), 'The sum is 3.']"
            )
        return _build(ScriptedModel, spec, options)
    if text.lower() == "test":
        from kode_nb.models.test_model import TestModel

        return _build(TestModel, spec, options)
    if sep and prefix == "openai":
        from kode_nb.models.openai_compat import OpenAIChatModel

        return _build(OpenAIChatModel, spec, {"model": _model_id(rest, spec), **options})
    if sep and prefix == "anthropic":
        from kode_nb.models.anthropic import AnthropicModel

        return _build(AnthropicModel, spec, {"model": _model_id(rest, spec), **options})
    if sep and prefix == "openai-compatible":
        from kode_nb.models.openai_compat import OpenAIChatModel

        base_url, hash_, model = rest.strip().rpartition("#")
        if not hash_ or not base_url or not model.strip():
            raise ConfigurationError(
                f"model name {spec!r}: write 'openai-compatible:<base url>#<model>', e.g. "
                "'openai-compatible:http://127.0.0.1:11434/v1#llama3.2'"
            )
        defaults: dict[str, Any] = {
            "model": model.strip(),
            "base_url": base_url,
            "api_key_env": None,
            "name": f"openai-compatible:{base_url}#{model.strip()}",
        }
        return _build(OpenAIChatModel, spec, {**defaults, **options})
    close = difflib.get_close_matches(prefix, _PREFIXES, n=1)
    hint = f" Did you mean '{close[0]}'?" if close and close[0] != prefix else ""
    raise ConfigurationError(f"unknown model {spec!r}.{hint} Use one of: {_FORMS}.")


def _model_id(rest: str, spec: str) -> str:
    model = rest.strip()
    if not model:
        raise ConfigurationError(f"model name {spec!r} has no model after the ':'")
    return model


def _build(cls: type[Any], spec: str, options: dict[str, Any]) -> Model:
    params = inspect.signature(cls).parameters
    unknown = sorted(k for k in options if k not in params)
    if unknown:
        known = sorted(k for k, p in params.items() if p.kind is p.KEYWORD_ONLY)
        raise ConfigurationError(
            f"resolve_model({spec!r}): unknown option(s) {unknown}; "
            f"{cls.__name__} accepts: {', '.join(known)}"
        )
    try:
        model: Model = cls(**options)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigurationError):
            raise
        raise ConfigurationError(f"resolve_model({spec!r}): {exc}") from exc
    return model
