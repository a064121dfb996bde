"""Answer normalisation: the comparison key of final answers, shared by success labels and scenarios.

Lives in the bottom layer so a scenario (e.g. deep research) and the answer-match labels use one rule
without a scenario importing label code.
"""

from __future__ import annotations

import re
import unicodedata

_ARTICLES = frozenset({"a", "an", "the"})
NUM_TOKEN = re.compile(r"^-?\d+(?:\.\d+)?$")
CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])")
_UNITS = (
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
)
_TENS = {
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "seventy": "70",
    "eighty": "80",
    "ninety": "90",
}
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(_UNITS)} | _TENS


def tokens(text: str) -> list[str]:
    """Normalised words: NFKC, lower case, punctuation dropped, articles dropped, CJK per character."""
    s = unicodedata.normalize("NFKC", text).lower()
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)  # 1,000 -> 1000
    s = CJK.sub(r" \1 ", s)
    chars = [
        c
        if (c.isalnum() or c.isspace() or (c == "." and _between_digits(s, i)))
        else (f" {c} " if ord(c) > 127 and unicodedata.category(c).startswith("S") else " ")
        for i, c in enumerate(s)
    ]
    words = "".join(chars).split()
    # an article goes only before a real word: "A → B" and a one-letter answer "A" keep their letter
    kept = [
        w
        for i, w in enumerate(words)
        if w not in _ARTICLES or i + 1 >= len(words) or not (words[i + 1].isalnum() and len(words[i + 1]) > 1)
    ]
    return [_NUMBER_WORDS.get(w) or _trim_number(w) for w in kept]


def _between_digits(s: str, i: int) -> bool:
    return 0 < i < len(s) - 1 and s[i - 1].isdigit() and s[i + 1].isdigit()


def _trim_number(word: str) -> str:
    if NUM_TOKEN.match(word) and "." in word:
        word = word.rstrip("0").rstrip(".")
    return word


def normalize(text: str) -> str:
    """The comparison key: normalised tokens joined without spaces (GAIA-style)."""
    return "".join(tokens(text))
