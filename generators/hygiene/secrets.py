"""Secret scanning and redaction: nothing secret ships in a benchmark row, a report or a log.

`Scanner` finds secrets with aptforge's typed patterns (`secret_patterns.PATTERNS`), also split
over string literals or base64 / hex / percent-encoded (`encoded`), and with the detect-secrets
plugins, and returns spans (start, end, kind), never logging a value. `Redactor`
replaces every span with a typed placeholder `<REDACTED:kind>` and guarantees consistency: a
secret of a recognisable shape (a token, or a password with mixed character classes, 8+ chars)
is remembered, and every later occurrence of the same value in any field of any trajectory,
question or Problem of the build becomes the same placeholder, even where no pattern would
recognise it (a token pasted bare into a `curl` header). Placeholders are deliberately not
numbered: a number would depend on what else the build contains, so adding a trajectory would
change other items' content hashes and throw away their human verdicts.

Placeholders are never findings, so `scan_rows(redacted rows)` is empty: `assert_clean` is the
guard publish calls to refuse a release in which anything is still found. `Finding` holds the
kind and the location only; the value is never stored in a finding, a Problem or a report.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from generators.hygiene.encoded import encoded_spans, split_literal_spans
from generators.hygiene.secret_patterns import (
    DETECT_SECRETS_PLUGINS,
    FORMAT_KINDS,
    PATTERNS,
    PERSONAL_KINDS,
    Pattern,
    assignment_kind,
    ds_kind,
    escaped,
    key_before,
    plausible_value,
    rank,
    token_start,
)

#: Bump when what the scanner finds changes (cached, redacted read shards are keyed by it).
SCANNER_VERSION = 2
PLACEHOLDER = re.compile(r"<REDACTED:([a-z0-9_]+)>")
_LEFT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_RIGHT_CHARS = _LEFT_CHARS | frozenset("+/=.")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: A line can hold something for detect-secrets only if it names a credential (its keyword
#: plugin's words, `://` for basic auth) or has a long token of letters and digits: the other
#: lines (most of a trajectory) skip its slow scan.
_HINTS = (
    "_key",
    "apikey",
    "authkey",
    "servicekey",
    "accountkey",
    "dbkey",
    "databasekey",
    "privkey",
    "privatekey",
    "private key",
    "clientkey",
    "pass",
    "pwd",
    "secret",
    "contrase",
    "token",
    "cred",
    "cloudant",
    "softlayer",
    "sl_",
    "ibm",
    "bearer",
    "://",
)
_LONG_RUN = re.compile(r"[A-Za-z0-9_\-+=]{20,}")
#: detect-secrets keeps its settings in a process-wide singleton: one scan at a time.
_DS_LOCK = threading.Lock()


def placeholder(kind: str) -> str:
    """The text that replaces a secret of `kind`: `<REDACTED:github_token>`."""
    return f"<REDACTED:{kind}>"


class PrivacyOptions(NamedTuple):
    """What the scanner looks for beyond credentials (personal data is opt-in)."""

    redact_emails: bool = False
    """Also find e-mail addresses (`git@` SSH remotes excepted)."""
    redact_phones: bool = False
    """Also find phone numbers (9+ digits in a phone layout)."""
    detect_secrets: bool = True
    """Run the detect-secrets plugins beside aptforge's own patterns."""


class Span(NamedTuple):
    """A secret's position in one text."""

    start: int
    end: int
    kind: str


class Finding(NamedTuple):
    """One secret found: its kind and where, never its value."""

    kind: str
    where: str
    field: str = ""

    def __str__(self) -> str:
        return f"{self.where}{'.' + self.field if self.field else ''}: {self.kind}"


class SecretsFound(RuntimeError):
    """Raised by `assert_clean`; the message lists kinds and places, never values."""

    def __init__(self, findings: list[Finding]) -> None:
        kinds = Counter(f.kind for f in findings)
        places = "; ".join(str(f) for f in findings[:10])
        more = f" (+{len(findings) - 10} more)" if len(findings) > 10 else ""
        super().__init__(f"{len(findings)} secret(s) still present ({dict(kinds)}): {places}{more}")
        self.findings = findings


def _merge(spans: Iterable[Span]) -> list[Span]:
    """Union overlapping spans; the merged span takes the most specific kind."""
    merged: list[Span] = []
    for s in sorted(spans):
        if merged and s.start < merged[-1].end:
            last = merged[-1]
            kind = min((last.kind, s.kind), key=rank)
            merged[-1] = Span(last.start, max(last.end, s.end), kind)
        else:
            merged.append(s)
    return merged


