"""Error -> fix pairs observed in a run, and fix texts (helpers of `swe_env_setup`'s `error` task).

A pair is a failing step (a command, code cell or Dockerfile build that printed an error), the
fix and the evidence that the fix worked: the next run of the same invocation no longer shows
that error. Errors are the same by identity (`tracebacks.identify`: exception type
plus the module, path or symbol it names and, for symbol errors, the innermost repository
file), never by last line. The fix is the *minimal* set of state-changing steps between the
failure and that re-run that target what the traceback names: an install of the missing module
or of a package the traceback passes through, an edit of a repository file of the traceback (or
of the failing command), a corrected re-run, a command naming the missing path. When no step
between them targets the error, nothing shows which step fixed it: no pair. A step that only
changes directory (`cd data/x`, naming the missing path) never is the whole fix: the files appear
through later steps (a code cell writing them), so a fix of moves alone is no pair. Fix attempts after
which the same error came back, and fix commands that themselves failed, are the pair's *failed
fixes*: observed wrong, they are distractors of the question.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from extractors.shell.commands import command_key, is_read_only, segments, words
from extractors.swe_env_setup.tracebacks import MISSING_MODULE, ErrorId, identify, is_tool_error, same_error
from schemas.envsetup import EnvSetupRun, EnvStep

MAX_FIX_LINES = 4
#: A rendered line longer than this is never shortened with "...": the fix (or option) is dropped.
MAX_LINE_CHARS = 220

#: Import name -> distribution name, where they differ (the usual suspects of ModuleNotFoundError).
DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "bs4": "beautifulsoup4",
    "skimage": "scikit-image",
    "dateutil": "python-dateutil",
    "attr": "attrs",
    "faiss": "faiss-cpu",
    "Crypto": "pycryptodome",
    "google.protobuf": "protobuf",
    "dgl": "dgl",
    "torch_geometric": "torch-geometric",
    "sentencepiece": "sentencepiece",
}


class ErrorPair(NamedTuple):
    """A failure, the fix observed to work, and what proved it."""

    fail: int
    """Index of the failing step."""
    signature: str
    """Its decisive error line ('' when the output has none)."""
    fix: tuple[int, ...]
    """The minimal steps of the fix (the corrected re-run itself when nothing else changed)."""
    evidence: int
    """The later run of the same invocation that no longer shows the error."""
    evidence_kind: str
    """`rerun_succeeded` or `error_resolved` (it fails with another error)."""
    failed_fixes: tuple[tuple[int, ...], ...]
    """Fix attempts observed not to work for this error."""
    error: ErrorId | None = None
    """The error's identity (what its traceback names)."""


def _is_run(s: EnvStep) -> bool:
    return s.kind in {"shell", "code", "dockerfile"} and not (s.kind == "shell" and is_read_only(s.command))


def invocation(command: str) -> str:
    """`command_key` of the command after any leading `cd <dir> &&` / `cd <dir>;` hops."""
    parts = [p for p in segments(command.split("\n", 1)[0]) if p.strip()]
    while len(parts) > 1 and words(parts[0])[:1] == ["cd"]:
        parts = parts[1:]
    return command_key(parts[0] if parts else command)


def _key(s: EnvStep) -> str:
    return "docker build" if s.kind == "dockerfile" else invocation(s.command)


def _actions(run: EnvSetupRun, lo: int, hi: int, key: str) -> list[EnvStep]:
    """State-changing steps strictly between two runs of `key`."""
    return [
        s
        for s in run.steps[lo + 1 : hi]
        if s.kind in {"shell", "edit", "code"}
        and not (s.kind == "shell" and is_read_only(s.command))
        and _key(s) != key
    ]


def norm_name(name: str) -> str:
    """A package or module name compared loosely (`Foo_Bar` == `foo-bar`)."""
    return re.sub(r"[-_.]+", "-", name.strip().lower())


_VALUE_FLAGS = frozenset(
    {
        "-r",
        "--requirement",
        "-e",
        "--editable",
        "-c",
        "--constraint",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-n",
        "--name",
        "--channel",
        "--target",
        "-t",
        "--prefix",
    }
)


_INSTALLERS = frozenset(
    {"pip", "pip3", "conda", "mamba", "uv", "apt-get", "apt", "npm", "yarn", "pnpm", "gem", "cargo"}
)


