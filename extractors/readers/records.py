"""Decode raw files into records (parsed JSON objects / Parquet rows) with their origin.

A file is one JSON object (`.traj`, `.json`), a JSON list of rows, JSONL, or Parquet. Binary,
empty, truncated or non-JSON files and bad lines become Problems naming file, line and reason;
the good records of the same file still come through.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from extractors.base import Origin
from schemas import Problem

#: File endings considered when a directory is searched.
INPUT_SUFFIXES = (".traj", ".json", ".jsonl", ".parquet")
_SNIFF_BYTES = 8192


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


def iter_records(path: str | os.PathLike[str]) -> Iterator[Record | Problem]:
    """Yield the records of one file, or Problems for what cannot be decoded."""
    file = str(path)
    try:
        blob = Path(path).read_bytes()
    except OSError as exc:
        yield _problem(file, "unreadable_file", f"{type(exc).__name__}: {exc.strerror or exc}")
        return
    if not blob.strip():
        yield _problem(file, "empty_file", "the file is empty")
        return
    if file.endswith(".parquet") or blob[:4] == b"PAR1":
        yield from _parquet_records(file)
        return
    if b"\x00" in blob[:_SNIFF_BYTES]:
        yield _problem(file, "binary_file", "the file holds NUL bytes: not a JSON, JSONL or Parquet trajectory")
        return
    if file.endswith(".jsonl"):
        yield from _jsonl_records(file, blob)
        return
    try:
        data = orjson.loads(blob)
    except orjson.JSONDecodeError as exc:
        if blob.lstrip()[:1] == b"{" and blob.count(b"\n") > 1 and _looks_like_jsonl(blob):
            yield from _jsonl_records(file, blob)
        else:
            reason = "truncated_json" if _is_truncated(exc, blob) else "invalid_json"
            yield _problem(file, reason, _json_error(exc, blob))
        return
    if isinstance(data, list):
        for i, row in enumerate(data, start=1):
            yield Record(row, Origin(file, i))
    else:
        yield Record(data, Origin(file, None))


def _is_truncated(exc: orjson.JSONDecodeError, blob: bytes) -> bool:
    return exc.pos is not None and exc.pos >= len(blob.rstrip()) - 1


def _looks_like_jsonl(blob: bytes) -> bool:
    first = blob.split(b"\n", 1)[0]
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return True


def _jsonl_records(file: str, blob: bytes) -> Iterator[Record | Problem]:
    for lineno, line in enumerate(blob.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield Record(orjson.loads(line), Origin(file, lineno))
        except orjson.JSONDecodeError as exc:
            yield _problem(Origin(file, lineno), "invalid_json", f"invalid JSON line: {exc.msg}")


def _parquet_records(file: str) -> Iterator[Record | Problem]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(file)
    except Exception as exc:  # pyarrow raises several unrelated types for corrupt files
        yield _problem(file, "invalid_parquet", f"{type(exc).__name__}: {exc}")
        return
    for i, row in enumerate(table.to_pylist(), start=1):
        yield Record(row, Origin(file, i))
