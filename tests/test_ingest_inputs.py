"""Finding and decoding inputs safely: special files never opened, symlinks followed once, every
skipped entry a Problem, byte-order marks and UTF-16/32 decoded, compressed files streamed."""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import os
import shutil
import socket
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from extractors.ingest import records
from extractors.ingest.bundles import scan_run_inputs
from extractors.ingest.records import Record, iter_records, scan_inputs
from schemas import Problem

RUN = (
    Path(__file__).resolve().parents[1]
    / "extractors/samples/swe_issue_fix/sweagent_v1/tinycalc__tinycalc-12/tinycalc__tinycalc-12.traj"
)
ROWS = [{"id": 1, "text": "héllo"}, {"id": 2, "text": "日本語"}]


def _bounded(fn, *args):
    """Run `fn` in a thread and fail (not hang) if it blocks: opening a FIFO would block forever."""
    result: dict[str, object] = {}
    worker = threading.Thread(target=lambda: result.update(value=fn(*args)), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), f"{fn.__name__} blocked (did it open a FIFO?)"
    return result["value"]


def _reasons(problems: list[Problem], root: Path) -> set[tuple[str, str]]:
    return {(str(Path(p.where).relative_to(root)), p.reason) for p in problems}


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    """A folder with one good run and every kind of entry that must be skipped and reported."""
    root = tmp_path / "runs"
    (root / "sub").mkdir(parents=True)
    shutil.copy(RUN, root / "good.traj")
    os.mkfifo(root / "pipe.traj")
    os.mkfifo(root / "sub" / "unnamed")  # a FIFO is reported whatever its name
    (root / "dangling.traj").symlink_to(root / "nothing-here.traj")
    (root / "sub" / "loop").symlink_to(root)
    (root / "again").symlink_to(root / "sub")  # a second way into a folder (followed once)
    (root / "x.traj").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "agent.sock"))
    sock.close()
    (root / "README.md").write_text("not an input")
    return root


def test_special_files_and_bad_symlinks_are_reported_never_opened(messy):
    scan = _bounded(scan_inputs, [messy])
    assert [p.name for p in scan.files] == ["good.traj"]
    assert _reasons(scan.problems, messy) == {
        ("pipe.traj", "not_a_regular_file"),
        ("sub/unnamed", "not_a_regular_file"),
        ("agent.sock", "not_a_regular_file"),
        ("dangling.traj", "dangling_symlink"),
        ("sub/loop", "symlink_loop"),
        ("x.traj", "not_a_regular_file"),
        ("again", "symlink_duplicate"),
    }
    fifo = next(p for p in scan.problems if p.where.endswith("pipe.traj"))
    assert "FIFO" in fifo.detail and fifo.stage == "read"
    run_scan = _bounded(scan_run_inputs, [messy])  # the build's walk reports the same entries
    assert len(run_scan.problems) == len(scan.problems) and [p.name for p in run_scan.files] == ["good.traj"]


def test_a_fifo_or_a_symlink_loop_given_as_input_is_one_problem(tmp_path):
    os.mkfifo(tmp_path / "in.jsonl")
    (tmp_path / "self.traj").symlink_to(tmp_path / "self.traj")
    scan = _bounded(scan_inputs, [tmp_path / "in.jsonl", tmp_path / "self.traj"])
    assert scan.files == []
    assert _reasons(scan.problems, tmp_path) == {
        ("in.jsonl", "not_a_regular_file"),
        ("self.traj", "symlink_loop"),
    }
    (problem,) = _bounded(lambda p: list(iter_records(p)), tmp_path / "in.jsonl")
    assert problem.reason == "not_a_regular_file"


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [
        ("utf-8", codecs.BOM_UTF8),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-32-le", codecs.BOM_UTF32_LE),
        ("utf-32-be", codecs.BOM_UTF32_BE),
        ("utf-16-le", b""),
        ("utf-16-be", b""),
    ],
)
def test_byte_order_marks_and_utf16_32_are_decoded_every_line_kept(tmp_path, encoding, bom):
    lines = tmp_path / "rows.jsonl"
    lines.write_bytes(bom + _jsonl(ROWS).encode(encoding))
    out = list(iter_records(lines))
    assert [r.data for r in out] == ROWS and [r.origin.line for r in out] == [1, 2]
    doc = tmp_path / "run.json"
    doc.write_bytes(bom + json.dumps({"rows": ROWS}, indent=1, ensure_ascii=False).encode(encoding))
    (record,) = list(iter_records(doc))
    assert isinstance(record, Record) and record.data == {"rows": ROWS}


def test_a_run_with_a_bom_reads_like_the_plain_one(tmp_path):
    plain = [r.data for r in iter_records(RUN)]
    (tmp_path / "bom.traj").write_bytes(codecs.BOM_UTF8 + RUN.read_bytes())
    assert [r.data for r in iter_records(tmp_path / "bom.traj")] == plain


@pytest.mark.parametrize("suffix", [".gz", ".zst", ".bz2"])
def test_compressed_inputs_are_found_and_read_streaming(tmp_path, suffix):
    data = _jsonl(ROWS).encode()
    path = tmp_path / f"rows.jsonl{suffix}"
    if suffix == ".gz":
        path.write_bytes(gzip.compress(data))
    elif suffix == ".bz2":
        path.write_bytes(bz2.compress(data))
    else:
        with pa.output_stream(str(path), compression="zstd") as out:
            out.write(data)
    assert scan_inputs([tmp_path]).files == [path]
    out = list(iter_records(path))
    assert [r.data for r in out] == ROWS and [r.origin.line for r in out] == [1, 2]


def test_a_compressed_run_document_reads_like_the_plain_one(tmp_path):
    (tmp_path / "run.traj.gz").write_bytes(gzip.compress(RUN.read_bytes()))
    assert [r.data for r in iter_records(tmp_path / "run.traj.gz")] == [r.data for r in iter_records(RUN)]


def test_a_corrupt_or_unsupported_compressed_file_is_one_problem(tmp_path, monkeypatch):
    (tmp_path / "bad.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage, not deflate")
    (problem,) = list(iter_records(tmp_path / "bad.jsonl.gz"))
    assert problem.reason == "unreadable_file"
    (tmp_path / "rows.jsonl.zst").write_bytes(b"whatever")
    monkeypatch.setattr(records, "codec_available", lambda name: name != "zstd")  # a build without zstd
    (missing,) = list(iter_records(tmp_path / "rows.jsonl.zst"))
    assert missing.reason == "codec_unavailable" and "zstd" in missing.detail
