"""SWE issue fixing, the patch-level tasks: `locate`, `fix_patch` and `test_patch` (APTBench's atomic tasks).

Reads: a successful `swe` trajectory, its resolving patch (`Trajectory.patch`) and what the agent
saw. Every item is a 4-option MCQ; its only context field is the issue text. The patch is first
cleaned of files the issue does not need (`CLEANING_RULES`; each dropped file is reported in a
`patch_files_dropped` info Problem). Produces:
- `locate`: one item per hunk of a source file the patch edits (not a test file, not a new file):
  gold = the hunk's pre-image (context and removed lines), the code window the fix edits;
  candidates = windows of the same length from the lines of that file the run displayed before
  changing it (`patches.file_reads`: editor views, `nl -ba | sed -n`, `cat -n`, `sed -n`, `head`,
  `tail -n +k`, `grep -n`), nearest first, none containing a line the gold patch changes (nor
  spanning one of its insertion points, nor repeating a removed line's text). Hunks that only change
  imports are left out (they show where a name comes from, not the bug). A hunk whose window the
  run never showed is a `window_not_seen` Problem. `step_index` is the hunk's position.
- `fix_patch`: gold = the cleaned patch without its test files; candidates = patches of failed
  runs of the same instance (cleaned the same way), then plausible mutations of the gold
  (`mutations.patch_mutations`). Never another instance's or repository's patch. `step_index` 0.
- `test_patch`: golds = each reproduction script the agent wrote and ran before its first change
  of a patched file (the version that ran last before it) and ran again after it, the last written
  first, one of two scripts that say the same left out; then the test files the patch changes, as
  one diff (SWE-bench's `test_patch`); at most `max_items_per_trajectory`. Candidates = failed
  runs' scripts (or test diffs) of the same instance, then mutations (`mutations.script_mutations`:
  the check reverted, the input changed, a step dropped; `patch_mutations` for a diff).
  `step_index` is the step that wrote the script (the first write of a test file for the diff).
Field names follow APTBench: `issue_statement` (locate, fix_patch), `problem_statement` (test_patch).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from rapidfuzz import fuzz

from extractors.base import ExtractOptions, gold_step, location
from extractors.swe_issue_fix.mutations import patch_mutations, script_mutations
from extractors.swe_issue_fix.observed import Observed
from extractors.swe_issue_fix.patches import (
    FilePatch,
    Hunk,
    Script,
    created_scripts,
    file_reads,
    first_write,
    lines_of,
    parse_patch,
    render_patch,
    same_file,
    window,
)
from schemas import Candidate, GoldStep, Problem, Trajectory, content_id

PATCH_TASKS = ("locate", "fix_patch", "test_patch")
#: Longest gold accepted, in characters (an option must fit a prompt next to three others).
MAX_GOLD_CHARS = 8000
#: Files of a run's patch that the issue does not need: (rule name, test on the file). A new file
#: at the repository root is the agent's own script (`reproduce.py`) or helper (`symlink_dir`);
#: packaging and tool configs are environment pins (`setup.py`, `tox.ini`); changelogs and author
#: lists are bookkeeping; a symlink or a binary is no source; a new top-level folder that no
#: changed file lives in is the agent's scaffolding (`test_app/`).
CLEANING_RULES: tuple[tuple[str, Any], ...] = (
    ("new_root_file", lambda f, tops: f.is_new and "/" not in f.path),
    (
        "packaging_pin",
        lambda f, tops: (
            f.path.rsplit("/", 1)[-1]
            in {
                "setup.py",
                "setup.cfg",
                "tox.ini",
                "pyproject.toml",
                "MANIFEST.in",
                "Pipfile",
                ".pre-commit-config.yaml",
            }
            or re.match(r"(?:.*/)?requirements[^/]*\.txt$", f.path) is not None
        ),
    ),
    (
        "changelog",
        lambda f, tops: (
            re.match(
                r"(?:AUTHORS|CONTRIBUTORS|CHANGES|CHANGELOG|HISTORY|NEWS)(?:\.\w+)?$|changelog/|doc/changelog|docs?/whatsnew",
                f.path,
                re.I,
            )
            is not None
        ),
    ),
    (
        "symlink_or_binary",
        lambda f, tops: any("120000" in h or h.startswith("Binary files") for h in f.header),
    ),
    (
        "new_scaffold_folder",
        lambda f, tops: f.is_new and "/" in f.path and f.path.split("/", 1)[0] not in tops,
    ),
)


class Cleaned(NamedTuple):
    """A patch's files the issue needs, and the dropped ones with the rule that dropped each."""

    files: list[FilePatch]
    dropped: list[tuple[str, str]]


