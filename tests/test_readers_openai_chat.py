"""The generic chat reader on the project's own fixtures: OpenAI tool calls, harmony, ShareGPT."""

from __future__ import annotations

from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.sniff import read_file
from schemas import Problem, Trajectory

FIX = Path(__file__).parent / "fixtures" / "openai_chat"
READERS = discover_readers()


def test_a_message_list_file_is_one_run_and_demonstrations_are_not_the_task():
    (t,) = list(read_file(READERS, str(FIX / "build-0.json")))
    assert isinstance(t, Trajectory) and t.source.format == "openai_chat" and t.kind == "generic"
    assert t.task == "Build error: ModuleNotFoundError: No module named 'yaml'"
    assert [(s.action.tool, s.action.args) for s in t.steps] == [
        ("get_file_contents", {"path": "requirements.txt"}),
        ("submit_dockerfile", {"dockerfile": "RUN pip install pyyaml"}),
    ]
    assert [s.observation for s in t.steps] == ["requests==2.31", "build succeeded"]
    assert t.outcome.label == "unknown" and t.source.instance_id == "build-0"


def test_harmony_recipients_are_tool_calls_and_the_final_channel_is_the_answer():
    harmony, sharegpt, broken = list(read_file(READERS, str(FIX / "rows.jsonl")))
    assert harmony.kind == "dr" and harmony.task == "What is the chemical symbol of gold?"
    assert "Use the browser tool." in harmony.system_prompt
    step = harmony.steps[0]
    assert (step.thought, step.action.tool, step.action.args) == (
        "I should search.",
        "browser.search",
        {"query": "gold chemical symbol"},
    )
    assert "Gold (Au)" in step.observation
    assert harmony.final_answer == "The symbol is Au." and harmony.outcome.label == "success"
    assert sharegpt.task == "Say hi" and (sharegpt.outcome.label, sharegpt.outcome.signal) == (
        "success",
        "row:success",
    )
    assert isinstance(broken, Problem) and broken.reason == "missing_task"


def test_messages_held_as_a_json_string_and_arguments_as_objects_are_both_read():
    import json

    from extractors.base import Origin
    from extractors.readers.openai_chat import OpenAIChat

    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "count files"}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "k", "function": {"name": "bash", "arguments": {"command": "ls | wc -l"}}}],
        },
        {"role": "tool", "tool_call_id": "k", "content": [{"type": "text", "text": "3"}]},
    ]
    t = OpenAIChat().read(
        {"id": "r1", "messages": json.dumps(msgs), "resolved": "False"}, Origin("rows.jsonl", 2)
    )
    assert t.task == "count files" and t.steps[0].action.raw == "ls | wc -l" and t.steps[0].observation == "3"
    assert (t.outcome.label, t.outcome.signal) == ("failure", "row:resolved")