def strong_value(kind: str, value: str) -> bool:
    """Whether a value is distinctive enough to be redacted wherever it appears.

    Format kinds (tokens, keys) and personal data always are; a password, URL password or
    `KEY=value` secret needs 8+ characters from 2+ classes (so `postgres` is redacted where it is
    assigned, not in every `psql` command of the build).
    """
    if kind in FORMAT_KINDS or kind in PERSONAL_KINDS:
        return len(value) >= 8
    classes = sum(bool(re.search(p, value)) for p in ("[a-z]", "[A-Z]", "[0-9]", "[^A-Za-z0-9]"))
    return len(value) >= 8 and classes >= 2


class Scanner:
    """Finds secret spans in text. One per build: it caches detect-secrets results per line."""

    def __init__(self, options: PrivacyOptions | None = None) -> None:
        self.options = options or PrivacyOptions()
        self._patterns = [
            p
            for p in PATTERNS
            if (p.kind != "email" or self.options.redact_emails)
            and (p.kind != "phone" or self.options.redact_phones)
        ]
        self._ds_cache: dict[str, tuple[tuple[str, str], ...]] = {}

    def release(self) -> None:
        """Forget the per-line detect-secrets results (a later scan recomputes them)."""
        self._ds_cache.clear()

    def spans(self, text: str) -> list[Span]:
        """Merged, non-overlapping secret spans of `text` (placeholders are never secrets)."""
        if len(text) < 8:
            return []
        found = self._pattern_spans(text)
        # split over string literals, or base64 / hex / percent-encoded: spans in the original text
        found += [Span(*s) for s in split_literal_spans(text, self._format_spans)]
        found += [Span(*s) for s in encoded_spans(text, self._format_spans)]
        if self.options.detect_secrets:
            found += self._detect_secrets_spans(text)
        guarded = [(m.start(), m.end()) for m in PLACEHOLDER.finditer(text)]
        found = [
            s for s in found if s.end > s.start and not any(s.start < e and b < s.end for b, e in guarded)
        ]
        return _merge(found)

    def _pattern_spans(self, text: str) -> list[Span]:
        found: list[Span] = []
        lower = text.translate(_ASCII_LOWER)  # same length as `text`, unlike str.lower()
        for p in self._patterns:
            for m in self._matches(p, text, lower):
                if (p.boundary and not token_start(text, m.start())) or (
                    p.accept is not None and not p.accept(m)
                ):
                    continue
                start, end = m.span(p.group)
                kind = assignment_kind(key_before(text, m.end("key"))) if p.kind == "secret" else p.kind
                found.append(Span(start, end, kind))
        return found

    def _format_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Secrets of a recognisable format in a joined or decoded text (see `encoded`)."""
        return [tuple(s) for s in self._pattern_spans(text) if s.kind in FORMAT_KINDS]

    @staticmethod
    def _matches(p: Pattern, text: str, lower: str) -> Iterator[re.Match[str]]:
        if p.stems is None:
            yield from p.regex.finditer(text)
            return
        for stem in p.stems.finditer(lower):
            m = p.regex.match(text, stem.start())
            if m is not None:
                yield m

    def prepare(self, texts: Iterable[str]) -> None:
        """Run detect-secrets over the lines of many texts in one session (its setup is costly)."""
        if not self.options.detect_secrets:
            return
        todo = {c for text in texts for _, c in _chunks(text) if c not in self._ds_cache}
        self._scan_chunks(sorted(todo))

    def _detect_secrets_spans(self, text: str) -> list[Span]:
        spans: list[Span] = []
        chunks = _chunks(text)
        todo = [c for _, c in chunks if c not in self._ds_cache]
        if todo:
            self._scan_chunks(todo)
        for offset, chunk in chunks:
            for secret_type, value in self._ds_cache.get(chunk, ()):
                if secret_type == "Secret Keyword" and not plausible_value(value.strip("'\"\\"), True, True):
                    continue  # `password='password'`, `SECRET_KEY='testing'`: fixtures, not secrets
                spans += self._locate(chunk, offset, ds_kind(secret_type), value)
        return spans

    def _scan_chunks(self, chunks: list[str]) -> None:
        """detect-secrets over the lines worth it; every line's result (even none) is cached."""
        worth = []
        for chunk in chunks:
            if _worth_scanning(chunk):
                worth.append(chunk)
            else:
                self._ds_cache[chunk] = ()
        if not worth:
            return
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import transient_settings

        # Plugins only, default filters: no `is_ignored_due_to_verification_policies` filter, so no
        # plugin ever calls out to verify a secret (no network, no secret leaves the process).
        with _DS_LOCK, transient_settings({"plugins_used": [{"name": n} for n in DETECT_SECRETS_PLUGINS]}):
            for chunk in worth:
                hits = {(s.type, s.secret_value) for s in scan_line(chunk) if s.secret_value}
                self._ds_cache[chunk] = tuple(sorted(hits))

    @staticmethod
    def _locate(chunk: str, offset: int, kind: str, value: str) -> Iterator[Span]:
        """Every occurrence of a detect-secrets value, widened to the whole token around it.

        detect-secrets reports a capture group for some plugins (`ghp` of a GitHub token, a JWT
        without its signature); widening to the surrounding token characters redacts all of it.
        Widening never crosses `=` or `:` to the left (the key of `KEY=value` stays) nor eats the
        letter of a JSON escape (`\\n`, `\\t`), and drops a trailing `.` or `/`; a span never starts
        or ends inside a backslash escape, so JSON-escaped text stays valid JSON.
        """
        hit = chunk.find(value)
        while hit >= 0:
            start, end = hit, hit + len(value)
            if " " not in value:
                while start > 0 and chunk[start - 1] in _LEFT_CHARS and not escaped(chunk, start - 1):
                    start -= 1
                while end < len(chunk) and chunk[end] in _RIGHT_CHARS:
                    end += 1
                while end - start > len(value) and chunk[end - 1] in "./":
                    end -= 1
            while end > start and chunk[end - 1] == "\\":  # never end inside a JSON escape
                end -= 1
            if escaped(chunk, start):
                start += 1
            yield Span(offset + start, offset + end, kind)
            hit = chunk.find(value, hit + len(value))


