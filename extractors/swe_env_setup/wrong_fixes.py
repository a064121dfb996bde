"""Rule-made wrong fixes for an `error` item, aimed at what THIS traceback names (never other files).

Each family writes fix lines in the gold's own style (`Run `...``, `In `file`, change `a` to `b``,
`Re-run it as `...``) about the error's own module, packages, repository files, source lines and
failing command, so no option is wrong merely for naming something the item never mentions:

- `wrong_package`: a near-miss distribution for the missing module (`py<m>`, `<m>-python`), or
  a pinned ancient version of it;
- `other_package`: (re)installing or upgrading a package the traceback passes through instead of
  the one that is missing or broken;
- `drop_line`: deleting, commenting out or guarding the failing source line of a repository frame;
- `revert_edit`: the gold's change of a line made the other way round;
- `make_path`: creating an empty file or folder where a missing file was expected, or opening the
  permissions of the folder it was expected in (the file is still missing);
- `upgrade_pip`: upgrading pip itself, or purging its cache, when pip finds no version that
  satisfies a pin (the index still has none);
- `retry`: re-running the failing command unchanged;
- `rerun_variant`: re-running the command unchanged under `python3`, or with a pip flag that does
  not touch the cause (`--no-cache-dir`, `--no-deps`, `--upgrade`);
- `wrong_file`: the gold's own edit made in another repository file of the traceback (the fix in
  the wrong place, as when the error is raised in one module and the agent edits its caller);
- `repo_as_package`: installing a folder of the traceback (`pip install trainers`) as if it were a
  PyPI package;
- `dockerfile_*`: for a failing Dockerfile build, dropping one of its own `RUN` steps, floating its
  base image to `:latest`, or a cache setting that does not touch the cause;
- npm: cleaning the cache or `node_modules`, `--ignore-scripts`, a global or pinned install of the
  missing module.

None of them is the gold or any step the run itself took to fix the error (the caller filters).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from extractors.swe_env_setup.errors import DISTRIBUTIONS
from extractors.swe_env_setup.tracebacks import MISSING_MODULE, ErrorId


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.lower())


def _pkg_variants(module: str) -> Iterator[str]:
    top = module.split(".")[0]
    dist = DISTRIBUTIONS.get(module) or DISTRIBUTIONS.get(top) or top.replace("_", "-")
    if norm(dist) != norm(top):
        yield f"pip install {top}"  # the import name is not the distribution's
    if not top.lower().startswith("py"):
        yield f"pip install py{top.lower()}"
    yield f"pip install {dist}==0.0.1"


_EDIT = re.compile(r"^In `([^`]+)`, (.*)$")


def wrong_fixes(
    err: ErrorId,
    command: str,
    gold_lines: list[str] = (),
    root: str = "",  # type: ignore[assignment]
) -> Iterator[tuple[str, str]]:
    """`(family, fix line)` pairs for an error of `command` (one line each; the caller combines them)."""
    files = err.repo_files(root)
    for line in gold_lines:
        m = _EDIT.match(line)
        swap = re.match(r"^In `([^`]+)`, change `(.+)` to `(.+)`$", line)
        if swap:
            yield "revert_edit", f"In `{swap.group(1)}`, change `{swap.group(3)}` to `{swap.group(2)}`"
        if m:
            for other in files:
                if (
                    other != m.group(1)
                    and not other.endswith("/" + m.group(1))
                    and not m.group(1).endswith(other)
                ):
                    yield "wrong_file", f"In `{other}`, {m.group(2)}"
    frames = [f for f in reversed(err.frames) if f.source and any(f.path.endswith(p) for p in files)]
    packages = err.packages()
    if err.type == "MODULE_NOT_FOUND" and err.subject:
        m = err.subject
        yield (
            "wrong_package",
            f"Run `npm install -g {m}`",
        )  # a global install is not what the project resolves
        yield "wrong_package", f"Run `npm install {m}@0.0.1`"
        yield "wrong_package", f"Run `npm uninstall {m}`"
        yield "wrong_package", f"Run `npm install @types/{m.rsplit('/', 1)[-1]}`"
    elif err.type in MISSING_MODULE and re.fullmatch(r"[A-Za-z_][\w.]*", err.subject):
        module = err.subject
        for cmd in _pkg_variants(module):
            yield "wrong_package", f"Run `{cmd}`"
    elif err.type == "pip" and err.subject:
        name = re.split(r"[=<>!~\[]", err.subject)[0]
        yield "wrong_package", f"Run `pip install {name}-binary`"
        yield "wrong_package", f"Run `pip install --pre {name}==0.0.1`"
        yield "upgrade_pip", "Run `python -m pip install --upgrade pip setuptools wheel`"
        yield "upgrade_pip", "Run `pip cache purge`"
    named = packages[1:] if err.type in MISSING_MODULE else packages
    for p in named[:2]:
        yield "other_package", f"Run `pip install -U {p}`"
    for k, f in enumerate([f for f in frames if not f.source.startswith(("import ", "from "))][:2]):
        path = next(p for p in files if f.path.endswith(p))
        if k % 2 == 0:
            yield "drop_line", f"In `{path}`, remove `{f.source}`"
        else:
            yield "drop_line", f"In `{path}`, change `{f.source}` to `# {f.source}`"
    if err.type in {"FileNotFoundError", "NotADirectoryError"} and err.subject:
        target = err.subject
        parent = target.rsplit("/", 1)[0] if "/" in target.strip("/") else ""
        if parent:
            yield "make_path", f"Run `mkdir -p {shlex.quote(parent)}`"
        yield "make_path", f"Run `touch {shlex.quote(target)}`"
        yield "make_path", f"Run `chmod -R a+rwx {shlex.quote(parent or '.')}`"
    dirs = [d for p in files for d in p.split("/")[:-1] if d.isidentifier()]
    for top in [d for d in dict.fromkeys(dirs) if d != err.subject.split(".")[0]][:3]:
        yield "repo_as_package", f"Run `pip install {top}`"  # a folder of this traceback is no PyPI package
    lines = [ln.strip() for ln in command.split("\n") if ln.strip() and not ln.strip().startswith("#")]
    if lines and lines[0].upper().startswith("FROM "):  # a Dockerfile build: its own instructions
        yield from _dockerfile_fixes(lines)
        return
    if re.match(r"^(?:npm|yarn|pnpm) ", lines[0] if lines else ""):
        tool = lines[0].split()[0]
        yield "rerun_variant", f"Run `{tool} cache clean --force`"
        yield "rerun_variant", f"Re-run it as `{lines[0]} --ignore-scripts`"
        yield "rerun_variant", "Run `rm -rf node_modules`"
    first = next((ln for ln in lines if not ln.startswith("cd ")), "")
    if first and len(first) <= 60:
        yield "retry", f"Re-run it as `{first}`"  # unchanged: nothing was fixed
    if first.startswith("python "):
        yield "rerun_variant", f"Re-run it as `python3 {first[len('python ') :]}`"
    if re.match(r"^(?:pip3?|python3? -m pip) install ", first):
        for flag in ("--no-cache-dir", "--no-deps", "--upgrade"):
            if flag not in first:
                yield "rerun_variant", f"Re-run it as `{first} {flag}`"


def _dockerfile_fixes(lines: list[str]) -> Iterator[tuple[str, str]]:
    """Wrong changes to the failing Dockerfile's own instructions (drop a step, float the base image)."""
    joined = " ".join(lines)
    for ln in lines:
        head = ln.split(" ", 1)[0].upper()
        if head in {"RUN", "WORKDIR"} and len(ln) <= 160:
            yield "dockerfile_drop", f"Remove `{ln}` from the Dockerfile"
        elif head == "FROM" and ":" in ln and not ln.endswith(":latest"):
            yield "dockerfile_base", f"Change `{ln}` to `{ln.rsplit(':', 1)[0]}:latest` in the Dockerfile"
    if "pip install" in joined:
        yield "dockerfile_flag", "Add `ENV PIP_NO_CACHE_DIR=1` to the Dockerfile"
    if "apt-get install" in joined:
        yield "dockerfile_flag", "Add `RUN apt-get clean` to the Dockerfile"
