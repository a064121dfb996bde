"""Secrets that no pattern sees as written: split over string literals, or encoded.

An agent writes `api_key = ("sk-proj-Q7vT2m..."` on one line and `"...T3BlbkFJx8Yw2Vq")` on the
next; a config holds a token base64-encoded; a URL carries it percent-encoded. Each function here
finds the pieces of text that, once joined or decoded, hold a secret of a known format, and
returns their spans in the ORIGINAL text with the kind found, so the redactor replaces them like
any other span. `find` is the scanner's own pattern search (kinds with a recognisable format), run
on the joined or decoded text only; nothing here logs or keeps a value.

- split literals: two or more quoted literals of token characters, separated by whitespace, a
  `+`, a line continuation or a JSON-escaped newline (`\\n`, also in JSON-escaped text `\\"`);
  every literal that overlaps the secret in the joined text is a span.
- base64 (standard and URL-safe), hex, and percent-encoding: a run of the alphabet that decodes
  to UTF-8 text is scanned; a secret inside makes the whole run a span.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from urllib.parse import unquote

#: (start, end, kind) in the text given to `find`.
Find = Callable[[str], list[tuple[int, int, str]]]

_QUOTE = r"""(?:\\?["'])"""
_BODY = r"[A-Za-z0-9_\-+/=.:]{2,}"
_JOIN = r"(?:\s|\\[nrt]|\\\s|\+)*"
_LITERAL = re.compile(rf"(?P<q>{_QUOTE})(?P<body>{_BODY})(?P=q)")
_SPLIT = re.compile(rf"{_QUOTE}{_BODY}{_QUOTE}(?:{_JOIN}{_QUOTE}{_BODY}{_QUOTE})+")
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")
_HEX = re.compile(r"(?<![0-9A-Za-z])[0-9A-Fa-f]{32,}(?![0-9A-Za-z])")
_PERCENT = re.compile(r"(?<![A-Za-z0-9._~+%-])[A-Za-z0-9._~+%-]{12,}")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def split_literal_spans(text: str, find: Find) -> Iterator[tuple[int, int, str]]:
    """Literals that together spell a secret (each literal alone may be too short to match)."""
    if text.count('"') + text.count("'") < 4:
        return
    for run in _SPLIT.finditer(text):
        pieces = [(m.start("body") + run.start(), m.group("body")) for m in _LITERAL.finditer(run.group(0))]
        if len(pieces) < 2:
            continue
        joined = "".join(body for _, body in pieces)
        offsets = []  # where each piece starts in the joined text
        pos = 0
        for _, body in pieces:
            offsets.append(pos)
            pos += len(body)
        for start, end, kind in find(joined):
            for (where, body), off in zip(pieces, offsets, strict=True):
                lo, hi = max(start, off), min(end, off + len(body))
                if lo < hi:  # this literal holds part of the secret
                    yield where + lo - off, where + hi - off, kind


def _printable(data: bytes) -> str | None:
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not decoded or sum(ch.isprintable() or ch in "\n\r\t" for ch in decoded) < 0.95 * len(decoded):
        return None
    return decoded


def _b64(run: str) -> str | None:
    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    altchars = b"-_" if ("-" in body or "_" in body) else None
    try:
        return _printable(base64.b64decode(padded, altchars=altchars, validate=True))
    except (binascii.Error, ValueError):
        return None


def encoded_spans(text: str, find: Find) -> Iterator[tuple[int, int, str]]:
    """Runs of base64, hex or percent-encoding whose decoded text holds a secret."""
    for regex, decode in (
        (_BASE64, _b64),
        (_HEX, lambda run: _printable(bytes.fromhex(run)) if len(run) % 2 == 0 else None),
        (_PERCENT, lambda run: unquote(run) if len(_ESCAPE.findall(run)) >= 3 else None),
    ):
        if regex is _PERCENT and "%" not in text:
            continue
        for m in regex.finditer(text):
            decoded = decode(m.group(0))
            if decoded and decoded != m.group(0):
                hits = find(decoded)
                if hits:
                    yield m.start(), m.end(), hits[0][2]


__all__ = ["encoded_spans", "split_literal_spans"]
