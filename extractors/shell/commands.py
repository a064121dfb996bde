"""Shell-command analysis shared by the env-setup adapters and the `swe_env_setup` extractor.

Pure functions over command strings and their printed output: notebook cell normalisation
(`!cmd` -> `cmd`, `%cd x` -> `cd x`, `\\` continuations joined), read-only and placeholder
detection, failure inference for sources without exit codes, the error line of an output, the
identity of an invocation (`python -m colbert.train`), and a plain-English description of a step.
"""

from __future__ import annotations

import functools
import re
import shlex
from typing import NamedTuple

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]")
_CONT = re.compile(r"[ \t]*\\[ \t]*\r?\n[ \t]*")
_WS = re.compile(r"\s+")
_MAGIC = {
    "cd": "cd",
    "ls": "ls",
    "mkdir": "mkdir",
    "pip": "pip",
    "conda": "conda",
    "cat": "cat",
    "pwd": "pwd",
    "rm": "rm",
    "cp": "cp",
    "mv": "mv",
    "env": "export",
    "set_env": "export",
}


class CellCommands(NamedTuple):
    """A notebook cell read as shell commands (`kind == "shell"`), Python code, or nothing."""

    kind: str
    """`shell`, `code` or `other` (comments only)."""
    commands: tuple[str, ...]
    """Normalised shell commands, one per entry (empty unless `kind == "shell"`)."""


