"""What a file-viewing command showed: the (path, line number -> text) window it printed.

Shared by every SWE format, since all of them view files through a shell or an editor tool:
- numbered listings: `str_replace_editor view [--view_range a b]` and OpenHands `read`
  (`Here's the result of running `cat -n` on <path>:`), `cat -n f`, `nl -ba f` (also piped through
  `sed -n 'a,bp'`, `grep`, `head`, `tail`: every printed line carries its own number);
- unnumbered ranges: `sed -n 'a,bp' f` (`'ap'`, `'a,+np'`), `head [-n N] f`, `tail -n +K f`, `cat f`;
- `grep -n ... f` (one file: `N:text` matches, `N-text` context lines) and `grep -rn` (`path:N:text`);
- SWE-agent 0.x `open`/`goto` windows (`[File: p (n lines total)]` then `N:text`).
A leading `cd dir &&` is allowed; any other compound command is not a view. Outputs cut by the
agent (`<output_head>`/`<output_tail>`) or by a reader (`[... N characters omitted ...]`) keep only
the lines that are certainly whole. Whether the file was still original is the caller's business.
"""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

_NUMBERED = re.compile(r"^\s*(\d+)\t(.*)$")
_OPEN_LINE = re.compile(r"^(\d+):(.*)$")
_OPEN_HEAD = re.compile(r"^\[File: (\S+) \(\d+ lines total\)\]")
_EDITOR = re.compile(r"Here's the result of running `cat -n` on (\S+?):?\n")
_SED_RANGE = re.compile(r"^(\d+)(?:,(\+?)(\d+))?p$")
_GREP_LINE = re.compile(r"^(\d+)([:-])(.*)$")
_GREP_PATH_LINE = re.compile(r"^(.+?\.[A-Za-z0-9_]+)([:-])(\d+)\2(.*)$")
_OMITTED = re.compile(r"\n?\[\.\.\. \d+ characters omitted \.\.\.\]\n?")
_FILTERS = {"sed", "grep", "head", "tail", "cut"}


class View(NamedTuple):
    """Lines of one file a command printed, by their line number in that file."""

    path: str
    lines: dict[int, str]


def output_parts(observation: str) -> list[str]:
    """The command output inside the observation, as pieces that are each contiguous text.

    mini-swe-agent wraps output in `<output>` (or `<output_head>` + `<output_tail>` when long);
    readers cut long observations around `[... N characters omitted ...]`. Each piece but the
    first loses its first line and each but the last its last line (they may be cut mid-line).
    """
    text = observation
    if "<output_head>" in text:
        head = text.split("<output_head>", 1)[1].split("</output_head>", 1)[0]
        tail = (
            text.split("<output_tail>", 1)[1].split("</output_tail>", 1)[0] if "<output_tail>" in text else ""
        )
        pieces = [head, tail]
    else:
        if "<output>" in text:
            text = text.split("<output>", 1)[1].rsplit("</output>", 1)[0]
        pieces = _OMITTED.split(text)
    out: list[str] = []
    for i, piece in enumerate(pieces):
        piece = piece.removeprefix("\n")
        lines = piece.split("\n")
        if lines and lines[-1] == "" and i == len(pieces) - 1:
            lines = lines[:-1]
        if i > 0:
            lines = lines[1:]
        if i < len(pieces) - 1:
            lines = lines[:-1]
        out.append("\n".join(lines) if lines else "")
    return out


def _tokens(command: str) -> list[list[list[str]]] | None:
    """`cmd1 | cmd2 && cmd3` -> [[cmd1, cmd2], [cmd3]] (commands as word lists); None if unparsable."""
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars="|&;<>")
        lex.whitespace_split = True
        toks = list(lex)
    except ValueError:
        return None
    chains: list[list[list[str]]] = [[[]]]
    for t in toks:
        if t in ("&&", ";"):
            chains.append([[]])
        elif t == "|":
            chains[-1].append([])
        elif set(t) <= set("|&;<>"):
            return None  # redirections, background jobs, `||`: not a plain view
        else:
            chains[-1][-1].append(t)
    return chains


