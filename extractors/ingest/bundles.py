"""Multi-file runs: recognise run folders by their marker files and read each as one record.

The record layer (`records.py`) decodes one file at a time, but an env-setup run spans several
files (a SUPER notebook and its `metrics.json`; RepoLaunch's `setup.log`, `result.json` and
`instance.json`; a Repo2Run track and its command logs; Installamatic message logs and the eval
JSON of their trial). Here such a run becomes one *bundle*: a primary file standing for the run
in the input list, plus its member files, which are left out of per-file reading. Reading a
bundle yields one synthetic record `{"__bundle__": <format>, "dir", "paths", "files", "meta"}`
with every member decoded, which the `envsetup_*` readers sniff. A member that cannot be decoded
becomes a Problem naming its file and line; the run still comes through without it unless the
member is the run itself.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from extractors.base import Origin
from extractors.ingest.records import InputScan, Record, scan_inputs, stable_key
from extractors.ingest.sniff import FoundVerdict, read_file, read_record
from schemas import Problem, Trajectory

log = logging.getLogger(__name__)

BUNDLE_KEY = "__bundle__"
_SUPER = ("history.ipynb", "metrics.json")
_REPOLAUNCH = ("setup.log", "result.json", "instance.json")
_REPO2RUN = (
    "track.json",
    "outer_commands.json",
    "inner_commands.json",
    "track.txt",
    "pip_list.json",
    "pipdeptree.json",
)
_INSTALLAMATIC = re.compile(r"^(?P<stem>.+)-(?P<phase>build|gather)-(?P<trial>\d+)\.json$")
#: Marker files that `find_inputs` does not list (not JSON), searched for in input folders.
_EXTRA_MARKERS = ("history.ipynb", "setup.log")


class Bundle(NamedTuple):
    """One run spread over several files."""

    format: str
    """`super_ipynb`, `repolaunch_log`, `repo2run_track` or `installamatic_msgs`."""
    primary: str
    """The file that stands for the run in the input list (and in its Origin)."""
    members: dict[str, str]
    """Role (file name, or `build`/`gather`/`eval`) -> path, for the member files that exist."""
    meta: dict[str, str]
    """Format facts read from the layout (Installamatic: run, model, repo, trial)."""


def _json_keys(path: Path) -> set[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def _present(folder: Path, names: Iterable[str]) -> dict[str, str]:
    return {name: str(folder / name) for name in names if (folder / name).is_file()}


def _installamatic(path: Path) -> Bundle | None:
    m = _INSTALLAMATIC.match(path.name)
    if not m or path.parent.parent.name != "messages":
        return None
    run, stem, trial = path.parent.name, m.group("stem"), m.group("trial")
    members = {ph: str(path.parent / f"{stem}-{ph}-{trial}.json") for ph in ("build", "gather")}
    members = {k: v for k, v in members.items() if Path(v).is_file()}
    model, repo = "", stem
    eval_dir = path.parent.parent.parent / "eval"
    for cand in sorted(eval_dir.glob(f"{run}_*.json")) if eval_dir.is_dir() else []:
        name = cand.stem[len(run) + 1 :]
        if stem.startswith(name + "-"):
            model, repo = name, stem[len(name) + 1 :]
            members["eval"] = str(cand)
            break
    primary = members.get("build") or members["gather"]
    return Bundle(
        "installamatic_msgs", primary, members, {"run": run, "model": model, "repo": repo, "trial": trial}
    )


def detect_bundle(path: str | os.PathLike[str]) -> Bundle | None:
    """The bundle a file belongs to (as its primary or a member), or None for a plain input file."""
    p = Path(path)
    folder = p.parent
    if p.name in _SUPER:
        found = _present(folder, _SUPER)
        if "history.ipynb" in found or (
            p.name == "metrics.json" and ({"output_match", "checkpoints"} & _json_keys(p))
        ):
            missing = {} if "history.ipynb" in found else {"missing": "history.ipynb"}
            return Bundle("super_ipynb", found.get("history.ipynb") or found["metrics.json"], found, missing)
    if p.name in _REPOLAUNCH:
        found = _present(folder, _REPOLAUNCH)
        if "setup.log" in found or (
            "result.json" in found and "setup_commands" in _json_keys(folder / "result.json")
        ):
            return Bundle("repolaunch_log", found.get("setup.log") or found["result.json"], found, {})
    if p.name in _REPO2RUN:
        found = _present(folder, _REPO2RUN)
        runs = [n for n in ("track.json", "outer_commands.json", "inner_commands.json") if n in found]
        if runs:
            return Bundle("repo2run_track", found[runs[0]], found, {})
    return _installamatic(p)


def is_claimed(path: str | os.PathLike[str]) -> bool:
    """Files read only as part of bundles even though no bundle stands on them (Installamatic eval JSON)."""
    p = Path(path)
    if p.suffix != ".json" or p.parent.name != "eval":
        return False
    messages = p.parent.parent / "messages"
    return messages.is_dir() and any((messages / run).is_dir() for run in _run_prefixes(p.stem))


def _run_prefixes(stem: str) -> list[str]:
    return [stem[:i] for i, ch in enumerate(stem) if ch == "_"]


def scan_run_inputs(paths: Iterable[str | os.PathLike[str]]) -> InputScan:
    """Input files as `scan_inputs` finds them (run-folder marker files too), each bundle's members
    folded into its primary, and a Problem for every entry skipped."""
    scan = scan_inputs(paths, names=_EXTRA_MARKERS)
    found: set[Path] = set()
    for file in scan.files:
        bundle = detect_bundle(file)
        if bundle is not None:
            found.add(Path(bundle.primary))
        elif not is_claimed(file):
            found.add(file)
    return InputScan(sorted(found), scan.problems)


def find_run_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Input files as `find_inputs` lists them, with each bundle's members folded into its primary."""
    return scan_run_inputs(paths).files


