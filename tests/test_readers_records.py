"""Decoding files into records: streaming JSONL and Parquet, JSON documents, transcripts, bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from extractors.ingest.records import Record, iter_records
from schemas import Problem


def test_jsonl_is_read_line_by_line_with_bad_lines_quarantined_and_blank_lines_skipped(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n   \n[1, 2]\r\n')
    out = list(iter_records(path))
    assert [(type(o).__name__, str(o.origin) if isinstance(o, Record) else o.where) for o in out] == [
        ("Record", f"{path}:1"),
        ("Problem", f"{path}:3"),
        ("Record", f"{path}:5"),
    ]
    assert out[0].data == {"a": 1} and out[2].data == [1, 2] and out[1].reason == "invalid_json"


def test_jsonl_and_parquet_memory_stays_flat_in_the_input_size(tmp_path):
    import tracemalloc

    line = json.dumps({"messages": [{"role": "user", "content": "x" * 10_000}]}) + "\n"
    path = tmp_path / "big.jsonl"
    path.write_text(line * 2000)  # about 20 MB
    table = pa.table({"text": ["y" * 10_000] * 2000})
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=200)
    del table
    for file in (path, tmp_path / "big.parquet"):
        tracemalloc.start()
        count = sum(1 for _ in iter_records(file))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == 2000 and peak < 6_000_000, (file.name, peak)


def test_a_json_named_file_holding_jsonl_is_streamed_as_lines(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text('{"a": 1}\n{"a": 2}\n')
    assert [(r.data, r.origin.line) for r in iter_records(path)] == [({"a": 1}, 1), ({"a": 2}, 2)]


def test_a_json_document_list_is_rows_unless_it_is_a_transcript(tmp_path):
    rows, chat = tmp_path / "rows.json", tmp_path / "chat.json"
    rows.write_text(json.dumps([{"messages": []}, {"messages": []}], indent=1))
    chat.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], indent=1)
    )
    assert [r.origin.line for r in iter_records(rows)] == [1, 2]
    (whole,) = list(iter_records(chat))
    assert whole.origin.line is None and len(whole.data) == 2


def test_parquet_is_read_batch_by_batch_with_row_numbers(tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(
        pa.table({"i": list(range(600)), "s": [f"r{i}" for i in range(600)]}), path, row_group_size=100
    )
    out = list(iter_records(path))
    assert (
        len(out) == 600 and out[599].data == {"i": 599, "s": "r599"} and str(out[599].origin) == f"{path}:600"
    )


def test_broken_inputs_are_problems_naming_the_file_and_the_reason(tmp_path):
    cases = {
        "empty.jsonl": b"\n\n",
        "empty.json": b"",
        "nul.json": b'{"a":\x00}',
        "cut.json": b'{"a": [1, 2',
        "bad.parquet": b"PAR1garbage",
        "junk.json": b"{not json at all}\n",
    }
    found = {}
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
        (problem,) = list(iter_records(tmp_path / name))
        assert isinstance(problem, Problem) and problem.where == str(tmp_path / name) and problem.detail
        found[name] = problem.reason
    assert found == {
        "empty.jsonl": "empty_file",
        "empty.json": "empty_file",
        "nul.json": "binary_file",
        "cut.json": "truncated_json",
        "bad.parquet": "invalid_parquet",
        "junk.json": "invalid_json",
    }
    (missing,) = list(iter_records(tmp_path / "nope.json"))
    assert missing.reason == "unreadable_file"
