"""Argument validators: raw model arguments in, keyword arguments (or an arguments dict) out.

Every validator implements :class:`kode_nb.tools._model.ArgumentValidator`: ``validate(raw, tool=)``
accepts JSON text (``str``/``bytes``), a mapping, or ``None``/``""`` (no arguments), and raises
:class:`~kode_nb.errors.ToolValidationError` with one :class:`~kode_nb.errors.FieldIssue` per
problem, located by the *argument* names the model used (``"items.2.name"``).

- :class:`ParamsValidator`: one pydantic model per function, fields aliased by parameter name.
- :class:`SimpleParamsValidator`: the same for simple signatures, with no model class at all.
- :class:`LoneModelValidator`: the function takes one pydantic model; the arguments are it.
- :class:`ConfigArgsValidator`: ``inputConfig`` tools; returns the arguments dict.
- :class:`JsonSchemaValidator`: a raw JSON Schema, checked by ``jsonschema`` (imported lazily).

Built by :mod:`kode_nb.tools._schema`; this module only validates and explains.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator, from_json, to_jsonable_python

from kode_nb._finite import non_finite_issues
from kode_nb.errors import FieldIssue, ToolValidationError
from kode_nb.tools._issues import (
    jsonschema_issues,
    not_an_object,
    pydantic_issues,
    unexpected_field,
)

if TYPE_CHECKING:
    from pydantic.plugin._schema_validator import PluggableSchemaValidator

__all__ = [
    "ConfigArgsValidator",
    "JsonSchemaValidator",
    "LoneModelValidator",
    "ParamsValidator",
    "SimpleParamsValidator",
    "allowed_keys",
]

_RawArgs = str | bytes | bytearray | Mapping[str, Any] | None


def _is_empty(raw: object) -> bool:
    if raw is None:
        return True
    if isinstance(raw, (str, bytes, bytearray)):
        return not raw or raw.isspace()
    return False


def _to_jsonable(value: Any) -> Any:
    return to_jsonable_python(value, by_alias=True, fallback=repr)


class _CoreValidator:
    """Shared by the pydantic-backed validators: raw -> validated value, errors -> issues."""

    schema: dict[str, Any]
    _validator: SchemaValidator | PluggableSchemaValidator

    def _instance(self, raw: _RawArgs, tool: str) -> Any:
        try:
            if isinstance(raw, (str, bytes, bytearray)):
                return self._validator.validate_json(raw)
            if isinstance(raw, Mapping):
                return self._validator.validate_python(raw)
        except ValidationError as exc:
            # "" and blank text are invalid JSON, so they are only looked for now: no arguments
            if not _is_empty(raw):
                raise ToolValidationError(tool, pydantic_issues(exc, raw, self.schema)) from None
        else:
            if raw is not None:
                raise ToolValidationError(tool, [not_an_object(raw)])
        try:  # no arguments: an empty object
            return self._validator.validate_json("{}")
        except ValidationError as exc:
            raise ToolValidationError(tool, pydantic_issues(exc, "{}", self.schema)) from None


class _PydanticValidator(_CoreValidator):
    """A validator backed by a pydantic model: raw -> model instance."""

    def __init__(self, model: type[BaseModel], schema: dict[str, Any]) -> None:
        self.model = model
        """The pydantic model the arguments are validated with."""
        self.schema = schema
        self._validator = model.__pydantic_validator__
        self._numbers = '"number"' in json.dumps(schema)
        """Whether any argument can be a float (only then are models' floats checked)."""

    def _instance(self, raw: _RawArgs, tool: str) -> Any:
        instance = super()._instance(raw, tool)
        if self._numbers:
            issues = non_finite_issues(instance, models_only=True)
            if issues:
                raise ToolValidationError(tool, issues)
        return instance

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.__name__})"


class ParamsValidator(_PydanticValidator):
    """Validates a function's parameters with one model whose fields are aliased by name."""

    def __init__(
        self, model: type[BaseModel], schema: dict[str, Any], names: Sequence[tuple[str, str]]
    ) -> None:
        super().__init__(model, schema)
        self.names = tuple(names)
        """(parameter name, model field name) pairs, in signature order."""

    def validate(self, raw: _RawArgs, *, tool: str) -> dict[str, Any]:
        values = self._instance(raw, tool).__dict__
        return {param: values[field] for param, field in self.names}

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return {
            param: _to_jsonable(validated[param]) for param, _ in self.names if param in validated
        }