def _chunks(text: str) -> list[tuple[int, str]]:
    """Lines of a text with their offsets, split at real and JSON-escaped (`\\n`) newlines."""
    chunks: list[tuple[int, str]] = []
    pos = 0
    for line in text.split("\n"):
        for part in line.split("\\n"):
            chunks.append((pos, part))
            pos += len(part) + 2
        pos += 1 - 2
    return chunks


def _worth_scanning(chunk: str) -> bool:
    """Whether detect-secrets could find anything in a line (see `_HINTS`)."""
    if len(chunk) < 8:
        return False
    low = chunk.translate(_ASCII_LOWER)
    if any(h in low for h in _HINTS):
        return True
    return any(
        any(c.isdigit() for c in run) and any(c.isalpha() for c in run) for run in _LONG_RUN.findall(chunk)
    )


class Redaction(NamedTuple):
    """A redacted text and how many placeholders of each kind it received."""

    text: str
    counts: Counter[str]


#: A Redactor remembers the digests of this many to twice as many texts scanned without findings.
CLEAN_MEMORY = 1 << 15


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Redactor:
    """Build-wide redaction with one value -> kind map, so a secret reads the same everywhere.

    Call `learn` over every text of a stage first, then `redact` each text: a value learnt
    anywhere is replaced everywhere, including in texts where no pattern recognises it.
    """

    def __init__(self, scanner: Scanner | None = None) -> None:
        self.scanner = scanner or Scanner()
        self._values: dict[str, str] = {}
        self._spans: dict[str, list[Span]] = {}
        # digests of the texts with findings (few): each counts once in `found`, build-wide
        self._counted: set[bytes] = set()
        # digests of texts scanned without findings, the last CLEAN_MEMORY to 2 x CLEAN_MEMORY of
        # them (two generations): a text met again soon is not scanned again, and a build's
        # millions of texts are not all remembered (scanning one again finds the same: nothing)
        self._clean: set[bytes] = set()
        self._clean_old: set[bytes] = set()
        self._regex: re.Pattern[str] | None = None
        self.found: Counter[str] = Counter()
        """Findings per kind over every text learnt (a repeated text counts once)."""

    def _scan(self, text: str, key: bytes | None = None) -> list[Span]:
        """The spans of `text` (`key`: its `_digest`, when the caller has it)."""
        spans = self._spans.get(text)
        if spans is not None:
            return spans
        key = key or _digest(text)
        if key in self._clean or key in self._clean_old:  # scanned lately, nothing found
            return []
        spans = self.scanner.spans(text)
        if not spans:
            self._clean.add(key)
            if len(self._clean) >= CLEAN_MEMORY:
                self._clean_old, self._clean = self._clean, set()
            return spans
        self._spans[text] = spans  # only texts with findings are kept (by text)
        if key not in self._counted:  # a text scanned again after a `release` counts once
            self._counted.add(key)
            for s in spans:
                self.found[s.kind] += 1
                value = text[s.start : s.end]
                if strong_value(s.kind, value):
                    known_kind = self._values.get(value)
                    if known_kind is None or rank(s.kind) < rank(known_kind):
                        self._values[value] = s.kind
                        self._regex = None
        return spans

    def learn(self, texts: Iterable[str]) -> None:
        """Scan texts and remember their distinctive secret values."""
        self.learn_groups([texts])

    def learn_groups(self, groups: Iterable[Iterable[str]]) -> list[bool]:
        """`learn` the texts of every group (a question's, say) in one pass; per group, whether any
        of its texts has findings (one that has none needs only `redact(text, scanned=True)`)."""
        groups = [[t for t in g if t] for g in groups]
        keys: dict[str, bytes] = {}  # each text's digest, once
        for g in groups:
            for t in g:
                if t not in self._spans and t not in keys:
                    keys[t] = _digest(t)
        todo = [t for t, k in keys.items() if k not in self._counted]
        self.scanner.prepare(t for t in todo if keys[t] not in self._clean and keys[t] not in self._clean_old)
        for t in todo:
            self._scan(t, keys[t])
        return [any(t in self._spans or keys[t] in self._counted for t in g) for g in groups]

    def release(self) -> None:
        """Forget the texts scanned so far (their spans, the scanner's per-line results): the cache
        keys are those texts, kept alive only by it. The value map, the counts and a digest of each
        text with findings stay, so a text redacted later reads the same and its findings are not
        counted twice; a build learns its texts a batch at a time, releasing between batches, then
        redacts them."""
        self._spans.clear()
        self.scanner.release()

    def _known(self) -> re.Pattern[str] | None:
        if self._regex is None and self._values:
            alternatives = sorted(self._values, key=len, reverse=True)
            self._regex = re.compile(
                r"(?<![A-Za-z0-9])(?:" + "|".join(re.escape(v) for v in alternatives) + r")(?![A-Za-z0-9])"
            )
        return self._regex

    def redact(self, text: str, scanned: bool = False) -> Redaction:
        """Replace every secret span and every known value with its placeholder (`scanned`: the
        text was learnt and had no findings, `learn_groups`: only known values are looked for)."""
        if not text:
            return Redaction(text, Counter())
        spans = [] if scanned else list(self._scan(text))
        known = self._known()
        if known is not None:
            spans += [Span(m.start(), m.end(), self._values[m.group(0)]) for m in known.finditer(text)]
        if not spans:
            return Redaction(text, Counter())
        merged = _merge(spans)
        parts: list[str] = []
        pos = 0
        for s in merged:
            parts += [text[pos : s.start], placeholder(s.kind)]
            pos = s.end
        parts.append(text[pos:])
        return Redaction("".join(parts), Counter(s.kind for s in merged))

    def redact_value(self, value: Any, counts: Counter[str], scanned: bool = False) -> Any:
        """Redact every string inside nested dicts, lists and tuples (keys are left alone;
        `scanned` as for `redact`, of every string)."""
        if isinstance(value, str):
            red = self.redact(value, scanned)
            counts.update(red.counts)
            return red.text
        if isinstance(value, Mapping):
            return {k: self.redact_value(v, counts, scanned) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.redact_value(v, counts, scanned) for v in value)
        return value

    @property
    def knows_values(self) -> bool:
        """Whether any value was learnt: without one, a text without findings redacts to itself."""
        return bool(self._values)


