"""An LLM answer judge for deep-research runs the matching rules leave undecided (`needs_judge`).

Why: verbose answers ("The river is the Ilz, which joins ...") defeat exact matching, and a run
dropped as `needs_judge` is a good run lost. The judge asks a model whether the final answer states
the gold (or an alias) and relabels only those runs; rule-decided runs are never sent.

On the shared LLM layer: requests go through the same engine (SDK retries, one retry for output
that does not parse, limiter), the SQLite response cache (a rerun makes no request) and the ledger
(spend and budget, task `judge`). The prompt is a versioned file (`judge.answer.v<N>.md.j2`, its
hash in the signal); the reply is structured (`{"verdict", "reason"}`: strict JSON schema on
OpenAI-style APIs, a forced tool on Anthropic). `format_prompt` and `parse_verdict` are pure.

Labels: `correct` -> success, `incorrect` -> failure, `unsure` (or a failed request) -> stays
unknown with reason `judge_unsure` / `judge_failed`; the signal names the judge, model and prompt
version and the reason is kept in `meta["judge"]`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from generators.llm.engine import Checked, Job, LLMFailure, LLMReply, LLMRequest, make_request
from generators.llm.prompting import Prompt, PromptLibrary, PromptTemplate
from schemas import Outcome, Trajectory

VERDICTS = ("correct", "incorrect", "unsure")
TOOL_NAME = "record_verdict"
JUDGE_SCENARIO, JUDGE_TASK = "judge", "answer"


class Verdict(NamedTuple):
    """The judge's word on one answer."""

    verdict: str
    """`correct`, `incorrect` or `unsure`."""
    reason: str
    """One line."""


def verdict_schema() -> dict[str, Any]:
    """JSON schema of a reply (strict-mode safe)."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["verdict", "reason"],
        "properties": {"verdict": {"type": "string", "enum": list(VERDICTS)}, "reason": {"type": "string"}},
    }


def gold_aliases_of(traj: Trajectory) -> list[str]:
    """The gold answer and its aliases."""
    extra = traj.meta.get("gold_aliases")
    aliases = [traj.gold_answer or "", *(extra if isinstance(extra, list) else [])]
    return [a for a in dict.fromkeys(str(a).strip() for a in aliases) if a]


def needs_judge(traj: Trajectory) -> bool:
    """Only runs the rules left undecided, with a gold and an answer to compare."""
    return (
        traj.outcome.label == "unknown"
        and traj.outcome.reason == "needs_judge"
        and bool(gold_aliases_of(traj))
        and bool((traj.final_answer or "").strip())
    )


def format_prompt(template: PromptTemplate, traj: Trajectory) -> Prompt:
    """The judge's prompt for one run (pure)."""
    values = {"question": traj.task, "aliases": gold_aliases_of(traj), "answer": traj.final_answer or ""}
    return Prompt(
        template.system.render(values).strip(),
        template.user.render(values).strip(),
        template.name,
        template.sha256,
    )


def parse_verdict(text: str | None) -> Verdict | None:
    """The verdict of a reply, or None when it holds none (pure)."""
    if not text:
        return None
    body = text.strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(body[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("verdict") not in VERDICTS:
        return None
    reason = " ".join(str(data.get("reason", "")).split())[:200]
    return Verdict(str(data["verdict"]), reason)


def request_body(provider: str, prompt: Prompt, model: str, max_tokens: int) -> dict[str, Any]:
    """The provider's request body (pure): strict JSON schema (OpenAI-style) or a forced tool (Anthropic)."""
    if provider == "anthropic":
        return {
            "model": model,
            "max_tokens": max_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
            "tools": [
                {"name": TOOL_NAME, "description": "Record the verdict.", "input_schema": verdict_schema()}
            ],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
        }
    return {
        "model": model,
        "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
        "max_completion_tokens" if provider == "openai" else "max_tokens": max_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "strict": True, "schema": verdict_schema()},
        },
    }