class SimpleParamsValidator(_CoreValidator):
    """Validates a simple signature (see :mod:`kode_nb.tools._simple_schema`) without a model class.

    A pydantic-core typed-dict validator keyed by the parameter names: the same field schemas,
    lax mode and forbidden extras as :class:`ParamsValidator`'s model, so the same outcomes.
    """

    def __init__(
        self,
        validator: SchemaValidator,
        schema: dict[str, Any],
        names: Sequence[str],
        model: Callable[[], type[BaseModel]],
    ) -> None:
        self.schema = schema
        self._validator = validator
        self.validate_json_text = validator.validate_json
        """What :meth:`validate` does with a JSON text, without its checks and calls: a success
        is its result; a failure raises ``ValidationError``, which :meth:`validate` words."""
        self.names = tuple((name, name) for name in names)
        """(parameter name, field name) pairs, in signature order (the same names here)."""
        self._build_model = model
        self._model: type[BaseModel] | None = None

    @property
    def model(self) -> type[BaseModel]:
        """The equivalent pydantic model, built on first use (validation never needs it)."""
        if self._model is None:
            self._model = self._build_model()
        return self._model

    def validate(self, raw: _RawArgs, *, tool: str) -> dict[str, Any]:
        # One path for all inputs: calling validate_json first for str arguments saved ~0.03 µs
        # a call (noise; benchmarks/results/micro_opts.txt), and validated invalid input twice.
        kwargs: dict[str, Any] = self._instance(raw, tool)
        return kwargs

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return {
            param: _to_jsonable(validated[param]) for param, _ in self.names if param in validated
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(name for name, _ in self.names)})"


class LoneModelValidator(_PydanticValidator):
    """The function's only parameter is a pydantic model: the arguments object *is* that model.

    The schema the model sees is the model's own, so its fields come at the top level
    (``{"city": "Rome"}`` for ``def hot_days(query: Query)``). Arguments wrapped in the
    parameter's name (``{"query": {"city": "Rome"}}``, that key alone, holding an object) are
    read as that object too, the way pydantic-ai reads a lone model-like parameter: at once when
    the model has no field of that name, and only if the plain reading fails when it has.

    With ``allowed`` (the model's input keys), other keys are rejected like the schema's
    ``additionalProperties: false`` says, while the instances stay of the user's own class.
    """

    def __init__(
        self,
        model: type[BaseModel],
        schema: dict[str, Any],
        param: str,
        allowed: frozenset[str] | None = None,
    ) -> None:
        super().__init__(model, schema)
        self.param = param
        """The parameter that receives the model instance."""
        self._allowed = allowed
        properties = schema.get("properties")
        self._param_is_field = isinstance(properties, Mapping) and param in properties
        """Whether ``param`` is also one of the model's top-level keys (then wrapping is ambiguous)."""
        self._needle = json.dumps(param)
        self._needle_bytes = self._needle.encode()

    def validate(self, raw: _RawArgs, *, tool: str) -> dict[str, Any]:
        inner = self._wrapped(raw)
        if inner is None:
            return self._validate(raw, tool)
        if not self._param_is_field:
            return self._validate(inner, tool)
        try:
            return self._validate(raw, tool)
        except ToolValidationError as plain:
            try:
                return self._validate(inner, tool)
            except ToolValidationError:
                raise plain from None

    def _validate(self, raw: _RawArgs, tool: str) -> dict[str, Any]:
        try:
            if self._allowed is not None and not _is_empty(raw):
                self._reject_unknown_keys(raw, tool)
            return {self.param: self._instance(raw, tool)}
        except ToolValidationError as exc:
            if any(issue.path == self.param for issue in exc.issues):
                raise ToolValidationError(tool, self._explained(exc.issues)) from None
            raise

    def _wrapped(self, raw: _RawArgs) -> Mapping[str, Any] | None:
        """The object inside ``{param: {...}}`` (that key alone; an instance of the model is
        dumped), else ``None``."""
        data: Any = raw
        if isinstance(raw, str):
            if self._needle not in raw:
                return None
            data = self._parsed(raw)
        elif isinstance(raw, (bytes, bytearray)):
            if self._needle_bytes not in raw:
                return None
            data = self._parsed(raw)
        elif raw is None or self.param not in raw:  # the common case, before any ABC check
            return None
        if isinstance(data, Mapping) and len(data) == 1 and self.param in data:
            inner = data[self.param]
            if isinstance(inner, self.model):  # `%tool NAME query=$q`, q an instance
                dumped: dict[str, Any] = inner.model_dump(by_alias=True)
                return dumped
            if isinstance(inner, Mapping):
                return inner
        return None

    @staticmethod
    def _parsed(raw: str | bytes | bytearray) -> Any:
        try:
            return from_json(raw)
        except ValueError:
            return None  # validation reports the bad JSON

    def _explained(self, issues: Sequence[FieldIssue]) -> list[FieldIssue]:
        """Say where the fields go when the parameter's own name was given as an argument."""
        fields = ", ".join(f"`{name}`" for name in self.schema.get("properties") or ())
        where = (
            f"this tool's arguments are the fields of {self.model.__name__} ({fields}) at the "
            f"top level, not inside `{self.param}`"
        )
        return [
            FieldIssue(
                path=issue.path,
                message=f"unexpected field; {where}",
                expected=issue.expected,
                received=issue.received,
                missing=issue.missing,
            )
            if issue.path == self.param and issue.message.startswith("unexpected field")
            else issue
            for issue in issues
        ]

    def _reject_unknown_keys(self, raw: _RawArgs, tool: str) -> None:
        data: Any = raw
        if isinstance(raw, (str, bytes, bytearray)):
            data = self._parsed(raw)
            if data is None:
                return
        if not isinstance(data, Mapping):
            return
        assert self._allowed is not None
        unknown = [key for key in data if key not in self._allowed]
        if not unknown:
            return
        message = unexpected_field(self.schema)
        found = [FieldIssue(path=str(k), message=message, received=data[k]) for k in unknown]
        known = {k: v for k, v in data.items() if k in self._allowed}
        try:
            self._validator.validate_python(known)
        except ValidationError as exc:
            found = pydantic_issues(exc, known, self.schema) + found
        raise ToolValidationError(tool, found)

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        value = _to_jsonable(validated.get(self.param, {}))
        return value if isinstance(value, dict) else {self.param: value}


