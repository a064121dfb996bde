"""Text normalisation and similarity shared by generators and quality gates."""

from __future__ import annotations

import difflib
import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s]", re.U)
_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+", re.U)


def normalise(text: str) -> str:
    """Case-folded, NFKC, punctuation-free, whitespace-collapsed text."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return _WS.sub(" ", _PUNCT.sub(" ", text)).strip()


def tokens(text: str) -> frozenset[str]:
    """Set of word tokens of the normalised text."""
    return frozenset(_TOKEN.findall(normalise(text)))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Token-set Jaccard similarity (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def similarity(a: str, b: str) -> float:
    """Normalised character similarity in [0, 1] (difflib ratio of the normalised texts)."""
    na, nb = normalise(a), normalise(b)
    if na == nb:
        return 1.0
    matcher = difflib.SequenceMatcher(None, na, nb, autojunk=False)
    if matcher.real_quick_ratio() < 0.5 or matcher.quick_ratio() < 0.5:
        return matcher.quick_ratio()
    return matcher.ratio()
