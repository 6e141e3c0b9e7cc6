"""What a function's answer depends on, as a digest: the cache key's view of a tool's code.

:func:`fingerprint` hashes a function by what decides its answer:

* its **code**: bytecode, constants and names, nested functions and lambdas included;
* the **values of its closure cells** and of its default arguments, by content;
* the **module globals it reads** (``LOAD_GLOBAL``/``LOAD_NAME`` in its code or its nested
  code), by content; builtins count by name;
* **recursively**, the same for each function, method and class of *your* code that it reaches
  through those values (a helper it calls, a class it builds), cycles cut by name.

"By content" means: ``None``, numbers, strings and bytes by value; lists, tuples, sets, dicts
by their items; dataclasses, pydantic models, enums, ``functools.partial``, bound methods,
NumPy arrays, pandas objects, dates, decimals, paths, UUIDs and regular expressions by what
they hold; instances of a class of your code by their attributes (``vars``). *Library code* —
the standard library, installed packages and kode_nb — counts by module, name and version
(``json.dumps`` is ``json.dumps``), not by its body, and a module counts by its name.

An object whose class defines ``__kode_nb_cache_key__(self)`` counts by what that returns
instead (hashed the same way): say what decides a client's answers (its base URL and model),
or that a call log does not decide them at all.

A value the digest cannot cover (a client, a connection, a lock, an open file, any object of a
library class not listed above) raises :class:`Unhashable`, saying which value and where it
was read: a cached answer could not tell whether it changed, so the caller does not cache.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import dis
import enum
import fractions
import functools
import hashlib
import os
import pathlib
import re
import sys
import sysconfig
import types
import uuid
from typing import Any

__all__ = ["Unhashable", "fingerprint"]

_MAX_DEPTH = 64
"""Values nested deeper than this are not hashed (the function is not cached)."""
_BY_REPR = (
    datetime.date,
    datetime.time,
    datetime.timedelta,
    datetime.timezone,
    decimal.Decimal,
    fractions.Fraction,
    pathlib.PurePath,
    uuid.UUID,
    range,
    slice,
    type(Ellipsis),
    type(NotImplemented),
    re.Pattern,
)
"""Library types whose ``repr`` states their whole content."""
_SKIPPED_CLASS_ATTRS = frozenset({"_abc_impl"})


class Unhashable(ValueError):
    """A value that decides a function's answer but cannot be hashed by content."""


def fingerprint(fn: Any) -> str:
    """A hex digest of ``fn`` and everything it reads (see the module docstring); raises
    :class:`Unhashable` naming the first value it cannot cover."""
    hasher = _Hasher()
    hasher.value(fn, _name_of(fn), 0)
    return hasher.h.hexdigest()


