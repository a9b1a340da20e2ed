"""The span matcher: the user's messages as the value rules read them. Spans at word
boundaries (`Spans`), numbers as the messages give them (in words, without thousands
separators: `number_text`), the fields they name (`mention`, `named`, `near`), what
they say (`said`), and values made only of a field's own name (`own_name`).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Collection, Iterator

__all__ = [
    "Spans",
    "is_function_word",
    "mention",
    "named",
    "near",
    "number_text",
    "own_name",
    "said",
    "spelled",
]

_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")
_FRACTION = re.compile(r"(?<![\d/.])\d{1,3}/(\d{1,3})(?![\d/.])")
"""A fraction or a score out of some number: "4/5", "3/4"."""
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
"""A thousands separator: a comma between a digit and exactly three digits."""
_WORD = re.compile(r"[a-z]+|[A-Z][a-z]*")
_FLAG_WORDS = frozenset(
    {
        "include",
        "includes",
        "with",
        "use",
        "show",
        "enable",
        "allow",
        "return",
        "only",
        "get",
        "has",
        "is",
        "want",
        "need",
    }
)
"""Words of a flag's name that say what it does, not what it is about (`include_`, `with_`)."""
_KEY_NOUNS = frozenset({"name", "type", "value", "values", "number", "num", "info", "data", "level"})
"""Words of a field's name that say what kind of value it is, not which one (`hotel_name`)."""
_AFTER = 3
"""How many words after a mention of a field's name a value of that field may start."""
_BEFORE = 1
"""How many words before a mention of a field's name a value of that field may start."""
_CLAUSE_BREAK = re.compile(r"[,.;:!?()\n]")
_CONJUNCTIONS = frozenset({"and", "or", "but"})
_SOURCE_WORD = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")
_NEGATION = re.compile(
    r"\b(?:not|no|never|without|don't|dont|do not|doesn't|exclude|excluding)\W+(?:\w+\W+){0,2}$"
)
"""A negation up to three words before a mention."""