def _problem(where: str, reason: str, detail: str, severity: str = "error") -> Problem:
    return Problem(where=where, stage="read", reason=reason, detail=detail, severity=severity)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=16)
def _load_json_cached(path: str, mtime_ns: int, size: int) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _decode(role: str, path: str) -> Any:
    """Decode one member file (JSON allows NaN, as RepoLaunch writes it; notebooks via nbformat)."""
    if role == "history.ipynb":
        return _notebook(Path(path).read_text(encoding="utf-8"))
    if path.endswith((".log", ".txt")):
        return Path(path).read_text(encoding="utf-8", errors="replace")
    if role == "eval":
        st = os.stat(path)
        return _load_json_cached(path, st.st_mtime_ns, st.st_size)
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _notebook(text: str) -> Any:
    """A notebook as nbformat v4, from one JSON parse (a broken one is reported with the line it breaks at)."""
    import nbformat

    data = json.loads(text)
    major, minor = nbformat.reader.get_version(data)
    if major not in nbformat.versions:
        raise nbformat.NBFormatError(f"unsupported nbformat version {major}")
    notebook = nbformat.convert(nbformat.versions[major].to_notebook_json(data, minor=minor), 4)
    try:
        nbformat.validate(notebook)
    except nbformat.ValidationError as exc:  # as nbformat.reads does: an invalid notebook is still read
        log.warning("notebook JSON is invalid: %s", exc)
    return notebook


def _decode_problem(path: str, exc: Exception) -> Problem:
    if isinstance(exc, json.JSONDecodeError):
        reason = "truncated_json" if exc.pos >= len(exc.doc.rstrip()) - 1 else "invalid_json"
        return _problem(f"{path}:{exc.lineno}", reason, f"invalid JSON at line {exc.lineno}: {exc.msg}")
    if isinstance(exc, OSError):
        return _problem(path, "unreadable_file", f"{type(exc).__name__}: {exc.strerror or exc}")
    if isinstance(exc, UnicodeDecodeError):
        return _problem(path, "binary_file", f"not UTF-8 text: {exc.reason}")
    return _problem(path, "invalid_notebook", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")


def bundle_record(bundle: Bundle, root: str | None = None) -> Iterator[Record | Problem]:
    """Decode a bundle's members into one synthetic record (Problems for members that fail)."""
    files: dict[str, Any] = {}
    for role, path in bundle.members.items():
        try:
            files[role] = _decode(role, path)
        except Exception as exc:  # nbformat and json raise several unrelated types
            yield _decode_problem(path, exc)
            if path == bundle.primary:
                return
    record = {
        BUNDLE_KEY: bundle.format,
        "dir": str(Path(bundle.primary).parent),
        "paths": dict(bundle.members),
        "files": files,
        "meta": dict(bundle.meta),
    }
    yield Record(record, Origin(bundle.primary, None, stable_key(bundle.primary, root)))


def read_bundle(
    readers: Mapping[str, Any], bundle: Bundle, forced: str | None = None, root: str | None = None
) -> Iterator[Trajectory | Problem | FoundVerdict]:
    """Read one bundle through the reader that sniffs it (or the forced one)."""
    if "missing" in bundle.meta:
        yield _problem(
            bundle.primary,
            "run_not_present",
            f"{bundle.format} folder without its run file {bundle.meta['missing']}: only the verdict is here",
            severity="info",
        )
        return
    for rec in bundle_record(bundle, root):
        if isinstance(rec, Problem):
            yield rec
            continue
        out = read_record(readers, rec, forced)
        if isinstance(out, list):
            yield from out
        elif out is not None:
            yield out


def read_input(
    readers: Mapping[str, Any], file: str, forced: str | None = None, root: str | None = None
) -> Iterator[Trajectory | Problem | FoundVerdict]:
    """The read stage for one input: a bundle when the file belongs to a run folder, else the file.

    A member file stands for its whole run (read twice, the run keeps one trajectory id, so the keep
    stage drops the copy); a file only ever read inside bundles (Installamatic eval JSON) yields nothing.
    """
    bundle = detect_bundle(file)
    if bundle is not None:
        yield from read_bundle(readers, bundle, forced, root)
    elif not is_claimed(file):
        yield from read_file(readers, file, forced, root)
