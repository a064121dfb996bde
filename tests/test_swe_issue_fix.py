"""swe_issue_fix extraction: plan condensation, item selection, context forms, budgets."""

from __future__ import annotations

import json

import pytest

from extractors.base import ExtractOptions
from extractors.swe_issue_fix import SweIssueFix, condense_plan
from schemas import Action, GoldStep, Outcome, Problem, Source, Step, Trajectory
from schemas.text import truncate_middle


def _step(i: int, thought: str, raw: str, tool: str = "bash", obs: str | None = "ok", args=None) -> Step:
    return Step(index=i, thought=thought, action=Action(tool=tool, raw=raw, args=args or {}), observation=obs)


def _traj(steps, **kw) -> Trajectory:
    return Trajectory(
        trajectory_id=kw.get("tid", "t1"),
        kind="swe",
        task="Division by zero in tinycalc.div",
        system_prompt="You are a helpful assistant.",
        prompt="<pr_description>\nDivision by zero in tinycalc.div\n</pr_description>",
        steps=tuple(steps),
        outcome=Outcome(label="success", signal="harness_summary:resolved_ids", reason="resolved"),
        source=Source(format="swe_agent_traj", file="x.traj", instance_id="tinycalc-1"),
    )


STEPS = [
    _step(
        0,
        "Let's look at the repository layout first.",
        "find /testbed -name '*.py'",
        obs="\n".join(
            f"/testbed/{p}"
            for p in (
                "tinycalc/ops.py",
                "tinycalc/cli.py",
                "tinycalc/util.py",
                "tests/test_ops.py",
                "tests/test_cli.py",
                "tests/test_util.py",
            )
        ),
    ),
    _step(
        1,
        "I'll open `tinycalc/ops.py` to see how div is implemented.",
        "str_replace_editor view /testbed/tinycalc/ops.py",
        tool="str_replace_editor",
        args={"command": "view", "path": "/testbed/tinycalc/ops.py"},
    ),
    _step(
        2,
        "Now let me write a script that reproduces the crash.",
        "str_replace_editor create /testbed/repro.py --file_text 'print(1)'",
        tool="str_replace_editor",
        args={"command": "create", "path": "/testbed/repro.py", "file_text": "print(1)"},
    ),
    _step(3, "Run it.", "cd /testbed && python repro.py"),
    _step(4, "The fix works; time to submit.", "submit", tool="submit", obs=None),
]


def test_a_stated_intent_becomes_an_i_need_to_plan():
    assert condense_plan(STEPS[1]) == "I need to open `tinycalc/ops.py` to see how div is implemented"
    assert condense_plan(STEPS[0]) == "I need to look at the repository layout first"


def test_without_a_stated_intent_the_plan_comes_from_the_action():
    assert condense_plan(STEPS[3]) == "I need to run `cd /testbed && python repro.py`"
    assert condense_plan(STEPS[4]) == "I need to submit the changes"
    view = _step(0, "", "str_replace_editor view /testbed/a.py", tool="str_replace_editor")
    assert condense_plan(view) == "I need to view /testbed/a.py"


def test_plan_items_replace_assistant_turns_with_plans_and_end_on_an_observation():
    golds = list(SweIssueFix().extract(_traj(STEPS), "plan", ExtractOptions(max_items_per_trajectory=10)))
    assert all(isinstance(g, GoldStep) for g in golds)
    last = golds[-1]
    msgs = json.loads(last.fields["trajs"])
    assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
    assert all(set(m) == {"role", "plan"} for m in msgs if m["role"] == "assistant")
    assert msgs[-1]["role"] in {"tool", "user"} and msgs[-1]["content"][0]["text"].startswith("OBSERVATION:")
    assert last.gold.startswith("I need to")
    assert last.gold not in [m.get("plan") for m in msgs]


def test_action_items_end_on_the_assistant_thought_and_answer_with_the_command():
    golds = [
        g
        for g in SweIssueFix().extract(_traj(STEPS), "action", ExtractOptions(max_items_per_trajectory=10))
        if isinstance(g, GoldStep)
    ]
    by_step = {g.step_index: g for g in golds}
    g = by_step[1]
    msgs = json.loads(g.fields["trajs"])
    assert msgs[-1] == {"role": "assistant", "thought": STEPS[1].thought}
    assert g.gold == "str_replace_editor view /testbed/tinycalc/ops.py"
    assert msgs[-3]["role"] == "assistant" and msgs[-3]["action"] == "find /testbed -name '*.py'"
    assert json.loads(g.fields["tool_set"]) == [{"name": "str_replace_editor"}]