_TIMES_A_YEAR = {"semiannually": "2", "quarterly": "4", "monthly": "12"}
"""Words of how often, as the times a year they mean ("compounded quarterly": 4)."""
_NUMBER_WORDS = {
    w: str(n)
    for n, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {"twice": "2", "thrice": "3", **_TIMES_A_YEAR}
_VALUE_WORD = re.compile(r"[^\W_]+")
_SPELLED = re.compile(r"\b(?:" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
"""A number written as a word ("two"), from zero to twenty, as "twice" or "thrice", or as
the times a year of "quarterly" and its like (`_TIMES_A_YEAR`)."""
_PLAIN_SPELLED = re.compile(
    r"\b(?:" + "|".join(w for w in _NUMBER_WORDS if w not in _TIMES_A_YEAR) + r")\b", re.IGNORECASE
)
"""`_SPELLED` but for the times a year: the number words that mean a number as written."""


def _stem(word: str) -> str:
    """A word's first letters, all but two and at least four (the whole word if shorter)."""
    return word[: max(4, len(word) - 2)]


def said(value: str, source: str) -> bool:
    """Whether `source` says every word of `value`: a short word (under four characters)
    as a whole word, a longer one by its stem ("detailed" for "in detail")."""
    words = _VALUE_WORD.findall(value.lower())
    source = source.lower()
    return bool(words) and all(
        re.search(rf"\b{re.escape(w)}\b" if len(w) < 4 else rf"\b{re.escape(_stem(w))}", source)
        for w in words
    )


@functools.lru_cache(maxsize=1024)
def _name_words(key: str) -> frozenset[str]:
    """The words of a field's name, in lower case (`daily_budget`, `dailyBudget`: "daily", "budget")."""
    return frozenset(w.lower() for w in _WORD.findall(key))


def mention(key: str, source: str) -> int:
    """Whether `source` mentions what the flag `key` is about: 1, negated: -1, not at all: 0.

    A word of the key (`include_tolls`: "tolls"; none of `_FLAG_WORDS`, none
    under three letters) is mentioned where a word of `source` starts with its
    stem (its first letters, all but two, at least four).
    """
    return _mentioned({w for w in _name_words(key) if len(w) >= 3} - _FLAG_WORDS, source)


def _mentioned(words: Collection[str], source: str) -> int:
    source = source.lower()
    found = 0
    for word in words:
        for hit in re.finditer(rf"\b{re.escape(_stem(word))}", source):
            if _NEGATION.search(source[: hit.start()]):
                return -1
            found = 1
    return found


def _key_words(key: str) -> set[str]:
    """The words of a field's name that a mention of it is found by (`daily_budget`: "daily",
    "budget"); none of `_KEY_NOUNS` or `_FLAG_WORDS`, none under three letters."""
    return {w for w in _name_words(key) if len(w) >= 3} - _KEY_NOUNS - _FLAG_WORDS


def near(source: str, key: str, others: Collection[str]) -> tuple[frozenset[int], frozenset[int]]:
    """Where values of field `key` likely start in `source`, by where it names the fields.

    A field is named where a word of `source` starts with the stem of a word
    of its key that no sibling's key has ("weight of 70 kg": `weight`; "a 7
    days trip": `days`; "end city 2": `end_city`, not `start_city`). The
    `_AFTER` words after a name and the `_BEFORE` words before it are near
    that field, within one clause (no punctuation or "and" between), and
    belong to the nearest one among `key` and its siblings `others`.
    Returns the start offsets of the words nearest `key` (or tied), and of
    those nearer another field.
    """
    words = [(m.start(), m.group().lower()) for m in _SOURCE_WORD.finditer(source)]
    breaks = [0] * len(words)  # clause breaks before each word
    for i in range(1, len(words)):
        gap = source[words[i - 1][0] + len(words[i - 1][1]) : words[i][0]]
        breaks[i] = breaks[i - 1] + bool(_CLAUSE_BREAK.search(gap) or words[i][1] in _CONJUNCTIONS)
    far = _AFTER + _BEFORE + 1
    fields = {key, *others}
    named = {k: _key_words(k) for k in fields}

    def distances(k: str) -> list[int]:
        shared = set().union(*(named[o] for o in fields - {k}))
        stems = [_stem(w) for w in named[k] - shared]
        out = [far] * len(words)
        for j in [j for j, (_, w) in enumerate(words) if any(w.startswith(st) for st in stems)]:
            for i in range(max(0, j - _BEFORE), min(len(words), j + _AFTER + 1)):
                if i != j and breaks[i] == breaks[j] and words[i][1] not in _CONJUNCTIONS:
                    out[i] = min(out[i], abs(i - j))
        return out

    own = distances(key)
    rival = [far] * len(words)
    for other in set(others) - {key}:
        rival = [min(a, b) for a, b in zip(rival, distances(other), strict=True)]
    mine = frozenset(at for (at, _), d, r in zip(words, own, rival, strict=True) if d < far and d <= r)
    theirs = frozenset(at for (at, _), d, r in zip(words, own, rival, strict=True) if r < d)
    return mine, theirs


def number_text(source: str, times_a_year: bool = True) -> str:
    """`source` with its numbers as the number rules read them: without thousands
    separators ("$2,000,000": 2000000) and in digits where written as words ("two": 2);
    with `times_a_year`, also the times a year that "quarterly" and its like mean (4: a
    convention, not the user's words)."""
    words = _SPELLED if times_a_year else _PLAIN_SPELLED
    return words.sub(lambda m: _NUMBER_WORDS[m.group().lower()], _THOUSANDS.sub("", source))


def spelled(source: str, times_a_year: bool = True) -> frozenset[int]:
    """Where `number_text(source, times_a_year)` has a number that `source` writes as a word ("two")."""
    text, shift, found = _THOUSANDS.sub("", source), 0, set()
    for m in (_SPELLED if times_a_year else _PLAIN_SPELLED).finditer(text):
        found.add(m.start() + shift)
        shift += len(_NUMBER_WORDS[m.group().lower()]) - len(m.group())
    return frozenset(found)


def named(key: str, source: str) -> int:
    """`mention`, by the words of `key` that say which value it holds, not what kind
    (`fullName`: "full"; not "name")."""
    return _mentioned(_key_words(key), source)


_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "these",
        "those",
        "its",
        "their",
        "my",
        "your",
        "his",
        "her",
        "our",
        "of",
        "in",
        "for",
        "to",
        "from",
        "with",
        "at",
        "on",
        "by",
        "near",
        "into",
        "over",
        "under",
        "between",
        "about",
        "as",
        "than",
        "and",
        "or",
        "then",
        "if",
        "when",
        "where",
        "how",
        "what",
        "that",
        "which",
        "who",
        "whom",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
    ]
)
"""Words that end a phrase rather than go on with it ("the king size bed in Paris")."""


