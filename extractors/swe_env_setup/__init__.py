"""SWE environment setup: APTBench's `env_setup` tasks from executed, verified setup runs.

Reads: successful `envsetup` trajectories (a normalised run in `meta["envsetup"]`, see
`schemas/envsetup.py`). Produces gold steps for
- `action` (completion): gold = the next setup command of the run; context = the run's described
  plan (`step1: ...; step2: ...`) and the commands executed so far joined by `;`. A command is a
  target only when it ran and succeeded, is one line with no `;`, is not read-only (`ls`, `cat`,
  `pip show` ...), not a repeat, not a placeholder (`<repository_url>`) and has two words or more
  (`cmd_prefix + " " + cmd_postfix == target_cmd`). Each dropped command is counted by reason in
  one `info` Problem per run. Row: `uuid, execution_plan, executed_cmds, cmd_prefix, cmd_postfix, target_cmd`.
- `error` (MCQ, 7 options): a failing step and its output as an issue; gold = the fix observed to
  work (a later re-run succeeded or lost the error); `candidates` = fixes observed *not* to work
  (attempts after which the error came back, fix commands that failed) followed by the fixes of
  the run's other errors. Never edited copies of the gold. Row: `uuid, setup_instruct,
  issue_title, issue_body, choices, answer`.
- `plan` (MCQ, 7 options): gold = the run's whole described plan (`*step1: ...;*step2: ...;`)
  given the README, docs and file tree it saw; `candidates` = six plans each checked wrong by the
  run's own evidence (see `plan`). Row: `uuid, repo_info, choices, answer`.

Which steps become items: all eligible ones, then at most `max_items_per_trajectory` drawn with
`Random(h(seed, trajectory_id, task))` (one plan per run). Context budget: `max_context_tokens`
(chars / 4): the oldest executed commands are dropped first; outputs keep head and tail.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from extractors.base import ExtractOptions, estimate_tokens, extractor, gold_step, location, unknown_task
from extractors.shell.commands import describe, has_placeholder, is_read_only
from extractors.swe_env_setup.balance import balanced_head
from extractors.swe_env_setup.errors import (
    MAX_LINE_CHARS,
    ErrorPair,
    FailedFix,
    error_class,
    error_pairs,
    failed_fixes,
    fix_lines,
    installed,
    invocation,
    render_fix,
    repo_dir,
)
from extractors.swe_env_setup.plan import plan_distractors, repo_info, required_steps, similarity
from extractors.swe_env_setup.plan_variants import clean_plan, remap_required, wrong_plans
from extractors.swe_env_setup.steps import (
    PlanStep,
    commands,
    determined,
    normalise_target,
    plan_steps,
    render_plan,
    split_target,
    target_drop,
)
from extractors.swe_env_setup.tasks import SPECS
from extractors.swe_env_setup.wrong_fixes import wrong_fixes
from schemas import Candidate, GoldStep, Problem, Trajectory, content_id
from schemas.envsetup import EnvSetupRun, run_of
from schemas.text import truncate_middle

_NAMED = re.compile(r"^\d+\. In `([^`]+)`", re.M)
_CODE = re.compile(r"`([^`]+)`")
_PATHLIKE = re.compile(r"[\w.\-]+(?:/[\w.\-]+)+|[\w\-]+\.(?:py|sh|cfg|json|ya?ml|txt|toml|ipynb)\b")


_FORM = re.compile(r"^\d+\. (Run `[\w.-]+(?: [\w.-]+)?|Re-run it as|In `|\w+)")


def _form(fix: str) -> str:
    m = _FORM.match(fix)
    return m.group(1) if m else ""


def _verb(fix: str) -> str:
    m = re.match(r"^\d+\. In `[^`]+`, (\w+)", fix)
    return m.group(1) if m else ""


def _lines(fix: str) -> list[str]:
    return [re.sub(r"^\d+\.\s*", "", ln) for ln in fix.split("\n") if ln.strip()]


def mentions_only(fix: str, context: str) -> bool:
    """Does every file or path the fix names appear in the item (its issue and setup so far)?

    Packages may be new to the item (installing the wrong one is the commonest failed fix); files may not.
    """
    low = context.lower()
    for m in _NAMED.finditer(fix):
        if m.group(1) and m.group(1).rsplit("/", 1)[-1].lower() not in low:
            return False
    for code in _CODE.findall(fix):
        for path in _PATHLIKE.findall(code):
            parts = [p for p in path.lower().split("/") if p not in {"", ".", ".."}]
            if parts and not any(p in low for p in parts[-1:]):
                return False
    return True


_DIRS = re.compile(r"(?<![\w./-])(?:\.{0,2}/)?(?:[\w.-]+/)+(?=[\w.-])")
_PIN = re.compile(r"([A-Za-z0-9][\w.\-\[\]]*)\s*==\s*([\w.*+-]+)")


def pathless(fix: str) -> str:
    """The fix with every path cut to its file name: two fixes equal so differ only by a path."""
    return _DIRS.sub("", fix)


def pins(fix: str) -> set[tuple[str, str]]:
    """The `package==version` pins a fix names (package names case-folded)."""
    return {(m[1].lower(), m[2]) for m in _PIN.finditer(fix)}


def distinct_fixes(gold: str, cands: list[str]) -> list[str]:
    """Candidates that are not the gold under another path (`In models/x.py` for `In x.py`), do not
    name a pin the gold names (it would be the gold's install again), and are not another candidate
    under another path (the first is kept)."""
    seen = {pathless(gold)}
    named = pins(gold)
    out: list[str] = []
    for c in cands:
        key = pathless(c)
        if key in seen or pins(c) & named:
            continue
        seen.add(key)
        out.append(c)
    return out


#: A plan item shows six wrong plans (APTBench's 7 options).
MIN_PLAN_OPTIONS = 6

#: Options closer than this are one option to the offline generator's reserve (it keeps one of them).
DISTINCT_SIMILARITY = 0.85


def _distinct(texts: list[str]) -> int:
    """How many of `texts` (the gold first) stay once every text too close to an earlier kept one goes."""
    kept: list[str] = []
    for t in texts:
        if all(similarity(t, k, DISTINCT_SIMILARITY) < DISTINCT_SIMILARITY for k in kept):
            kept.append(t)
    return len(kept) - 1


#: An error item needs six wrong fixes of its own (APTBench's 7 options): the generator's pool holds other
#: runs' golds, which name files this item never shows.
MIN_ERROR_CANDIDATES = 6


class FixLibrary(NamedTuple):
    """Fixes observed to fail across every labelled run of a build (what `observe` learns)."""

    fixes: tuple[FailedFix, ...] = ()
    """All of them, in run order."""
    installs: tuple[tuple[str, PlanStep], ...] = ()
    """`(run_id, install step)` of every labelled run's plan (`plan` distractors of other repositories)."""


@extractor("swe_env_setup", version=8, reads={"envsetup"}, tasks=SPECS)
class SweEnvSetup:
    """Gold commands, fixes and plans from successful environment-setup runs."""

    def __init__(self) -> None:
        self.library = FixLibrary()

    @staticmethod
    def observe(runs: Iterable[Trajectory]) -> FixLibrary:
        """Collect the fixes that failed in every labelled run, failed runs included (`error` distractors)."""
        found: list[FailedFix] = []
        installs: list[tuple[str, PlanStep]] = []
        for traj in runs:
            try:
                run = run_of(traj.meta)
            except (KeyError, ValueError):
                continue
            found += failed_fixes(run)
            installs += [(run.run_id, s) for s in plan_steps(run) if s.category == "install"]
        return FixLibrary(tuple(dict.fromkeys(found)), tuple(installs))

    def use(self, library: FixLibrary) -> None:
        """Take the build-wide fix library `observe` returned."""
        self.library = library

    def extract(self, traj: Trajectory, task: str, options: ExtractOptions) -> Iterator[GoldStep | Problem]:
        where = location(traj)
        if (problem := unknown_task(self, traj, task)) is not None:
            yield problem
            return
        try:
            run = run_of(traj.meta)
        except (KeyError, ValueError) as exc:
            yield Problem(
                where=where,
                stage="extract",
                reason="not_an_envsetup_run",
                detail=f"{type(exc).__name__}: {exc}",
            )
            return
        found = {"action": self._actions, "error": self._errors, "plan": self._plan}[task](
            traj, run, options, where
        )
        golds = [g for g in found if isinstance(g, GoldStep)]
        yield from (p for p in found if isinstance(p, Problem))
        if not golds:
            yield Problem(
                where=where,
                stage="extract",
                reason="no_eligible_steps",
                severity="info",
                detail=f"{task}: no step of {run.run_id} qualifies",
            )
            return
        rng = random.Random(content_id(options.seed, traj.trajectory_id, task))
        chosen = sorted(
            rng.sample(golds, min(options.max_items_per_trajectory, len(golds))), key=lambda g: g.step_index
        )
        yield from chosen

    def _gold(
        self,
        traj: Trajectory,
        task: str,
        index: int,
        gold: str,
        fields: dict[str, str],
        options: ExtractOptions,
        candidates: tuple[Candidate, ...] = (),
    ) -> GoldStep:
        return gold_step(
            self.name, self.version, traj, task, index, gold, fields, options.seed, candidates=candidates
        )

    def _actions(
        self, traj: Trajectory, run: EnvSetupRun, options: ExtractOptions, where: str
    ) -> list[GoldStep | Problem]:
        cmds = commands(run)
        per_step = Counter(c.step for c in cmds)
        # the execution plan the commands follow: one described step per command that took effect, in
        # order (edits made with a tool, which no executed command shows, are not steps of it)
        done: list[str] = []
        for cmd in cmds:
            if (
                not cmd.failed
                and not is_read_only(cmd.text)
                and not has_placeholder(cmd.text)
                and cmd.text not in done
            ):
                done.append(cmd.text)
        steps = [describe(c) for c in done]
        plan = "; ".join(f"step{k}: {t}" for k, t in enumerate(steps, start=1))
        executed: list[str] = []
        dropped: Counter[str] = Counter()
        out: list[GoldStep | Problem] = []
        for cmd in cmds:
            target = normalise_target(cmd.text)
            reason = target_drop(cmd._replace(text=target), set(executed), per_step[cmd.step] > 1)
            if reason is None and not executed:
                reason = "nothing_executed_before"
            if reason is None and cmd.text in done:
                step = steps[done.index(cmd.text)]
                if not determined(target, step, executed):
                    reason = "not_determined_by_plan_or_history"
            elif reason is None:
                reason = "not_a_plan_step"
            if reason is None:
                history = self._fit_history(plan, executed, options.max_context_tokens)
                prefix, postfix = split_target(target)
                fields = {
                    "execution_plan": plan,
                    "executed_cmds": history,
                    "cmd_prefix": prefix,
                    "cmd_postfix": postfix,
                    "target_cmd": target,
                }
                out.append(self._gold(traj, "action", cmd.step, target, fields, options))
            else:
                dropped[reason] += 1
            if cmd.text in done and cmd.text not in executed and not cmd.failed:
                executed.append(cmd.text)
        if dropped:
            detail = ", ".join(f"{k}={v}" for k, v in sorted(dropped.items()))
            out.append(
                Problem(
                    where=where,
                    stage="extract",
                    reason="action_targets_dropped",
                    severity="info",
                    detail=f"{run.run_id}: {sum(dropped.values())} commands not used as targets ({detail})",
                )
            )
        return out

    @staticmethod
    def _fit_history(plan: str, executed: list[str], budget: int) -> str:
        for start in range(len(executed)):
            text = ";".join(executed[start:])
            if estimate_tokens(plan + text) <= budget:
                return text
        return executed[-1]

    def _errors(
        self, traj: Trajectory, run: EnvSetupRun, options: ExtractOptions, where: str
    ) -> list[GoldStep | Problem]:
        pairs = error_pairs(run)
        out: list[GoldStep | Problem] = []
        undetermined = thin = 0
        for p in pairs:
            gold = render_fix(fix_lines(run, p.fix, p.fail))
            if not gold or p.error is None:
                undetermined += 1
                continue
            fields = self._issue(run, p, options)
            context = "\n".join(fields.values())
            rng = random.Random(content_id(options.seed, traj.trajectory_id, "error", p.fail))
            taken = {ln for i in p.fix for ln in fix_lines(run, (i,), p.fail)}
            origin: dict[str, str] = {}
            for name, texts in self._real_wrong_fixes(run, p, rng):
                for t in texts:
                    if t and mentions_only(t, context) and not (set(_lines(t)) & taken):
                        origin.setdefault(t, name)
            done = [  # installs that had run before the error: repeating them changes nothing
                ("repeat_done", f"Run `{c.text}`")
                for c in commands(run)
                if c.step < p.fail and not c.failed and installed(c.text) and "\n" not in c.text
            ][-4:]
            made = [
                (fam, line)
                for fam, line in [
                    *wrong_fixes(p.error, run.steps[p.fail].command, _lines(gold), repo_dir(run)),
                    *done,
                ]
                if line not in taken and len(line) <= MAX_LINE_CHARS
            ]
            for fam, text in self._rule_options(gold, made, rng):
                if mentions_only(text, context):  # a frame cut from the shown output is not mentioned
                    origin.setdefault(text, f"rule:{fam}")
            cands = distinct_fixes(gold, [c for c in origin if c != gold and similarity(c, gold, 0.9) < 0.9])[
                :30
            ]
            if len(cands) < MIN_ERROR_CANDIDATES:
                thin += 1
                continue
            # options in the gold's own form first (an install among installs, an edit among edits)
            cands.sort(key=lambda c: (_form(c) != _form(gold), _verb(c) != _verb(gold)))
            ordered = balanced_head(gold, cands, rng, window=24)
            found = tuple(Candidate(text=c, origin=origin[c]) for c in ordered)
            out.append(self._gold(traj, "error", p.fail, gold, fields, options, found))
        if thin:
            out.append(
                Problem(
                    where=where,
                    stage="extract",
                    reason="too_few_checked_distractors",
                    severity="info",
                    detail=f"{run.run_id}: {thin} errors with fewer than {MIN_ERROR_CANDIDATES} wrong fixes "
                    "that name only what the item shows",
                )
            )
        if undetermined:
            out.append(
                Problem(
                    where=where,
                    stage="extract",
                    reason="fix_not_determined",
                    severity="info",
                    detail=f"{run.run_id}: {undetermined} resolved errors whose fix cannot be shown whole",
                )
            )
        return out

    def _real_wrong_fixes(
        self, run: EnvSetupRun, p: ErrorPair, rng: random.Random
    ) -> list[tuple[str, list[str]]]:
        """Fixes observed to fail: this error's own attempts, then other runs' of the same error class."""
        own = [render_fix(fix_lines(run, f, p.fail)) for f in p.failed_fixes]
        kind = p.error.type if p.error else ""
        same: list[str] = []
        kin: list[str] = []
        for f in self.library.fixes:
            if f.run_id == run.run_id or not kind or (f.error_type or error_class(f.signature)) != kind:
                continue
            (same if f.signature == p.signature else kin).append(f.text)
        kin = list(dict.fromkeys(kin))
        rng.shuffle(kin)
        kin = kin[:3]  # a failed fix offered to every item of its class would become a tell of its own
        others = [render_fix(fix_lines(run, q.fix, q.fail)) for q in error_pairs(run) if q.fail != p.fail]
        return [
            ("same_run:failed_fix", own),
            ("other_run:same_error", list(dict.fromkeys(same))),
            ("other_run:same_error_class", kin),
            ("same_run:other_error_fix", others),
        ]

    @staticmethod
    def _rule_options(gold: str, made: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
        """Rule-made fix lines as options with as many steps as the gold (singles, then pairs)."""
        n = len(_lines(gold))
        singles = [(fam, render_fix([line])) for fam, line in made]
        if n == 1 or len(made) < 2:
            return [(f, t) for f, t in singles if t]
        combos: list[tuple[str, str]] = []
        pool = list(made)
        for _ in range(3 * len(pool)):
            pick = rng.sample(pool, min(n, len(pool)))
            text = render_fix([line for _, line in pick])
            if text:
                combos.append(("+".join(sorted({f for f, _ in pick})), text))
        return list(dict.fromkeys(combos)) + [(f, t) for f, t in singles if t]

    @staticmethod
    def _issue(run: EnvSetupRun, p: ErrorPair, options: ExtractOptions) -> dict[str, str]:
        f = run.steps[p.fail]
        output = truncate_middle((f.output or "").strip(), min(options.max_observation_chars, 6000))
        if f.kind == "dockerfile":
            body = (
                f"Building this Dockerfile\n```dockerfile\n{f.command}\n```\nfails with:\n```\n{output}\n```"
            )
            action = "docker build"
        else:
            lang = "python" if f.kind == "code" else "bash"
            body = f"Running\n```{lang}\n{f.command}\n```\nfails with:\n```\n{output}\n```"
            lines = [
                ln.strip() for ln in f.command.split("\n") if ln.strip() and not ln.strip().startswith("#")
            ]
            action = next((ln for ln in lines if not ln.startswith("cd ")), lines[0] if lines else "")
        short = action if len(action) <= 80 else invocation(action)  # never cut with "..."
        title = (
            f"{p.signature} when running `{short}`"
            if p.signature
            else f"`{short}` fails (exit code {f.exit_code})"
        )
        done = [c for c in commands(run) if c.step < p.fail and not c.failed]
        lines = [f"{k}. {describe(c.text)}: `{c.text}`" for k, c in enumerate(done[-25:], start=1)]
        so_far = (
            "## Steps executed so far\n" + "\n".join(lines)
            if lines
            else "## Setup so far\nThe Dockerfile shown in the issue."
            if f.kind == "dockerfile"
            else "## No setup command has run yet"
        )
        setup = (
            f"# Setup plan for {run.target_repo.url or run.run_id}\n\n{run.task.strip()[:2000]}\n\n{so_far}"
        )
        return {"setup_instruct": setup, "issue_title": title, "issue_body": body}

    def _plan(
        self, traj: Trajectory, run: EnvSetupRun, options: ExtractOptions, where: str
    ) -> list[GoldStep | Problem]:
        plan = plan_steps(run)
        if len(plan) < 3:
            return [
                Problem(
                    where=where,
                    stage="extract",
                    reason="plan_too_short",
                    severity="info",
                    detail=f"{run.run_id}: {len(plan)} effective setup steps",
                )
            ]
        required = required_steps(plan, error_pairs(run))
        gold_plan = clean_plan(plan)
        required = remap_required(plan, gold_plan, required)
        repo = repo_dir(run)
        rng = random.Random(content_id(options.seed, traj.trajectory_id, "plan-distractors"))
        fields = {"repo_info": repo_info(run, options.max_context_tokens * 4)}
        files_text = "\n".join(
            [run.context.file_tree, run.context.readme, *(d.text for d in run.context.docs)]
        )
        foreign = [step for rid, step in self.library.installs if rid != run.run_id]
        gold = render_plan(gold_plan, star=True)
        pool = wrong_plans(gold_plan, required, files_text, repo, foreign, rng)
        found = [(w.kinds, w.text, w.foreign) for w in pool]
        if _distinct([gold, *(w.text for w in pool if w.keeps_shape)]) < 4 * MIN_PLAN_OPTIONS:
            # too few shape-keeping options far enough apart (short plans): block moves of the steps (each
            # checked wrong), whose order of steps a structural rule reads, fill in
            found += [
                ("move", t, False)
                for t in plan_distractors(gold_plan, required, repo, rng)
                if t not in {f[1] for f in found}
            ]
        cands = [t for _, t, _ in found]
        if len(cands) < MIN_PLAN_OPTIONS:
            return [
                Problem(
                    where=where,
                    stage="extract",
                    reason="too_few_checked_distractors",
                    severity="warning",
                    detail=f"{run.run_id}: {len(required)} required steps give {len(cands)} checked-wrong plans",
                )
            ]
        kinds = {t: (k, alien) for k, t, alien in found}
        # the options shown first come from those that keep the gold's shape (a step-order rule then
        # has nothing to go on); the rest follow as the adversarial filter's reserve
        keep = [w.text for w in pool if w.keeps_shape]
        head = balanced_head(gold, keep, rng, window=18) if len(keep) >= 6 else keep
        ordered = [*head, *(c for c in cands if c not in set(head))]
        made = tuple(
            Candidate(
                text=c,
                origin=f"{'other_run' if kinds[c][1] else 'rule'}:plan_{kinds[c][0].replace('+', '_')}",
            )
            for c in ordered
        )
        return [self._gold(traj, "plan", 0, gold, fields, options, made)]
