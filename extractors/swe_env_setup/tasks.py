"""The tasks of `swe_env_setup`: row specs (APTBench `env_setup`) and reviewer guidelines.

Field names, order and types follow APTBENCH.md §4 (options separated by one space, as APTBench's
env_setup rows are). APTBench's evaluation protocol of each task is declared beside this module in
`aptbench_prompts.yaml` (discovery folds it into these specs).
"""

from __future__ import annotations

from schemas import TaskSpec

DATASET = "env_setup"

SPECS: dict[str, TaskSpec] = {
    "plan": TaskSpec(
        dataset=DATASET,
        task="plan",
        form="mcq",
        n_options=7,
        fields=(("uuid", "str"), ("repo_info", "str"), ("choices", "str"), ("answer", "str")),
        context=("repo_info",),
        answers=("choices", "answer"),
        choices_sep=" ",
        other_runs_as_distractors=False,  # another run's whole plan is trivially wrong: edits of this one only
        guidelines=(
            "Accept when the gold plan is the sequence of steps the verified run needed, and each edited "
            "plan misses, reorders or adds a step in a way that would break the setup."
        ),
    ),
    "action": TaskSpec(
        dataset=DATASET,
        task="action",
        form="completion",
        n_options=0,
        fields=(
            ("uuid", "str"),
            ("execution_plan", "str"),
            ("executed_cmds", "str"),
            ("cmd_prefix", "str"),
            ("cmd_postfix", "str"),
            ("target_cmd", "str"),
        ),
        context=("execution_plan", "executed_cmds"),
        answers=("cmd_prefix", "cmd_postfix", "target_cmd"),
        answer_key="target_cmd",
        guidelines="Accept when the target command is the next one the verified run executed and the plan calls for it.",
    ),
    "error": TaskSpec(
        dataset=DATASET,
        task="error",
        form="mcq",
        n_options=7,
        fields=(
            ("uuid", "str"),
            ("setup_instruct", "str"),
            ("issue_title", "str"),
            ("issue_body", "str"),
            ("choices", "str"),
            ("answer", "str"),
        ),
        context=("setup_instruct", "issue_title", "issue_body"),
        answers=("choices", "answer"),
        choices_sep=" ",
        other_runs_as_distractors=False,  # another run's fix names files this item never shows
        guidelines=(
            "Accept when the gold fix is what made the failing step pass in the verified run and the other "
            "fixes would not resolve the error shown."
        ),
    ),
}
