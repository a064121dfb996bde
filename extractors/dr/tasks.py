"""The tasks of `dr`: row specs (APTBench `deepresearch`) and reviewer guidelines.

Field names, order and types follow APTBENCH.md §4; releases split each task by the language of its
query (`plan_en`, `plan_zh`), as APTBench does. APTBench's evaluation protocol of each task file is
declared beside this module in `aptbench_prompts.yaml` (discovery folds it into these specs).
"""

from __future__ import annotations

import re

from extractors.dr.wording import COMPLETION_TOOLS
from schemas import TaskSpec

DATASET = "deepresearch"

SPECS: dict[str, TaskSpec] = {
    "plan": TaskSpec(
        dataset=DATASET,
        task="plan",
        form="mcq",
        n_options=6,
        fields=(
            ("traj_id", "int"),
            ("source", "str"),
            ("qid", "str"),
            ("query", "str"),
            ("question_instruct", "str"),
            ("trajectory", "str"),
            ("next_step", "str"),
            ("choices", "str"),
            ("tool_set", "str"),
            ("traj_len", "int"),
            ("answer", "str"),
            ("query_answer", "str"),
            ("uuid", "str"),
        ),
        context=("query", "question_instruct", "trajectory", "tool_set"),
        answers=("next_step", "choices", "answer", "query_answer"),
        guidelines=(
            "Accept when the gold is the step (planning and tool call) the successful run took next, and "
            "each wrong step is plausible for this trajectory without stating its own flaw."
        ),
        split_by_language=True,
        # another run's argument-free completion is never a distractor to an argument-free completion
        # gold: it is the same call whatever its planning says (129 of 613 APTBench items showed
        # another run's `task_complete` beside theirs); a completion carrying another answer differs
        other_runs_not_beside=(
            r'"execution": \{"name": "(?:'
            + "|".join(sorted(map(re.escape, COMPLETION_TOOLS)))
            + r')", "args": \{\}\}'
        ),
    ),
    "summ_ans": TaskSpec(
        dataset=DATASET,
        task="summ_ans",
        form="completion",
        n_options=0,
        fields=(
            ("uuid", "str"),
            ("traj_id", "int"),
            ("source", "str"),
            ("query", "str"),
            ("query_answer", "str"),
            ("question_instruct", "str"),
            ("traj_len", "int"),
            ("trajectory", "str"),
            ("answer", "str"),
        ),
        context=("query", "question_instruct", "trajectory"),
        answers=("query_answer", "answer"),
        guidelines="Accept when the answer is the verified final answer and the trajectory contains what it takes to reach it.",
        split_by_language=True,
    ),
}
