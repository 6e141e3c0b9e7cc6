"""A bound on how deeply nested the JSON/YAML a magic line or cell gives may be.

Python's parsers recurse once per level, so ``[[[[…]]]]`` 10,000 deep raises ``RecursionError``
(and a value a few hundred deep would do so later, in validation or display). Magics check the
text with :func:`check_nesting` before parsing it and turn a ``RecursionError`` met while parsing
into a :class:`~IPython.core.error.UsageError` with :func:`too_deep`.
"""

from __future__ import annotations

from IPython.core.error import UsageError

__all__ = ["MAX_NESTING", "check_nesting", "nesting_depth", "too_deep"]

MAX_NESTING = 64
"""The deepest ``[``/``{`` nesting a magic accepts."""


def nesting_depth(text: str, stop: int = MAX_NESTING) -> int:
    """The deepest ``[``/``{`` nesting of ``text`` outside double-quoted strings (JSON rules,
    backslash escapes); the scan ends early once ``stop`` is exceeded."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop:
                    break
        elif char in "]}" and depth:
            depth -= 1
    return deepest


def too_deep(where: str, limit: int = MAX_NESTING) -> UsageError:
    """The error for input nested deeper than ``limit``."""
    return UsageError(
        f"{where}: the value is nested too deeply (more than {limit} levels of [ ] or {{ }}); "
        "flatten it or pass it from a notebook variable (key=$var)."
    )


def check_nesting(text: str, where: str, limit: int = MAX_NESTING) -> None:
    """Raise :func:`too_deep`'s UsageError if ``text`` nests deeper than ``limit``."""
    if nesting_depth(text, limit) > limit:
        raise too_deep(where, limit)