def _pipeline(command: str) -> list[list[str]] | None:
    chains = _tokens(command.strip())
    if not chains:
        return None
    while len(chains) > 1 and chains[0] and len(chains[0]) == 1 and chains[0][0][:1] == ["cd"]:
        chains = chains[1:]
    if len(chains) != 1 or any(not c for c in chains[0]):
        return None
    return chains[0]


def _files(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


def _numbered(lines: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for ln in lines:
        if (m := _NUMBERED.match(ln)) is not None:
            out[int(m.group(1))] = m.group(2)
    return out


def _sed_range(script: str) -> tuple[int, int | None] | None:
    m = _SED_RANGE.match(script.strip())
    if m is None:
        return None
    start = int(m.group(1))
    if m.group(3) is None:
        return start, start
    end = int(m.group(3))
    return start, (start + end if m.group(2) else end)


def _from(start: int, parts: list[str], end: int | None = None) -> dict[int, str]:
    """Unnumbered output starting at line `start` (only the first, uncut piece is trusted)."""
    if not parts:
        return {}
    lines = parts[0].split("\n") if parts[0] else []
    out = {start + i: ln for i, ln in enumerate(lines)}
    if end is not None:
        out = {n: t for n, t in out.items() if n <= end}
    return out


def _head_count(args: list[str]) -> int | None:
    n: int | None = 10
    for i, a in enumerate(args):
        if a == "-n" and i + 1 < len(args) and args[i + 1].isdigit():
            n = int(args[i + 1])
        elif re.fullmatch(r"-n?\d+", a):
            n = int(a.lstrip("-n"))
        elif a.startswith("-") and a not in ("-n",) and not a[1:].isdigit():
            return None
    return n


def _grep(args: list[str], parts: list[str]) -> View | None:
    opts = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    plain = [a for a in args if not a.startswith("-")]
    if "n" not in opts or any(c in opts for c in "ovlLcH") or len(plain) < 2:
        return None
    # option values (-A 3, -C 5, -e pat) were counted as plain words: drop the numbers after -A/-B/-C
    words: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-A", "-B", "-C", "-m", "-e"):
            skip = True
            continue
        if not a.startswith("-"):
            words.append(a)
    if len(words) < 2:
        return None
    files = words[1:]
    recursive = "r" in opts or "R" in opts or len(files) > 1
    lines = "\n".join(p for p in parts if p).split("\n")
    found: dict[str, dict[int, str]] = {}
    for ln in lines:
        if ln == "--":
            continue
        if recursive:
            m = _GREP_PATH_LINE.match(ln)
            if m is not None:
                found.setdefault(m.group(1), {})[int(m.group(3))] = m.group(4)
        elif (m := _GREP_LINE.match(ln)) is not None:
            found.setdefault(files[0], {})[int(m.group(1))] = m.group(3)
    if len(found) != 1:
        return None  # several files: one view per file is all a caller handles
    path, got = next(iter(found.items()))
    return View(path, got)


def parse_view(command: str, observation: str | None) -> View | None:
    """The file window a view command printed, or None when `command` is no view or showed nothing."""
    if not observation:
        return None
    m = _EDITOR.search(observation)
    if m is not None and not observation.lstrip().startswith("The file"):
        lines = _numbered(observation[m.end() :].split("\n"))
        return View(m.group(1), lines) if lines else None
    head = _OPEN_HEAD.match(observation)
    if head is not None:
        lines = {
            int(x.group(1)): x.group(2) for ln in observation.split("\n")[1:] if (x := _OPEN_LINE.match(ln))
        }
        return View(head.group(1), lines) if lines else None
    pipeline = _pipeline(command)
    if pipeline is None:
        return None
    if "<returncode>" in observation and not observation.startswith("<returncode>0<"):
        return None
    first, rest = pipeline[0], pipeline[1:]
    if any(c[0] not in _FILTERS for c in rest):
        return None
    parts = output_parts(observation)
    name, args = first[0], first[1:]
    files = _files(args)
    if name in ("nl", "cat") and len(files) == 1 and ((name == "cat" and "-n" in args) or name == "nl"):
        if name == "nl" and not any(a in ("-ba", "-b", "a") or a.startswith("-ba") for a in args):
            return None  # plain `nl` skips blank lines: its numbers are not file lines
        lines = _numbered("\n".join(parts).split("\n"))
        return View(files[0], lines) if lines else None
    if rest and not (len(rest) == 1 and rest[0][0] == "head" and name == "sed"):
        return None
    if name == "sed" and len(args) == 3 and args[0] == "-n":
        rng = _sed_range(args[1])
        if rng is None:
            return None
        cap = _head_count(rest[0][1:]) if rest else None
        end = rng[1] if cap is None else min(rng[1] or 10**9, rng[0] + cap - 1)
        lines = _from(rng[0], parts, end)
        return View(args[2], lines) if lines else None
    if name == "head" and args and not args[-1].startswith("-") and (len(args) == 1 or args[-2] != "-n"):
        n = _head_count(args[:-1])
        if n is None:
            return None
        lines = _from(1, parts, n)
        return View(args[-1], lines) if lines else None
    if (
        name == "tail"
        and len(args) == 3
        and args[0] == "-n"
        and args[1].startswith("+")
        and args[1][1:].isdigit()
    ):
        lines = _from(int(args[1][1:]), parts)
        return View(args[2], lines) if lines else None
    if name == "cat" and len(args) == 1 and not args[0].startswith("-"):
        lines = _from(1, parts)
        return View(args[0], lines) if lines else None
    if name == "grep":
        return _grep(args, parts)
    return None


_WRITERS = re.compile(
    r"\bsed\s+-i|>>?|\btee\b|\bpatch\b|git\s+(?:apply|am|checkout|restore|stash|reset)|\bmv\b|\bcp\b|\brm\b|\bperl\s+-[a-z]*i"
)
_PY_WRITE = re.compile(r"\.write(?:_text|lines)?\(|open\([^)]*['\"][wa]\+?['\"]|fileinput")


def may_write(command: str, script_texts: dict[str, str] | None = None) -> str:
    """The text whose file names a command may have changed ('' when it changes no file).

    Shell writers (`sed -i`, redirections, `tee`, `patch`, `git apply/checkout/stash`, `mv`, `cp`)
    and Python that writes (`-c`/heredoc code, or a script the run created, `script_texts` by
    name) count; the caller matches file names against the returned text. A heredoc's body counts
    only when Python runs it (`cat <<EOF > f` writes `f`, not the files its text mentions).
    Conservative otherwise: a command that mentions a file while writing elsewhere also counts.
    """
    first, _, body = command.partition("\n")
    if "<<" in first:
        if re.search(r"\bpython3?\b", first) and _PY_WRITE.search(body):
            return command
        return first if _WRITERS.search(first) else ""
    if _WRITERS.search(command):
        return command
    if re.search(r"\bpython3?\b", command):
        if _PY_WRITE.search(command):
            return command
        for name, text in (script_texts or {}).items():
            ran = re.search(rf"\bpython3?\s+(?:-\w+\s+)*\S*{re.escape(name)}\b", command)
            if ran and _PY_WRITE.search(text):
                return text
    return ""


def heredoc_file(command: str) -> tuple[str, str] | None:
    """(path, text) of a file written by `cat <<'EOF' > path` ... `EOF` (mini-swe-agent's create)."""
    first, _, body = command.partition("\n")
    m = re.match(r"^\s*(?:cd \S+ && )?cat\s+<<-?\s*(['\"]?)(\w+)\1\s*>\s*(\S+)\s*$", first)
    if m is None:
        return None
    end = m.group(2)
    lines = body.split("\n")
    if end not in (ln.strip() for ln in lines):
        return None
    text = "\n".join(lines[: [ln.strip() for ln in lines].index(end)])
    return m.group(3), text + "\n"
