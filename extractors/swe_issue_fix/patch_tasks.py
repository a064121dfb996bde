"""SWE issue fixing, the patch-level tasks: `locate`, `fix_patch` and `test_patch` (APTBench's atomic tasks).

Reads: a successful `swe` trajectory, its resolving patch (`Trajectory.patch`) and what the agent
saw. Every item is a 4-option MCQ; its only context field is the issue text. Produces:
- `locate`: one item per hunk of a source file the patch edits (not a test file, not a new file):
  gold = the hunk's pre-image (context and removed lines), the code window the fix edits;
  candidates = windows of the same length shifted by +-25/50/75% of it, nearest first, inside the
  lines of that file the agent read before editing it (`patches.file_reads`). Extractors read no
  files, so a checkout reaches them only as what the run displayed; a hunk whose window the run
  never showed is a `window_not_seen` Problem. `step_index` is the hunk's position in the patch.
- `fix_patch`: gold = the resolving patch without its test-file diffs; candidates = the patches of
  failed runs of the same instance (`failed_patches`, collected over the whole build through the
  extractor's `observe` hook), then mutations of the gold (`patches.mutate_patch`: a hunk
  dropped, an added line dropped, an operator or literal changed). `step_index` is 0.
- `test_patch`: gold = the reproduction script the agent wrote, ran before its first edit of a
  patched file and ran again after it (it showed the bug, then the fix); no candidates of its
  own: the generator draws other runs' scripts (same repository first). `step_index` is the step
  that created it. Runs without such a script give a `no_test_patch` Problem (info).
Field names follow APTBench: `issue_statement` (locate, fix_patch), `problem_statement` (test_patch).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from extractors.base import ExtractOptions, gold_step, location
from extractors.swe_issue_fix.patches import (
    created_scripts,
    file_reads,
    lines_of,
    mutate_patch,
    parse_patch,
    render_patch,
    same_file,
    shifted_windows,
    window,
)
from schemas import Candidate, GoldStep, Problem, Trajectory, content_id

PATCH_TASKS = ("locate", "fix_patch", "test_patch")
#: Longest gold accepted, in characters (an option must fit a prompt next to three others).
MAX_GOLD_CHARS = 6000


def _where(traj: Trajectory) -> str:
    return location(traj)


def _problem(traj: Trajectory, task: str, reason: str, detail: str, severity: str = "info") -> Problem:
    return Problem(
        where=_where(traj), stage="extract", reason=reason, detail=f"{task}: {detail}", severity=severity
    )  # type: ignore[arg-type]


def _gold(
    traj: Trajectory,
    name: str,
    version: int,
    task: str,
    index: int,
    gold: str,
    fields: dict[str, Any],
    candidates: list[tuple[str, str]],
    options: ExtractOptions,
) -> GoldStep:
    """`candidates`: (origin, text) pairs in preference order; the first origin of a repeated text wins."""
    unique = {text: origin for origin, text in reversed(candidates) if text.strip() and text != gold}
    ordered = dict.fromkeys(text for _, text in candidates if text in unique)
    made = tuple(Candidate(text=t, origin=unique[t]) for t in ordered)
    return gold_step(name, version, traj, task, index, gold, fields, options.seed, candidates=made)


def failed_patches(runs: Iterable[Trajectory]) -> dict[str, tuple[str, ...]]:
    """Non-empty patches of failed runs, by instance id (runs without an instance id are left out)."""
    found: dict[str, list[str]] = {}
    for t in runs:
        if t.outcome.label == "failure" and t.source.instance_id and (t.patch or "").strip():
            found.setdefault(t.source.instance_id, []).append(t.patch or "")
    return {k: tuple(dict.fromkeys(v)) for k, v in found.items()}


def patch_items(
    traj: Trajectory, task: str, options: ExtractOptions, name: str, version: int, failed: Sequence[str] = ()
) -> Iterator[GoldStep | Problem]:
    """Gold steps (or Problems) of one patch-level task from one successful run (`failed`: failed runs' patches)."""
    files = parse_patch(traj.patch or "")
    source = [f for f in files if not f.is_test]
    if task == "test_patch":
        yield from _test_patch(traj, files, options, name, version)
    elif not source:
        yield _problem(traj, task, "no_source_patch", "the run's patch changes no source file")
    elif task == "fix_patch":
        gold = render_patch(source)
        if len(gold) > MAX_GOLD_CHARS:
            yield _problem(traj, task, "patch_too_long", f"{len(gold)} chars > {MAX_GOLD_CHARS}", "warning")
            return
        theirs = [
            ("same_instance:failed_run", render_patch(fs))
            for p in failed
            if (fs := [f for f in parse_patch(p) if not f.is_test])
        ]
        rng = random.Random(content_id(options.seed, traj.trajectory_id, task))
        mutated = [(f"rule:mutation:{kind}", text) for kind, text in mutate_patch(source, rng)]
        fields = {"issue_statement": traj.task}
        yield _gold(traj, name, version, task, 0, gold, fields, theirs + mutated, options)
    else:
        yield from _locate(traj, source, options, name, version)


def _locate(
    traj: Trajectory, files: list[Any], options: ExtractOptions, name: str, version: int
) -> Iterator[GoldStep | Problem]:
    reads = file_reads(traj.steps)
    hunks = [(f, h) for f in files if not f.is_new for h in f.hunks]
    rng = random.Random(content_id(options.seed, traj.trajectory_id, "locate"))
    chosen = sorted(rng.sample(range(len(hunks)), min(options.max_items_per_trajectory, len(hunks))))
    for k in chosen:
        f, h = hunks[k]
        pre = h.pre_image
        lines = lines_of(reads.views, f.path)
        if window(lines, h.old_start, len(pre)) != pre:
            seen = [p for p in reads.views if same_file(p, f.path)]
            yield _problem(
                traj,
                "locate",
                "window_not_seen",
                f"hunk {k} of {f.path} (lines {h.old_start}-{h.old_start + len(pre) - 1}) is not among "
                f"the {sum(len(reads.views[p]) for p in seen)} original lines the run displayed",
            )
            continue
        shifted = [
            ("rule:shifted_window", "\n".join(text))
            for _, text in shifted_windows(lines, h.old_start, len(pre))
        ]
        yield _gold(
            traj, name, version, "locate", k, "\n".join(pre), {"issue_statement": traj.task}, shifted, options
        )


def _test_patch(
    traj: Trajectory, files: list[Any], options: ExtractOptions, name: str, version: int
) -> Iterator[GoldStep | Problem]:
    patched = [f.path for f in files if not f.is_test]
    first_edits = [
        i for p, i in file_reads(traj.steps).first_edit.items() if any(same_file(p, q) for q in patched)
    ]
    first_fix = min(first_edits, default=None)
    for script in created_scripts(traj.steps):
        reran = first_fix is not None and any(
            s.action is not None and script.path.rsplit("/", 1)[-1] in s.action.raw
            for s in traj.steps[first_fix:]
        )
        if (
            first_fix is not None
            and script.first_run < first_fix
            and reran
            and len(script.text) <= MAX_GOLD_CHARS
        ):
            fields = {"problem_statement": traj.task}
            yield _gold(
                traj, name, version, "test_patch", script.created_at, script.text, fields, [], options
            )
            return
    yield _problem(
        traj,
        "test_patch",
        "no_test_patch",
        "no script created, run before the first edit of a patched file and run again after it",
    )