def clean_patch(files: Sequence[FilePatch]) -> Cleaned:
    """Drop the files `CLEANING_RULES` name; the rest is the patch the issue needs."""
    tops = {f.path.split("/", 1)[0] for f in files if not f.is_new and "/" in f.path}
    kept, dropped = [], []
    for f in files:
        rule = next((name for name, test in CLEANING_RULES if test(f, tops)), None)
        if rule is None:
            kept.append(f)
        else:
            dropped.append((f.path, rule))
    return Cleaned(kept, dropped)


def _problem(traj: Trajectory, task: str, reason: str, detail: str, severity: str = "info") -> Problem:
    return Problem(
        where=location(traj), stage="extract", reason=reason, detail=f"{task}: {detail}", severity=severity
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
    unique = {
        text: origin for origin, text in reversed(candidates) if text.strip() and text.strip() != gold.strip()
    }
    ordered = dict.fromkeys(text for _, text in candidates if text in unique)
    made = tuple(Candidate(text=t, origin=unique[t]) for t in ordered)
    return gold_step(name, version, traj, task, index, gold, fields, options.seed, candidates=made)


def patch_items(
    traj: Trajectory,
    task: str,
    options: ExtractOptions,
    name: str,
    version: int,
    observed: Observed | None = None,
) -> Iterator[GoldStep | Problem]:
    """Gold steps (or Problems) of one patch-level task from one successful run (`observed`: failed runs' material)."""
    observed = observed or Observed({}, {}, {})
    cleaned = clean_patch(parse_patch(traj.patch or ""))
    if cleaned.dropped and task == "fix_patch":
        yield _problem(
            traj,
            task,
            "patch_files_dropped",
            "; ".join(f"{path} ({rule})" for path, rule in cleaned.dropped),
        )
    source = [f for f in cleaned.files if not f.is_test]
    iid = traj.source.instance_id
    if task == "test_patch":
        yield from _test_patch(traj, cleaned, options, name, version, observed)
    elif not source:
        yield _problem(traj, task, "no_source_patch", "the run's patch changes no source file")
    elif task == "fix_patch":
        gold = render_patch(source)
        if len(gold) > MAX_GOLD_CHARS:
            yield _problem(traj, task, "patch_too_long", f"{len(gold)} chars > {MAX_GOLD_CHARS}", "warning")
            return
        theirs = [
            ("same_instance:failed_run", render_patch(fs))
            for p in observed.patches.get(iid, ())
            if (fs := [f for f in clean_patch(parse_patch(p)).files if not f.is_test])
        ]
        views = file_reads(traj.steps).views
        seen = {f.path: lines_of(views, f.path) for f in source}
        mutated = [(f"rule:{kind}", text) for kind, text in patch_mutations(source, seen)]
        fields = {"issue_statement": traj.task}
        yield _gold(traj, name, version, task, 0, gold, fields, theirs + mutated, options)
    else:
        yield from _locate(traj, source, options, name, version)


def _changed(f: FilePatch) -> tuple[set[int], set[int]]:
    """Old-side numbers of the lines the file's hunks remove, and of the lines right before each insertion."""
    removed: set[int] = set()
    inserts: set[int] = set()
    for h in f.hunks:
        n = h.old_start
        for ln in h.lines:
            if ln[:1] == "-":
                removed.add(n)
                n += 1
            elif ln[:1] == "+":
                inserts.add(n - 1)
            elif ln[:1] == " ":
                n += 1
    return removed, inserts


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def _imports_only(h: Hunk) -> bool:
    changed = [ln[1:].strip() for ln in h.lines if ln[:1] in "+-" and ln[1:].strip()]
    return bool(changed) and all(re.match(r"(?:from \S+ )?import\b|\)$|[\w, ]+,?$", c) for c in changed)


def locate_windows(f: FilePatch, h: Hunk, lines: dict[int, str], issue: str = "") -> list[tuple[int, str]]:
    """(shift, text) distractor windows of hunk `h`: same length, seen, no changed line inside.

    Ordered by how many of the issue's words they share (the windows a reader of the issue could
    take for the buggy one: hard negatives), then nearest first; a window overlapping one already
    taken by more than half is left out, so no pair of distractors is closer than they are to the gold.
    """
    length = len(h.pre_image)
    removed, inserts = _changed(f)
    removed_text = {lines.get(n, "").strip() for n in removed} - {""}
    removed_text = {t for t in removed_text if len(t) > 8}
    gold = "\n".join(h.pre_image)
    out: list[tuple[int, str]] = []
    for start in sorted({n for n in lines}, key=lambda n: (abs(n - h.old_start), n)):
        span = range(start, start + length)
        if (
            start == h.old_start
            or any(n in removed for n in span)
            or any(n in inserts and n + 1 in span for n in span)
        ):
            continue
        text = window(lines, start, length)
        if text is None or "\n".join(text) == gold or any(t.strip() in removed_text for t in text):
            continue
        if not any(t.strip() for t in text):
            continue
        out.append((start - h.old_start, "\n".join(text)))
    words = set(_WORD.findall(issue))
    ranked = sorted(out, key=lambda dt: (-len(words & set(_WORD.findall(dt[1]))), abs(dt[0]), dt[0]))
    kept: list[tuple[int, str]] = []
    for d, text in ranked:  # distractors overlap each other no more than half, as they overlap the gold
        if all(abs(d - e) * 2 >= length for e, _ in kept):
            kept.append((d, text))
    return kept


def _locate(
    traj: Trajectory, files: list[FilePatch], options: ExtractOptions, name: str, version: int
) -> Iterator[GoldStep | Problem]:
    reads = file_reads(traj.steps)
    # a hunk that only adds or drops imports shows where a name comes from, not where the bug is
    hunks = [(f, h) for f in files if not f.is_new for h in f.hunks if not _imports_only(h)]
    seen_ok = []
    for k, (f, h) in enumerate(hunks):
        lines = lines_of(reads.views, f.path)
        if window(lines, h.old_start, len(h.pre_image)) == h.pre_image:
            seen_ok.append(k)
        else:
            seen = [p for p in reads.views if same_file(p, f.path)]
            yield _problem(
                traj,
                "locate",
                "window_not_seen",
                f"hunk {k} of {f.path} (lines {h.old_start}-{h.old_start + len(h.pre_image) - 1}) is not among "
                f"the {sum(len(reads.views[p]) for p in seen)} original lines the run displayed",
            )
    rng = random.Random(content_id(options.seed, traj.trajectory_id, "locate"))
    for k in sorted(rng.sample(seen_ok, min(options.max_items_per_trajectory, len(seen_ok)))):
        f, h = hunks[k]
        lines = lines_of(reads.views, f.path)
        shifted = [
            (f"rule:shifted_window:{d:+d}", text) for d, text in locate_windows(f, h, lines, traj.task)
        ]
        yield _gold(
            traj,
            name,
            version,
            "locate",
            k,
            "\n".join(h.pre_image),
            {"issue_statement": traj.task},
            shifted,
            options,
        )


def _runs(traj: Trajectory, name: str, start: int) -> list[int]:
    return [
        s.index
        for s in traj.steps[start:]
        if s.action is not None
        and re.search(rf"\bpython3?\s+(?:-\w+\s+)*\S*{re.escape(name)}\b", s.action.raw)
    ]


def _test_scripts(traj: Trajectory, source: list[FilePatch]) -> list[Script]:
    """The reproduction scripts of a run: each file the agent wrote whole, ran before its first change
    of a patched file and ran again after it, in the version that ran last before that change; the
    script chosen first is the last one written (as before), then the others, latest first. A script
    too close to one already chosen (the same check under another name) is left out."""
    firsts = [w for f in source if (w := first_write(traj.steps, f.path)) is not None]
    first_fix = min(firsts, default=None)
    if first_fix is None:
        return []
    latest: dict[str, Script] = {}
    for script in created_scripts(traj.steps):
        base = script.path.rsplit("/", 1)[-1]
        if (
            script.first_run < first_fix
            and _runs(traj, base, first_fix)
            and len(script.text) <= MAX_GOLD_CHARS
            and not any(same_file(script.path, f.path) for f in source)
        ):
            latest.pop(base, None)
            latest[base] = script  # the last version that ran before the fix wins
    chosen: list[Script] = []
    for script in reversed(latest.values()):
        if all(fuzz.ratio(script.text, c.text) < SAME_SCRIPT for c in chosen):
            chosen.append(script)
    return chosen


#: Character similarity (rapidfuzz ratio, 0-100) at which two scripts of a run count as one test.
SAME_SCRIPT = 80


def _test_patch(
    traj: Trajectory,
    cleaned: Cleaned,
    options: ExtractOptions,
    name: str,
    version: int,
    observed: Observed,
) -> Iterator[GoldStep | Problem]:
    """Gold steps of `test_patch`: the run's reproduction scripts (`_test_scripts`), then the test
    files its patch changes (one diff, as SWE-bench's `test_patch`), at most `max_items_per_trajectory`."""
    source = [f for f in cleaned.files if not f.is_test]
    iid = traj.source.instance_id
    fields = {"problem_statement": traj.task}
    golds: list[tuple[int, str, list[tuple[str, str]]]] = []
    for script in _test_scripts(traj, source):
        theirs = [("same_instance:failed_run", s) for s in observed.scripts.get(iid, ())]
        mutated = [(f"rule:{kind}", text) for kind, text in script_mutations(script.text, issue=traj.task)]
        golds.append((script.created_at, script.text, theirs + mutated))
    tests = [f for f in cleaned.files if f.is_test]
    diff = render_patch(tests) if tests else ""
    at = min(
        (w for f in tests if (w := first_write(traj.steps, f.path)) is not None), default=len(traj.steps)
    )
    if tests and len(diff) <= MAX_GOLD_CHARS and at not in {g[0] for g in golds}:
        theirs = [
            ("same_instance:failed_run", render_patch(fs))
            for p in observed.patches.get(iid, ())
            if (fs := [f for f in clean_patch(parse_patch(p)).files if f.is_test])
        ]
        views = file_reads(traj.steps).views
        seen = {f.path: lines_of(views, f.path) for f in tests}
        mutated = [(f"rule:{kind}", text) for kind, text in patch_mutations(tests, seen)]
        golds.append((at, diff, theirs + mutated))
    if not golds:
        yield _problem(
            traj,
            "test_patch",
            "no_test_patch",
            "no script created, run before the first edit of a patched file and run again after it, "
            "and no test file in the patch",
        )
        return
    for index, gold, candidates in golds[: options.max_items_per_trajectory]:
        yield _gold(traj, name, version, "test_patch", index, gold, fields, candidates, options)