def installed(command: str) -> list[str]:
    """Package names a command installs (`pip install a b==1`, `conda install -y c`, `apt-get install d`)."""
    out: list[str] = []
    for part in segments(command):
        toks = [t for t in words(part) if t]
        while toks and (re.match(r"^[A-Za-z_]\w*=", toks[0]) or toks[0] in {"sudo", "!"}):
            toks = toks[1:]
        if toks[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]):
            toks = ["pip", *toks[3:]]
        if len(toks) > 1 and toks[0] in _INSTALLERS:
            rest = (
                toks[2:]
                if toks[1] in {"install", "add", "i"}
                else toks[3:]
                if toks[1:3] == ["pip", "install"]
                else []
            )
            skip = {i + 1 for i, t in enumerate(rest) if t in _VALUE_FLAGS}
            out += [
                re.split(r"[=<>!~\[@;]", t)[0]
                for i, t in enumerate(rest)
                if i not in skip
                and not t.startswith("-")
                and "/" not in t
                and not t.endswith(".txt")
                and t != "."
            ]
    return [p for p in out if p]


def module_matches(package: str, module: str) -> bool:
    """Does installing distribution `package` provide import `module` (by name)?"""
    pkg, top = norm_name(package), norm_name(module.split(".")[0])
    alias = DISTRIBUTIONS.get(module) or DISTRIBUTIONS.get(module.split(".")[0])
    return (
        pkg == top or (alias is not None and pkg == norm_name(alias)) or pkg in {f"py{top}", f"python-{top}"}
    )


def package_named(name: str, err: ErrorId) -> bool:
    """Is distribution `name` one the error names: the missing module's, a package of the traceback
    or of its message, or one of their family (`torchvision` beside `torch`)?"""
    mods = [err.subject.split(".")[0]] if err.type in MISSING_MODULE else []
    mods += _mentioned_packages(err.message)
    if any(module_matches(name, m) for m in mods if m):
        return True
    if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", err.message, re.I):
        return True
    named = {norm_name(p) for p in err.packages()}
    n = norm_name(name)
    return n in named or any(len(p) >= 4 and n.startswith(p) for p in named)


def _same_file(a: str, b: str) -> bool:
    a, b = a.strip("./"), b.strip("./")
    return bool(a and b) and (a == b or a.endswith("/" + b) or b.endswith("/" + a))


_MOVES = frozenset({"cd", "%cd", "pushd", "popd", "chdir"})


def moves_only(step: EnvStep) -> bool:
    """A shell step that only changes directory (every segment a `cd`, `pushd` or `popd`)."""
    parts = [words(p) for p in segments(step.command)] if step.kind == "shell" else []
    return bool(parts) and all(w and w[0] in _MOVES for w in parts)


def targets(step: EnvStep, err: ErrorId, failing: EnvStep) -> bool:
    """Does a state-changing step act on what the error names (its module, files, path, packages)?"""
    files = [*err.repo_files(), *_command_files(failing.command)]
    if step.kind == "edit" and step.edit is not None:
        return any(_same_file(step.edit.path, f) for f in files)
    if step.kind != "shell":
        return False  # a code cell's effect on the error cannot be read from its text
    names = installed(step.command)
    if is_tool_error(err) and err.type != "pip":
        # no traceback: an install, or a command whose arguments the error lines name (`n 22` for node>=22)
        said = set(re.findall(r"[\w.\-]+", err.message + "\n" + (failing.output or "")[-2000:]))
        installing = bool(installed(failing.command)) or re.match(
            r"^\s*(?:npm|yarn|pnpm) (?:ci|i|install)\b", failing.command
        )
        return (bool(names) and bool(installing)) or any(
            t in said for t in words(step.command)[1:] if not t.startswith("-")
        )
    if names:
        return all(package_named(n, err) for n in names)
    text = step.command
    if err.type == "pip" and err.subject:
        name = re.split(r"[=<>!~\[]", err.subject)[0]
        return bool(name) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None
    if err.type in {"FileNotFoundError", "NotADirectoryError"} and err.subject:
        path = err.subject.strip("./")
        return bool(path) and (path in text or (path.rsplit("/", 1)[0] in text and "/" in path))
    return any(
        f and f.rsplit("/", 1)[-1] in text
        for f in files
        if f.endswith((".py", ".sh", ".cfg", ".json", ".yaml", ".yml", ".txt"))
    )


def _command_files(command: str) -> list[str]:
    return [
        t for t in words(command.split("\n", 1)[0]) if re.search(r"\.(?:py|sh|cfg|json|ya?ml|txt|toml)$", t)
    ]


def _mentioned_packages(message: str) -> list[str]:
    return [m for m in re.findall(r"pip install (?:-U )?([A-Za-z0-9_.\-]+)", message)] + re.findall(
        r"`([A-Za-z0-9_.\-]+)`", message
    )


