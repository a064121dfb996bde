"""Find input files and decode them into records (parsed JSON objects / Parquet rows), streaming.

Finding (`scan_inputs`): folders are searched recursively; symlinks are followed once (a link back
to a folder on its own path is `symlink_loop`, a second way into a folder already searched is
`symlink_duplicate`, a link to nothing is `dangling_symlink`); FIFOs, sockets and devices are never
opened (`not_a_regular_file`), nor is a folder named like an input file; every entry skipped so
becomes a Problem, so it is quarantined and counted.

Decoding: a file is one JSON document (`.traj`, `.json`), JSONL, or Parquet, optionally compressed
(`.gz`, `.zst`, `.bz2`, decompressed streaming by pyarrow; a codec it lacks is `codec_unavailable`).
Text may be UTF-8 (with or without a byte-order mark), UTF-16 or UTF-32 with a BOM, or UTF-16
without one; it is re-encoded to UTF-8 as it streams. JSONL is read line by line and Parquet batch
by batch, so memory stays flat however large the input; a JSON document is one object and is parsed
whole. Binary, empty, truncated or non-JSON files and bad lines become Problems naming file, line
and reason; the good records of the same file still come through.

A JSON document that is a list is either a table of rows (one record per element, `file:i`) or
one transcript: when most elements are chat messages (`role`) or agent events (`action` /
`observation`), the whole list is a single record (an OpenHands event list, an OpenAI message
list), because its elements mean nothing apart.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson

from extractors.base import Origin
from schemas import Problem

#: File endings considered when a directory is searched (each also compressed, see COMPRESSIONS).
INPUT_SUFFIXES = (".traj", ".json", ".jsonl", ".parquet")
#: Compressed-file endings -> pyarrow codec name; read streaming.
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".bz2": "bz2"}
_SNIFF_BYTES = 8192
_STREAM_BUFFER = 1 << 18
#: Parquet rows decoded per batch: bounds memory for wide rows (trajectories of tens of KB).
PARQUET_BATCH_ROWS = 256


class Record(NamedTuple):
    """One raw record and where it sits."""

    data: Any
    origin: Origin


#: Reasons of the entries `scan_inputs` skips (each is a quarantined Problem).
SKIPPED_REASONS = frozenset(
    {"not_a_regular_file", "dangling_symlink", "symlink_loop", "symlink_duplicate", "unreadable_folder"}
)


class InputScan(NamedTuple):
    """The files found under some paths, and a Problem for every entry skipped."""

    files: list[Path]
    problems: list[Problem]


def input_name(name: str, suffixes: tuple[str, ...] = INPUT_SUFFIXES) -> bool:
    """Whether a file name is an input: an input suffix, optionally followed by a compression suffix."""
    base, ext = os.path.splitext(name)
    if ext in COMPRESSIONS:
        name = base
    return name.endswith(suffixes)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _skipped(path: str | Path, reason: str, detail: str) -> Problem:
    return Problem(where=str(path), stage="read", reason=reason, detail=detail)


def scan_inputs(
    paths: Iterable[str | os.PathLike[str]],
    suffixes: tuple[str, ...] = INPUT_SUFFIXES,
    names: tuple[str, ...] = (),
) -> InputScan:
    """Expand files and folders (recursively) into sorted input files; never opens anything.

    A path given explicitly is taken whatever its name (a missing one is reported when read); in
    folders, files whose name is an input (`suffixes`, or exactly one of `names`) are taken.
    """
    found: set[Path] = set()
    problems: list[Problem] = []
    visited: set[tuple[int, int]] = set()
    for raw in paths:
        path = Path(raw)
        try:
            st = path.stat()
        except FileNotFoundError:
            if path.is_symlink():
                problems.append(_skipped(path, "dangling_symlink", "a symlink to nothing"))
            else:
                found.add(path)  # reported as unreadable when read
            continue
        except OSError as exc:
            problems.append(_skipped(path, "symlink_loop", f"cannot resolve: {exc.strerror or exc}"))
            continue
        if stat.S_ISDIR(st.st_mode):
            visited.add((st.st_dev, st.st_ino))
            _walk(path, (suffixes, names), found, problems, visited, frozenset({(st.st_dev, st.st_ino)}))
        elif stat.S_ISREG(st.st_mode):
            found.add(path)
        else:
            problems.append(_skipped(path, "not_a_regular_file", f"{_kind(st.st_mode)}: never opened"))
    return InputScan(sorted(found), problems)


def _walk(
    folder: Path,
    wanted: tuple[tuple[str, ...], tuple[str, ...]],
    found: set[Path],
    problems: list[Problem],
    visited: set[tuple[int, int]],
    ancestors: frozenset[tuple[int, int]],
) -> None:
    suffixes, names = wanted
    try:
        # real entries before symlinks: a folder reached both ways is searched by its real path
        entries = sorted(os.scandir(folder), key=lambda e: (e.is_symlink(), e.name))
    except OSError as exc:
        problems.append(_skipped(folder, "unreadable_folder", f"{type(exc).__name__}: {exc.strerror or exc}"))
        return
    for entry in entries:
        path = Path(entry.path)
        wanted_name = input_name(entry.name, suffixes) or entry.name in names
        try:
            st = os.stat(entry.path)  # follows a symlink
        except FileNotFoundError:
            if entry.is_symlink():
                problems.append(_skipped(path, "dangling_symlink", "a symlink to nothing"))
            continue
        except OSError as exc:
            problems.append(_skipped(path, "symlink_loop", f"cannot resolve: {exc.strerror or exc}"))
            continue
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in ancestors:
                problems.append(_skipped(path, "symlink_loop", "links back to a folder on its own path"))
                continue
            if key in visited:
                problems.append(
                    _skipped(path, "symlink_duplicate", "a second way into a folder already searched")
                )
                continue
            visited.add(key)
            before = len(found)
            _walk(path, wanted, found, problems, visited, ancestors | {key})
            if wanted_name and len(found) == before:
                problems.append(
                    _skipped(
                        path, "not_a_regular_file", "a folder named like an input file, holding no input"
                    )
                )
        elif entry.name.startswith("."):
            continue  # hidden files (editor and temp files) are not inputs
        elif not stat.S_ISREG(st.st_mode):
            problems.append(_skipped(path, "not_a_regular_file", f"{_kind(st.st_mode)}: never opened"))
        elif wanted_name:
            found.add(path)


def find_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files and directories (recursively) into a sorted list of candidate input files."""
    return scan_inputs(paths).files


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
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the open forever
            yield _problem(file, "not_a_regular_file", f"{_kind(st.st_mode)}: never opened")
            return
        handle = _open(file)
    except CodecUnavailable as exc:
        yield _problem(file, "codec_unavailable", str(exc))
        return
    except OSError as exc:
        yield _problem(file, "unreadable_file", f"{type(exc).__name__}: {exc.strerror or exc}")
        return
    try:
        head = handle.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
        if _logical_name(file).endswith(".parquet") or head[:4] == b"PAR1":
            handle.close()
            if _logical_name(file) != file:
                yield _problem(file, "codec_unavailable", "compressed Parquet: decompress it first")
                return
            yield from _parquet_records(file, key=key)
            return
        text = _as_utf8(handle, head)
        if text is None:
            yield _problem(
                file, "binary_file", "the file holds NUL bytes: not a JSON, JSONL or Parquet trajectory"
            )
            return
        handle = text  # closing it closes the file under it
        head = text.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
        if not head.strip() and not _has_content(text):
            yield _problem(file, "empty_file", "the file is empty")
            return
        if _logical_name(file).endswith(".jsonl"):
            yield from _jsonl_records(file, text, first_line=1, key=key)
            return
        yield from _document_or_lines(file, text, key=key)
    except (OSError, UnicodeDecodeError) as exc:  # a corrupt compressed stream, a bad UTF-16 pair
        detail = getattr(exc, "strerror", None) or exc
        yield _problem(file, "unreadable_file", f"{type(exc).__name__}: {detail}")
    finally:
        handle.close()