def clean_output(text: str) -> str:
    """Printed output as a reader sees it: ANSI codes stripped, carriage-return redraws collapsed."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    return "\n".join(line.rsplit("\r", 1)[-1] if "\r" in line else line for line in text.split("\n"))


def join_continuations(text: str) -> str:
    """Join backslash-continued lines into one line."""
    return _CONT.sub(" ", text)


def _magic(line: str) -> str | None:
    word, _, rest = line[1:].partition(" ")
    target = _MAGIC.get(word)
    if target is None:
        return None
    if target == "export":
        rest = rest.replace(" ", "=", 1) if "=" not in rest else rest
    return f"{target} {rest.strip()}".strip()


def notebook_commands(source: str) -> CellCommands:
    """Read a notebook code cell: shell when every statement is `!cmd` / `%magic` / a `%%bash` body."""
    text = join_continuations(source.replace("\r\n", "\n"))
    lines = [ln.strip() for ln in text.split("\n")]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if not lines:
        return CellCommands("other", ())
    if lines[0].startswith(("%%bash", "%%sh", "%%shell")):
        return CellCommands("shell", tuple(lines[1:])) if lines[1:] else CellCommands("other", ())
    commands = []
    for ln in lines:
        if ln.startswith("!"):
            commands.append(ln[1:].strip())
        elif ln.startswith("%") and not ln.startswith("%%") and (cmd := _magic(ln)) is not None:
            commands.append(cmd)
        else:
            return CellCommands("code", ())
    return CellCommands("shell", tuple(c for c in commands if c))


def words(command: str) -> list[str]:
    """Tokens of a command (shell quoting honoured when it parses, whitespace split otherwise)."""
    return list(_words(command))


@functools.lru_cache(maxsize=8192)
def _words(command: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(command, comments=False, posix=True))
    except ValueError:
        return tuple(command.split())


def segments(command: str) -> list[str]:
    """The parts of `a && b || c | d` (quoting ignored: a rough split is enough here)."""
    return [p.strip() for p in re.split(r"\s*(?:&&|\|\||\||;)\s*", command) if p.strip()]


def _strip_env(tokens: list[str]) -> list[str]:
    i = 0
    while i < len(tokens) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[i]):
        i += 1
    rest = tokens[i:]
    if rest[:1] in (["sudo"], ["env"], ["time"], ["nohup"]):
        rest = rest[1:]
    return rest


_READ_ONLY = {
    "ls",
    "ll",
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "find",
    "pwd",
    "echo",
    "printf",
    "which",
    "whereis",
    "type",
    "tree",
    "wc",
    "du",
    "df",
    "stat",
    "file",
    "printenv",
    "nvidia-smi",
    "diff",
    "cmp",
    "id",
    "whoami",
    "uname",
    "hostname",
    "date",
    "ps",
    "free",
    "lscpu",
    "jq",
    "history",
    "nproc",
    "sleep",
    "true",
    "realpath",
    "dirname",
    "basename",
    "md5sum",
    "sha256sum",
}
_READ_ONLY_SUB = {
    "git": {"status", "log", "diff", "show", "remote", "rev-parse", "ls-files", "ls-tree", "blame"},
    "pip": {"show", "list", "freeze", "--version", "check", "index"},
    "pip3": {"show", "list", "freeze", "--version", "check"},
    "conda": {"list", "info", "search"},
    "npm": {"ls", "list", "view", "--version", "-v", "outdated"},
    "yarn": {"list", "info", "--version", "why"},
    "apt": {"list", "show", "search"},
    "apt-cache": {"policy", "search", "show"},
    "poetry": {"show", "--version", "check"},
    "cargo": {"--version", "tree"},
    "go": {"version", "env", "list"},
    "docker": {"ps", "images"},
}


def is_read_only(command: str) -> bool:
    """True for commands that only look (ls, cat, grep, pip show, git status, --version, --help ...)."""
    parts = segments(command)
    return bool(parts) and all(_segment_read_only(p) for p in parts)


def _segment_read_only(part: str) -> bool:
    tokens = _strip_env(words(part))
    if not tokens:
        return True
    head = tokens[0].rsplit("/", 1)[-1]
    if head in _READ_ONLY:
        return not (head == "find" and ("-delete" in tokens or "-exec" in tokens))
    if head == "sed":
        return "-i" not in tokens and not any(t.startswith("-i") for t in tokens[1:])
    if head == "awk":
        return ">" not in part
    if len(tokens) > 1 and tokens[1] in _READ_ONLY_SUB.get(head, ()):
        return True
    return len(tokens) == 2 and tokens[1] in {"--version", "-V", "--help", "-h", "-v"}


_PLACEHOLDER = re.compile(
    r"<[A-Za-z_][\w\-]*(?: [\w\-]+)*>|\{\{[^}]*\}\}|\bYOUR_[A-Z_]+\b|\byour[_-](?:token|key|name|path|repo)\b"
    r"|/path/to/|\[(?:repo|repository|url|path|package)[^\]]*\]|(?:^|\s)\.\.\.(?:\s|$)|\bxxx+\b",
    re.I,
)


def has_placeholder(command: str) -> bool:
    """True for template slots such as `<repository_url>`, `{{name}}`, `YOUR_TOKEN`, `/path/to/`, `...`."""
    return bool(_PLACEHOLDER.search(command))


_ERROR_LINE = re.compile(
    r"^(?:\w+(?:\.\w+)*(?:Error|Exception|Exit)\b.*"
    r"|ERROR: (?!pip's dependency resolver).*|error(?:\[\w+\])?: .*|fatal: .*|E: .*|npm ERR! .*|FATAL.*"
    r"|.*: command not found|.*: No such file or directory|.*[Ss]egmentation fault.*|Killed"
    r"|.*(?:FAILED|FAILURES|BUILD FAILURE).*|.*Permission denied.*)$",
    re.M,
)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.M)


_LOG_PREFIX = re.compile(r"^[ \t]*(?:#\d+[ \t]+)?(?:\d+(?:\.\d+)?[ \t]+)?", re.M)
_EXCEPTION = re.compile(r"^\w+(?:\.\w+)*(?:Error|Exception)\b")


def error_line(output: str | None) -> str:
    """The decisive error line of an output: a Python-style exception line (the last), else the first error line."""
    if not output:
        return ""
    found = [m.group(0).strip() for m in _ERROR_LINE.finditer(_LOG_PREFIX.sub("", clean_output(output)))]
    exceptions = [line for line in found if _EXCEPTION.match(line)]
    line = exceptions[-1] if exceptions else (found[0] if found else "")
    return line[:300]


def infer_failure(command: str, output: str | None) -> bool | None:
    """Did a command without a recorded exit code fail? None when the output is unknown."""
    if output is None:
        return None
    text = clean_output(output)
    tokens = _strip_env(words(command.split("\n", 1)[0]))
    if tokens[:2] in (["pip", "install"], ["pip3", "install"]) or tokens[1:3] == ["-m", "pip"]:
        if re.search(
            r"^ERROR: (?:Could not|No matching|Invalid requirement|Failed|Directory|Cannot)", text, re.M
        ):
            return True
        if "Successfully installed" in text or "Requirement already satisfied" in text:
            return False
    if _TRACEBACK.search(text):
        return True
    return bool(error_line(text))


def command_key(command: str) -> str:
    """The identity of an invocation, for matching a re-run: `python -m pkg.mod`, `python train.py`, `yarn test`."""
    tokens = _strip_env(words(command.split("\n", 1)[0]))
    if not tokens:
        return ""
    head = tokens[0].rsplit("/", 1)[-1]
    head = "python" if re.fullmatch(r"python[\d.]*", head) else head
    if head == "python":
        rest = [t for t in tokens[1:] if not t.startswith("-") or t == "-m"]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return f"python -m {rest[1]}"
        return f"python {rest[0]}" if rest else "python"
    if head in {"bash", "sh", "source", "."} and len(tokens) > 1:
        return f"{head} {tokens[1]}"
    if len(tokens) > 1 and tokens[1] in {"install", "add", "i", "ci"}:
        return " ".join([head, tokens[1], *(t for t in tokens[2:] if not t.startswith("-"))])
    return " ".join([head, *tokens[1:2]])


_NO_ARG = {
    "-U",
    "--upgrade",
    "-q",
    "-qq",
    "--quiet",
    "--no-cache-dir",
    "--user",
    "-y",
    "--yes",
    "--no-deps",
    "--pre",
    "--force-reinstall",
    "--no-build-isolation",
    "-v",
    "--verbose",
    "--ignore-installed",
    "-I",
}


def packages(tokens: list[str]) -> list[str]:
    """Package arguments of an install command (options and their values left out)."""
    out, skip = [], False
    for tok in tokens:
        if skip:
            skip = False
            continue
        if tok.startswith("-"):
            skip = tok not in _NO_ARG and "=" not in tok
            continue
        out.append(tok)
    return out


def _describe_one(part: str) -> str:
    tokens = _strip_env(words(part))
    if not tokens:
        return "Run an empty command"
    head = tokens[0].rsplit("/", 1)[-1]
    head = "python" if re.fullmatch(r"python[\d.]*", head) else head
    sub, args = (tokens[1] if len(tokens) > 1 else ""), tokens[2:]
    if head == "git" and sub == "clone":
        urls = [t for t in args if not t.startswith("-")]
        name = urls[0].rstrip("/").removesuffix(".git").split("github.com/")[-1] if urls else "the repository"
        return f"Clone the repository {name}"
    if head == "git" and sub in {"checkout", "switch"}:
        return f"Check out {' '.join(t for t in args if not t.startswith('-')) or 'the branch'}"
    if head == "cd":
        return f"Change into the {sub or 'home'} directory"
    if head in {"pip", "pip3", "uv"} or (head == "python" and sub == "-m" and args[:1] == ["pip"]):
        rest = tokens[1:] if head != "python" else tokens[3:]
        rest = rest[1:] if rest[:1] == ["pip"] else rest
        verb, rest = (rest[0] if rest else ""), rest[1:]
        if verb == "install":
            if "-r" in rest or "--requirement" in rest:
                idx = rest.index("-r") if "-r" in rest else rest.index("--requirement")
                return f"Install the Python requirements listed in {rest[idx + 1] if idx + 1 < len(rest) else 'the file'}"
            if "-e" in rest or "--editable" in rest:
                return "Install the repository as an editable Python package"
            pkgs = packages(rest)
            return (
                f"Install the Python package{'s' if len(pkgs) > 1 else ''} {', '.join(pkgs)}"
                if pkgs
                else "Install Python packages"
            )
        if verb == "uninstall":
            return f"Uninstall the Python package(s) {', '.join(packages(rest))}"
        return f"Run pip {verb}".strip()
    if head in {"conda", "mamba", "micromamba"}:
        if sub == "create":
            return "Create a conda environment"
        if sub == "activate":
            return f"Activate the conda environment {args[0] if args else ''}".strip()
        if sub == "install":
            return f"Install {', '.join(packages(args)) or 'packages'} with conda"
        return f"Run conda {sub}".strip()
    if head in {"apt-get", "apt", "yum", "apk", "dnf"}:
        if sub == "update":
            return "Update the system package index"
        if sub in {"install", "add"}:
            return f"Install the system package(s) {', '.join(packages(args))}"
        return f"Run {head} {sub}".strip()
    if head in {"npm", "yarn", "pnpm", "bun"}:
        if sub in {"", "install", "ci", "i", "add"}:
            pkgs = packages(args)
            if pkgs:
                return (
                    f"Install the Node.js package{'s' if len(pkgs) > 1 else ''} {', '.join(pkgs)} with {head}"
                )
            return f"Install the Node.js dependencies with {head}"
        if sub in {"test", "t"} or (sub == "run" and args[:1] and "test" in args[0]):
            return "Run the test suite"
        return f"Run the {head} script {args[0] if sub == 'run' and args else sub}"
    if head in {"poetry", "pipenv", "hatch", "pdm"} and sub in {"install", "sync"}:
        return f"Install the project dependencies with {head}"
    if head in {"pytest", "tox", "nox"} or (
        head == "python" and sub == "-m" and args[:1] in (["pytest"], ["unittest"])
    ):
        return "Run the test suite"
    if head == "python":
        rest = [t for t in tokens[1:] if not t.startswith("-") or t == "-m"]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return f"Run the Python module {rest[1]}"
        return f"Run the script {rest[0]}" if rest else "Start Python"
    if head in {"bash", "sh", "source", "."}:
        return f"{'Source' if head in {'source', '.'} else 'Run the script'} {sub}".strip()
    if head in {"mkdir"}:
        return f"Create the directory {' '.join(t for t in tokens[1:] if not t.startswith('-'))}"
    if head in {"wget", "curl", "gdown"}:
        urls = [t for t in tokens[1:] if "://" in t or re.match(r"^[\w-]{20,}$", t)]
        return f"Download {urls[0].rstrip('/').rsplit('/', 1)[-1] if urls else 'a file'}"
    if head in {"unzip", "tar", "gunzip", "7z"}:
        files = [t for t in tokens[1:] if not t.startswith("-") and "." in t]
        return f"Extract {files[0] if files else 'the archive'}"
    if head == "export":
        return f"Set the environment variable {sub.split('=', 1)[0]}"
    if head in {"make", "cmake", "cargo", "go", "mvn", "gradle", "./gradlew", "gradlew", "dotnet", "ant"}:
        return f"Run {head} {sub}".strip()
    if head == "sed" and any(t.startswith("-i") for t in tokens[1:]):
        files = [
            t
            for t in tokens[1:]
            if not t.startswith("-") and not re.match(r"^[sy]?/", t) and "/" not in t[:2]
        ]
        return f"Edit {files[-1] if files else 'a file'} in place with sed"
    if head in {"rm", "mv", "cp", "ln", "chmod", "touch"}:
        return (
            {
                "rm": "Remove",
                "mv": "Move",
                "cp": "Copy",
                "ln": "Link",
                "chmod": "Change the mode of",
                "touch": "Create",
            }[head]
            + " "
            + " ".join(t for t in tokens[1:] if not t.startswith("-"))[:80]
        )
    return f"Run {head}"


def describe(command: str) -> str:
    """A plain-English description of a shell command (`&&` parts joined with "and")."""
    parts = [_describe_one(p) for p in re.split(r"\s*&&\s*", command.split("\n", 1)[0]) if p.strip()]
    if not parts:
        return "Run an empty command"
    return parts[0] + "".join(" and " + p[0].lower() + p[1:] for p in parts[1:])
