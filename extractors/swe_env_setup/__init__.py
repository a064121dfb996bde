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
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from extractors.base import ExtractOptions, estimate_tokens, extractor, gold_step, location, unknown_task
from extractors.readers.envsetup.common import run_of
from extractors.shell.commands import describe
from extractors.swe_env_setup.errors import (
    ErrorPair,
    FailedFix,
    error_class,
    error_pairs,
    failed_fixes,
    failing_commands,
    fix_lines,
    render_fix,
)
from extractors.swe_env_setup.plan import (
    balance_lengths,
    plan_distractors,
    repo_info,
    required_steps,
    similarity,
)
from extractors.swe_env_setup.steps import (
    commands,
    normalise_target,
    plan_steps,
    render_plan,
    split_target,
    target_drop,
)
from schemas import Candidate, GoldStep, Problem, Trajectory, content_id
from schemas.envsetup import EnvSetupRun
from schemas.text import truncate_middle


class FixLibrary(NamedTuple):
    """Fixes observed to fail across every labelled run of a build (what `observe` learns)."""

    fixes: tuple[FailedFix, ...] = ()
    """All of them, in run order."""


@extractor("swe_env_setup", version=1, reads={"envsetup"}, tasks=("plan", "action", "error"))
class SweEnvSetup:
    """Gold commands, fixes and plans from successful environment-setup runs."""

    def __init__(self) -> None:
        self.library = FixLibrary()

    @staticmethod
    def observe(runs: Iterable[Trajectory]) -> FixLibrary:
        """Collect the fixes that failed in every labelled run, failed runs included (`error` distractors)."""
        found: list[FailedFix] = []
        for traj in runs:
            try:
                found += failed_fixes(run_of(traj))
            except (KeyError, ValueError):
                continue
        return FixLibrary(tuple(dict.fromkeys(found)))

    def use(self, library: FixLibrary) -> None:
        """Take the build-wide fix library `observe` returned."""
        self.library = library

    def extract(self, traj: Trajectory, task: str, options: ExtractOptions) -> Iterator[GoldStep | Problem]:
        where = location(traj)
        if (problem := unknown_task(self, traj, task)) is not None:
            yield problem
            return
        try:
            run = run_of(traj)
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
        plan = render_plan(plan_steps(run), star=False)
        cmds = commands(run)
        per_step = Counter(c.step for c in cmds)
        executed: list[str] = []
        dropped: Counter[str] = Counter()
        out: list[GoldStep | Problem] = []
        for cmd in cmds:
            target = normalise_target(cmd.text)
            reason = target_drop(cmd._replace(text=target), set(executed), per_step[cmd.step] > 1)
            if reason is None and not executed:
                reason = "nothing_executed_before"
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
            if not cmd.failed and reason not in {"read_only", "placeholder"} and cmd.text not in executed:
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
        worked = {p.fail: render_fix(fix_lines(run, p.fix, p.fail)) for p in pairs}
        failed_elsewhere = [render_fix(fix_lines(run, f)) for f in failing_commands(run)]
        out: list[GoldStep | Problem] = []
        for p in pairs:
            gold = worked[p.fail]
            if not gold:
                continue
            own = [render_fix(fix_lines(run, f, p.fail)) for f in p.failed_fixes]
            others = [t for k, t in worked.items() if k != p.fail]
            rng = random.Random(content_id(options.seed, traj.trajectory_id, "error", p.fail))
            ranked = self._library_fixes(run, p.signature, rng)
            tiers = (
                ("same_run:failed_fix", own),
                ("other_run:same_repo_error", ranked[0]),
                ("same_run:failing_command", failed_elsewhere),
                ("other_run:same_repo_or_kind", ranked[1]),
                ("same_run:other_error_fix", others),
                ("other_run:any", ranked[2]),
            )
            origin: dict[str, str] = {}
            for name, texts in tiers:
                for t in texts:
                    origin.setdefault(t, name)
            cands = [c for c in origin if c and similarity(c, gold, 0.85) < 0.85][:30]
            fields = self._issue(run, p, options)
            ordered = balance_lengths(gold, cands, rng)
            made = tuple(Candidate(text=c, origin=origin[c]) for c in ordered)
            out.append(self._gold(traj, "error", p.fail, gold, fields, options, made))
        return out

    def _library_fixes(
        self, run: EnvSetupRun, signature: str, rng: random.Random
    ) -> tuple[list[str], list[str], list[str]]:
        """Failed fixes of other runs: same repo and error, same repo or error kind, the rest."""
        repo, kind = run.target_repo.url.lower().removesuffix(".git"), error_class(signature)
        tiers: tuple[list[str], list[str], list[str]] = ([], [], [])
        for f in self.library.fixes:
            if f.run_id == run.run_id:
                continue
            same_repo, same_kind = (
                f.repo == repo and bool(repo),
                bool(kind) and error_class(f.signature) == kind,
            )
            name = f.repo.rstrip("/").rsplit("/", 1)[-1].replace("-", "_")
            if not same_repo and (
                "In `" in f.text or "/" in f.text or (name and name in f.text.lower().replace("-", "_"))
            ):
                continue  # another repository's files would give the option away
            tiers[0 if same_repo and f.signature == signature else 1 if same_repo or same_kind else 2].append(
                f.text
            )
        # a failed fix offered to every item would become a tell of its own: each item draws a few
        same, kin, rest = (list(dict.fromkeys(t)) for t in tiers)
        rng.shuffle(kin)
        rng.shuffle(rest)
        return same, kin[:2], rest[:1]

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
            action = f.command.split("\n", 1)[0]
        short = action if len(action) <= 80 else action[:77] + "..."
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
        repo_dir = (run.target_repo.url.rstrip("/").rsplit("/", 1)[-1]).removesuffix(".git")
        rng = random.Random(content_id(options.seed, traj.trajectory_id, "plan-distractors"))
        cands = plan_distractors(plan, required, repo_dir, rng)
        if len(cands) < 6:
            return [
                Problem(
                    where=where,
                    stage="extract",
                    reason="too_few_checked_distractors",
                    severity="warning",
                    detail=f"{run.run_id}: {len(required)} required steps give {len(cands)} checked-wrong plans",
                )
            ]
        fields = {"repo_info": repo_info(run, options.max_context_tokens * 4)}
        made = tuple(Candidate(text=c, origin="rule:plan_edit") for c in cands)
        return [self._gold(traj, "plan", 0, render_plan(plan, star=True), fields, options, made)]