def is_function_word(text: str) -> bool:
    """Whether `text` is a function word ("the", "of"), in any case, with blanks around it."""
    return text.strip().lower() in _FUNCTION_WORDS


def own_name(value: str, *keys: str) -> bool:
    """Whether a string value is made only of words of its field's name
    (`"method_used": "method"`), or of one of the other names given."""
    words = {w.lower() for w in _VALUE_WORD.findall(value)}
    return bool(words) and any(words <= _name_words(key) for key in keys)


def _kind(c: str) -> str:
    return "a" if c.isalpha() else "0" if c.isdigit() else c


class Spans:
    """Which texts are spans of a source text: starting (and ending) at word boundaries.

    An occurrence taken by `use` is not matched again.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._used: set[int] = set()
        self._inside: set[int] = set()
        """Where a span starts inside an occurrence taken by `use` ("04-27" of "2022-04-27")."""
        self._points = frozenset(m.start() for m in _DECIMAL_POINT.finditer(source))
        """Where the source has a decimal point between two digits."""
        self._denominators = frozenset(m.start(1) for m in _FRACTION.finditer(source))
        """Where the source has the number under a fraction ("4/5"; not in a date "08/16/2022")."""

    def copy(self) -> Spans:
        """An independent copy (the occurrences taken so far stay taken)."""
        other = copy.copy(self)
        other._used = set(self._used)
        other._inside = set(self._inside)
        return other

    def use(self, value: str) -> int:
        """Take the first free occurrence of `value` as a whole span: it is not offered again.
        Returns where it starts; -1 if `value` is no free whole span."""
        i = self._find(value, whole=True)
        if i >= 0:
            self._used.add(i)
            self._inside.update(range(i + 1, i + len(value)))
        return i

    def _boundary(self, i: int) -> bool:
        s = self.source
        if i <= 0 or i >= len(s):
            return True
        a, b = _kind(s[i - 1]), _kind(s[i])
        if i in self._points or i - 1 in self._points:
            return False  # inside a decimal number: "0" is no span of "0.015"
        if b == "0" and (a == "a" or s[i - 1] == "^" or i in self._denominators):
            return False  # "2" of "CO2" or of "m/s^2", "5" of "4/5": no number the user gave
        return not (a == b and a in "a0")

    def match(self, value: str, whole: bool) -> bool:
        """Whether `value` starts a span of the source (`whole`: is one).

        A span starts with a letter, a digit or a minus sign, and does not end with a blank.
        """
        return self.starts_span(value, whole) and self._find(value, whole) >= 0

    @staticmethod
    def starts_span(value: str, whole: bool) -> bool:
        """Whether `value` has the form `match` asks of a span: it starts with a letter, a
        digit or a minus sign and (`whole`) does not end with a blank."""
        return bool(value) and (value[0].isalnum() or value[0] == "-") and not (whole and value[-1].isspace())

    def where(self, value: str, whole: bool) -> list[int]:
        """Where `value` starts a free span of the source (`whole`: is one)."""
        return list(self._occurrences(value, whole))

    def free(self, value: str) -> list[int]:
        """Where `value` is a free whole span of the source."""
        return list(self._occurrences(value, whole=True))

    def taken(self, value: str, whole: bool) -> bool:
        """Whether `value` starts a span of the source (`whole`: is one) that a value has taken."""
        return next(self._occurrences(value, whole, taken=True), -1) >= 0

    def is_free(self, at: int) -> bool:
        """Whether the occurrence at `at` has not been taken."""
        return at not in self._used

    def take(self, at: int) -> None:
        """Take the occurrence at `at`: it is not offered again."""
        self._used.add(at)

    def _find(self, value: str, whole: bool) -> int:
        return next(self._occurrences(value, whole), -1)

    def _occurrences(self, value: str, whole: bool, taken: bool = False) -> Iterator[int]:
        s, i = self.source, self.source.find(value)
        while i >= 0:
            if (
                (i in self._used or i in self._inside) is taken
                and self._boundary(i)
                and (not whole or self._boundary(i + len(value)))
            ):
                yield i
            i = s.find(value, i + 1)
