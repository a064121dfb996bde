"""Plausible but wrong variants of a gold patch or reproduction script (SWE `fix_patch` / `test_patch`).

Patch mutations, each a valid diff of the gold's own files in the gold's own hunk style
(`rule:<kind>`):
- `reverted_condition`: a condition of an added line negated (`==`/`!=`, `is`/`is not`, `in`/`not
  in`, `and`/`or`, `if x` -> `if not x`, `True`/`False`);
- `off_by_one`: an integer literal or a comparison of an added line moved by one (`< n` -> `<= n`,
  `n` -> `n + 1`, slices, `len(x)` -> `len(x) - 1`, `range(n)` -> `range(n + 1)`, `[i]` -> `[i + 1]`);
- `partial_fix`: one hunk of a multi-hunk fix dropped, or one added line of a hunk dropped;
- `wrong_line`: an added line moved one line up or down in its hunk, past a context line it
  depends on (never an import, never past an independent line: the same code);
- `wrong_name`: the name an added line introduces swapped for another name of the hunk (the right
  change on the wrong variable);
- `extra_name`: an added statement kept and repeated on another name of the hunk (the right
  change, and the same change where it does not belong);
- `kept_old_line`: the new lines added but the old ones kept (the old code still runs); an old
  assignment the new lines make again is kept after them (else the new value wins: the gold
  again), and no variant keeps one right before its new value;
- `dropped_line`: the new lines added and the statement right after them removed (the fix
  deletes a line it needed);
- `wrong_location`: the hunk's change applied at another place of the same file the run displayed
  (where the removed lines also occur, or, for a pure insertion, after another line of the same
  indentation in another function) - the right change in the wrong function; its `@@` line has
  the heading git gives that place (the nearest `def` / `class` above it), and a place whose
  heading the displayed lines do not show gives no variant (a bare `@@` line was a tell);
- `double`: two of the above at once, two per base, so the gold is not the one option all others
  are one edit away from (a base and its doubles cluster around the base).
No variant is the gold's hunk made the other way (its added lines removed: a patch that does not
even apply to the file the issue is about). In a Python file, a variant whose changed hunk no longer
parses where the gold's does (`parse_window`: the hunk's new lines, dedented, cut ends of context
left out, a block left open closed with `pass`; the variant cut the same way) is dropped: a kept old `if` or a dropped block body is a syntax error, no plausible fix.
Only code is mutated: a comment, a docstring or doctest line changed, a hunk that only deletes or
only adds imports dropped, an old import kept, leave the gold's behaviour (no distractor). The
variants come longer and not longer than the gold in turn (each group in the kinds' turn), those
with fewer lines held back while they would outnumber those with more by two, so the first few
already let the gold be the longest, the shortest or neither option.
Script mutations (`test_patch`): the check that tells the bug reverted (the last checks first;
setup guards such as `if __name__` or `settings.configured` are never it), the triggering input
changed (an integer of a check, an expected value or an index by one, a string argument for
another of the script's, a flag argument of a value read later or of a call spread over lines
flipped, or a positional `True`/`False` of a call; a value a lowercase helper makes from a literal
replaced by the literal, `_('DATE_FORMAT')` -> `'DATE_FORMAT'`: `changed_input`), the triggering
call's first two arguments exchanged, or two plain ones after them (or a print's, when prints are
the checks: `swapped_args`; a call made inside a print when the script makes none outside one), a check or print
made on another variable of the script (`wrong_name`, never a word of a message), two adjacent
statements swapped where the order matters (`swapped_steps`), and pairs of those clustered around
a base (`double`); one statement dropped comes last (it shortens the script, so it would make the
gold the longest option) and never one whose name a later line uses, a setup line or a traceback print.
Every variant differs from the gold and from every other variant.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from collections.abc import Iterator, Sequence
from itertools import pairwise, zip_longest

from extractors.swe_issue_fix.patches import FilePatch, Hunk, render_patch

_REVERT = (
    (r" == ", " != "),
    (r" != ", " == "),
    (r"\bis not\b", "is"),
    (r"\bis None\b", "is not None"),
    (r"\bnot in\b", "in"),
    (r"(?<!not) \bin\b (?=\w)", " not in "),
    (r"\band\b", "or"),
    (r"\bor\b", "and"),
    (r"\bTrue\b", "False"),
    (r"\bFalse\b", "True"),
    (r"^(\s*(?:el)?if )not ", r"\1"),
    (r"^(\s*(?:el)?if )(?!not )", r"\1not "),
)
_OFF_BY_ONE = (
    (r" <= ", " < "),
    (r" >= ", " > "),
    (r" < ", " <= "),
    (r" > ", " >= "),
    (r" \+ 1\b", ""),
    (r" - 1\b", ""),
    (r"\[:(-?\w+)\]", r"[:\1 + 1]"),
    (r"\[(-?\w+):\]", r"[\1 + 1:]"),
    (r"\blen\(([\w.]+)\)(?! [-+] 1\b)", r"len(\1) - 1"),
    (r"\brange\(([\w.()]+)\)", r"range(\1 + 1)"),
    (r"\[(i|j|k|n|idx|index|pos|start|end|offset)\]", r"[\1 + 1]"),
    (r"(?<![\w.])(\d{1,2})(?![\w.])", None),  # an integer literal n -> n + 1
)
#: An added line a repeat on another name could follow: a plain statement, no block opener.
_STATEMENT = re.compile(
    r"^\s*(?!(?:if|elif|else|for|while|with|try|except|finally|def|class|return|raise|yield|"
    r"import|from|pass|break|continue|assert|@|#)\b)\S.*[^:,(\[{\\]$"
)


_FOR_NOT_IN = re.compile(r"\bfor\s+[\w, ()\[\]]+?\s+not in\b")


def _one_edit(line: str, table: Sequence[tuple[str, str | None]]) -> Iterator[str]:
    """Each single rewrite of `line` by one entry of `table` (the first match of that entry)."""
    body, prefix = line[1:], line[:1]
    if body.lstrip().startswith("#"):
        return
    for pattern, repl in table:
        if repl is None:  # an integer literal of the code, never a digit inside a string
            m = re.search(pattern, _code_only(body))
            out = body[: m.start()] + str(int(m.group(1)) + 1) + body[m.end() :] if m else body
        else:
            out = re.sub(pattern, repl, body, count=1, flags=re.M)
        if out != body and not _FOR_NOT_IN.search(out):  # `for a, b not in x` is no Python
            yield prefix + out


def _with_hunk(files: Sequence[FilePatch], i: int, j: int, hunk: Hunk | None) -> list[FilePatch]:
    out = []
    for n, f in enumerate(files):
        hunks = [h for k, h in enumerate(f.hunks) if (n, k) != (i, j)] if hunk is None else []
        if hunk is not None:
            hunks = [hunk if (n, k) == (i, j) else h for k, h in enumerate(f.hunks)]
        if hunks:
            out.append(f._replace(hunks=tuple(hunks)))
    return out


def _line_edits(files: Sequence[FilePatch]) -> Iterator[tuple[str, list[FilePatch]]]:
    for i, f in enumerate(files):
        for j, h in enumerate(f.hunks):
            # only code is mutated: a changed comment or docstring line leaves the gold's behaviour
            added = [k for k, ln in enumerate(h.lines) if ln.startswith("+") and _does_something(ln[1:])]
            for kind, table in (("reverted_condition", _REVERT), ("off_by_one", _OFF_BY_ONE)):
                for k in added:
                    for mutated in _one_edit(h.lines[k], table):
                        lines = (*h.lines[:k], mutated, *h.lines[k + 1 :])
                        yield kind, _with_hunk(files, i, j, h._replace(lines=lines))
            if len(added) > 1:
                for k in (k for k in added if _does_something(h.lines[k][1:])):
                    yield (
                        "partial_fix",
                        _with_hunk(files, i, j, h._replace(lines=h.lines[:k] + h.lines[k + 1 :])),
                    )
            for k in added:
                for d in (-1, 1):
                    m = k + d
                    if 0 <= m < len(h.lines) and _movable(h.lines[m], h.lines[k]):
                        lines = list(h.lines)
                        lines[k], lines[m] = lines[m], lines[k]
                        yield "wrong_line", _with_hunk(files, i, j, h._replace(lines=tuple(lines)))
            for k, mutated in _wrong_names(h):
                yield (
                    "wrong_name",
                    _with_hunk(files, i, j, h._replace(lines=(*h.lines[:k], mutated, *h.lines[k + 1 :]))),
                )
                if _STATEMENT.match(h.lines[k][1:]) and h.lines[k][1:].count("(") == h.lines[k][1:].count(
                    ")"
                ):
                    lines = (*h.lines[: k + 1], mutated, *h.lines[k + 1 :])
                    yield "extra_name", _with_hunk(files, i, j, h._replace(lines=lines))
            for k in _dropped_lines(h.lines):
                lines = (*h.lines[:k], "-" + h.lines[k][1:], *h.lines[k + 1 :])
                yield "dropped_line", _with_hunk(files, i, j, h._replace(lines=lines))
            # an old import or docstring line kept changes nothing: only kept old code is wrong
            if any(ln[:1] == "-" for ln in h.lines) and added:  # noqa: SIM102
                if any(
                    _does_something(ln[1:]) and not _IMPORT.match(ln[1:]) for ln in h.lines if ln[:1] == "-"
                ):
                    if not _overridden(h.lines):
                        kept = tuple(" " + ln[1:] if ln[:1] == "-" else ln for ln in h.lines)
                    else:  # the old value kept after the new one: it wins, the fix has no effect
                        kept = _old_after_new(h.lines)
                    yield "kept_old_line", _with_hunk(files, i, j, h._replace(lines=kept))


def _overridden(lines: Sequence[str]) -> bool:
    """Every removed line that does something is an assignment an added line after it makes again
    (`x = old` kept before `x = new`): keeping the old lines changes nothing, the new value wins."""
    for k, ln in enumerate(lines):
        if ln[:1] != "-" or not _does_something(ln[1:]):
            continue
        names = _assigned(ln[1:])
        indent = len(ln[1:]) - len(ln[1:].lstrip())
        later = [m[1:] for m in lines[k + 1 :] if m[:1] == "+"]
        if (
            not names
            or "." in ln[1:].split("=", 1)[0]
            or not any(_assigned(m) == names and len(m) - len(m.lstrip()) == indent for m in later)
        ):
            return False
    return True


def _old_value_overridden(gold: Sequence[FilePatch], variant: Sequence[FilePatch]) -> bool:
    """A line the gold removes kept right before an added line assigning the same names again (at
    its indentation): the new value wins, the variant behaves as the gold."""
    removed = {ln[1:] for f in gold for h in f.hunks for ln in h.lines if ln[:1] == "-"}
    for f in variant:
        for h in f.hunks:
            for a, b in pairwise(h.lines):
                if a[:1] == " " and b[:1] == "+" and a[1:] in removed and (names := _assigned(a[1:])):
                    indent = len(a[1:]) - len(a[1:].lstrip())
                    if _assigned(b[1:]) == names and len(b[1:]) - len(b[1:].lstrip()) == indent:
                        return True
    return False


def _old_after_new(lines: Sequence[str]) -> tuple[str, ...]:
    """Each block of removed and added lines written as the added lines, then the removed ones kept."""
    out: list[str] = []
    block: list[str] = []
    for ln in [*lines, " "]:
        if ln[:1] in "+-":
            block.append(ln)
            continue
        out += [b for b in block if b[:1] == "+"] + [" " + b[1:] for b in block if b[:1] == "-"]
        block = []
        out.append(ln)
    return tuple(out[:-1])


def _dropped_lines(lines: Sequence[str]) -> Iterator[int]:
    """The context line right after each block of added lines, when removing it is a plausible slip:
    a statement of the block's own indentation (not a definition, a decorator or a blank)."""
    for k in range(1, len(lines)):
        if lines[k][:1] != " " or lines[k - 1][:1] != "+":
            continue
        start = k - 1
        while start > 0 and lines[start - 1][:1] == "+":
            start -= 1
        body, added = lines[k][1:], lines[start][1:]  # the block's own indentation: its first line's
        if not _does_something(body) or not _does_something(added):  # never docstring text or its quotes
            continue
        if re.match(r"\s*(?:def |class |@|#|else\b|elif\b|except\b|finally\b)", body):
            continue
        if len(body) - len(body.lstrip()) == len(added) - len(added.lstrip()):
            yield k