def test_multi_line_and_semicolon_commands_never_become_action_targets():
    steps = [
        _step(0, "Let me edit it.", "edit 1:2\nx = 1\nend_of_edit"),
        _step(1, "Let me run both.", "ls; pwd"),
        _step(2, "Let me list files.", "ls -la"),
    ]
    golds = [
        g
        for g in SweIssueFix().extract(_traj(steps), "action", ExtractOptions(max_items_per_trajectory=10))
        if isinstance(g, GoldStep)
    ]
    assert [g.gold for g in golds] == ["ls -la"]


def test_selection_is_seeded_per_trajectory_and_capped():
    opts = ExtractOptions(max_items_per_trajectory=2, seed=7)
    a = [g.step_index for g in SweIssueFix().extract(_traj(STEPS), "plan", opts)]
    b = [g.step_index for g in SweIssueFix().extract(_traj(STEPS), "plan", opts)]
    assert a == b and len(a) == 2
    picks = {
        tuple(g.step_index for g in SweIssueFix().extract(_traj(STEPS), "plan", opts._replace(seed=s)))
        for s in range(12)
    }
    assert len(picks) > 1


def test_plan_golds_come_with_wrong_plans_made_from_the_runs_own_context():
    golds = list(SweIssueFix().extract(_traj(STEPS), "plan", ExtractOptions(max_items_per_trajectory=10)))
    by_step = {g.step_index: g for g in golds}
    g = by_step[1]
    # a longer substitute, then one not longer than the gold's own target (`tinycalc/ops.py`)
    assert [c.text for c in g.candidates if c.origin == "rule:wrong_target"][:2] == [
        "I need to open `tinycalc/util.py` to see how div is implemented",
        "I need to open `tinycalc/cli.py` to see how div is implemented",
    ]
    assert "I need to submit the changes" in {
        c.text for c in g.candidates if c.origin == "rule:premature"
    } or any(c.origin == "rule:premature" for c in g.candidates)
    run = by_step[3]  # a command's script swapped for another script the context names
    assert {c.text for c in run.candidates if c.origin == "rule:wrong_target"} >= {
        "I need to run `cd /testbed && python tests/test_ops.py`"
    }
    assert all(c.text not in {condense_plan(s) for s in STEPS} for g in golds for c in g.candidates)


def test_intents_never_double_their_modal_nor_end_cut_inside_a_quote():
    cases = {
        "I'll need to verify the fix with `repro.py`.": "I need to verify the fix with `repro.py`",
        "Now I will apply the patch to `ops.py`.": "I need to apply the patch to `ops.py`",
        "We should also check `div`.": "I need to check `div`",
        'I need to see how it parses "x1, x2: y" in `split`.': 'I need to see how it parses "x1, x2: y" in `split`',
    }
    for thought, plan in cases.items():
        assert condense_plan(_step(0, thought, "ls")) == plan
    # a finding is no intent, and a clause cut before its object is not kept: the action speaks
    assert condense_plan(_step(0, "Now I think the bug is in div.", "ls -la")) == "I need to run `ls -la`"
    assert condense_plan(_step(0, "I need to change it to:\n x", "ls -la")) == "I need to run `ls -la`"


def test_a_trajectory_without_eligible_steps_gives_an_info_problem():
    out = list(SweIssueFix().extract(_traj([_step(0, "", "")]), "plan", ExtractOptions()))
    assert len(out) == 1 and isinstance(out[0], Problem) and out[0].reason == "no_eligible_steps"


def test_long_observations_keep_head_and_tail():
    text = "A" * 50 + "B" * 50
    cut = truncate_middle(text, 20)
    assert cut.startswith("A" * 10) and cut.endswith("B" * 10) and "80 characters omitted" in cut


def test_contexts_over_the_budget_drop_the_oldest_steps_but_keep_the_task():
    big = [_step(i, f"Let me look at `f{i}.py` closely.", f"cat f{i}.py", obs="x" * 3000) for i in range(8)]
    opts = ExtractOptions(max_items_per_trajectory=10, max_context_tokens=2500, max_observation_chars=4000)
    golds = [g for g in SweIssueFix().extract(_traj(big), "plan", opts) if isinstance(g, GoldStep)]
    last = max(golds, key=lambda g: g.step_index)
    msgs = json.loads(last.fields["trajs"])
    assert len(last.fields["trajs"]) / 4 <= 2500
    assert msgs[1]["role"] == "user" and "Division by zero" in msgs[1]["content"][0]["text"]
    assert len([m for m in msgs if m["role"] == "assistant"]) < last.step_index