def _name_of(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return f"`{name}`" if isinstance(name, str) else f"a {type(value).__qualname__}"


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {p for p in sys.path if "site-packages" in p or "dist-packages" in p}
    return tuple(sorted({os.path.realpath(r) + os.sep for r in roots if r}))


@functools.lru_cache(maxsize=4096)
def _library_version(module: str) -> str | None:
    """``None`` for a module of your code; else the version of the library it belongs to."""
    top = module.partition(".")[0]
    if top in ("kode_nb", "builtins") or module in sys.builtin_module_names:
        return _version_of(top)
    mod = sys.modules.get(module)
    if mod is None:
        return None if module == "__main__" else _version_of(top)
    file = getattr(mod, "__file__", None)
    if not isinstance(file, str):
        origin = getattr(getattr(mod, "__spec__", None), "origin", None)
        return _version_of(top) if origin in ("built-in", "frozen") else None
    real = os.path.realpath(file)
    return _version_of(top) if real.startswith(_library_roots()) else None


def _version_of(top: str) -> str:
    version = getattr(sys.modules.get(top), "__version__", None)
    return version if isinstance(version, str) else sys.version.split()[0]


def _global_names(code: types.CodeType) -> list[str]:
    """The global names ``code`` and its nested code read, in first-read order."""
    names: dict[str, None] = {}
    stack = [code]
    while stack:
        current = stack.pop()
        for ins in dis.get_instructions(current):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
                names.setdefault(ins.argval)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return list(names)


def _code_digest(code: types.CodeType) -> bytes:
    h = hashlib.sha256(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        h.update(_code_digest(const) if isinstance(const, types.CodeType) else repr(const).encode())
    return h.digest()


class _Hasher:
    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.entered: dict[int, str] = {}
        """Functions and classes already hashed (or being hashed): later visits name them."""
        self.keep: list[Any] = []  # keeps ids in ``entered`` from being reused meanwhile

    def put(self, *parts: str) -> None:
        for part in parts:
            data = part.encode("utf-8", "surrogatepass")
            self.h.update(len(data).to_bytes(8, "little"))
            self.h.update(data)

    def sub(self, value: Any, where: str, depth: int) -> bytes:
        """The digest of ``value`` on its own (for unordered collections)."""
        inner = _Hasher()
        inner.entered, inner.keep = self.entered, self.keep
        inner.value(value, where, depth)
        return inner.h.digest()

    def value(self, value: Any, where: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise Unhashable(f"{where} is nested more than {_MAX_DEPTH} levels deep")
        kind = type(value)
        declared = getattr(kind, "__kode_nb_cache_key__", None)
        if value is None or kind in (bool, int, float, complex, str, bytes):
            self.put(kind.__name__, repr(value))
        elif callable(declared) and not isinstance(value, type):
            self.put("declared", kind.__qualname__)
            self.value(declared(value), f"{where} (its __kode_nb_cache_key__)", depth + 1)
        elif isinstance(value, (list, tuple)):
            self.put(kind.__qualname__, str(len(value)))
            for item in value:
                self.value(item, where, depth + 1)
        elif isinstance(value, (set, frozenset)):
            digests = sorted(self.sub(item, where, depth + 1) for item in value)
            self.put(kind.__qualname__, *(d.hex() for d in digests))
        elif isinstance(value, (dict, types.MappingProxyType)):
            self.put(kind.__qualname__, str(len(value)))
            for key, item in value.items():
                self.value(key, where, depth + 1)
                self.value(item, where, depth + 1)
        elif isinstance(value, enum.Enum):
            self.value(kind, where, depth + 1)
            self.put("member", value.name)
        elif isinstance(value, types.FunctionType):
            self.function(value, depth)
        elif isinstance(value, types.MethodType):
            self.put("method")
            self.value(value.__func__, where, depth + 1)
            if _library_version(getattr(value.__func__, "__module__", "") or "") is None:
                self.value(value.__self__, f"{where} (the object it is bound to)", depth + 1)
        elif isinstance(value, (staticmethod, classmethod)):
            self.put(kind.__name__)
            self.value(value.__func__, where, depth + 1)
        elif isinstance(value, property):
            self.put("property")
            for part in (value.fget, value.fset, value.fdel):
                self.value(part, where, depth + 1)
        elif isinstance(value, functools.partial):
            self.put("partial")
            self.value(value.func, where, depth + 1)
            self.value(value.args, where, depth + 1)
            self.value(dict(value.keywords), where, depth + 1)
        elif isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            module = getattr(value, "__module__", None) or type(getattr(value, "__self__", None))
            self.put("builtin", str(module), value.__qualname__)
        elif isinstance(value, types.ModuleType):
            self.put("module", value.__name__)
        elif isinstance(value, type):
            self.cls(value, depth)
        elif isinstance(value, _BY_REPR):
            self.put(kind.__module__, kind.__qualname__, repr(value))
        elif dataclasses.is_dataclass(value):
            self.value(kind, where, depth + 1)
            for f in dataclasses.fields(value):
                self.put(f.name)
                self.value(getattr(value, f.name), f"{where}.{f.name}", depth + 1)
        else:
            self.other(value, where, depth)

    def other(self, value: Any, where: str, depth: int) -> None:
        kind = type(value)
        module = kind.__module__ or ""
        if module in ("typing", "typing_extensions") or isinstance(
            value, (types.GenericAlias, types.UnionType)
        ):  # an annotation: its repr names what it holds
            self.put("annotation", repr(value))
            return
        if module.startswith("numpy") and hasattr(value, "tobytes") and hasattr(value, "dtype"):
            if value.dtype.hasobject:
                self.put("ndarray-objects", str(value.shape))
                self.value(value.tolist(), where, depth + 1)
            else:
                self.put("ndarray", value.dtype.str, str(getattr(value, "shape", ())))
                self.h.update(value.tobytes())
            return
        if module.startswith("pandas") and kind.__name__ in ("DataFrame", "Series", "Index"):
            import pandas as pd

            self.put("pandas", kind.__name__, repr(getattr(value, "shape", None)))
            frame = value.to_frame() if kind.__name__ != "DataFrame" else value
            self.value([str(c) for c in frame.columns], where, depth + 1)
            self.value([str(d) for d in frame.dtypes], where, depth + 1)
            try:
                rows = pd.util.hash_pandas_object(frame, index=True)
            except TypeError as exc:  # cells pandas cannot hash (lists, dicts)
                raise Unhashable(
                    f"{where} is a pandas {kind.__name__} with cells that cannot be hashed ({exc})"
                ) from None
            self.h.update(rows.to_numpy().tobytes())
            return
        dump = getattr(value, "model_dump", None)
        if callable(dump) and hasattr(kind, "model_fields"):  # a pydantic model
            self.value(kind, where, depth + 1)
            self.value(dump(mode="python"), where, depth + 1)
            return
        state = getattr(value, "__dict__", None)
        if isinstance(state, dict) and _library_version(module) is None:
            self.value(kind, where, depth + 1)  # an object of a class of your code
            self.value(state, where, depth + 1)
            return
        raise Unhashable(
            f"{where} is {_article(kind)} object, which kode_nb cannot hash by content"
        )

    def _seen(self, obj: Any) -> bool:
        label = self.entered.get(id(obj))
        if label is not None:
            self.put("seen", label)
            return True
        self.entered[id(obj)] = f"{getattr(obj, '__module__', '')}.{obj.__qualname__}"
        self.keep.append(obj)
        return False

    def function(self, fn: types.FunctionType, depth: int) -> None:
        module = fn.__module__ or ""
        version = _library_version(module)
        if version is not None:
            self.put("library", module, fn.__qualname__, version)
            return
        if self._seen(fn):
            return
        name = f"`{fn.__qualname__}`"
        code = fn.__code__
        self.put("function", fn.__qualname__, _code_digest(code).hex())
        for var, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            try:
                contents = cell.cell_contents
            except ValueError:  # not assigned yet
                self.put("empty cell", var)
                continue
            self.put("cell", var)
            self.value(contents, f"the variable `{var}` that {name} closes over", depth + 1)
        self.value(fn.__defaults__, f"the default arguments of {name}", depth + 1)
        self.value(fn.__kwdefaults__, f"the default arguments of {name}", depth + 1)
        scope = fn.__globals__
        for var in _global_names(code):
            if var in scope:
                self.put("global", var)
                self.value(scope[var], f"the global `{var}` that {name} reads", depth + 1)

    def cls(self, kind: type, depth: int) -> None:
        module = kind.__module__ or ""
        version = _library_version(module)
        if version is not None:
            self.put("library class", module, kind.__qualname__, version)
            return
        if self._seen(kind):
            return
        name = f"the class `{kind.__qualname__}`"
        self.put("class", module, kind.__qualname__)
        for base in kind.__bases__:
            self.value(base, name, depth + 1)
        if issubclass(kind, enum.Enum):
            for member in kind:
                self.put(member.name, repr(member.value))
            return
        generated: tuple[str, ...] = ()
        if dataclasses.is_dataclass(kind):  # its fields; the methods made from them are skipped
            generated = ("<string>",)
            for f in dataclasses.fields(kind):
                self.put("field", f.name, repr(f.type))
                for extra in (f.default, f.default_factory):
                    if extra is not dataclasses.MISSING:
                        self.value(extra, f"the field `{kind.__qualname__}.{f.name}`", depth + 1)
        for attr, item in sorted(vars(kind).items()):
            dunder = attr.startswith("__") and attr.endswith("__")
            code_like = isinstance(item, (types.FunctionType, staticmethod, classmethod, property))
            made = isinstance(item, types.FunctionType) and item.__code__.co_filename in generated
            if (
                attr in _SKIPPED_CLASS_ATTRS
                or (dunder and not code_like and attr != "__annotations__")
                or (dunder and made)
            ):
                continue
            self.put("attribute", attr)
            self.value(item, f"`{kind.__qualname__}.{attr}`", depth + 1)
        schema = getattr(kind, "model_json_schema", None)
        if callable(schema):  # a pydantic model: its fields, as their schema
            self.value(schema(), name, depth + 1)


def _article(kind: type) -> str:
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"