def _movable(context: str, added: str) -> bool:
    """A context line an added line can trade places with: a plain statement at the same indentation
    that one of the two lines reads a name of the other assigns (else the order does not matter:
    two imports, two independent calls, and the moved line is the gold again); never an import."""
    body = context[1:]
    if context[:1] != " " or not body.strip() or body.rstrip().endswith((":", ",", "(", "[", "{", "\\")):
        return False
    if re.match(r"\s*(?:else|elif|except|finally|return|raise|break|continue|@|def |class |#)", body):
        return False
    if _IMPORT.match(body) or _IMPORT.match(added[1:]):
        return False
    if len(body) - len(body.lstrip()) != len(added[1:]) - len(added[1:].lstrip()):
        return False
    return bool(
        _assigned(body) & set(_IDENT.findall(added[1:])) or _assigned(added[1:]) & set(_IDENT.findall(body))
    )


def _assigned(line: str) -> set[str]:
    """Names a statement assigns (`a, b = ...`, `a += ...`, `a.x = ...` assigns `a`'s state)."""
    m = re.match(r"\s*([\w.,\[\]'\" ]+?)\s*(?:[-+*/|&]?=)(?!=)", line)
    return {w.split(".")[0] for w in re.findall(r"[A-Za-z_][\w.]*", m.group(1))} if m else set()


