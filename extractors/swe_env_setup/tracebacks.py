"""What an error is: its exception type plus the module, file or symbol it names (helpers of `error`).

Two failures are the same error when their identities are equal, not when their last lines are:
`ModuleNotFoundError: No module named 'datasets'` is (`ModuleNotFoundError`, `datasets`) wherever
it is raised; a `NameError` or `AttributeError` is its type plus the symbol plus the innermost
repository file of the traceback, so the same message raised from another file is another error.
The traceback's frames also give what an item may mention: the repository files it passes
through (with the source lines shown) and the installed packages (`site-packages/<pkg>/`).
Non-Python errors (`npm ERR!`, `ERROR: Could not find a version`) keep their first error line.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from extractors.shell.commands import error_line

_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (\S+))?\s*\n(?:\s{3,}(\S[^\n]*)\n)?', re.M)
_EXC_LINE = re.compile(
    r"^[ \t]*(\w+(?:\.\w+)*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(.*))?$", re.M
)
_QUOTED = re.compile(r"""['"]([^'"]+)['"]""")
_SITE = re.compile(r"(?:site|dist)-packages/([A-Za-z0-9_.-]+)")
_NOTEBOOK_ROOT = re.compile(r"^/content/")
_PIP_NAME = re.compile(
    r"(?:version that satisfies the requirement|distribution found for|from versions: none\) for)\s+([A-Za-z0-9_.\-\[\]=<>!~]+)"
)


#: Error types whose subject is a module that is not installed.
MISSING_MODULE = frozenset({"ModuleNotFoundError", "ImportError", "MODULE_NOT_FOUND"})
#: Error types of Python itself (the rest are tools' error tags: `npm`, `ERROR`, `E` ...).
_PYTHON = re.compile(r"^\w*(?:Error|Exception|Exit|Interrupt|Warning)$")


def is_tool_error(err: ErrorId) -> bool:
    """An error a tool printed (npm, pip, apt, a Dockerfile build), not a Python exception."""
    return not _PYTHON.match(err.type) and err.type not in MISSING_MODULE


class Frame(NamedTuple):
    """One traceback frame."""

    path: str
    """The file as printed (absolute)."""
    line: int
    function: str
    source: str
    """The source line shown under the frame ('' when none)."""


class ErrorId(NamedTuple):
    """An error's identity and what its traceback names."""

    type: str
    """Exception type (`ModuleNotFoundError`), or the tool's error tag (`npm ERR!`, `ERROR:`)."""
    subject: str
    """The module, path or symbol the message names, else the message itself."""
    where: str
    """Innermost repository file of the traceback ('' when none), for symbol errors."""
    message: str
    """The whole exception line."""
    frames: tuple[Frame, ...]
    """Frames of the last traceback, outermost first."""

    @property
    def key(self) -> tuple[str, str, str]:
        """What two failures share when they are the same error."""
        return (self.type, self.subject, self.where)

    def repo_files(self, root: str = "") -> list[str]:
        """Repository files of the traceback (innermost first), relative to the notebook root."""
        out = [relative(f.path, root) for f in reversed(self.frames) if not _SITE.search(f.path)]
        return [
            p for p in dict.fromkeys(out) if p and not p.startswith(("<", "/")) and "/lib/python" not in p
        ]

    def packages(self) -> list[str]:
        """Installed packages the traceback passes through, plus the module or package the message names."""
        named = [self.subject.split(".")[0]] if self.type in MISSING_MODULE else []
        if self.type == "pip" and self.subject:
            named.append(re.split(r"[=<>!~\[]", self.subject)[0])
        seen = [m.group(1).split(".")[0] for f in reversed(self.frames) if (m := _SITE.search(f.path))]
        return [p for p in dict.fromkeys(named + seen) if p and not p.endswith((".py", ".so"))]


def relative(path: str, root: str = "") -> str:
    """A traceback path as the repository sees it (`/content/<repo>/x/y.py` -> `x/y.py` under the repo)."""
    p = _NOTEBOOK_ROOT.sub("", path)
    if root and p.startswith(root.rstrip("/") + "/"):
        p = p[len(root.rstrip("/")) + 1 :]
    return p


def frames_of(output: str) -> tuple[Frame, ...]:
    """Frames of the last traceback in an output."""
    start = output.rfind("Traceback (most recent call last)")
    text = output[start:] if start >= 0 else output
    return tuple(
        Frame(m.group(1), int(m.group(2)), m.group(3) or "", (m.group(4) or "").strip())
        for m in _FRAME.finditer(text)
    )


def _subject(kind: str, message: str) -> str:
    quoted = _QUOTED.findall(message)
    if kind in {"ModuleNotFoundError", "ImportError"}:
        m = re.search(r"cannot import name '([^']+)' from '([^']+)'", message)
        if m:
            return f"{m.group(2)}.{m.group(1)}"
        m = re.search(r"No module named '([^']+)'", message)
        if m:
            return m.group(1)
        m = re.search(r"requires `([A-Za-z0-9_.\-]+)", message) or re.search(
            r"pip install (?:-U )?([A-Za-z0-9_.\-]+)", message
        )
        if m:
            return m.group(1)
        return quoted[0] if quoted and re.fullmatch(r"[\w.]+", quoted[0]) else message
    if kind in {"FileNotFoundError", "NotADirectoryError", "IsADirectoryError", "PermissionError"}:
        return quoted[-1] if quoted else message
    if kind in {"NameError", "AttributeError", "KeyError", "UnboundLocalError"}:
        return " ".join(quoted[:2]) if quoted else message
    return re.sub(r"\d+(?:\.\d+)?", "N", message)[:160]


def identify(output: str | None) -> ErrorId | None:
    """The identity of the error an output ends in (None when it shows none)."""
    if not output:
        return None
    matches = list(_EXC_LINE.finditer(output))
    frames = frames_of(output)
    if matches:
        m = matches[-1]
        kind, message = m.group(1).rsplit(".", 1)[-1], (m.group(2) or "").strip()
        subject = _subject(kind, message)
        where = ""
        if kind not in {"ModuleNotFoundError", "ImportError", "FileNotFoundError"}:
            inner = [relative(f.path) for f in reversed(frames) if not _SITE.search(f.path)]
            inner = [p for p in inner if not p.startswith(("<", "/")) and "/lib/python" not in p]
            where = inner[0] if inner else ""
        return ErrorId(kind, subject, where, m.group(0).strip(), frames)
    js = re.search(r"Cannot find module '([^']+)'", output)
    if js:
        return ErrorId("MODULE_NOT_FOUND", js.group(1), "", js.group(0), ())
    line = error_line(output)
    if not line:
        return None
    pip = _PIP_NAME.search(output)
    if pip:
        return ErrorId("pip", pip.group(1), "", line, ())
    tag = re.split(r"[:\s]", line, maxsplit=1)[0][:40]
    return ErrorId(tag, re.sub(r"\d+(?:\.\d+)?", "N", line)[:160], "", line, frames)


def same_error(a: ErrorId | None, output: str | None) -> bool:
    """Does `output` still show the error `a`?"""
    if a is None:
        return False
    b = identify(output)
    return b is not None and b.key == a.key
