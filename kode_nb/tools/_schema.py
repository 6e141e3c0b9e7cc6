"""From a typed Python function (or a raw schema) to the JSON Schema the model sees plus a validator.

:func:`function_schema` reads ``inspect.signature``, the resolved type hints and the docstring.
When every parameter is of a simple type (``str``, ``int``, ``list[str]``, ``int | None``,
``Literal[...]``...), :mod:`kode_nb.tools._simple_schema` writes the schema and builds a
pydantic-core validator directly, identical to what the model path gives but several times
faster to define. Otherwise it builds **one** pydantic model per function (fields named
``p0, p1...`` and aliased by the parameter names, so ``json`` or ``model_config`` are fine
parameter names), which gives both the schema and fast validation (``validate_json`` on the
raw text).

:func:`schema_validator` (a raw JSON Schema) and :func:`input_config_schema` (an
``inputConfig``) live in :mod:`kode_nb.tools._raw_schema` and are re-exported here.

Every definition problem raises :class:`~kode_nb.errors.ToolDefinitionError` naming the
function and the parameter.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, JsonSchemaWarningKind
from pydantic_core import PydanticUndefined, core_schema

from kode_nb.errors import ToolDefinitionError
from kode_nb.tools._docstrings import parse_docstring
from kode_nb.tools._introspect import (
    DEFINE_FIRST,
    call_mode,
    check_param_kind,
    docstring_of,
    is_context_annotation,
    param_hints,
    qualname,
    signature_of,
    unwrap,
)
from kode_nb.tools._model import ArgumentValidator, CallMode
from kode_nb.tools._raw_schema import input_config_schema, input_config_validator, schema_validator
from kode_nb.tools._simple_schema import ParamInfo, simple_schema
from kode_nb.tools._validation import (
    LoneModelValidator,
    ParamsValidator,
    SimpleParamsValidator,
    allowed_keys,
)

__all__ = [
    "FunctionSchema",
    "call_mode",
    "function_schema",
    "input_config_schema",
    "input_config_validator",
    "is_context_annotation",
    "schema_validator",
]

_SUPPORTED = (
    "str, int, float, bool, None, Literal, Enum, list, tuple, set, dict, TypedDict, "
    "dataclasses and pydantic models"
)


@dataclass(kw_only=True)
class FunctionSchema:
    """What :func:`function_schema` learned about a function."""

    description: str
    """The docstring's description (or the lone model's docstring); may be empty."""
    parameters: dict[str, Any]
    """The JSON Schema of the arguments object, as the model sees it."""
    validator: ArgumentValidator
    """Validates raw arguments into keyword arguments for the function."""
    context_param: str | None = None
    """The parameter annotated :class:`~kode_nb.ToolContext` (not in the schema), if any."""
    mode: CallMode = "sync"
    """``sync``, ``async`` (coroutine function), ``async_gen`` or ``gen``."""
    param_descriptions: dict[str, str] = field(default_factory=dict)
    """Argument name -> description, as they appear in the schema."""


class _Schema(GenerateJsonSchema):
    """pydantic's JSON Schema without the auto-generated ``title`` noise.

    A default that has no JSON form (an arbitrary object) is left out of the schema quietly:
    the argument is still optional, and the function still gets its default.
    """

    ignored_warning_kinds: ClassVar[set[JsonSchemaWarningKind]] = {  # type: ignore[misc]
        "skipped-choice",
        "non-serializable-default",
    }

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def _drop_class_title(self, result: JsonSchemaValue, cls: Any) -> JsonSchemaValue:
        if result.get("title") == getattr(cls, "__name__", None):
            del result["title"]
        return result

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        return self._drop_class_title(super().model_schema(schema), schema["cls"])

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        return self._drop_class_title(super().dataclass_schema(schema), schema["cls"])

    def typed_dict_schema(self, schema: core_schema.TypedDictSchema) -> JsonSchemaValue:
        return self._drop_class_title(super().typed_dict_schema(schema), schema.get("cls"))


def function_schema(
    fn: Callable[..., Any], *, name: str | None = None, require_descriptions: bool = False
) -> FunctionSchema:
    """Build the schema and validator of ``fn``'s parameters.

    ``name`` is only used in error messages. With ``require_descriptions``, every argument must
    be described (in the docstring or with ``Annotated[..., Field(description=...)]``).
    """
    if inspect.isclass(fn) or not callable(fn):
        what = "a class" if inspect.isclass(fn) else type(fn).__name__
        raise ToolDefinitionError(
            f"a tool must be a function (or a callable object), got {what}: {fn!r}",
            function=name,
        )
    where = name or qualname(fn)
    signature = signature_of(fn, where)
    target = unwrap(fn)
    hints = param_hints(target, signature, where)
    doc = parse_docstring(docstring_of(fn))
    context_param: str | None = None
    params: list[ParamInfo] = []
    for param in signature.parameters.values():
        check_param_kind(param, where)
        annotation = hints[param.name]
        if is_context_annotation(annotation):
            if context_param is not None:
                raise ToolDefinitionError(
                    f"only one parameter can receive the ToolContext (already '{context_param}')",
                    function=where,
                    parameter=param.name,
                )
            context_param = param.name
            continue
        params.append(ParamInfo(param.name, annotation, param.default, doc.params.get(param.name)))
    simple = simple_schema(params) if _FAST_PATH else None
    validator: ArgumentValidator
    description = ""
    if simple is not None:
        parameters, core_validator = simple
        names = [p.name for p in params]
        validator = SimpleParamsValidator(
            core_validator, parameters, names, lambda: _model_of(target, params, where)[0]
        )
    else:
        validator, parameters, description = _model_validator(target, params, where)
    properties: dict[str, Any] = parameters.get("properties", {})
    described = {k: v["description"] for k, v in properties.items() if "description" in v}
    if require_descriptions:
        for arg in properties:
            if arg not in described:
                raise ToolDefinitionError(
                    "has no description: document it in the docstring (e.g. under 'Args:') or "
                    "use Annotated[..., Field(description=...)]",
                    function=where,
                    parameter=arg,
                )
    return FunctionSchema(
        description=doc.description or description,
        parameters=parameters,
        validator=validator,
        context_param=context_param,
        mode=call_mode(fn),
        param_descriptions=described,
    )


_FAST_PATH = True
"""Private switch: False sends every signature through the model path (tests compare both)."""


def _model_validator(
    target: Callable[..., Any], params: list[ParamInfo], where: str
) -> tuple[ArgumentValidator, dict[str, Any], str]:
    """The model path: one pydantic model (or the lone model) gives the schema and validator."""
    annotations = {p.name: p.annotation for p in params}
    lone = _lone_model(annotations)
    if lone is not None:
        return _lone_model_validator(lone, params[0].name, where)
    model, names = _model_of(target, params, where)
    parameters = _tidy(_json_schema(model, names, annotations, where))
    return ParamsValidator(model, parameters, names), parameters, ""


def _model_of(
    target: Callable[..., Any], params: list[ParamInfo], where: str
) -> tuple[type[BaseModel], list[tuple[str, str]]]:
    """The arguments model (fields ``p0, p1...`` aliased by the parameter names) and the
    (parameter, field) name pairs."""
    names = [(p.name, f"p{i}") for i, p in enumerate(params)]
    annotations = {p.name: p.annotation for p in params}
    fields = {f"p{i}": _field(p) for i, p in enumerate(params)}
    return _create_model(target, fields, names, annotations, where), names


def _lone_model(annotations: Mapping[str, Any]) -> type[BaseModel] | None:
    if len(annotations) != 1:
        return None
    (annotation,) = annotations.values()
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    return None


# --------------------------------------------------------------------------- model building


def _annotated_description(annotation: Any) -> str | None:
    if typing.get_origin(annotation) is not Annotated:
        return None
    for meta in reversed(typing.get_args(annotation)[1:]):
        if isinstance(meta, FieldInfo) and meta.description:
            return meta.description
    return None


def _field(param: ParamInfo) -> tuple[Any, FieldInfo]:
    annotation, default, doc = param.annotation, param.default, param.doc
    if isinstance(default, FieldInfo):  # `x: int = Field(3, ge=0)`
        annotation = Annotated[annotation, default]
        default = PydanticUndefined
    elif default is inspect.Parameter.empty:
        default = PydanticUndefined
    if doc and not _annotated_description(annotation):  # an explicit Field description wins
        return annotation, Field(default, alias=param.name, description=doc)
    return annotation, Field(default, alias=param.name)


_CONFIG = ConfigDict(extra="forbid", defer_build=False, allow_inf_nan=False)
"""NaN/Infinity need an opt-in (see :mod:`kode_nb._finite`)."""


def _create_model(
    target: Callable[..., Any],
    fields: dict[str, Any],
    names: list[tuple[str, str]],
    annotations: Mapping[str, Any],
    where: str,
) -> type[BaseModel]:
    model_name = _model_name(target)
    try:
        return create_model(model_name, __config__=_CONFIG, __module__=__name__, **fields)
    except Exception as exc:
        _blame_parameter(fields, names, annotations, where, exc)
        raise ToolDefinitionError(
            f"cannot build its schema: {_first_line(exc)}", function=where
        ) from exc


def _json_schema(
    model: type[BaseModel], names: list[tuple[str, str]], annotations: Mapping[str, Any], where: str
) -> dict[str, Any]:
    try:
        return model.model_json_schema(schema_generator=_Schema)
    except Exception as exc:
        fields = {internal: (annotations[param], FieldInfo()) for param, internal in names}
        _blame_parameter(fields, names, annotations, where, exc)
        raise ToolDefinitionError(
            f"cannot build its JSON Schema: {_first_line(exc)}", function=where
        ) from exc


def _blame_parameter(
    fields: Mapping[str, Any],
    names: list[tuple[str, str]],
    annotations: Mapping[str, Any],
    where: str,
    exc: Exception,
) -> None:
    """Raise a ToolDefinitionError naming the first parameter whose type alone fails."""
    for param, internal in names:
        annotation, _ = fields[internal]
        try:
            probe = create_model("Probe", __module__=__name__, value=(annotation, ...))
            probe.model_json_schema(schema_generator=_Schema)
        except PydanticUserError as probe_exc:
            if probe_exc.code != "class-not-fully-defined":
                raise _unsupported(annotations[param], probe_exc, where, param) from exc
            undefined = re.search(r"you should define `([^`]+)`", str(probe_exc))
            raise ToolDefinitionError(
                f"cannot resolve its type hint {_type_name(annotations[param])}: name "
                f"{undefined.group(1) if undefined else '?'!r} is not defined; {DEFINE_FIRST}",
                function=where,
                parameter=param,
            ) from exc
        except Exception as probe_exc:
            raise _unsupported(annotations[param], probe_exc, where, param) from exc


def _unsupported(annotation: Any, exc: Exception, where: str, param: str) -> ToolDefinitionError:
    return ToolDefinitionError(
        f"unsupported type {_type_name(annotation)}: {_first_line(exc)} (supported: {_SUPPORTED})",
        function=where,
        parameter=param,
    )


def _lone_model_validator(
    model: type[BaseModel], param: str, where: str
) -> tuple[LoneModelValidator, dict[str, Any], str]:
    try:
        schema = model.model_json_schema(schema_generator=_Schema)
    except Exception as exc:
        raise ToolDefinitionError(
            f"its model {model.__name__} has no JSON Schema: {_first_line(exc)}",
            function=where,
            parameter=param,
        ) from exc
    # unless the model says otherwise, forbid unknown arguments at the top level (as the schema says)
    allowed = allowed_keys(model) if model.model_config.get("extra") is None else None
    schema = _inline_top_ref(schema)
    if allowed is not None:
        schema["additionalProperties"] = False
    description = schema.pop("description", "")
    schema = _tidy(schema)
    return LoneModelValidator(model, schema, param, allowed), schema, str(description)


def _inline_top_ref(schema: dict[str, Any]) -> dict[str, Any]:
    """A recursive model's schema is a bare ``$ref``: make its definition the top level."""
    ref = schema.get("$ref")
    defs = schema.get("$defs", {})
    name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None
    if name not in defs:
        return schema
    top = {**defs[name], **{k: v for k, v in schema.items() if k not in ("$ref", "$defs")}}
    top["$defs"] = defs  # still referenced from inside (that is why pydantic used a $ref)
    return top


def _tidy(schema: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys in reading order: type, properties, required, additionalProperties, $defs."""
    schema.pop("title", None)
    order = ("type", "description", "properties", "required", "additionalProperties")
    tidy = {key: schema.pop(key) for key in order if key in schema}
    tidy.setdefault("type", "object")
    tidy.setdefault("properties", {})
    tidy.update(schema)
    for key, definition in tidy.get("$defs", {}).items():
        # enums get their class name as a title after generation; drop it like the others
        if isinstance(definition, dict) and key.rsplit("__", 1)[-1] == definition.get("title"):
            del definition["title"]
    return tidy


def _model_name(target: Callable[..., Any]) -> str:
    name = getattr(target, "__name__", "") or "tool"
    return "".join(part.capitalize() for part in name.split("_") if part.isidentifier()) + "Args"


def _first_line(exc: BaseException) -> str:
    """The gist of a pydantic error, without its advice for model authors and its URL."""
    text = str(exc).strip().split("\n\nFor further information", 1)[0]
    text = text.split(" Set `arbitrary_types_allowed", 1)[0]
    return text.splitlines()[0] if text else type(exc).__name__


def _type_name(annotation: Any) -> str:
    if inspect.isclass(annotation) and typing.get_origin(annotation) is None:
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")