_IMPORT = re.compile(r"\s*(?:import |from \S+ import )")


def _does_something(line: str) -> bool:
    """A line whose loss changes the code: not blank, not a comment, not docstring text (a bare
    string, or words with no sign of code)."""
    s = line.strip()
    if not s or s.startswith(("#", ">>>", "...")) or re.fullmatch(r"[rbuRBU]?(['\"]).*\1", s):
        return False  # a doctest line is docstring text too
    return (
        s.endswith(":")
        or re.search(r"[=()\[\]{}]|^(?:return|raise|yield|pass|break|continue|del|assert)\b", s) is not None
    )


#: Names no plausible wrong variable is: `self = [...]` for `names = [...]` reads as a typo, not a bug.
_NOT_VARIABLES = frozenset(dir(builtins)) | {"self", "cls"}
_IDENT = re.compile(r"\b[A-Za-z_]\w{2,}\b")


def _wrong_names(h: Hunk) -> Iterator[tuple[int, str]]:
    """An added line with the name it introduces swapped for another name of the hunk (the right
    change applied to the wrong variable): `[app_label, model_name]` -> `[app_label, field_name]`.
    In a pure insertion the names swapped are those the line shares with its context (what it acts on)."""
    removed = {w for ln in h.lines if ln[:1] == "-" for w in _IDENT.findall(ln[1:])}
    context = [w for ln in h.lines if ln[:1] == " " for w in _IDENT.findall(ln[1:])]
    for k, ln in enumerate(h.lines):
        if ln[:1] != "+" or not ln[1:].strip():
            continue
        words = _IDENT.findall(ln[1:])
        plain = [w for w in words if not keyword.iskeyword(w) and w not in _NOT_VARIABLES]
        new = [w for w in plain if w not in removed] if removed else [w for w in plain if w in context]
        for w in new[:2]:
            others = [
                c
                for c in dict.fromkeys(context)
                if c != w and c not in words and not keyword.iskeyword(c) and c not in _NOT_VARIABLES
            ]
            shaped = [c for c in others if ("_" in c) == ("_" in w) and c[:1].isupper() == w[:1].isupper()]
            for c in shaped[:2]:
                yield k, "+" + re.sub(rf"\b{re.escape(w)}\b", c, ln[1:], count=1)


