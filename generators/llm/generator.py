"""What every LLM distractor generator shares: the pure `parse()` with its quality rules, and `generate()`.

Why: the OpenAI, Anthropic and OpenAI-compatible generators differ only in the request body they
build; parsing the reply, refusing bad distractors and turning outcomes into Questions or Problems
is the same for all, and lives here once.

Reads: GoldSteps of MCQ tasks that have a prompt file (completion tasks pass through unchanged).
Produces: one Question per step (gold first, `gold_index=0`; origins `llm:<model>:<kind>`; provenance
with generator, prompt hash, model, tokens and cost), or one Problem per step: `no_prompt_template`,
`prompt_render_error`, `no_distractors` (budget exhausted: emitted as Problems only, never as
candidates; a rerun with a larger budget pays only for these, the rest comes from the cache),
`batch_pending`, or an `llm_*` reason from the LLM layer.

Quality rules of `parse()` (a reply breaking them is retried once, then becomes a Problem):
a distractor equal or near-equal (`generators.text.similarity` >= `near_duplicate`) to the gold or to
an option already accepted is refused; so is one that admits its own flaw (`generators.quality.gates.
flaw_terms` not used by the gold or the context) and, when the gold is a JSON object, one that is not.
Whitespace fingerprints (trailing spaces, `**bold**`, a leading `(B)` letter) are stripped.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any, ClassVar

from pydantic import ValidationError
from rapidfuzz import fuzz

from generators.base import PoolEntry, completion_question, posed
from generators.llm.engine import Checked, Job, LLMFailure, LLMReply, LLMRequest, Outcome, make_request
from generators.llm.ledger import Ledger
from generators.llm.prompting import DistractorReply, Prompt, PromptLibrary, render, with_repair_note
from generators.quality.gates import context_text, flaw_terms
from generators.text import normalise, similarity
from schemas import Distractor, GoldStep, Problem, Question, task_spec
from schemas.report import LLMUsage

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?|\n?```\s*$")
_LETTER = re.compile(r"^\(?[A-Za-z]\)\s+")
_KIND = re.compile(r"[^a-z0-9_]+")


def load_json(text: str) -> Any:
    """JSON from a reply that may be fenced or wrapped in prose; None when there is none."""
    body = _FENCE.sub("", text.strip()).strip()
    for candidate in (
        body,
        body[body.find("{") : body.rfind("}") + 1],
        body[body.find("[") : body.rfind("]") + 1],
    ):
        if candidate:
            try:
                return json.loads(candidate)
            except ValueError:
                continue
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def close_to(text: str, key: str, others: Sequence[tuple[str, str]], threshold: float) -> str | None:
    """The first of `others` (text, normalised) whose `similarity` to `text` reaches `threshold`, or None.

    Exactly `generators.text.similarity`, made cheap: rapidfuzz's Indel ratio (2 x LCS / total length)
    bounds difflib's ratio from above, and `similarity` returns difflib's ratio whenever it is 0.5 or
    more, so a pair rapidfuzz puts below a threshold above 0.5 needs no difflib call.
    """
    for other, other_key in others:
        if threshold > 0.5 and fuzz.ratio(key, other_key) / 100 < threshold:
            continue
        if similarity(text, other) >= threshold:
            return other
    return None


def clean_option(text: str) -> str:
    """Strip a leading option letter, `**` markers, trailing spaces per line and outer whitespace."""
    text = _LETTER.sub("", text.strip()).replace("**", "")
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def check_output(
    text: str | None,
    step: GoldStep,
    n: int,
    *,
    model: str = "",
    near_duplicate: float = 0.85,
    want: int | None = None,
) -> Checked:
    """Parse and validate a reply into at least `n` (at most `want`) distractors, or say why not (pure).

    Prompts ask for `want` (more than an item shows); the first `n` usable become the distractors
    and the rest the reserve that adversarial filtering draws from."""
    want = max(n, want or n)
    if text is None or not text.strip():
        return Checked(None, "the reply was empty")
    data = load_json(text)
    if data is None:
        return Checked(None, "the reply was not JSON")
    try:
        reply = DistractorReply.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        return Checked(None, f"the JSON does not match the reply schema ({where}: {first['msg']})")
    gold_is_json = _json_object(step.gold) is not None
    known = (step.gold + "\n" + context_text(step.fields)).lower()
    taken = [(step.gold, normalise(step.gold))]
    out: list[Distractor] = []
    refused: list[str] = []
    for i, option in enumerate(reply.distractors):
        body, kind = option.text, option.kind
        if not clean_option(body):
            refused.append(f"entry {i} has no text")
            continue
        body = clean_option(body)
        if gold_is_json:
            obj = _json_object(body)
            if obj is None:
                refused.append(f"entry {i} is not a JSON object like the correct step")
                continue
            body = json.dumps(obj, ensure_ascii=False)
        key = normalise(body)
        copied = close_to(body, key, taken, near_duplicate)
        if copied is not None:
            refused.append(
                f"entry {i} is a near-copy of {'the correct answer' if copied is step.gold else 'another option'}"
            )
            continue
        flaws = [t for t in flaw_terms(body) if t.lower() not in known]
        if flaws:
            refused.append(f"entry {i} admits its flaw ({', '.join(flaws)})")
            continue
        taken.append((body, key))
        tag = _KIND.sub("_", str(kind or "").lower()).strip("_")[:32]
        out.append(Distractor(text=body, origin=f"llm:{model}" + (f":{tag}" if tag else "")))
        if len(out) == want:
            return Checked(tuple(out))
    if len(out) >= n:
        return Checked(tuple(out))
    why = "; ".join(refused[:4]) or "too few entries"
    return Checked(None, f"{len(out)} of {n} distractors usable ({why})")


def parse(
    text: str | None, step: GoldStep, n: int | None = None, *, model: str = "", near_duplicate: float = 0.85
) -> list[Distractor] | None:
    """The distractors of a reply, or None when the model failed (pure)."""
    need = n if n is not None else task_spec(step.scenario, step.task).n_options - 1
    checked = check_output(text, step, need, model=model, near_duplicate=near_duplicate)
    return list(checked.value) if checked.value is not None else None


class LLMDistractorGenerator:
    """Base of the LLM generators: subclasses only build the provider's request body."""

    name: ClassVar[str] = "llm"
    version: ClassVar[int] = 2
    provider: ClassVar[str] = "openai"
    ask_factor: ClassVar[int] = 3
    """Prompts ask for this many times the distractors an item shows; the extra ones are the reserve
    adversarial filtering chooses from (a reply with at least the shown count is usable)."""

    def __init__(
        self,
        *,
        runner: Any,
        ledger: Ledger,
        prompts: PromptLibrary,
        model: str,
        temperature: float | None = None,
        max_output_tokens: int = 1024,
        max_context_chars: int = 24000,
        near_duplicate: float = 0.85,
        structured: str = "json_schema",
        owned: Sequence[Any] = (),
    ) -> None:
        """Wire a generator.

        Args:
            runner: `LLMEngine` (online) or `BatchRunner`: `run(jobs) -> list[Outcome]`.
            ledger: The build's ledger (`usage_report()`).
            prompts: Prompt files per (scenario, task).
            model: Model id to request.
            temperature: Sampling temperature; None leaves the provider's default.
            max_output_tokens: Output limit per request (doubled on a retry after a cut reply).
            max_context_chars: Characters of trajectory context a prompt may carry.
            near_duplicate: Similarity from which a distractor counts as a copy.
            structured: `json_schema`, `tool`, `json_object` or `none` (prompt-only JSON).
            owned: Objects to `close()` with the generator (runner, store).
        """
        self.runner, self.ledger, self.prompts, self.model = runner, ledger, prompts, model
        self.temperature, self.max_output_tokens = temperature, max_output_tokens
        self.max_context_chars, self.near_duplicate, self.structured = (
            max_context_chars,
            near_duplicate,
            structured,
        )
        self._owned = list(owned)

    def request_body(self, prompt: Prompt, max_tokens: int) -> dict[str, Any]:
        """The provider's request body for a rendered prompt (pure; subclasses)."""
        raise NotImplementedError

    def build_prompt(
        self, step: GoldStep, n: int, attempt: int = 1, failure: LLMFailure | None = None
    ) -> LLMRequest:
        """The request of one attempt for one gold step (pure).

        A second attempt after a malformed body repeats the first request; after a cut reply it
        doubles the output limit; after invalid output it appends what was wrong.

        Raises:
            KeyError: no prompt file for the step's (scenario, task).
        """
        template = self.prompts.get(step.scenario, step.task)
        if template is None:
            raise KeyError(f"{step.scenario}.{step.task}")
        prompt = render(template, step, n, self.max_context_chars)
        max_tokens = self.max_output_tokens
        if failure is not None and failure.reason == "llm_truncated_output":
            max_tokens *= 2
        elif failure is not None and failure.reason != "llm_malformed_response":
            prompt = with_repair_note(prompt, failure.detail)
        return make_request(self.provider, self.request_body(prompt, max_tokens))

    def parse(self, text: str | None, step: GoldStep, n: int | None = None) -> list[Distractor] | None:
        """The distractors of a reply, or None when the model failed (pure)."""
        return parse(text, step, n, model=self.model, near_duplicate=self.near_duplicate)

    def _attempt(
        self, step: GoldStep, n: int, first: LLMRequest, attempt: int, failure: LLMFailure | None
    ) -> LLMRequest:
        return first if attempt == 1 else self.build_prompt(step, self.ask_factor * n, attempt, failure)

    def _check(self, step: GoldStep, n: int, reply: LLMReply) -> Checked:
        return check_output(
            reply.text,
            step,
            n,
            model=self.model,
            near_duplicate=self.near_duplicate,
            want=self.ask_factor * n,
        )

    def generate(
        self, steps: Sequence[GoldStep], pool: Sequence[PoolEntry], n_options: int
    ) -> Iterator[Question | Problem]:
        """One Question or Problem per step, in order; all LLM jobs of the shard run concurrently,
        each sent as soon as its prompt is built (the runner takes the jobs as they come)."""
        n = n_options - 1
        slots: list[Question | Problem | int] = []
        hashes: list[str] = []
        jobs = self._jobs(steps, n, slots, hashes)
        first = next(jobs, None)  # a shard without LLM jobs (completions only) needs no runner
        outcomes = self.runner.run(itertools.chain([first], jobs)) if first is not None else []
        for step, slot in zip(steps, slots, strict=True):
            yield slot if not isinstance(slot, int) else self._question(step, outcomes[slot], hashes[slot])

    def _jobs(
        self, steps: Sequence[GoldStep], n: int, slots: list[Question | Problem | int], hashes: list[str]
    ) -> Iterator[Job]:
        """The LLM job of every step that needs one; fills `slots` (a Question or Problem made here, or
        the job's index) and `hashes` (each job's prompt hash) as it goes."""
        for step in steps:
            if step.form == "completion":
                slots.append(completion_question(step))
                continue
            template = self.prompts.get(step.scenario, step.task)
            if template is None:
                slots.append(
                    Problem(
                        where=step.step_id,
                        stage="generate",
                        reason="no_prompt_template",
                        detail=f"no prompt file {step.scenario}.{step.task}.v<N>.md.j2 in the scenario's prompts/ folder",
                    )
                )
                continue
            try:
                first = self.build_prompt(step, self.ask_factor * n)  # more than shown: the rest is reserve
            except Exception as exc:  # a template that does not fit this step's fields
                slots.append(
                    Problem(
                        where=step.step_id,
                        stage="generate",
                        reason="prompt_render_error",
                        detail=f"{template.name}: {type(exc).__name__}: {exc}",
                    )
                )
                continue
            slots.append(len(hashes))
            hashes.append(template.sha256)
            yield Job(
                step.step_id,
                step.task,
                partial(self._attempt, step, n, first),
                partial(self._check, step, n),
            )

    def _question(self, step: GoldStep, outcome: Outcome, prompt_hash: str) -> Question | Problem:
        if outcome.value is None:
            return Problem(where=step.step_id, stage="generate", reason=outcome.reason, detail=outcome.detail)
        prov = step.provenance.model_copy(
            update={
                "generator": self.name,
                "generator_version": self.version,
                "prompt_hash": prompt_hash,
                "model": outcome.model or self.model,
                "tokens_in": outcome.tokens_in,
                "tokens_out": outcome.tokens_out,
                "cost_usd": round(outcome.cost_usd, 8),
            }
        )
        need = task_spec(step.scenario, step.task).n_options - 1
        return posed(step, outcome.value[:need], prov, outcome.value[need:])

    def usage_report(self) -> LLMUsage:
        """Tokens and cost of this build per task and model (`Ledger.report`)."""
        return self.ledger.report()

    def close(self) -> None:
        """Close the runner and the response store."""
        for thing in self._owned:
            thing.close()


__all__ = ["LLMDistractorGenerator", "check_output", "clean_option", "load_json", "parse"]
