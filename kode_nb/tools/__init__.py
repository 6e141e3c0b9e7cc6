"""The tool model: what a tool is, how one is defined, described and found.

Lives here: :class:`Tool` and the argument-validator protocol (``_model``); defining tools from
functions, raw JSON Schemas or ``inputConfig`` dicts (``_define``, ``_docstrings``,
``_introspect``, ``_schema``, ``_simple_schema``, ``_raw_schema``, ``_validation``, ``_issues``);
exporting their schemas for OpenAI, Anthropic, Gemini and MCP (``_formats``,
``_schema_dialects``); and the registry that holds them, with its selectors, profiles, per-tool
stats and entry-point plugins (``_registry``, ``_selectors``, ``_stats``, ``_plugins``).

May import: :mod:`kode_nb.types`, :mod:`kode_nb.errors`, ``kode_nb._finite`` and the standard
library, pydantic and jsonschema (lazily). Never the policy, execution, events, agents or notebook layers. Modules
inside import each other by their private paths, never through this ``__init__``.
"""

from kode_nb.tools import _define, _model, _registry
from kode_nb.tools._define import *  # noqa: F403  (its __all__ is this package's API)
from kode_nb.tools._model import *  # noqa: F403  (its __all__ is this package's API)
from kode_nb.tools._registry import *  # noqa: F403  (its __all__ is this package's API)

__all__ = [*_define.__all__, *_model.__all__, *_registry.__all__]
