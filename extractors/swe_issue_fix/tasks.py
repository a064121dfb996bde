"""The tasks of `swe_issue_fix`: row specs (APTBench `issue_fix`) and reviewer guidelines.

Field names, order and types follow APTBENCH.md §4. APTBench's evaluation protocol of each task is
declared beside this module in `aptbench_prompts.yaml` (discovery folds it into these specs).
Nothing outside this package names these tasks.
"""

from __future__ import annotations

from schemas import TaskSpec

DATASET = "issue_fix"

_PATCH_GUIDE = (
    "Accept when exactly one option is the change that fixes the issue as stated, the others are "
    "plausible but wrong for this issue, and no option is a trivial copy of another."
)

SPECS: dict[str, TaskSpec] = {
    "plan": TaskSpec(
        dataset=DATASET,
        task="plan",
        form="mcq",
        n_options=4,
        fields=(("uuid", "str"), ("trajs", "str"), ("choices", "str"), ("answer", "str")),
        context=("trajs",),
        answers=("choices", "answer"),
        guidelines=(
            "Accept when the gold is the plan the agent actually followed next and it is right for the "
            "trajectory so far; each distractor must be a plausible but wrong next step for this context."
        ),
    ),
    "action": TaskSpec(
        dataset=DATASET,
        task="action",
        form="completion",
        n_options=0,
        fields=(("uuid", "str"), ("tool_set", "str"), ("trajs", "str"), ("answer", "str")),
        context=("tool_set", "trajs"),
        answers=("answer",),
        guidelines="Accept when the gold command is the one the agent ran next and it follows from the trajectory.",
    ),
    "locate": TaskSpec(
        dataset=DATASET,
        task="locate",
        form="mcq",
        n_options=4,
        fields=(("uuid", "str"), ("issue_statement", "str"), ("choices", "str"), ("answer", "str")),
        context=("issue_statement",),
        answers=("choices", "answer"),
        guidelines=(
            "Accept when the gold window is the code the fix edits and the other windows, from the same "
            "file, do not also contain the bug."
        ),
    ),
    "fix_patch": TaskSpec(
        dataset=DATASET,
        task="fix_patch",
        form="mcq",
        n_options=4,
        fields=(("uuid", "str"), ("issue_statement", "str"), ("choices", "str"), ("answer", "str")),
        context=("issue_statement",),
        answers=("choices", "answer"),
        guidelines=_PATCH_GUIDE,
    ),
    "test_patch": TaskSpec(
        dataset=DATASET,
        task="test_patch",
        form="mcq",
        n_options=4,
        fields=(("uuid", "str"), ("problem_statement", "str"), ("choices", "str"), ("answer", "str")),
        context=("problem_statement",),
        answers=("choices", "answer"),
        guidelines=(
            "Accept when the gold test fails before the fix and passes after it, and the distractors do "
            "not reproduce the issue."
        ),
    ),
}