class JudgeResult(NamedTuple):
    """Runs after judging, and what the judge did."""

    trajectories: list[Trajectory]
    counts: dict[str, int]
    """`sent`, `correct`, `incorrect`, `unsure`, `failed`."""


class AnswerJudge:
    """Judges `needs_judge` runs through an LLM runner (`LLMEngine` or `BatchRunner`)."""

    def __init__(
        self,
        runner: Any,
        ledger: Any,
        prompts: PromptLibrary,
        *,
        model: str,
        provider: str,
        max_output_tokens: int = 256,
        owned: Sequence[Any] = (),
    ) -> None:
        """Wire the parts (`owned` are closed by `close()`)."""
        template = prompts.get(JUDGE_SCENARIO, JUDGE_TASK)
        if template is None:
            raise ValueError(f"no prompt file {JUDGE_SCENARIO}.{JUDGE_TASK}.v<N>.md.j2")
        self.runner, self.ledger, self.template = runner, ledger, template
        self.model, self.provider, self.max_output_tokens = model, provider, max_output_tokens
        self._owned = list(owned)

    @property
    def signal(self) -> str:
        """`llm_judge:<model>:<prompt file>`."""
        return f"llm_judge:{self.model}:{self.template.name.removesuffix('.md.j2')}"

    def _request(self, traj: Trajectory, attempt: int, failure: LLMFailure | None) -> LLMRequest:
        prompt = format_prompt(self.template, traj)
        tokens = self.max_output_tokens * (2 if failure and failure.reason == "llm_truncated_output" else 1)
        return make_request(self.provider, request_body(self.provider, prompt, self.model, tokens))

    @staticmethod
    def _check(reply: LLMReply) -> Checked:
        v = parse_verdict(reply.text)
        return Checked(v) if v is not None else Checked(None, "no verdict in the reply")

    def ask(self, trajs: Sequence[Trajectory]) -> list[Any]:
        """The engine's outcome of judging each run (value: a `Verdict`, or None with a reason)."""
        jobs = [
            Job(t.trajectory_id, "judge", lambda a, f, t=t: self._request(t, a, f), self._check)
            for t in trajs
        ]
        return self.runner.run(jobs) if jobs else []

    def judge(self, trajs: Sequence[Trajectory]) -> JudgeResult:
        """Relabel the runs that need a judge; every other run is returned unchanged and never sent."""
        todo = [i for i, t in enumerate(trajs) if needs_judge(t)]
        outcomes = self.ask([trajs[i] for i in todo])
        out = list(trajs)
        counts = dict.fromkeys(("sent", *VERDICTS, "failed"), 0)
        counts["sent"] = len(todo)
        for i, o in zip(todo, outcomes, strict=True):
            traj = trajs[i]
            if o.value is None:
                counts["failed"] += 1
                label, reason, note = "unknown", "judge_failed", f"{o.reason}: {o.detail}"[:200]
            else:
                counts[o.value.verdict] += 1
                label = {"correct": "success", "incorrect": "failure"}.get(o.value.verdict, "unknown")
                reason, note = f"judge_{o.value.verdict}", o.value.reason
            out[i] = traj.model_copy(
                update={
                    "outcome": Outcome(label=label, signal=self.signal, reason=reason),
                    "meta": {
                        **traj.meta,
                        "judge": {"verdict": reason.removeprefix("judge_"), "reason": note},
                    },
                }
            )
        return JudgeResult(out, counts)

    def usage_report(self) -> dict[str, Any]:
        """Tokens and cost of the judge's requests (`Ledger.report`)."""
        return self.ledger.report()

    def close(self) -> None:
        """Close the runner and the response store."""
        for thing in self._owned:
            thing.close()


__all__ = [
    "AnswerJudge",
    "JudgeResult",
    "Verdict",
    "format_prompt",
    "needs_judge",
    "parse_verdict",
    "request_body",
]