def allowed_keys(model: type[BaseModel]) -> frozenset[str] | None:
    """The keys ``model`` accepts as input; ``None`` if unknowable (alias paths or choices)."""
    keys: set[str] = set()
    by_name = bool(
        model.model_config.get("populate_by_name") or model.model_config.get("validate_by_name")
    )
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        if alias is not None and not isinstance(alias, str):
            return None
        keys.add(alias or info.alias or name)
        if by_name:
            keys.add(name)
    return frozenset(keys)


class ConfigArgsValidator(_PydanticValidator):
    """Validates ``inputConfig`` arguments; returns the arguments given, as one dict."""

    def __init__(
        self, model: type[BaseModel], schema: dict[str, Any], names: Sequence[tuple[str, str]]
    ) -> None:
        super().__init__(model, schema)
        self._names = tuple(names)

    def validate(self, raw: _RawArgs, *, tool: str) -> dict[str, Any]:
        instance = self._instance(raw, tool)
        given = instance.__pydantic_fields_set__
        values = instance.__dict__
        return {name: values[field] for name, field in self._names if field in given}

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return {str(k): _to_jsonable(v) for k, v in validated.items()}


class JsonSchemaValidator:
    """Validates against a raw JSON Schema with a cached ``jsonschema`` validator.

    ``validate`` returns the arguments object, with top-level defaults filled in.
    """

    def __init__(self, schema: dict[str, Any], validator: Any) -> None:
        self.schema = schema
        self._validator = validator
        properties = schema.get("properties")
        self._defaults = {
            name: prop["default"]
            for name, prop in (properties.items() if isinstance(properties, dict) else ())
            if isinstance(prop, dict) and "default" in prop
        }

    def validate(self, raw: _RawArgs, *, tool: str) -> dict[str, Any]:
        data: Any
        if _is_empty(raw):
            data = {}
        elif isinstance(raw, (str, bytes, bytearray)):
            try:
                data = json.loads(raw)
            except ValueError as exc:
                detail = f"arguments must be a JSON object, but the text is not valid JSON ({exc})"
                raise ToolValidationError(tool, [not_an_object(raw, detail)]) from None
        else:
            data = raw
        if not isinstance(data, Mapping):
            raise ToolValidationError(tool, [not_an_object(data)])
        args: dict[str, Any] = dict(data)
        errors = list(self._validator.iter_errors(args))
        if errors:
            raise ToolValidationError(tool, jsonschema_issues(errors, self.schema))
        not_finite = non_finite_issues(args)
        if not_finite:
            raise ToolValidationError(tool, not_finite)
        for name, default in self._defaults.items():
            if name not in args:
                args[name] = copy.deepcopy(default)
        return args

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return {str(k): _to_jsonable(v) for k, v in validated.items()}

    def __repr__(self) -> str:
        return f"JsonSchemaValidator({type(self._validator).__name__})"