def _relocated(f: FilePatch, h: Hunk, seen: dict[int, str]) -> Iterator[Hunk]:
    """The hunk's change applied elsewhere in the file's seen lines (see `wrong_location`)."""
    removed = [ln[1:] for ln in h.lines if ln[:1] == "-"]
    added = [ln for ln in h.lines if ln[:1] == "+"]
    first = next((k for k, ln in enumerate(h.lines) if ln[:1] in "-+"), 0)
    span = range(h.old_start - 3, h.old_start + len(h.pre_image) + 3)
    anchor = h.lines[first - 1][1:] if first > 0 else ""
    indent = len(anchor) - len(anchor.lstrip()) if anchor.strip() else None
    for p in sorted(seen):
        if p in span:
            continue
        if removed:
            if [seen.get(p + k) for k in range(len(removed))] != removed:
                continue
            stop = p + len(removed)
        else:
            line = seen.get(p - 1, "")
            if indent is None or not line.strip() or len(line) - len(line.lstrip()) != indent:
                continue
            # only after a line that ends a statement the way the gold's anchor does (`"""`, `:`, `)`)
            if line.rstrip()[-1:] != anchor.rstrip()[-1:] or line.rstrip().endswith((",", "(", "[", "{")):
                continue
            if line.strip() != anchor.strip() and re.match(r"\s*(?:def|class|@|#)", line):
                continue
            stop = p
        before = [seen.get(n) for n in range(p - 3, p)]
        after = [seen.get(n) for n in range(stop, stop + 3)]
        if any(x is None for x in before + after) or p - 3 < 1:
            continue
        lines = (
            *(" " + x for x in before if x is not None),
            *("-" + x for x in removed),
            *added,
            *(" " + x for x in after if x is not None),
        )
        section = _section_at(seen, p - 3)
        if section is None:
            continue  # its `@@` line would show no heading where the gold's may: a tell
        yield Hunk(p - 3, p - 3, section, lines)


#: The heading git's Python diff driver gives a hunk: the nearest `def` / `class` line above it.
_HEADING = re.compile(r"^[ \t]*((?:class|(?:async[ \t]+)?def)[ \t].*)$")


def _section_at(seen: dict[int, str], first: int) -> str | None:
    """The text after `@@ ... @@` of a hunk whose first line is `first` (git: the nearest heading
    line above it, cut to 80 bytes and right-stripped; none at the top of a file); None when the
    lines the run displayed do not reach such a line without a gap."""
    n = first - 1
    while n in seen:
        m = _HEADING.match(seen[n])
        if m:
            return " " + m.group(1).encode()[:80].decode(errors="ignore").rstrip()
        n -= 1
    return "" if n < 1 else None


def patch_mutations(
    files: Sequence[FilePatch], seen: dict[str, dict[int, str]], limit: int = 24
) -> list[tuple[str, str]]:
    """(kind, patch text) wrong variants of `files` (see the module docstring), at most `limit`, kinds interleaved."""
    gold = render_patch(files)
    by_kind: dict[str, list[list[FilePatch]]] = {}
    hunks = [(i, j) for i, f in enumerate(files) for j in range(len(f.hunks))]
    if len(hunks) > 1:
        # a hunk that only deletes, or only adds imports or comments, leaves a working fix when dropped
        by_kind["partial_fix"] = [
            _with_hunk(files, i, j, None)
            for i, j in hunks
            if any(
                ln[:1] == "+" and _does_something(ln[1:]) and not _IMPORT.match(ln[1:])
                for ln in files[i].hunks[j].lines
            )
        ]
    for kind, variant in _line_edits(files):
        by_kind.setdefault(kind, []).append(variant)
    # a reverted condition that adds a `not` first only when no other is left: else `not` itself
    # tells the distractors (a gold's own `not` dropped is as wrong)
    nots = _NOT.findall(gold)
    by_kind.get("reverted_condition", []).sort(key=lambda v: len(_NOT.findall(render_patch(v))) > len(nots))
    for i, f in enumerate(files):
        for j, h in enumerate(f.hunks):
            for moved in _relocated(f, h, seen.get(f.path, {})):
                by_kind.setdefault("wrong_location", []).append(_with_hunk(files, i, j, moved))
    singles = _interleave(by_kind)
    # doubles queue up base by base: a base and two doubles on it make a cluster whose centre is
    # the base, not the gold (the one option every single mutation is one edit away from)
    doubles = [("double", d) for _, base in singles[:8] for d in _doubles(base, gold)]
    out: dict[str, str] = {}
    windows: dict[Hunk, tuple[int, int] | None] = {}
    for n, (kind, variant) in enumerate(singles):
        pairs = [(kind, variant)] + ([doubles[n - 1]] if 0 < n <= len(doubles) else [])
        for k, v in pairs:
            text = render_patch(v) if v else ""
            if (
                v
                and text != gold
                and text not in out
                and not _breaks_syntax(files, v, windows)
                and not _old_value_overridden(files, v)
            ):
                out[text] = k
        if len(out) >= limit:
            break
    longer = [(kind, text) for text, kind in out.items() if len(text) > len(gold)]
    rest = [(kind, text) for text, kind in out.items() if len(text) <= len(gold)]
    return _balance_lines(
        [pair for row in zip_longest(longer, rest) for pair in row if pair is not None], gold
    )


