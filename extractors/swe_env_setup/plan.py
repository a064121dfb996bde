"""Checked-wrong plan options and the repository information of the `plan` task.

Which steps are required comes from the run's own evidence: the clone (needed by the first step
that works in it), an install or edit that fixed an observed failure (needed by the re-run that
proved it), the project's dependency install (needed by the first run), the final run. A wrong
edit deletes or moves a required step after the step that needs it, or inserts a harmful step
(uninstalling a required package, deleting the clone). Every distractor shares one wrong move
(the anchor) and adds one own move of a different block of steps, so all options hold the same
steps and the same length, each has a feature no other option has, and the gold is as far from
each option as the options are from each other: unlike APTBench's one-edit copies, the gold is
not the option most similar to the rest. Each option is checked wrong before it is kept.
"""

from __future__ import annotations

import random
import re
from typing import NamedTuple

from cydifflib import SequenceMatcher  # the standard library's difflib in C++: the same ratios
from rapidfuzz import fuzz

from extractors.swe_env_setup.errors import ErrorPair
from extractors.swe_env_setup.steps import PlanStep, render_plan
from schemas.envsetup import EnvSetupRun

#: Options more similar than this (normalised difflib ratio) are too close to tell apart.
MAX_SIMILARITY = 0.84


class Edit(NamedTuple):
    """One wrong-making change of a plan."""

    kind: str
    """`delete`, `move` or `insert`."""
    at: int
    """Plan step concerned."""
    to: int = -1
    """Destination (move) or insertion point (insert)."""
    text: str = ""
    """Inserted step text."""
    size: int = 1
    """Consecutive steps deleted or moved, from `at` on."""


def required_steps(plan: list[PlanStep], pairs: list[ErrorPair]) -> dict[int, int]:
    """Plan steps proven necessary -> the plan step that needs them (for a wrong move)."""
    fixes = {i for p in pairs for i in p.fix}
    needs = {
        i: next((k for k, s in enumerate(plan) if p.evidence in s.steps), len(plan) - 1)
        for p in pairs
        for i in p.fix
    }
    last_run = max((k for k, s in enumerate(plan) if s.category in {"run", "test"}), default=-1)

    def first_after(k: int, categories: set[str]) -> int:
        return next((j for j in range(k + 1, len(plan)) if plan[j].category in categories), -2)

    req: dict[int, int] = {}
    for k, s in enumerate(plan):
        fixing = [needs[i] for i in s.steps if i in fixes]
        if s.category == "clone":
            req[k] = first_after(k, {"cd", "deps", "run", "test", "edit"})
        elif fixing:
            req[k] = max(fixing)
        elif s.category == "deps" and k < last_run:
            req[k] = first_after(k, {"run", "test"})
        elif k == last_run and k > 0:
            req[k] = -1
    return {k: v for k, v in req.items() if v == -1 or k < v < len(plan)}


def _harmful(step: PlanStep, repo_dir: str) -> str:
    if step.category == "install" and step.packages and "Python" in step.text:
        return (
            f"Uninstall the Python package{'s' if len(step.packages) > 1 else ''} {', '.join(step.packages)}"
        )
    if step.category == "clone":
        return f"Delete the cloned {repo_dir or 'repository'} folder"
    if step.category == "deps":
        return (
            "Delete the installed dependencies (node_modules, site-packages) to start clean"
            if "Node" in step.text
            else "Uninstall every package installed from the requirements"
        )
    return ""


def wrong_edits(plan: list[PlanStep], required: dict[int, int], repo_dir: str) -> list[Edit]:
    """Every single edit that makes the plan wrong, by the run's evidence."""
    edits = []
    for k, needed_by in sorted(required.items()):
        edits.append(Edit("delete", k))
        if needed_by > k:
            edits.append(Edit("move", k, needed_by))
        if harm := _harmful(plan[k], repo_dir):
            edits.append(Edit("insert", k, k + 1, harm))
    return edits


def apply(plan: list[PlanStep], edits: list[Edit]) -> list[int | str] | None:
    """The plan with `edits` applied, as original step indices and inserted texts.

    None when two edits touch the same step, a block runs past the end, or a move lands in a moved block.
    """
    touched: list[int] = [k for e in edits for k in range(e.at, e.at + e.size)]
    if len(set(touched)) < len(touched) or max(touched, default=0) >= len(plan):
        return None
    if any(e.kind == "move" and e.to in touched for e in edits):
        return None
    out: list[int | None] = list(range(len(plan)))
    inserts: dict[int, list[int | str]] = {}
    for e in edits:
        block = list(range(e.at, e.at + e.size))
        if e.kind in {"delete", "move"}:
            for k in block:
                out[k] = None
        if e.kind == "move":
            inserts.setdefault(e.to, []).extend(block)
        elif e.kind == "insert":
            inserts.setdefault(e.at, []).append(e.text)
    result: list[int | str] = []
    for k, x in enumerate(out):
        if x is not None:
            result.append(x)
        result.extend(inserts.get(k, []))
    return result


def is_wrong(variant: list[int | str], required: dict[int, int]) -> bool:
    """Checked against the run's evidence: a harmful step, a required step missing or after its user."""
    if any(isinstance(x, str) for x in variant):
        return True
    pos = {x: n for n, x in enumerate(variant)}
    for k, needed_by in required.items():
        if k not in pos or (needed_by in pos and pos[k] > pos[needed_by]):
            return True
    return False


