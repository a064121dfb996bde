"""Property test: malformed and random records thrown at every discovered reader never crash a run.

Every record either reads into a Trajectory or comes back as a Problem naming where it was and
why; no exception escapes `extractors.ingest.sniff.read_record`, forced to each reader in turn
or left to sniffing. Inputs are random JSON values and valid fixture records with parts deleted,
nulled, retyped or replaced.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.base import Origin
from extractors.discovery import discover_readers
from extractors.ingest.records import Record, find_inputs, iter_records
from extractors.ingest.sniff import FoundVerdict, read_record
from extractors.labels.gold_answers import FoundGold
from schemas import Problem, Trajectory

READERS = discover_readers()
ROOT = Path(__file__).resolve().parents[1]
WHERE = Origin("fuzz.jsonl", 7)
OWN = {"mini_swe_agent", "openhands", "tapeagents", "webdancer", "miroflow", "aptbench_dr", "openai_chat"}
KEYS = [
    "messages",
    "history",
    "trajectory",
    "steps",
    "metadata",
    "role",
    "content",
    "tool_calls",
    "function",
    "arguments",
    "action",
    "observation",
    "args",
    "info",
    "instance_id",
    "query",
    "query_answer",
    "next_step",
    "message_history",
    "final_boxed_answer",
    "type",
    "answer",
    "kind",
    "task",
    "result",
    "text",
    "id",
    "trajectory_format",
    "issue",
    "success",
    "resolved",
    "source",
    "cause",
    "tool_call_metadata",
]
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def _seeds() -> list[Any]:
    files = find_inputs([ROOT / "tests" / "fixtures", ROOT / "extractors" / "samples" / "swe_issue_fix"])
    return [r.data for f in files for r in iter_records(f) if isinstance(r, Record)]


SEEDS = _seeds()

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=30)
    | st.sampled_from(
        [
            "mini-swe-agent-1",
            "mini-swe-agent-1.1",
            "chatml",
            "assistant",
            "user",
            "tool",
            "system",
            "exit",
            "run",
            "message",
            "finish",
            "question",
            "search_action",
            "gaia_answer_action",
            '<tool_call>{"name": 1}</tool_call>',
            "<use_mcp_tool><tool_name>x</tool_name><arguments>[</arguments>",
            "[1, 2",
            '{"planning": 3}',
            "None",
        ]
    )
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=25,
)


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Replace, drop, null or retype one randomly chosen node of `value`."""
    containers = isinstance(value, (dict, list)) and value
    if not containers or depth > 6 or data.draw(st.integers(0, 3)) == 0:
        return data.draw(values)
    if isinstance(value, dict):
        key = data.draw(st.sampled_from(sorted(value)))
        op = data.draw(st.sampled_from(["descend", "drop", "null", "stringify"]))
        out = dict(value)
        if op == "drop":
            del out[key]
        elif op == "null":
            out[key] = None
        elif op == "stringify":
            out[key] = str(out[key])
        else:
            out[key] = _mutate(value[key], data, depth + 1)
        return out
    i = data.draw(st.integers(0, len(value) - 1))
    out = list(value)
    out[i] = _mutate(value[i], data, depth + 1)
    return out


def _check(out: Any, name: str | None) -> None:
    if isinstance(out, Problem):
        assert out.where == str(WHERE) and out.stage == "read" and SNAKE.match(out.reason) and out.detail
        if name in OWN:  # this issue's readers say precisely what is wrong, never a bare crash
            assert out.reason not in ("reader_error", "malformed_record"), out
    else:
        assert out is None or isinstance(out, (Trajectory, FoundVerdict, FoundGold, list)), type(out)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=values)
def test_random_records_never_crash_any_reader(record):
    _check(read_record(READERS, Record(record, WHERE)), None)
    for name in READERS:
        _check(read_record(READERS, Record(record, WHERE), forced=name), name)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_real_records_never_crash_any_reader(data):
    record = _mutate(data.draw(st.sampled_from(SEEDS)), data)
    for _ in range(data.draw(st.integers(0, 3))):
        record = _mutate(record, data)
    _check(read_record(READERS, Record(record, WHERE)), None)
    for name in READERS:
        _check(read_record(READERS, Record(record, WHERE), forced=name), name)


def test_the_fuzzer_starts_from_a_record_of_every_reader_of_this_issue():
    outs = [read_record(READERS, Record(rec, WHERE)) for rec in SEEDS]
    found = {out.source.format for out in outs if isinstance(out, Trajectory)}
    assert found >= OWN
