"""Text normalisation and similarity shared by generators and quality gates."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from functools import lru_cache

import numpy as np
from cydifflib import SequenceMatcher  # the standard library's difflib in C++: the same ratios
from rapidfuzz import fuzz, process

#: A run of characters that are not word characters (punctuation or whitespace): one space.
_NON_WORD = re.compile(r"\W+", re.U)
_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+", re.U)


def normalise(text: str) -> str:
    """Case-folded, NFKC, punctuation-free, whitespace-collapsed text."""
    # each punctuation mark a space, then whitespace runs collapsed: one pass over runs of \W
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def tokens(text: str) -> frozenset[str]:
    """Set of word tokens of the normalised text."""
    return frozenset(_TOKEN.findall(normalise(text)))


def jaccard(a: frozenset[str], b: Collection[str]) -> float:
    """Token-set Jaccard similarity (1.0 for two empty sets). `b` may be any collection of distinct
    tokens (the offline generator's pool index keeps tuples), taken as its set."""
    if not a and not b:
        return 1.0
    shared = len(a.intersection(b))  # the union's size without building it (the offline generator's hot call)
    return shared / (len(a) + len(b) - shared)


def similarity(a: str, b: str) -> float:
    """Normalised character similarity in [0, 1] (difflib ratio of the normalised texts)."""
    return normalised_similarity(normalise(a), normalise(b))


#: Up to this many texts `ratio_matrix` scores pair by pair; more go to one `process.cdist` call.
RATIO_LOOP_UP_TO = 64


def ratio_matrix(texts: Sequence[str] | Sequence[Sequence[str]]) -> np.ndarray:
    """Pairwise `fuzz.ratio` (0-100) of texts or token lists: `process.cdist(texts, texts)`'s float32
    matrix, value for value, with small sets scored pair by pair while holding the GIL.

    `cdist` lets go of the GIL on every call, and a thread that lets go of it waits up to the
    interpreter's switch interval (5 ms) to get it back while another thread runs Python: on a
    build's thread runner, where shards generate and filter side by side, a 4x4 matrix that takes
    5 us alone took 1.7 ms (42,000 of them were 73 s of a 3,000-run build). Scored here, the pairs
    cost a few microseconds and the thread keeps the GIL; past `RATIO_LOOP_UP_TO` texts the matrix
    is work enough to amortise the wait, and `cdist` scores it."""
    n = len(texts)
    if n > RATIO_LOOP_UP_TO:
        return process.cdist(texts, texts, scorer=fuzz.ratio, workers=1)
    out = np.empty((n, n), dtype=np.float32)
    for i, a in enumerate(texts):
        out[i, i] = fuzz.ratio(a, a)
        for j in range(i + 1, n):
            out[i, j] = out[j, i] = fuzz.ratio(a, texts[j])
    return out


@lru_cache(maxsize=8192)
def normalised_similarity(na: str, nb: str) -> float:
    """`similarity` of two texts already through `normalise` (callers comparing one text many times).

    Memoised: the offline generator's draws for one item compare the same candidate with the same
    options again and again (4 calls in 5 are repeats on templated runs), and difflib is its cost
    (cydifflib: the standard library's algorithm, heuristics and results, about 4x faster here)."""
    if na == nb:
        return 1.0
    matcher = SequenceMatcher(None, na, nb, autojunk=False)
    if matcher.real_quick_ratio() < 0.5 or matcher.quick_ratio() < 0.5:
        return matcher.quick_ratio()
    return matcher.ratio()


_CODE_LINE = re.compile(
    r"^(?:\s{2,}|\t|def |class |import |from \S+ import |@@ |[-+]{3} |diff --git |"
    r"(?:if|elif|else|for|while|try|except|finally|with|return|assert|raise)\b.*[:)\w]$|"
    r"[A-Za-z_][\w.\[\]'\"]*\s*(?:[-+*/|&]?=)\s*\S|[A-Za-z_][\w.]*\(.*\)$)"
)
_COMMENT = re.compile(r"(?m)(?:^|(?<=\s))#.*$")


def looks_like_code(text: str) -> bool:
    """Code, diffs and tracebacks (at least 40% of the lines indented or code-shaped; any hunk header:
    a diff of docs or docstrings is code too, one changed word in it is a real difference)."""
    if text.startswith(("diff --git", "@@ ")) or "\n@@ " in text:
        return True
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 3:
        return False
    return sum(bool(_CODE_LINE.match(ln)) for ln in lines) >= 0.4 * len(lines)


def code_key(text: str) -> str:
    """Code compared as code: comments dropped and whitespace collapsed, punctuation kept.

    Two code options are the same only when this key is equal: in code one token (`<` for `<=`,
    `!=` for `==`) is a real difference, which `normalise` (punctuation-free) would erase.
    """
    return _WS.sub(" ", _COMMENT.sub("", text)).strip()


def option_key(text: str) -> str:
    """The key two options are compared by: `code_key` for code, `normalise` for prose."""
    return code_key(text) if looks_like_code(text) else normalise(text)