#: How many context lines a parse check may leave out at either end of a hunk (a hunk cut inside a
#: call, a bracket or a docstring parses once its cut ends are left out).
_TRIM = 6


def _region(lines: Sequence[str], head: int, tail: int) -> str | None:
    """The new lines of a hunk (context and added) as a Python module: up to `head` / `tail` context
    lines left out at the ends (never an added one), dedented to their least indentation, each
    indentation the first line is deeper than opened by an `if True:` above it, a last line opening
    a block given a `pass` body; None when the ends to leave out are not context."""
    body = list(lines)
    # never leave out a change or the line next to one: there a variant breaks (an orphaned body)
    if (head and any(ln[:1] != " " for ln in body[:head])) or (
        tail and any(ln[:1] != " " for ln in body[-tail:])
    ):
        return None
    body = [ln[1:] for ln in body[head : len(body) - tail] if ln[:1] in " +"]
    code = [ln for ln in body if ln.strip()]
    if not code:
        return ""
    least = min(len(ln) - len(ln.lstrip()) for ln in code)
    body = [ln[least:] if ln.strip() else "" for ln in body]
    depth = len(code[0]) - len(code[0].lstrip()) - least
    levels = sorted({len(ln) - len(ln.lstrip()) for ln in body if ln.strip()} | {0})
    headers = [" " * n + "if True:" for n in levels if n < depth]
    last = next(ln for ln in reversed(body) if ln.strip())
    if _code_only(last).split("#", 1)[0].rstrip().endswith(":"):
        body.append(" " * (len(last) - len(last.lstrip()) + 4) + "pass")
    return "\n".join([*headers, *body])


def _parses(code: str | None) -> bool:
    if code is None:
        return False
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def parse_window(hunk: Hunk) -> tuple[int, int] | None:
    """The fewest context lines to leave out at the start and the end of `hunk` for its new lines to
    parse as Python (`_region`), or None when no such cut parses."""
    cuts = sorted(((a, b) for a in range(_TRIM + 1) for b in range(_TRIM + 1)), key=lambda ab: (sum(ab), ab))
    return next((ab for ab in cuts if _parses(_region(hunk.lines, *ab))), None)


def parses(hunk: Hunk, window: tuple[int, int] = (0, 0)) -> bool:
    """The hunk's new lines parse as Python with `window` context lines left out at its ends."""
    return _parses(_region(hunk.lines, *window))


def _breaks_syntax(
    gold: Sequence[FilePatch], variant: Sequence[FilePatch], windows: dict[Hunk, tuple[int, int] | None]
) -> bool:
    """A hunk of a Python file of `variant` that does not parse where the gold hunk it comes from
    (same file and start, or the same added lines moved elsewhere) does, both cut the same way
    (`parse_window` of the gold hunk, cached in `windows`)."""
    by_path = {f.path: f.hunks for f in gold}
    for f in variant:
        if not f.path.endswith(".py"):
            continue
        olds = by_path.get(f.path, ())
        for h in f.hunks:
            if h in olds:
                continue
            added = [ln for ln in h.lines if ln[:1] == "+"]
            source = next((g for g in olds if g.old_start == h.old_start), None) or next(
                (g for g in olds if [ln for ln in g.lines if ln[:1] == "+"] == added), None
            )
            if source is None:
                continue
            if source not in windows:
                windows[source] = parse_window(source)
            window = windows[source]
            if window is not None and not parses(h, window):
                return True
    return False


def _balance_lines(variants: list[tuple[str, str]], gold: str) -> list[tuple[str, str]]:
    """`variants` with those of fewer lines than the gold held back while they would outnumber
    those of more lines by two (a dropped hunk or line is the usual mutation; the gold must not
    be the option with the most lines)."""
    lines = gold.count("\n")
    out: list[tuple[str, str]] = []
    held: list[tuple[str, str]] = []
    fewer = more = 0
    for kind, text in variants:
        n = text.count("\n")
        if n < lines and fewer >= more + 1:
            held.append((kind, text))
            continue
        fewer, more = fewer + (n < lines), more + (n > lines)
        out.append((kind, text))
    return out + held


def _doubles(base: list[FilePatch], gold: str, most: int = 2) -> list[list[FilePatch]]:
    """Up to `most` variants of `base` with one more line edit (never the gold back; edits that
    add no `not` first, as for single reverted conditions)."""
    found: dict[str, list[FilePatch]] = {}
    seen = {gold, render_patch(base)}
    for kind, variant in _line_edits(base):
        text = render_patch(variant)
        if kind in _SECOND_EDITS and text not in seen and text not in found:
            found[text] = variant
            if len(found) >= 4 * most:
                break
    nots = len(_NOT.findall(render_patch(base)))
    ranked = sorted(found, key=lambda t: len(_NOT.findall(t)) > nots)
    return [found[t] for t in ranked[:most]]


_NOT = re.compile(r"\bnot\b")
#: The line edits a `double` adds on top of another variant.
_SECOND_EDITS = ("reverted_condition", "off_by_one", "wrong_name", "wrong_line", "extra_name", "dropped_line")