def render_variant(plan: list[PlanStep], variant: list[int | str]) -> str:
    """Plan-option text of a variant."""
    return render_plan(
        [plan[x] if isinstance(x, int) else PlanStep(x, "harm", ()) for x in variant], star=True
    )


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def similarity(a: str, b: str, threshold: float = 1.0) -> float:
    """Normalised difflib ratio, as the generator and the gates measure closeness.

    The Indel (LCS) ratio is never below difflib's and is linear-time, so pairs it already puts
    under `threshold` skip difflib (the value returned is then the Indel ratio, still < threshold).
    difflib's algorithm runs as `cydifflib` (the same matching blocks and ratio in C++): the
    standard library's took 63 of the real env-setup build's 83 s, on plans of a few KB.
    """
    na, nb = _norm(a), _norm(b)
    fast = fuzz.ratio(na, nb) / 100.0
    if fast < threshold:
        return fast
    return SequenceMatcher(None, na, nb, autojunk=False).ratio()


def plan_distractors(
    plan: list[PlanStep], required: dict[int, int], repo_dir: str, rng: random.Random, need: int = 6
) -> list[str]:
    """`need` checked-wrong options: a shared wrong move (the anchor) plus one own edit each.

    Own edits move a different inner block of steps each, so every option holds the same steps, the
    same length and the same first and last step (no word, length or position tell); the anchor and
    own blocks have the same size (one
    step per six of the plan, rounded), so the gold is as far from each option as the options are from each
    other. Deletions and harmful insertions are used only when there are too few distinct moves.
    Each option is checked wrong (`is_wrong`).
    """
    gold = render_plan(plan, star=True)
    size = max(1, (len(plan) + 3) // 6)
    wrong = wrong_edits(plan, required, repo_dir)
    anchors = [e._replace(size=size) for e in wrong if e.kind == "move"]
    rng.shuffle(anchors)
    n = len(plan)
    # the frame of the gold: the clone (and the `cd` into it) first, the final step last. A rule reading
    # "clone first, cd second, ends on the final run" tells the gold from edits that break it, so edits
    # that keep it are tried first (short plans have too few of them: the others follow)
    head = 2 if n > 1 and plan[0].category == "clone" and plan[1].category == "cd" else 1

    def breaks_frame(e: Edit) -> bool:
        if e.kind == "insert":  # inserted after step `at`
            return not head - 1 <= e.at < n - 1
        return e.at < head or e.at + e.size >= n or (e.kind == "move" and not head - 1 <= e.to < n - 1)

    # every option keeps the gold's frame when it can (an anchor that moves the clone or moves a step
    # past the final run would start or end every distractor the same way): those come last
    anchors.sort(key=breaks_frame)
    for anchor in anchors[:6]:
        picked: list[str] = []
        others = [k for k in range(n - size + 1) if k + size <= anchor.at or k >= anchor.at + anchor.size]
        rng.shuffle(others)
        fallback = [Edit("delete", k) for k in others] + [
            e for e in wrong if e.kind == "insert" and e.at != anchor.at
        ]
        per_step = [
            [Edit("move", k, d, size=size) for d in _destinations(k, size, len(plan), rng)] for k in others
        ]
        # round robin: one move of every block first, then second destinations, then the fallback
        tries = [moves[r] for r in range(len(plan)) for moves in per_step if r < len(moves)] + fallback
        tries.sort(key=breaks_frame)  # stable: the round robin within each side
        for e in tries:
            variant = apply(plan, [anchor, e])
            if variant is None or not is_wrong(variant, required):
                continue
            text = render_variant(plan, variant)
            if all(similarity(text, o, MAX_SIMILARITY) < MAX_SIMILARITY for o in [gold, *picked]):
                picked.append(text)
            if len(picked) == need:
                return picked
    return []


def _destinations(k: int, size: int, n: int, rng: random.Random) -> list[int]:
    """Where a block may go: two places or more away, never before the first or after the last step."""
    dests = [d for d in range(n) if (d >= k + size or d <= k - 2)]
    rng.shuffle(dests)
    return dests


def repo_info(run: EnvSetupRun, budget_chars: int) -> str:
    """APTBench's `repo_info` ("File Analysis"): repository, task, README, docs and file tree the run saw."""
    parts = [
        f"Repository: {run.target_repo.url or run.run_id}"
        + (f" (branch {run.target_repo.branch})" if run.target_repo.branch else ""),
        f"Task: {run.task.strip()}",
    ]
    ctx = run.context
    if ctx.readme:
        parts.append(f"File: README\n{ctx.readme}")
    parts += [f"File: {d.path}\n{d.text}" for d in ctx.docs if d.text.strip() and d.text != ctx.readme]
    if ctx.file_tree.strip():
        parts.append(f"File tree:\n{ctx.file_tree}")
    text = "File Analysis:\n" + "\n\n".join(parts)
    return text if len(text) <= budget_chars else text[: budget_chars - 30].rstrip() + "\n[... truncated ...]"


def balance_lengths(gold: str, candidates: list[str], rng: random.Random, need: int = 6) -> tuple[str, ...]:
    """Reorder candidates (priority order kept on each side) so the first `need` put the gold's length at
    a uniformly drawn rank: the gold is then the longest or shortest option only as often as chance."""
    longer = [c for c in candidates if len(c) > len(gold)]
    shorter = [c for c in candidates if len(c) <= len(gold)]
    n_longer = rng.randint(0, need)
    n_longer = (
        min(n_longer, len(longer)) if len(shorter) >= need - n_longer else max(n_longer, need - len(shorter))
    )
    head = longer[:n_longer] + shorter[: need - n_longer]
    rng.shuffle(head)
    return tuple(head + [c for c in candidates if c not in head])