class CodecUnavailable(OSError):
    """The file is compressed with a codec this pyarrow build lacks."""


def _logical_name(file: str) -> str:
    base, ext = os.path.splitext(file)
    return base if ext in COMPRESSIONS else file


def _open(file: str) -> io.BufferedReader:
    """The file's bytes, decompressed as they stream when its name says it is compressed."""
    codec = COMPRESSIONS.get(os.path.splitext(file)[1])
    if codec is None:
        return open(file, "rb", buffering=_STREAM_BUFFER)
    import pyarrow as pa

    if not codec_available(codec):
        raise CodecUnavailable(f"{codec} is not available in this pyarrow build")
    return io.BufferedReader(pa.input_stream(file, compression=codec), _STREAM_BUFFER)


def codec_available(codec: str) -> bool:
    """Whether pyarrow was built with `codec` (gzip, bz2 and zstd are in the PyPI wheels)."""
    import pyarrow as pa

    return bool(pa.Codec.is_available(codec))


#: Byte-order marks, longest first (the UTF-32 LE mark starts like the UTF-16 LE one).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _encoding(head: bytes) -> tuple[str, int] | None:
    """(encoding, BOM length) of a text head; None when it is binary (NUL bytes, not UTF-16/32)."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    if b"\x00" not in head:
        return "utf-8", 0
    sample = head[: len(head) - len(head) % 2]
    even, odd = sample[0::2], sample[1::2]
    if sample and odd.count(0) == 0 and even.count(0) * 10 >= len(even) * 9:
        return "utf-16-be", 0
    if sample and even.count(0) == 0 and odd.count(0) * 10 >= len(odd) * 9:
        return "utf-16-le", 0
    return None


def _as_utf8(handle: io.BufferedReader, head: bytes) -> io.BufferedReader | None:
    """`handle` as UTF-8 bytes without a BOM (UTF-16/32 re-encoded as it streams), or None if binary."""
    found = _encoding(head)
    if found is None:
        return None
    encoding, bom = found
    if encoding == "utf-8":
        handle.read(bom)
        return handle
    handle.read(bom)
    return io.BufferedReader(_Recoded(handle, encoding), _STREAM_BUFFER)


class _Recoded(io.RawIOBase):
    """A byte stream in `encoding` read as UTF-8 bytes."""

    def __init__(self, raw: IO[bytes], encoding: str) -> None:
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(_STREAM_BUFFER)
            self._pending = self._decoder.decode(chunk, final=not chunk).encode("utf-8")
            if not chunk:
                break
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _has_content(handle: IO[bytes]) -> bool:
    while chunk := handle.read(1 << 20):
        if chunk.strip():
            return True
    return False


def _document_or_lines(file: str, handle: IO[bytes], key: str = "") -> Iterator[Record | Problem]:
    """A `.json`/`.traj` file: one document, unless its first line is a whole JSON value (JSONL).

    Read forward only (a decompressed or re-encoded stream cannot seek back)."""
    consumed: list[bytes] = []
    lines = iter(handle.readline, b"")
    first, lineno = b"", 0
    for first in lines:
        lineno += 1
        consumed.append(first)
        if first.strip():
            break
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        value = _NOT_JSON
    if value is not _NOT_JSON:
        second, second_no = None, lineno
        for line in lines:
            second_no += 1
            if line.strip():
                second = line
                break
        if second is None:
            yield from _document_records(file, value, key=key)
            return
        yield Record(value, Origin(file, lineno, key))
        yield from _jsonl_records(file, _chain([second], lines), first_line=second_no, key=key)
        return
    blob = b"".join(consumed) + handle.read()
    try:
        data = orjson.loads(blob)
    except orjson.JSONDecodeError as exc:
        reason = "truncated_json" if _is_truncated(exc, blob) else "invalid_json"
        yield _problem(file, reason, _json_error(exc, blob))
        return
    yield from _document_records(file, data, key=key)


def _chain(first: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    yield from first
    yield from rest


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
    file: str, handle: Iterable[bytes], first_line: int, key: str = ""
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