def _interleave(by_kind: dict[str, list[list[str]]] | dict[str, list[list[FilePatch]]]) -> list:
    """One variant of each kind in turn (the first of each kind, then the second of each...)."""
    depth = max((len(g) for g in by_kind.values()), default=0)
    return [(kind, g[d]) for d in range(depth) for kind, g in by_kind.items() if d < len(g)]


# --- reproduction scripts ---------------------------------------------------------------------

_SCRIPT_REVERT = _REVERT + ((r"\bassert not\b", "assert"), (r"\bassert (?!not\b)", "assert not "))


_BOILERPLATE = re.compile(
    r"__name__|settings\.configured|sys\.path|os\.environ|DJANGO_SETTINGS|django\.setup"
)


def _defines_used_name(lines: list[str], k: int) -> bool:
    """Line `k` assigns a name a later line uses."""
    m = re.match(r"\s*([A-Za-z_][\w, ]*?)\s*=(?!=)", lines[k])
    if m is None:
        return False
    names = [n.strip() for n in m.group(1).split(",") if n.strip()]
    rest = "\n".join(lines[k + 1 :])
    return any(re.search(rf"\b{re.escape(n)}\b", rest) for n in names)


def _statements(lines: list[str]) -> list[int]:
    """Indexes of single-line statements a reproduction could lose (not imports, prints, defs, blanks)."""
    out = []
    for k, ln in enumerate(lines):
        s = ln.strip()
        if not s or s.startswith(
            (
                "#",
                "import ",
                "from ",
                "print(",
                "def ",
                "class ",
                "@",
                "if ",
                "else",
                "try",
                "except",
                "return",
            )
        ):
            continue
        if s.endswith((":", "(", "[", "{", ",", "\\")) or s.startswith((")", "]", "}")):
            continue
        if _BOILERPLATE.search(s) or re.match(r"(?:traceback|logging|logger|log)\.", s):
            continue  # dropping the setup crashes the script, dropping a traceback print changes nothing
        out.append(k)
    return out


def script_mutations(text: str, limit: int = 18, issue: str = "") -> list[tuple[str, str]]:
    """(kind, script) wrong variants of a reproduction script: check reverted, input off by one, a statement dropped."""
    lines = text.split("\n")
    singles: list[tuple[str, list[str]]] = []
    # the check that tells the bug comes last in a reproduction; setup guards are not it
    for kind, table in (("reverted_check", _SCRIPT_REVERT), ("changed_input", _OFF_BY_ONE[-1:])):
        for k in reversed(range(len(lines))):
            ln = lines[k]
            if kind == "reverted_check" and (
                not re.match(r"\s*(?:if|elif|assert|while)\b|.*\breturn\b", ln) or _BOILERPLATE.search(ln)
            ):
                continue
            if kind == "changed_input" and (
                ln.lstrip().startswith(("print", "#"))
                or _BOILERPLATE.search(ln)
                or not _CHECKED_NUMBER.search(_code_only(ln))
            ):
                continue
            for mutated in _one_edit(" " + ln, table):
                singles.append((kind, [*lines[:k], mutated[1:], *lines[k + 1 :]]))
                break
    singles += [("changed_input", v) for v in _swapped_literals(lines, issue)]
    singles += list(_argument_edits(lines))
    singles += [("wrong_name", v) for v in _checked_names(lines)]
    statements = _statements(lines)
    for k, m in pairwise(statements):  # two steps in the other order, when the order matters
        indent = len(lines[k]) - len(lines[k].lstrip())
        if m == k + 1 and len(lines[m]) - len(lines[m].lstrip()) == indent and _order_matters(lines, k):
            singles.append(("swapped_steps", [*lines[:k], lines[m], lines[k], *lines[m + 1 :]]))
    # a dropped statement must not leave a name undefined (a NameError is no plausible test)
    statements = [k for k in statements if not _defines_used_name(lines, k)]
    by_kind: dict[str, list[list[str]]] = {}
    for kind, v in singles:
        by_kind.setdefault(kind, []).append(v)
    if not any(re.match(r"\s*(?:if|elif|assert)\b", ln) for ln in lines):  # the prints are the checks
        prints = [
            k for k, ln in enumerate(lines) if ln.strip().startswith("print(") and ln.strip().endswith(")")
        ]
        statements += prints if len(prints) >= 3 else []
        for k in prints:
            for mutated in _one_edit(" " + lines[k], ((r"\(([\w.]+), ([\w.]+)\)", r"(\2, \1)"),)):
                by_kind.setdefault("swapped_args", []).append([*lines[:k], mutated[1:], *lines[k + 1 :]])
    # variants that keep every token first: a dropped statement makes the gold the longest option
    ordered = _interleave(by_kind) + [("dropped_step", [*lines[:k], *lines[k + 1 :]]) for k in statements]
    # doubles queue up base by base (two one-line edits on different lines combined), so a base and
    # two doubles on it make a cluster whose centre is the base, not the gold
    doubles = _script_doubles([v for _, v in ordered], lines)
    out: dict[str, str] = {}
    for n, (kind, v) in enumerate(ordered):
        extra = doubles[n - 1] if 0 < n <= len(doubles) else (_second(v, lines) if n % 2 else None)
        for candidate_kind, candidate in [(kind, v), ("double", extra)]:
            if candidate is None:
                continue
            joined = "\n".join(candidate)
            if joined != text and joined not in out:
                out[joined] = candidate_kind
        if len(out) >= limit:
            break
    return [(kind, t) for t, kind in out.items()]