def error_pairs(run: EnvSetupRun) -> list[ErrorPair]:
    """Every failure of the run whose minimal fix is observed to work (see the module docstring)."""
    pairs = []
    steps = run.steps
    for f in steps:
        if not (f.failed and _is_run(f)):
            continue
        err = identify(f.output)
        if err is None:
            continue
        key = _key(f)
        failed_fixes: list[tuple[int, ...]] = []
        last = f.i
        for r in steps[f.i + 1 :]:
            if not _is_run(r) or _key(r) != key:
                continue
            between = _actions(run, last, r.i, key)
            good = tuple(s.i for s in between if not s.failed and targets(s, err, f))
            if all(moves_only(steps[i]) for i in good):
                good = ()  # a directory change alone fixes nothing (the fix is a step not read)
            failed_fixes += [
                (s.i,) for s in between if s.failed and (targets(s, err, f) or _FIX_LIKE.match(s.command))
            ]
            if f.kind == "dockerfile" or (not good and r.command.strip() != steps[last].command.strip()):
                good = (r.i,)
            if r.failed and same_error(err, r.output):
                tried = tuple(s.i for s in between if not s.failed)
                if tried:
                    failed_fixes.append(good or tried)
                last = r.i
                continue
            if good:
                kind = "error_resolved" if r.failed else "rerun_succeeded"
                pairs.append(
                    ErrorPair(f.i, err.message, good, r.i, kind, tuple(dict.fromkeys(failed_fixes)), err)
                )
            break
    return pairs


def _short(text: str) -> str:
    """Whitespace collapsed; never cut (an over-long line makes `render_fix` drop the fix)."""
    return " ".join(text.split())


def _instructions(dockerfile: str) -> list[str]:
    joined = re.sub(r"\\\s*\n\s*", " ", dockerfile)
    return [
        " ".join(ln.split()) for ln in joined.split("\n") if ln.strip() and not ln.lstrip().startswith("#")
    ]


def _dockerfile_fix(before: str, after: str) -> list[str]:
    old, new = _instructions(before), _instructions(after)
    lines = []
    for op, a, b, c, d in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "insert":
            lines += [f"Add `{_short(x)}` to the Dockerfile" for x in new[c:d]]
        elif op == "delete":
            lines += [f"Remove `{_short(x)}` from the Dockerfile" for x in old[a:b]]
        elif op == "replace":
            lines += [
                f"Change `{_short(x)}` to `{_short(y)}` in the Dockerfile"
                for x, y in zip(old[a:b], new[c:d], strict=False)
            ]
            lines += [f"Add `{_short(y)}` to the Dockerfile" for y in new[c + (b - a) : d]]
    return lines


def repo_dir(run: EnvSetupRun) -> str:
    """The folder the repository is cloned into (its name), which paths are shown relative to."""
    return run.target_repo.url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")


def repo_path(path: str, root: str) -> str:
    """A path as the options show it: relative to the repository (`/content/<repo>/x`, `<repo>/x` -> `x`)."""
    p = re.sub(r"^/content/", "", path).removeprefix("./")
    return p[len(root) + 1 :] if root and p.startswith(root + "/") else p


def _edit_fix(s: EnvStep, root: str = "") -> list[str]:
    assert s.edit is not None
    path = repo_path(s.edit.path, root)
    old = [ln.strip() for ln in s.edit.before.split("\n") if ln.strip()]
    new = [ln.strip() for ln in s.edit.after.split("\n") if ln.strip()]
    # every changed line, in order (`import matplotlib` alone is not the fix `matplotlib.use('Agg')`
    # completes); a fix too long to show whole is dropped by `render_fix`
    removed = _lines([x for x in old if x not in new])
    added = _lines([x for x in new if x not in old])
    if removed and added:
        return [f"In `{path}`, change {removed} to {added}"]
    if added:
        return [f"In `{path}`, add {added}"]
    if removed:
        return [f"In `{path}`, remove {removed}"]
    return []  # no line changed that can be shown: the edit says nothing


def _lines(lines: list[str]) -> str:
    """Code lines as an instruction's object: each in backticks, the last joined by `and`."""
    quoted = [f"`{_short(x)}`" for x in dict.fromkeys(lines)]
    return ", ".join(quoted[:-1]) + (" and " if len(quoted) > 1 else "") + quoted[-1] if quoted else ""


