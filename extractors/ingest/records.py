"""Decode raw files into records (parsed JSON objects / Parquet rows) with their origin, streaming.

A file is one JSON document (`.traj`, `.json`), JSONL, or Parquet. JSONL is read line by line and
Parquet batch by batch, so memory stays flat however large the input; a JSON document is one
object and is parsed whole. Binary, empty, truncated or non-JSON files and bad lines become
Problems naming file, line and reason; the good records of the same file still come through.

A JSON document that is a list is either a table of rows (one record per element, `file:i`) or
one transcript: when most elements are chat messages (`role`) or agent events (`action` /
`observation`), the whole list is a single record (an OpenHands event list, an OpenAI message
list), because its elements mean nothing apart.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson

from extractors.base import Origin
from schemas import Problem

#: File endings considered when a directory is searched.
INPUT_SUFFIXES = (".traj", ".json", ".jsonl", ".parquet")
_SNIFF_BYTES = 8192
#: Parquet rows decoded per batch: bounds memory for wide rows (trajectories of tens of KB).
PARQUET_BATCH_ROWS = 256


class Record(NamedTuple):
    """One raw record and where it sits."""

    data: Any
    origin: Origin


def find_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files and directories (recursively) into a sorted list of candidate input files."""
    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for sub in path.rglob("*"):
                if sub.is_file() and sub.name.endswith(INPUT_SUFFIXES) and not sub.name.startswith("."):
                    found.add(sub)
        else:
            found.add(path)
    return sorted(found)


def _problem(origin: Origin | str, reason: str, detail: str) -> Problem:
    return Problem(where=str(origin), stage="read", reason=reason, detail=detail)


def _json_error(exc: orjson.JSONDecodeError, blob: bytes) -> str:
    line = blob.count(b"\n", 0, exc.pos) + 1 if exc.pos is not None else "?"
    return f"invalid JSON at line {line}: {exc.msg}"


def is_transcript(items: list[Any]) -> bool:
    """True when a JSON list reads as one conversation or event stream rather than a table of rows."""
    if not items or not all(isinstance(x, dict) for x in items):
        return False
    marked = sum(1 for x in items if "role" in x or "action" in x or "observation" in x)
    return marked * 2 >= len(items)


def stable_key(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> str:
    """`path` relative to the input `root` (a folder, or a file standing for itself), POSIX-style."""
    if root is None:
        return ""
    base = Path(root)
    base = base.parent if base.is_file() else base
    try:
        return Path(os.path.relpath(Path(path).resolve(), base.resolve())).as_posix()
    except ValueError:  # another drive: fall back to the path as given
        return str(path)


def iter_records(
    path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
) -> Iterator[Record | Problem]:
    """Yield the records of one file, or Problems for what cannot be decoded.

    `root` is the input folder the file was found under; record origins carry the file's path
    relative to it (`Origin.key`), from which readers derive ids.
    """
    file = str(path)
    key = stable_key(path, root)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed in the finally below, across yields
    except OSError as exc:
        yield _problem(file, "unreadable_file", f"{type(exc).__name__}: {exc.strerror or exc}")
        return
    try:
        head = handle.read(_SNIFF_BYTES)
        if file.endswith(".parquet") or head[:4] == b"PAR1":
            handle.close()
            yield from _parquet_records(file, key=key)
            return
        if not head.strip() and not _has_content(handle):
            yield _problem(file, "empty_file", "the file is empty")
            return
        if b"\x00" in head:
            yield _problem(
                file, "binary_file", "the file holds NUL bytes: not a JSON, JSONL or Parquet trajectory"
            )
            return
        handle.seek(0)
        if file.endswith(".jsonl"):
            yield from _jsonl_records(file, handle, first_line=1, key=key)
            return
        yield from _document_or_lines(file, handle, key=key)
    except OSError as exc:
        yield _problem(file, "unreadable_file", f"{type(exc).__name__}: {exc.strerror or exc}")
    finally:
        handle.close()


def _has_content(handle: IO[bytes]) -> bool:
    while chunk := handle.read(1 << 20):
        if chunk.strip():
            return True
    return False


def _document_or_lines(file: str, handle: IO[bytes], key: str = "") -> Iterator[Record | Problem]:
    """A `.json`/`.traj` file: one document, unless its first line is a whole JSON value (JSONL)."""
    first = handle.readline()
    lineno = 1
    while first and not first.strip():
        first, lineno = handle.readline(), lineno + 1
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        value = _NOT_JSON
    if value is not _NOT_JSON:
        rest_at = handle.tell()
        if not _has_content(handle):
            yield from _document_records(file, value, key=key)
            return
        handle.seek(rest_at)
        yield Record(value, Origin(file, lineno, key))
        yield from _jsonl_records(file, handle, first_line=lineno + 1, key=key)
        return
    handle.seek(0)
    blob = handle.read()
    try:
        data = orjson.loads(blob)
    except orjson.JSONDecodeError as exc:
        reason = "truncated_json" if _is_truncated(exc, blob) else "invalid_json"
        yield _problem(file, reason, _json_error(exc, blob))
        return
    yield from _document_records(file, data, key=key)


_NOT_JSON = object()


def _document_records(file: str, data: Any, key: str = "") -> Iterator[Record]:
    if isinstance(data, list) and not is_transcript(data):
        for i, row in enumerate(data, start=1):
            yield Record(row, Origin(file, i, key))
    else:
        yield Record(data, Origin(file, None, key))


def _is_truncated(exc: orjson.JSONDecodeError, blob: bytes) -> bool:
    return exc.pos is not None and exc.pos >= len(blob.rstrip()) - 1


def _jsonl_records(
    file: str, handle: IO[bytes], first_line: int, key: str = ""
) -> Iterator[Record | Problem]:
    # Iterating a buffered binary file reads one line at a time: memory is one line, not the file.
    seen = False
    for lineno, line in enumerate(handle, start=first_line):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if not line.strip():
                continue
            seen = True
            yield _problem(Origin(file, lineno, key), "invalid_json", f"invalid JSON line: {exc.msg}")
            continue
        seen = True
        yield Record(value, Origin(file, lineno, key))
    if not seen and first_line == 1:
        yield _problem(file, "empty_file", "the file holds no JSON lines")


def _parquet_records(file: str, key: str = "") -> Iterator[Record | Problem]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(file)
    except Exception as exc:  # pyarrow raises several unrelated types for corrupt files
        yield _problem(file, "invalid_parquet", f"{type(exc).__name__}: {exc}")
        return
    row = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for data in batch.to_pylist():
                row += 1
                yield Record(data, Origin(file, row, key))
    except Exception as exc:  # a corrupt row group mid-file: keep the rows already read
        yield _problem(Origin(file, row + 1, key), "invalid_parquet", f"{type(exc).__name__}: {exc}")
    finally:
        parquet.close()
