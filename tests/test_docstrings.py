"""Docstring parsing: Google, NumPy and Sphinx styles, mixed and odd docstrings."""

from __future__ import annotations

import pytest

from kode_nb.tools._docstrings import ParsedDocstring, parse_docstring


def test_google_args_types_continuations_and_skipped_sections() -> None:
    doc = """Search the index.

    Looks in every shard.

    Args:
        query (str): What to look for.
            Continued on a second line.
        limit (Dict[str, Tuple(int, int)], optional): At most this many.
        *args: Extra positional.
        **kwargs: Extra named.

    Returns:
        int: the count (not a parameter).

    Raises:
        ValueError: when bad (not a parameter).
    """
    parsed = parse_docstring(doc)
    assert parsed == ParsedDocstring(
        description="Search the index.\n\nLooks in every shard.",
        params={
            "query": "What to look for. Continued on a second line.",
            "limit": "At most this many.",
            "args": "Extra positional.",
            "kwargs": "Extra named.",
        },
        style="google",
    )


@pytest.mark.parametrize("header", ["Args:", "Arguments:", "Parameters:", "Keyword Args:"])
def test_google_header_aliases(header: str) -> None:
    parsed = parse_docstring(f"Do it.\n\n{header}\n    x: The x.\n")
    assert parsed.params == {"x": "The x."}
    assert parsed.description == "Do it."


def test_google_description_on_next_line_keeps_paragraphs() -> None:
    doc = """Desc.

    Args:
        x:
            On the next line.

            Second paragraph.
        y: Why.
    """
    assert parse_docstring(doc).params == {
        "x": "On the next line.\n\nSecond paragraph.",
        "y": "Why.",
    }


def test_google_returns_before_args_and_sections_after() -> None:
    doc = """Desc.

    Returns:
        x: looks like a parameter but is in Returns.

    Args:
        y: the real one.

    Example:
        z: not a parameter either.
    """
    parsed = parse_docstring(doc)
    assert parsed.params == {"y": "the real one."}
    assert parsed.description == "Desc."


def test_google_unindented_items() -> None:
    parsed = parse_docstring("Args:\nx: first\ny: second\n  continued\n")
    assert parsed.params == {"x": "first", "y": "second continued"}
    assert parsed.description == ""


def test_google_section_ends_at_dedent() -> None:
    doc = """Desc.

    Args:
        x: the x.
    Trailing text that is not part of x.
    """
    assert parse_docstring(doc).params == {"x": "the x."}


def test_numpy_style() -> None:
    doc = """Compute things.

    Parameters
    ----------
    x : int
        The x.
        More about x.
    y, z : float, optional
        Both of them.
    flag

    Returns
    -------
    int
        Not a parameter.
    """
    parsed = parse_docstring(doc)
    assert parsed == ParsedDocstring(
        description="Compute things.",
        params={
            "x": "The x. More about x.",
            "y": "Both of them.",
            "z": "Both of them.",
            "flag": "",
        },
        style="numpy",
    )


def test_numpy_other_sections_are_skipped() -> None:
    doc = "Desc.\n\nReturns\n-------\nresult : int\n    Not a param.\n\nParameters\n----------\na : str\n    The a.\n"
    assert parse_docstring(doc).params == {"a": "The a."}


def test_sphinx_style() -> None:
    doc = """Sphinx style.

    :param query: What to look for,
        continued.
    :param int limit: At most.
    :param dict[str, int] mapping: A map.
    :type query: str
    :returns: Not a parameter.
    :rtype: int
    :raises ValueError: Not a parameter.
    """
    parsed = parse_docstring(doc)
    assert parsed == ParsedDocstring(
        description="Sphinx style.",
        params={"query": "What to look for, continued.", "limit": "At most.", "mapping": "A map."},
        style="sphinx",
    )


def test_sphinx_unindented_text_after_blank_line_ends_field() -> None:
    doc = ":param x: The x.\n\nUnrelated trailing paragraph.\n"
    assert parse_docstring(doc).params == {"x": "The x."}


@pytest.mark.parametrize("key", ["param", "parameter", "arg", "argument", "key", "keyword"])
def test_sphinx_param_keys(key: str) -> None:
    assert parse_docstring(f"D.\n\n:{key} x: The x.").params == {"x": "The x."}


def test_mixed_styles_first_section_wins_conflicts() -> None:
    doc = """Mixed.

    Args:
        a: from google.

    :param a: from sphinx (loses).
    :param b: from sphinx.
    """
    parsed = parse_docstring(doc)
    assert parsed.style == "google"
    assert parsed.params == {"a": "from google.", "b": "from sphinx."}
    assert parsed.description == "Mixed."


def test_plain_docstring_keeps_paragraphs() -> None:
    parsed = parse_docstring("First line\nsecond line.\n\n\n\nNext paragraph.")
    assert parsed == ParsedDocstring(description="First line\nsecond line.\n\nNext paragraph.")


def test_first_line_on_quote_line_and_indented_rest() -> None:
    doc = "Summary here.\n        Indented body.\n\n        Args:\n            x: The x.\n        "
    parsed = parse_docstring(doc)
    assert parsed.description == "Summary here.\nIndented body."
    assert parsed.params == {"x": "The x."}


def test_tabs_are_expanded() -> None:
    parsed = parse_docstring("\tTabbed.\n\tArgs:\n\t\tx: tab.\n")
    assert parsed.description == "Tabbed."
    assert parsed.params == {"x": "tab."}


@pytest.mark.parametrize("doc", [None, "", "   \n  ", 42])
def test_empty_or_not_a_string(doc: object) -> None:
    assert parse_docstring(doc) == ParsedDocstring()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "doc",
    [
        "Args:",
        "Args:\n",
        ":param:",
        ":param x:",
        "Parameters\n----------",
        "----------\n----------",
        "x : int\n----",
        "Args:\n    (str): no name\n    : nothing\n",
        ":::\n::\n:param  : x",
        "\x00\x01 weird \udcff bytes",
        "Args:\n" + "    x: y\n" * 500,
    ],
)
def test_weird_docstrings_never_raise(doc: str) -> None:
    parsed = parse_docstring(doc)
    assert isinstance(parsed.description, str)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.params.items())


def test_note_in_text_is_not_a_section_unless_alone_on_its_line() -> None:
    parsed = parse_docstring("Note: this is prose, not a header.\n\nArgs:\n    x: The x.")
    assert parsed.description == "Note: this is prose, not a header."
