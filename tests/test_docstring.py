"""Tests for the docstring parser behind `@tool`."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aerix._docstring import Docstring, parse_docstring

DESCRIPTION = "Search the catalogue.\n\nMatches titles and authors,\nignoring case."
PARAMS = {
    "query": "The words to look for, in any order.",
    "limit": "At most this many hits.",
    "tags": "Extra tags.",
    "options": "Passed on to the backend.",
}

GOOGLE = """Search the catalogue.

    Matches titles and authors,
    ignoring case.

    Args:
        query (str): The words to look for,
            in any order.
        limit (int, optional): At most this many hits.
        *tags: Extra tags.
        **options (dict[str, Callable[[int], str]]): Passed on
            to the backend.

    Returns:
        list[str]: The titles found.

    Raises:
        ValueError: If the query is empty.
    """

NUMPY = """Search the catalogue.

    Matches titles and authors,
    ignoring case.

    Parameters
    ----------
    query : str
        The words to look for,
        in any order.
    limit : int, optional
        At most this many hits.
    *tags
        Extra tags.
    **options : dict
        Passed on
        to the backend.

    Returns
    -------
    list of str
        The titles found.

    See Also
    --------
    lookup : Find one title.
    """

REST = """Search the catalogue.

    Matches titles and authors,
    ignoring case.

    :param str query: The words to look for,
        in any order.
    :type query: str
    :param limit: At most this many hits.
    :param \\*tags: Extra tags.
    :param dict[str, int] **options: Passed on
        to the backend.
    :returns: The titles found.
    :rtype: list[str]
    :raises ValueError: If the query is empty.
    """


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, REST], ids=["google", "numpy", "rest"])
def test_each_style_gives_the_description_and_params(doc: str) -> None:
    assert parse_docstring(doc) == Docstring(description=DESCRIPTION, params=PARAMS)


@pytest.mark.parametrize(
    "doc",
    [
        "Ping.\n\nArgs:\n    host: The host.\n\nUsage:\n    ping('a')\n\nExample:\n    >>> 1\n",
        "Ping.\n\nParameters\n----------\nhost\n    The host.\n\nHistory\n-------\nold : str\n",
        "Ping.\n\n:param host: The host.\n:meta private:\n:custom thing: ignored\n",
    ],
    ids=["google", "numpy", "rest"],
)
def test_unknown_sections_after_the_params_are_ignored(doc: str) -> None:
    assert parse_docstring(doc) == Docstring(description="Ping.", params={"host": "The host."})


@pytest.mark.parametrize(
    ("doc", "description"),
    [
        (None, ""),
        ("", ""),
        ("   \n\t\n", ""),
        ("Return the answer.", "Return the answer."),
        ("  Return the answer.  \n\n\n", "Return the answer."),
        (
            "Summary.\n\n    Body line one,\n      indented line two.\n\n    Usage:\n        f()\n",
            "Summary.\n\nBody line one,\n  indented line two.\n\nUsage:\n    f()",
        ),
        (
            "See :class:`Foo`.\n:func:`bar` is related.",
            "See :class:`Foo`.\n:func:`bar` is related.",
        ),
    ],
    ids=["none", "empty", "blank", "summary", "padded", "no-sections", "roles"],
)
def test_without_sections_everything_is_the_description(doc: str | None, description: str) -> None:
    assert parse_docstring(doc) == Docstring(description=description, params={})


@pytest.mark.parametrize(
    "doc",
    [
        "Args:\n    a: An a.\n    b (int): A b.\n",
        "Parameters\n----------\na : str\n    An a.\nb\n    A b.\n",
        ":param a: An a.\n:param int b: A b.\n",
    ],
    ids=["google", "numpy", "rest"],
)
def test_only_sections_gives_an_empty_description(doc: str) -> None:
    assert parse_docstring(doc) == Docstring(description="", params={"a": "An a.", "b": "A b."})


def test_google_header_on_the_first_line() -> None:
    # Python strips the indent of the first line only; cleandoc cannot restore it.
    def f(a: int, b: int) -> None:
        """Args:
        a: An a,
            continued.
        b: A b.
        """

    assert parse_docstring(f.__doc__).params == {"a": "An a, continued.", "b": "A b."}


@pytest.mark.parametrize(
    ("doc", "params"),
    [
        ("Do.\n\nArguments:\n    x: X.\n\nKeyword Args:\n    y: Y.\n", {"x": "X.", "y": "Y."}),
        ("Do.\n\nArgs:\n    x:\n        X on its own line.\n", {"x": "X on its own line."}),
        ("Do.\n\nArgs:\n    x (int) : X.\n    not an item\n        dropped\n", {"x": "X."}),
        ("Do.\n\nArgs:\n    x: X.\n\n        Second paragraph.\n", {"x": "X. Second paragraph."}),
        ("Do.\n\nReturns: The value.\n\nArgs:\n    x: X.\n", {"x": "X."}),
    ],
    ids=["aliases", "desc-below", "junk", "paragraphs", "inline-returns"],
)
def test_google_details(doc: str, params: dict[str, str]) -> None:
    assert parse_docstring(doc) == Docstring(description="Do.", params=params)


@pytest.mark.parametrize(
    ("doc", "params"),
    [
        ("Do.\n\nParameters\n----------\nx, y : int\n    Both.\n", {"x": "Both.", "y": "Both."}),
        ("Do.\n\nParameters\n----------\nx : int\n", {"x": ""}),
        (
            "Do.\n\nParameters\n----------\nx : int\n    X.\n\nOther Parameters\n"
            "----------------\ny : str\n    Y.\n",
            {"x": "X.", "y": "Y."},
        ),
    ],
    ids=["shared", "no-desc", "other-parameters"],
)
def test_numpy_details(doc: str, params: dict[str, str]) -> None:
    assert parse_docstring(doc) == Docstring(description="Do.", params=params)


@pytest.mark.parametrize(
    ("doc", "params"),
    [
        (
            "Do.\n\n:parameter x: X.\n:arg y: Y.\n:keyword z: Z.\n",
            {"x": "X.", "y": "Y.", "z": "Z."},
        ),
        ("Do.\n\n:param: nameless\n:param x y z: X.\n:param 1x: bad name\n", {"z": "X."}),
        ("Do.\n\n:param x: X.\nTrailing text.\n", {"x": "X."}),
    ],
    ids=["aliases", "odd-names", "trailing-text"],
)
def test_rest_details(doc: str, params: dict[str, str]) -> None:
    assert parse_docstring(doc) == Docstring(description="Do.", params=params)


def test_tabs_and_mixed_styles() -> None:
    doc = "Do.\n\n\tArgs:\n\t\tx: X.\n\n\t:param y: Y.\n"

    assert parse_docstring(doc) == Docstring(description="Do.", params={"x": "X.", "y": "Y."})


_FRAGMENTS = st.sampled_from(
    [
        "Args:",
        "Returns:",
        "Note:",
        "Parameters",
        "----------",
        "x : int",
        "x (int): d",
        "*a: b",
        "**:",
        "x,:",
        ":param x:",
        ":param:",
        ":returns:",
        ":",
        "::",
        "(",
        "):",
        "\t",
    ]
)
_LINES = st.lists(
    st.tuples(st.sampled_from(["", " ", "    ", "\t", "        "]), _FRAGMENTS | st.text()),
    max_size=12,
).map(lambda lines: "\n".join(indent + text for indent, text in lines))


@given(st.text() | _LINES)
def test_never_raises_and_names_are_never_empty(doc: str) -> None:
    result = parse_docstring(doc)

    assert isinstance(result.description, str)
    for name, desc in result.params.items():
        assert re.fullmatch(r"\w+", name), name
        assert desc == desc.strip()