def test_a_long_plan_gets_wrong_plans_with_two_targets_swapped_and_never_names_what_the_patch_changes():
    from extractors.swe_issue_fix.plans import rule_plans

    gold = "I need to implement `_print_dict` and `_print_set` in the `ReprPrinter` class of the module"
    context = [
        "srepr not printing dict and set",
        "def _print_list(self, expr):\ndef _print_tuple(self, expr):\ndef _print_Symbol(self, expr):",
        "class StrPrinter:\nclass LatexPrinter:\n`sympy/printing/repr.py`",
    ]
    made = rule_plans(gold, context, [], [gold], True, right={"_print_tuple", "sympy/printing/repr.py"})
    texts = [m.text for m in made]
    doubles = [t for t in texts if "_print_dict" not in t and "_print_set" not in t]
    assert len(doubles) >= 2 and all(t.startswith("I need to implement `") for t in doubles), texts
    assert any("_print_list" in t and "_print_Symbol" in t for t in doubles)  # same-shaped names first
    # a function the resolving patch changes is a right target: never offered as a wrong one
    assert not [t for t in texts if "_print_tuple" in t or "repr.py" in t]
    assert all(m.kind in {"wrong_target", "redundant"} for m in made)


def test_plan_items_are_drawn_from_the_steps_richest_in_wrong_plans_of_their_own():
    from extractors.swe_issue_fix import richest

    counts = {0: 2, 1: 13, 2: 9, 3: 12, 4: 0, 5: 6, 6: 10}
    assert richest(counts, 2) == [1, 3]  # two steps reach 12
    assert richest(counts, 3) == [1, 2, 3, 6]  # only two reach 12: the next tier, 9
    assert richest(counts, 6) == [0, 1, 2, 3, 5, 6]  # the last tier takes any step with 2
    assert richest({0: 1, 1: 0}, 2) == []  # none has 2: the caller draws from every eligible step


def test_wrong_targets_are_of_the_gold_targets_own_type():
    from extractors.swe_issue_fix.plans import name_role, rule_plans

    context = [
        "Running `python -m pytest` fails; see `CHANGELOG.rst`, `docs/index.rst` and `textwidth`",
        "src/_pytest/main.py:\ndef _recurse(path):\ndef _collect(self):\nclass Session:\n`src/_pytest/python.py`",
        "`verify_docinfo.sh` and `reproduce.sh` were written; `mypackage2` is the package",
    ]
    gold = "I need to find the definition of `_recurse` in `src/_pytest/main.py`"
    texts = [m.text for m in rule_plans(gold, context, [], [gold], False)]
    # a function is looked for in another code file, never in a changelog; swapped for a function
    assert any("`src/_pytest/python.py`" in t for t in texts) and any("`_collect`" in t for t in texts)
    assert not [t for t in texts if "CHANGELOG" in t or "index.rst" in t or "`Session`" in t]
    assert not [t for t in texts if "`pytest`" in t or "`textwidth`" in t or "`mypackage2`" in t]
    gold = "I need to look at `docs/index.rst` created in `verify_docinfo.sh`"
    texts = [m.text for m in rule_plans(gold, context, [], [gold], False)]
    # a shell script is a file (swapped for another script, never a bare name); a doc page for a doc page
    assert any("created in `reproduce.sh`" in t for t in texts), texts
    assert any("`CHANGELOG.rst` created in" in t for t in texts), texts
    assert not [t for t in texts if "`textwidth`" in t or "`mypackage2`" in t or "main.py" in t]
    text = "\n".join(context)
    assert [name_role(n, text) for n in ("_recurse", "Session", "pytest", "textwidth")] == [
        "function",
        "class",
        "module",
        "",
    ]


@pytest.mark.parametrize(
    ("name", "text", "role"),
    [
        ("foo", "class foo:", "class"),  # at the very start: the word boundary before `class`
        ("foo", "subclass foo", ""),  # `class` inside a word is no class statement
        ("foo", "x = 1\ndef\tfoo(x):", "function"),
        ("foo", "redef foo", ""),
        ("foo", "foo(1)", "function"),  # a call at the very start
        ("foo", "x.foo(1)", ""),  # a method of something else
        ("foo", "_foo(1)", ""),
        ("foo", "import foo", "module"),
        ("foo", "reimport foo", ""),
        ("foo", "-m foo", "module"),  # `-m` at the very start
        ("foo", "python x-m foo", ""),
        ("foo", "python\n-m foo", "module"),
        ("foo", "see foo/bar/baz.py", "module"),
        ("foo", "see ./foo/bar/baz.py", ""),
        ("foo", "see foo/bar", ""),  # a path's top folder needs a second slash
        ("foo.bar", "nothing", "module"),
        ("foo()", "nothing", "function"),
        ("Foo", "nothing", "class"),
        ("fo.o", "import foXo", "module"),  # dotted: a module by its shape; the dot is no wildcard
        ("fo+o", "fo+o(", "function"),  # escaped: a name's characters are matched as written
    ],
)
def test_a_names_role_is_read_from_the_statements_around_it(name, text, role):
    from extractors.swe_issue_fix.plans import name_role

    assert name_role(name, text) == role