#: Where a number is what the script checks: a check line, an `expected` value, an index. Any
#: other number is an input that rarely matters (`Text(0, 0, ...)` -> `Text(1, 0, ...)` still shows the bug).
_CHECKED_NUMBER = re.compile(r"^\s*(?:if|elif|assert|while)\b.*\d|^\s*\w*expect\w*\s*=.*\d|\[\d{1,2}\]", re.I)
_LITERAL = re.compile(r"""(['"])([^'"\n\\]{2,60})\1""")


def _swapped_literals(lines: list[str], issue: str = "", most: int = 4) -> Iterator[list[str]]:
    """A string argument of a call replaced by another string of the script of the same shape
    (`order_by("record__root_id")` -> `order_by("record__root__id")`, the input that works): the
    script then no longer exercises what the issue describes. A string the issue names is replaced
    only by another one it names (else the gold is the option closest to the issue). Never in
    prints, comments, imports or setup boilerplate."""

    def usable(ln: str) -> bool:
        s = ln.strip()
        return (
            "(" in s and not s.startswith(("print", "#", "import ", "from ")) and not _BOILERPLATE.search(s)
        )

    pool = list(dict.fromkeys(m.group(2) for ln in lines if usable(ln) for m in _LITERAL.finditer(ln)))
    made = 0
    for k in reversed(range(len(lines))):  # the call that triggers the bug comes last
        if not usable(lines[k]):
            continue
        for m in _LITERAL.finditer(lines[k]):
            old = m.group(2)
            shaped = [
                x
                for x in pool
                if x != old and ("__" in x) == ("__" in old) and x.isidentifier() == old.isidentifier()
            ]
            if shaped:
                new = lines[k][: m.start(2)] + shaped[0] + lines[k][m.end(2) :]
                yield [*lines[:k], new, *lines[k + 1 :]]
                made += 1
                break
        if made >= most:
            return


_FLAG = re.compile(r"\b(\w+)=(True|False)\b")
_TWO_ARGS = re.compile(r"(?<=\w)\(([\w.]+(?:\([^()]*\))?), ([\w.]+(?:\([^()]*\))?)(?=[,)])")


def _argument_edits(lines: list[str]) -> Iterator[tuple[str, list[str]]]:
    """The call that triggers the bug made another way: a flag argument flipped (`can_delete=True`
    -> `can_delete=False`, `changed_input`) or its first two arguments exchanged (`Mul(Max(0, y), x)`
    -> `Mul(x, Max(0, y))`, `swapped_args`). A flag on a line of its own inside a call spread over
    lines counts. Never in imports, checks or setup boilerplate, nor in prints, unless the script
    makes its calls only inside prints (`print(Mul(Max(0, y), x, evaluate=False).evalf())`): then
    the call a print makes, never the print's own arguments."""
    inside, depth = [], 0  # open brackets before a line: a line inside a call is arguments, no assignment
    for line in lines:
        inside.append(depth > 0)
        depth = max(0, depth + _brackets(_code_only(line)))
    made = list(_call_edits(lines, inside, prints=False))
    yield from made or _call_edits(lines, inside, prints=True)


def _call_edits(lines: list[str], inside: list[bool], prints: bool) -> Iterator[tuple[str, list[str]]]:
    for k in reversed(range(len(lines))):  # the call that triggers the bug comes last
        line = lines[k]
        s = line.strip()
        if not s or s.startswith(("#", "import ", "from ", "if ", "elif ", "assert ", "def ", "class ")):
            continue  # a definition's parameters swapped is no other call
        if _BOILERPLATE.search(s) or "settings" in s:
            continue
        start = 0
        if s.startswith("print"):  # only a call inside the print: its own arguments change nothing
            inner = re.match(r"\s*print\((?=[\w.]+\()", line) if prints else None
            if inner is None:
                continue
            start = inner.end()
        assigns = not inside[k] and re.match(r"\s*[A-Za-z_][\w, ]*=(?!=)", line) is not None
        flag = _FLAG.search(line, start) if not assigns or _defines_used_name(lines, k) else None
        if flag is not None and flag.group(1) not in _PRINT_FLAGS:  # an unused value's flag changes nothing
            flipped = "False" if flag.group(2) == "True" else "True"
            new = line[: flag.start(2)] + flipped + line[flag.end(2) :]
            yield "changed_input", [*lines[:k], new, *lines[k + 1 :]]
        else:
            positional = _BOOL_ARG.search(_code_only(line), start)  # `t.set_antialiased(True)`
            if positional is not None:
                flipped = "False" if positional.group(1) == "True" else "True"
                new = line[: positional.start(1)] + flipped + line[positional.end(1) :]
                yield "changed_input", [*lines[:k], new, *lines[k + 1 :]]
        two = _TWO_ARGS.search(line, start) or _NEXT_ARGS.search(_code_only(line), start)
        if two is not None and line[two.start(1) : two.end(1)] != line[two.start(2) : two.end(2)]:
            a, b = line[two.start(1) : two.end(1)], line[two.start(2) : two.end(2)]
            new = line[: two.start(1)] + b + line[two.end(1) : two.start(2)] + a + line[two.end(2) :]
            yield "swapped_args", [*lines[:k], new, *lines[k + 1 :]]
        unwrapped = _WRAPPED.match(line)
        if unwrapped is not None and _defines_used_name(lines, k):  # the raw value, not the one made of it
            new = line[: unwrapped.start(2)] + unwrapped.group(3) + line[unwrapped.end(2) :]
            yield "changed_input", [*lines[:k], new, *lines[k + 1 :]]


