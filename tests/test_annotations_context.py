"""Context fields -> readable steps, parts and blocks (pure functions, no HTML)."""

from __future__ import annotations

import json

from annotations.context import FOLD_CHARS, OPEN_LAST_STEPS, as_text, blocks_of, field_view, field_views


def test_chat_messages_become_steps_with_roles_and_the_last_ones_open():
    trajs = json.dumps(
        [{"role": "system", "content": "be brief", "agent": "main", "message_type": "system_prompt"}]
        + [{"role": "assistant", "thought": f"thought {i}"} for i in range(5)]
    )
    view = field_view("trajs", trajs)
    assert [s.title for s in view.steps][:2] == ["0. system", "1. assistant"]
    assert [s.open for s in view.steps] == [False] * (6 - OPEN_LAST_STEPS) + [True] * OPEN_LAST_STEPS
    assert [p.label for p in view.steps[0].parts] == ["content"]  # bookkeeping keys are hidden
    assert view.steps[1].preview == "thought 0"


def test_deep_research_steps_show_planning_as_prose_and_the_tool_call_as_code():
    dr = json.dumps(
        [
            {
                "planning": "Search for the 1998 winner.",
                "execution": {"name": "search", "args": {"q": "1998"}},
                "observation": "Result: Alice won.",
            }
        ]
    )
    (step,) = field_view("trajectory", dr).steps
    parts = {p.label: p.blocks[0] for p in step.parts}
    assert (
        parts["planning"].kind == "text"
        and parts["execution"].kind == "code"
        and parts["observation"].kind == "code"
    )
    assert json.loads(parts["execution"].text) == {"name": "search", "args": {"q": "1998"}}


def test_fenced_code_is_split_from_prose_and_long_blocks_fold():
    blocks = blocks_of("Run this:\n```bash\npytest -x\n```\nthen look.")
    assert [(b.kind, b.text, b.lang) for b in blocks] == [
        ("text", "Run this:", ""),
        ("code", "pytest -x", "bash"),
        ("text", "then look.", ""),
    ]
    (long,) = blocks_of("x" * (FOLD_CHARS + 1), code=True)
    assert long.folded and long.preview == "x" * len(long.preview) and len(long.preview) < len(long.text)
    assert not blocks_of("short")[0].folded


def test_values_that_are_not_the_expected_json_fall_back_to_text():
    assert field_view("trajs", "[not json").blocks[0].text == "[not json"
    assert field_view("tool_set", '[{"name": "bash"}]').blocks[0].kind == "code"
    assert field_view("issue", "Plain <b>issue</b> text").blocks[0].text == "Plain <b>issue</b> text"


def test_the_plain_text_rendering_keeps_every_field_and_step_in_order():
    views = field_views(
        {
            "uuid": "u",
            "issue_statement": "Bug: 5-2 is 7",
            "trajs": json.dumps([{"role": "user", "content": [{"type": "text", "text": "fix it"}]}]),
        }
    )
    text = as_text(views)
    assert [v.name for v in views] == ["issue_statement", "trajs"]
    assert (
        text.index("Bug: 5-2 is 7") < text.index("--- [0. user · task statement] ---") < text.index("fix it")
    )


def test_the_task_statement_is_open_and_tool_previews_name_the_call_they_answer():
    steps = [
        {"role": "system", "content": "You are a coder."},
        {"role": "user", "content": "Fix the bug.\n" + "details\n" * 40},
        {"role": "assistant", "content": "Look first.\n```bash\ngrep -n evaluate calc.py\n```"},
        {
            "role": "tool",
            "content": "OBSERVATION:\n<returncode>0</returncode>\n<output>\n12: def evaluate(\n</output>",
        },
        {"role": "assistant", "plan": "I need to run the tests"},
        {
            "role": "tool",
            "content": [
                {"type": "text", "text": "OBSERVATION:\n<returncode>1</returncode>\n<output>\n</output>"}
            ],
        },
    ]
    view = field_view("trajs", json.dumps(steps))
    statement = view.steps[1]
    assert (
        statement.statement
        and statement.open
        and not any(b.folded for p in statement.parts for b in p.blocks)
    )
    assert [s.open for s in view.steps] == [False, True, False, True, True, True]
    assert view.steps[2].preview == "$ grep -n evaluate calc.py"
    assert view.steps[3].preview == "→ grep -n evaluate calc.py · 12: def evaluate("
    assert view.steps[5].preview == "↳ exit 1"  # the step before made no call (a plan row keeps none)
    assert not [s for s in view.steps if "OBSERVATION" in s.preview]


def test_a_unified_diff_is_split_into_coloured_lines():
    patch = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n ctx"
    (block,) = field_view("patch", patch).blocks
    assert [c for c, _ in block.lines] == ["meta", "meta", "meta", "hunk", "del", "add", "ctx"]
    assert field_view("prose", "- a list\n- not a diff").blocks[0].lines == ()