def strings_of(value: Any) -> Iterator[str]:
    """Every string inside nested dicts, lists and tuples."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from strings_of(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings_of(v)


def scan_text(text: str, where: str, field: str = "", scanner: Scanner | None = None) -> list[Finding]:
    """Findings in one text (placeholders excluded)."""
    return [Finding(s.kind, where, field) for s in (scanner or Scanner()).spans(text)]


def scan_rows(
    rows: Iterable[Mapping[str, Any]],
    options: PrivacyOptions | None = None,
    id_keys: tuple[str, ...] = ("item_id", "uuid"),
    scanner: Scanner | None = None,
) -> list[Finding]:
    """Findings in every string (and list-of-strings) column of rows: what publish checks.

    Each finding names the row (its first non-empty `id_keys` value, else `row <n>`) and column.
    """
    scanner = scanner or Scanner(options)
    findings: list[Finding] = []
    for n, row in enumerate(rows, start=1):
        where = next((str(row[k]) for k in id_keys if row.get(k)), f"row {n}")
        for column, value in row.items():
            for text in strings_of(value):
                findings += scan_text(text, where, column, scanner)
    return findings


def assert_clean(
    findings_or_rows: Iterable[Finding] | Iterable[Mapping[str, Any]], options: PrivacyOptions | None = None
) -> None:
    """Refuse (raise `SecretsFound`) when anything is found; accepts findings or rows.

    Raises:
        SecretsFound: at least one finding; the message names kinds and places only.
    """
    items = list(findings_or_rows)
    findings = [i for i in items if isinstance(i, Finding)]
    rows = [i for i in items if not isinstance(i, Finding)]
    findings += scan_rows(rows, options)
    if findings:
        raise SecretsFound(findings)


__all__ = [
    "PLACEHOLDER",
    "Finding",
    "PrivacyOptions",
    "Redaction",
    "Redactor",
    "Scanner",
    "SecretsFound",
    "Span",
    "assert_clean",
    "placeholder",
    "scan_rows",
    "scan_text",
    "strings_of",
    "strong_value",
]