def fix_lines(run: EnvSetupRun, indices: tuple[int, ...], rerun_of: int | None = None) -> list[str]:
    """The actions of a fix as instruction lines."""
    lines: list[str] = []
    for i in indices:
        s = run.steps[i]
        if s.kind == "dockerfile" and s.edit is not None:
            lines += _dockerfile_fix(s.edit.before, s.edit.after)
        elif s.kind == "edit" and s.edit is not None:
            lines += _edit_fix(s, repo_dir(run))
        elif s.kind == "shell":
            cmds = [_short(c) for c in s.command.split("\n") if c.strip() and not c.lstrip().startswith("#")]
            if rerun_of is not None and _key(s) == _key(run.steps[rerun_of]):
                before = {_short(c) for c in run.steps[rerun_of].command.split("\n")}
                lines += [f"Re-run it as `{c}`" for c in cmds if c not in before]  # only what changed
            else:
                lines += [f"Run `{c}`" for c in cmds]
        # a code cell's effect cannot be said in one line (its first line is usually an import): not rendered
    return lines


def render_fix(lines: list[str]) -> str:
    """A numbered fix plan (`1. ...\\n2. ...`); '' when it would need more than MAX_FIX_LINES steps
    or a line longer than MAX_LINE_CHARS (a fix is shown whole or not at all)."""
    kept = list(dict.fromkeys(lines))
    if not kept or len(kept) > MAX_FIX_LINES or any(len(x) > MAX_LINE_CHARS for x in kept):
        return ""
    return "\n".join(f"{k}. {line}" for k, line in enumerate(kept, start=1))


_FIX_LIKE = re.compile(
    r"^(?:(?:pip3?|uv|conda|mamba|apt-get|apt|npm|yarn|pnpm|bun|poetry|gem|cargo|go)\s+(?:install|add|i|ci|update|upgrade|get)\b"
    r"|git\s+(?:clone|checkout|pull|submodule)\b|export\s|mkdir\s|cp\s|mv\s|ln\s|sed\s+-i|n\s|nvm\s)"
)


def failing_commands(run: EnvSetupRun) -> list[tuple[int, ...]]:
    """Fix-like commands that failed themselves (an install that errored) while another invocation was failing."""
    out, failing_key = [], None
    for s in run.steps:
        if not (s.failed and _is_run(s)):
            continue
        if (
            failing_key is not None
            and s.kind == "shell"
            and _key(s) != failing_key
            and _FIX_LIKE.match(s.command)
        ):
            out.append((s.i,))
            continue
        failing_key = _key(s)
    return out


class FailedFix(NamedTuple):
    """A fix observed not to work, kept for other runs' `error` questions."""

    repo: str
    """Repository the run set up (lower case `owner/name` or URL)."""
    run_id: str
    """Run it was seen in."""
    signature: str
    """Error line it tried to fix ('' when unknown)."""
    text: str
    """The fix, rendered as a numbered plan."""
    error_type: str = ""
    """Class of the error it tried to fix (`ModuleNotFoundError`, `pip`, `npm` ...)."""


def error_class(signature: str) -> str:
    """The class of an error line: `ModuleNotFoundError`, `npm ERR!`, `ERROR:` ..."""
    err = identify(signature)
    if err is not None:
        return err.type
    head = re.split(r"[:\s]", signature.strip(), maxsplit=1)[0] if signature.strip() else ""
    return head[:40]


def failed_fixes(run: EnvSetupRun) -> list[FailedFix]:
    """Every fix attempt of a run (successful or not) after which its error came back, and fix commands that failed."""
    repo = run.target_repo.url.lower().removesuffix(".git")
    out: list[FailedFix] = []
    steps = run.steps
    last: ErrorId | None = None
    fix_like = set(failing_commands(run))
    for f in steps:
        if (f.i,) in fix_like:
            sig, kind = (last.message, last.type) if last else ("", "")
            out.append(FailedFix(repo, run.run_id, sig, render_fix(fix_lines(run, (f.i,))), kind))
            continue
        if not (f.failed and _is_run(f)):
            continue
        err = identify(f.output)
        last = err or last
        if err is None:
            continue
        key, prev = _key(f), f.i
        for r in steps[f.i + 1 :]:
            if not _is_run(r) or _key(r) != key:
                continue
            tried = tuple(s.i for s in _actions(run, prev, r.i, key) if not s.failed)
            if f.kind == "dockerfile" or (not tried and r.command.strip() != steps[prev].command.strip()):
                tried = (r.i,)
            if not (r.failed and same_error(err, r.output)):
                break
            if tried:
                text = render_fix(fix_lines(run, tried, f.i))
                out.append(FailedFix(repo, run.run_id, err.message, text, err.type))
            prev = r.i
    return [x for x in dict.fromkeys(out) if x.text]
