"""What the extractor learns from every labelled run before extracting, and the plan candidates it feeds.

Failed runs are never gold, but they are the best source of wrong options: the plan a failed run
of the same instance had at the same point, the patch it submitted, the reproduction script it
wrote. `observe_runs` collects them by instance id over the whole build (the extractor's
`observe` hook); `plan_candidates` orders a plan gold's candidates: failed runs of the same
instance at the nearest relative position first, then rule-made wrong plans from this run's own
context (`plans.rule_plans`), their kinds interleaved so no single rule fills an item.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import zip_longest
from typing import NamedTuple

from extractors.shell.views import parse_view
from extractors.swe_issue_fix.patches import created_scripts, first_write, parse_patch
from extractors.swe_issue_fix.plans import condense_plan, is_vague, rule_plans
from schemas import Candidate, Trajectory

#: A function or class a hunk's section line or added lines define.
_DEFINED = re.compile(r"(?:^|\s)(?:def|class)\s+([A-Za-z_]\w*)", re.M)
#: Characters of each observation the plan rules read (the end: the freshest names).
OBSERVATION_TAIL = 3000


class FailedPlan(NamedTuple):
    """One plan of a failed run: its text, its relative position in the run, and where it is."""

    text: str
    position: float
    where: str


class Observed(NamedTuple):
    """Failed runs' material by instance id."""

    patches: dict[str, tuple[str, ...]]
    plans: dict[str, tuple[FailedPlan, ...]]
    scripts: dict[str, tuple[str, ...]]


def observe_runs(runs: Iterable[Trajectory]) -> Observed:
    """Patches, plans and reproduction scripts of every failed run, by instance id."""
    patches: dict[str, list[str]] = {}
    plans: dict[str, list[FailedPlan]] = {}
    scripts: dict[str, list[str]] = {}
    for t in runs:
        iid = t.source.instance_id
        if t.outcome.label != "failure" or not iid:
            continue
        if (t.patch or "").strip():
            patches.setdefault(iid, []).append(t.patch or "")
        n = max(len(t.steps), 1)
        for s in t.steps:
            plan = condense_plan(s)
            if s.action is not None and len(plan.split()) >= 5 and not is_vague(plan):
                plans.setdefault(iid, []).append(
                    FailedPlan(plan, s.index / n, f"{t.trajectory_id}#{s.index}")
                )
        scripts.setdefault(iid, []).extend(sc.text for sc in created_scripts(t.steps))
    return Observed(
        {k: tuple(dict.fromkeys(v)) for k, v in patches.items()},
        {k: tuple(v) for k, v in plans.items()},
        {k: tuple(dict.fromkeys(v)) for k, v in scripts.items() if v},
    )


def _interleave(groups: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    return [c for row in zip_longest(*groups) for c in row if c is not None]


class RunFacts(NamedTuple):
    """What the plan rules need of a whole run, computed once: viewed paths by step, first fix."""

    viewed: tuple[str | None, ...]
    """The file each step displayed (None when it viewed nothing)."""
    first_fix: int | None
    """The first step that may have changed a file of the run's patch."""
    right: frozenset[str] = frozenset()
    """The files the run's patch changes and the functions and classes its hunks change."""


def run_facts(traj: Trajectory) -> RunFacts:
    """`RunFacts` of `traj`."""
    viewed: list[str | None] = []
    for s in traj.steps:
        view = None
        if s.action is not None:
            view = parse_view(str(s.action.args.get("command") or s.action.raw), s.observation)
        viewed.append(view.path if view is not None else None)
    files = parse_patch(traj.patch or "")
    sources = [f.path for f in files if not f.is_test]
    firsts = [w for p in sources if (w := first_write(traj.steps, p)) is not None]
    right = {f.path for f in files}
    for h in (h for f in files for h in f.hunks):
        right.update(_DEFINED.findall(h.section))
        right.update(_DEFINED.findall("\n".join(ln[1:] for ln in h.lines if ln[:1] == "+")))
    return RunFacts(tuple(viewed), min(firsts, default=None), frozenset(right))


def plan_candidates(
    traj: Trajectory, i: int, plans: Sequence[str], observed: Observed, facts: RunFacts | None = None
) -> tuple[Candidate, ...]:
    """Wrong plans for step `i` of `traj`, in preference order (see the module docstring)."""
    facts = facts or run_facts(traj)
    gold = plans[i]
    n = max(len(traj.steps), 1)
    own = {p.strip().lower() for p in plans}
    failed = [
        fp
        for fp in sorted(
            observed.plans.get(traj.source.instance_id, ()), key=lambda fp: abs(fp.position - i / n)
        )
        if fp.text.strip().lower() not in own
    ]
    same = [Candidate(text=fp.text, origin=f"same_instance:failed_run:{fp.where}") for fp in failed[:6]]
    context = [traj.task]
    for s in traj.steps[:i]:
        context.append(plans[s.index])
        context.append((s.observation or "")[-OBSERVATION_TAIL:])
    viewed = [v for v in facts.viewed[:i] if v]
    edited_yet = facts.first_fix is not None and facts.first_fix < i
    made = rule_plans(gold, context, viewed, plans, edited_yet, facts.right)
    kinds: dict[str, list[Candidate]] = {}
    for rp in made:
        kinds.setdefault(rp.kind, []).append(Candidate(text=rp.text, origin=f"rule:{rp.kind}"))
    premature = kinds.pop("premature", [])  # the least specific rule goes last
    return tuple(same + _interleave(list(kinds.values())) + premature)