#: A positional True/False argument of a call (never a keyword's, `_FLAG` flips those).
_BOOL_ARG = re.compile(r"(?<=[(,\s])(?<!=\s)(True|False)(?=\s*[,)])")
#: Two adjacent plain arguments after the first (`where(cond, 1, 0, ...)` -> `where(cond, 0, 1, ...)`).
_NEXT_ARGS = re.compile(r"(?<=, )([\w.]+), ([\w.]+)(?=\s*[,)])")
#: `name = helper('literal')`: a value made by a lowercase helper (`_('DATE_FORMAT')`, a lazy string).
_WRAPPED = re.compile(r"""^\s*([a-z_]\w*)\s*=\s*([a-z_][\w.]*\((['"][^'"\n]{1,60}['"])\))\s*$""")

#: Flags of a print or a logger, whose value changes no behaviour the script checks.
_PRINT_FLAGS = frozenset({"flush", "end", "sep", "file", "exc_info", "stack_info"})


def _brackets(code: str) -> int:
    """Opened minus closed brackets of a line's code."""
    return sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")


def _script_doubles(variants: list[list[str]], lines: list[str], bases: int = 6) -> list[list[str]]:
    """Up to two doubles for each of the first `bases` one-line edits: the base's edit and another
    one-line edit of a different line, applied together."""

    def edited(v: list[str]) -> int | None:
        diff = [k for k in range(len(lines)) if len(v) == len(lines) and v[k] != lines[k]]
        return diff[0] if len(diff) == 1 else None

    one_line = [(k, v) for v in variants if (k := edited(v)) is not None]
    out: list[list[str]] = []
    for k, base in one_line[:bases]:
        partners = [(m, w) for m, w in one_line if m != k][:2]
        out += [[w[m] if j == m else line for j, line in enumerate(base)] for m, w in partners]
    return out


def _checked_names(lines: list[str], most: int = 4) -> Iterator[list[str]]:
    """A check or print that looks at another variable of the script (the input, not the result:
    `print(f"Result: {result}")` -> `print(f"Result: {pattern}")`), the last checks first. Only
    variables (`x = ...` statements, not `x=` keyword arguments), never a word of a message."""
    statements = [ln for ln in lines if re.match(r"\s*[A-Za-z_][\w, ]*\s=\s", ln)]
    assigned = list(
        dict.fromkeys(n for ln in statements for n in sorted(_assigned(ln)) if n not in _NOT_VARIABLES)
    )
    made = 0
    for k in reversed(range(len(lines))):
        s = lines[k].strip()
        if not s.startswith(("print(", "if ", "elif ", "assert ")) or _BOILERPLATE.search(s):
            continue
        code = _code_only(lines[k])
        used = [w for w in dict.fromkeys(_IDENT.findall(code)) if w in assigned]
        others = [n for n in assigned if n not in used and ("_" in n) == ("_" in used[0])] if used else []
        at = re.search(rf"\b{re.escape(used[0])}\b", code) if others else None
        if at is not None:
            new = lines[k][: at.start()] + others[-1] + lines[k][at.end() :]
            yield [*lines[:k], new, *lines[k + 1 :]]
            made += 1
            if made >= most:
                return


_STRING = re.compile(r"""([rbfuRBFU]{0,2})(['"])((?:\\.|(?!\2).)*)\2""")


def _code_only(line: str) -> str:
    """`line` with the text of its string literals blanked (same length; an f-string's `{...}`
    fields kept): a name or a digit in a message is not code."""
    out = list(line)
    for m in _STRING.finditer(line):
        fields = "f" in m.group(1).lower()
        depth = 0
        for i in range(m.start(3), m.end(3)):
            c = line[i]
            depth += (c == "{") - (c == "}") if fields else 0
            if not (fields and (depth > 0 or c == "}")):
                out[i] = " "
    return "".join(out)


def _order_matters(lines: list[str], k: int) -> bool:
    """Lines `k` and `k + 1` read what the other reassigns (a name also assigned before `k`): in the
    other order the second reads the old value. Independent steps swapped are the same script, and a
    name read before its first assignment is a NameError, no plausible test."""
    earlier = set().union(*(_assigned(ln) for ln in lines[:k])) if k else set()
    first, second = lines[k], lines[k + 1]
    reads = lambda ln: set(_IDENT.findall(ln.split("=", 1)[-1]))  # noqa: E731
    return bool((_assigned(first) & reads(second) & earlier) or (_assigned(second) & reads(first) & earlier))


def _second(v: list[str], original: list[str]) -> list[str] | None:
    """A second, different edit on top of variant `v` (a reverted check or a changed input)."""
    for k, ln in enumerate(v):
        if k < len(original) and ln != original[k]:
            continue
        if re.match(r"\s*(?:if|elif|assert)\b", ln) and not _BOILERPLATE.search(ln):  # never a setup guard
            for mutated in _one_edit(" " + ln, _SCRIPT_REVERT):
                return [*v[:k], mutated[1:], *v[k + 1 :]]
    return None
