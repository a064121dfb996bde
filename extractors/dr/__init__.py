"""Deep research: the APTBench `deepresearch` tasks from successful deep-research runs.

Reads: `dr` trajectories from any deep-research reader (TapeAgents tapes, APTBench rows rebuilt
into runs, WebDancer, MiroFlow): steps with thought = planning, action = tool name + args, and
observation; `final_answer`, `gold_answer`. Produces gold steps for
- `plan` (MCQ, 6 options): gold = the next step as the APTBench JSON object `{"planning": ...,
  "execution": {"name": ..., "args": {...}}}` (`ensure_ascii=False`, default separators);
  context `trajectory` = the JSON list of the steps before it, each with its `observation`.
  `GoldStep.candidates` holds wrong next steps for the generator: the real wrong alternatives
  APTBench shipped for that step (`meta["wrong_next_steps"]`, runs rebuilt from APTBench rows)
  alternating with the rule-made steps of `wrong_steps` (those under a real planning first), never
  one repeating a call the run itself made (no option is a step of the same run), then other runs'
  steps for the same question that repeat a call this run already made (its result is in view:
  `redundant_steps`; their other steps may be as valid as the gold and are never taken). No
  candidate is the gold's call again (`same_call`: the same tool with the same query or page), and
  at most one completes the run among gold and candidates (`one_completion`).
  `group` is the question (runs answering it share it, in any language: their steps may be right).
- `summ_ans` (completion): only when the answer (or a gold alias) appears in the context as shown,
  after truncation (an observation holding it keeps that passage in view, `truncate_around`), else
  an `answer_not_in_context` Problem; gold = the run's final answer, short (the agent's answer, else the
  reference answer of a run judged successful; one line, at most `MAX_ANSWER_CHARS`, no `]`,
  which APTBench's scorer cuts at); context = the whole run without its answer-carrying last
  steps (a final message, `gaia_answer{answer}`); an argument-free `task_complete` stays, as in
  APTBench.
Rows carry APTBench's fields: `traj_id` (a stable int hashed from the trajectory id), `source`
(`<reader>` or `<reader>_<model>`), `qid = traj_<id>_step_<k>` (k = traj_len - 1), `query`,
`question_instruct` (APTBench's own wording in the query's language: Chinese when the query has
a CJK ideograph, the rule the publish step splits `_en` / `_zh` by), `tool_set` (APTBench's
`\\n    (1) {...}\\n` listing), `traj_len`, `query_answer`.

Which steps become `plan` items (documented, seeded): a step is eligible when at least one step
precedes it (in a run of exactly two tool calls, a search and an answer, its first step is
eligible too, with an empty trajectory), it has a tool call and non-empty planning, and its JSON is at most
`MAX_GOLD_CHARS`. Steps APTBench itself posed (those with real wrong alternatives) are taken
first, then `Random(h(seed, trajectory_id, task))` fills up to `max_items_per_trajectory`.

Context budget (documented): observations over `max_observation_chars` keep head and tail around
an omission marker; while the JSON still exceeds `max_context_tokens` (chars / 4) the observation
cap is halved (down to 256 chars), then the oldest steps are dropped; a context that never fits is
a `context_too_long` Problem.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from extractors.base import ExtractOptions, estimate_tokens, extractor, gold_step, location, unknown_task
from extractors.dr.tasks import SPECS
from extractors.dr.wording import COMPLETION_TOOLS
from extractors.dr.wrong_steps import RunView, is_completion, one_completion, same_call, wrong_steps
from schemas import Candidate, GoldStep, Problem, Step, Trajectory, content_id
from schemas.answer_text import normalize
from schemas.text import truncate_middle

MAX_GOLD_CHARS = 2000
MAX_ANSWER_CHARS = 100
_MIN_OBSERVATION_CHARS = 256
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SKIP_TOOLS = frozenset({"invalid_tool_call", "unknown_tool"})

#: APTBench's `question_instruct` strings. plan/en is the request line of APTBench's English plan
#: prompt (its rows are not public); the other three are the rows' own values.
INSTRUCT = {
    ("plan", "en"): "Given the question to be answered, the executed searching and browsing trajectory, "
    "and several possible next steps, determine which step is correct and most reasonable",
    (
        "plan",
        "zh",
    ): "给定要解决的问题、当前行为轨迹和接下来可能有的几个行为，判断哪个行为是没有错误的、最合理的。",
    ("summ_ans", "en"): "Given the problem to be solved and the information currently collected, "
    "write the answer to the problem",
    ("summ_ans", "zh"): "给定要解决的问题和当前搜集到的信息，写出问题答案",
}

#: The InfoDeepSeek tool specs of APTBench's `tool_set`, used for runs that record no specs.
KNOWN_TOOLS: dict[str, dict[str, Any]] = {
    "web_search": {
        "name": "web_search",
        "description": "Perform an internet search.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "str", "description": "Search query."}},
        },
        "returns": {"description": "", "type": "str"},
        "required": ["text"],
    },
    "browse_website": {
        "name": "browse_website",
        "description": "Browse a specific website using the provided URL link. ",
        "parameters": {
            "type": "object",
            "properties": {
                "url": {"type": "str", "description": "The website's URL link."},
                "question": {
                    "type": "str",
                    "description": "The specific content or topic sought on the website.",
                },
            },
        },
        "returns": {"description": "", "type": "str"},
        "required": ["url", "question"],
    },
    "task_complete": {
        "name": "task_complete",
        "description": "Indicate task completion without the need for further functions. ",
        "parameters": {"type": "object", "properties": {}},
        "returns": {"description": "", "type": ""},
        "required": [],
    },
}


def language(query: str) -> str:
    """`zh` when the query has a CJK ideograph, else `en` (the publish step's split rule)."""
    return "zh" if _CJK.search(query) else "en"


def truncate_around(text: str, limit: int, needles: Sequence[str]) -> str:
    """`truncate_middle`, except that the first passage holding one of `needles` stays in view.

    The kept text is a head, the passage around the match, and a tail, with the omitted stretches
    marked as `truncate_middle` marks them.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    low = text.lower()
    hits = [i for n in needles if n and (i := low.find(n.lower())) >= 0]
    if not hits:
        return truncate_middle(text, limit)
    at = min(hits)
    head = tail = limit // 4
    half = (limit - head - tail) // 2
    lo, hi = max(head, at - half), min(len(text) - tail, at + half)
    if lo <= head:  # the passage is already in the head
        return truncate_middle(text, limit, head=max(head, hi))
    if hi >= len(text) - tail:
        return truncate_middle(text, limit, head=limit - (len(text) - lo))
    return (
        f"{text[:head]}\n[... {lo - head} characters omitted ...]\n{text[lo:hi]}"
        f"\n[... {len(text) - tail - hi} characters omitted ...]\n{text[len(text) - tail :]}"
    )


def step_object(step: Step, observation_limit: int | None = None, keep: Sequence[str] = ()) -> dict[str, Any]:
    """A step as APTBench's `{planning, execution, observation}` (observation only when recorded).

    `keep`: strings (the answer and its aliases) whose first passage an observation keeps in view.
    """
    assert step.action is not None
    obj: dict[str, Any] = {
        "planning": step.thought.strip(),
        "execution": {"name": step.action.tool, "args": dict(step.action.args)},
    }
    if observation_limit is not None and step.observation is not None:
        obj["observation"] = truncate_around(step.observation, observation_limit, keep)
    return obj


def dumps(value: Any) -> str:
    """APTBench's JSON: `ensure_ascii=False`, default separators."""
    return json.dumps(value, ensure_ascii=False)


def spec_name(spec: dict[str, Any]) -> str:
    """A tool spec's name (flat, or OpenAI's `{"function": {"name"}}`)."""
    fn = spec.get("function")
    return str(spec.get("name") or (fn.get("name") if isinstance(fn, dict) else "") or "")


def tool_specs(traj: Trajectory) -> list[dict[str, Any]]:
    """The run's tool specs: recorded ones, else APTBench's for InfoDeepSeek tools, else names and args seen."""
    recorded = {spec_name(t): t for t in traj.tool_set}
    used: dict[str, set[str]] = {}
    for s in traj.steps:
        if s.action is not None and s.action.tool not in _SKIP_TOOLS:
            used.setdefault(s.action.tool, set()).update(s.action.args)
    if used and set(used) <= set(KNOWN_TOOLS) | {"time_delta"}:
        used.setdefault("task_complete", set())  # APTBench lists all three InfoDeepSeek tools
    specs = [t for t in traj.tool_set if isinstance(t, dict)]
    for name, keys in used.items():
        if name in recorded:
            continue
        specs.append(
            KNOWN_TOOLS.get(name)
            or {
                "name": name,
                "description": "",
                "parameters": {
                    "type": "object",
                    "properties": {k: {"type": "str", "description": ""} for k in sorted(keys)},
                },
                "required": sorted(keys),
            }
        )
    return specs


def render_tool_set(specs: Sequence[dict[str, Any]]) -> str:
    """APTBench's `tool_set` string: `\\n    (1) {...}\\n    (2) {...}\\n`."""
    return "\n" + "".join(f"    ({i}) {dumps(spec)}\n" for i, spec in enumerate(specs, start=1))


def fit_context(
    steps: Sequence[Step], options: ExtractOptions, keep: Sequence[str] = ()
) -> list[dict[str, Any]] | None:
    """The steps as APTBench objects within the budget (the documented rule), or None."""
    limit = options.max_observation_chars
    while True:
        objs = [step_object(s, limit, keep) for s in steps if s.action is not None]
        if estimate_tokens(dumps(objs)) <= options.max_context_tokens or limit <= _MIN_OBSERVATION_CHARS:
            break
        limit = max(_MIN_OBSERVATION_CHARS, limit // 2)
    for start in range(len(objs)):
        if estimate_tokens(dumps(objs[start:])) <= options.max_context_tokens:
            return objs[start:]
    return None if objs else []


def merge_candidates(theirs: Sequence[str], made: Sequence[str]) -> list[str]:
    """Real wrong steps and rule-made ones alternating, real first.

    APTBench's own LLM-written wrong steps carry option-only tells (on its plan_zh rows an
    option-only classifier finds the gold 47% of the time, chance 17%); alternating keeps them
    while diluting their style with steps made from the run itself.
    """
    out: list[str] = []
    for i in range(max(len(theirs), len(made))):
        out += [*theirs[i : i + 1], *made[i : i + 1]]
    return out


def short_answer(traj: Trajectory) -> str | None:
    """The final answer as a summ_ans gold: the agent's own, else the reference of a successful run."""
    options = [traj.final_answer]
    if traj.outcome.label == "success":
        options.append(traj.gold_answer)
    for text in options:
        text = (text or "").strip()
        if text and "\n" not in text and "]" not in text and len(text) <= MAX_ANSWER_CHARS:
            return text
    return None


def answer_aliases(traj: Trajectory, answer: str) -> list[str]:
    """The answer and every gold alias the run carries."""
    extra = traj.meta.get("gold_aliases") if isinstance(traj.meta.get("gold_aliases"), list) else []
    return [a for a in dict.fromkeys([answer, traj.gold_answer or "", *map(str, extra)]) if a.strip()]


def answer_in(context: Sequence[dict[str, Any]], aliases: Sequence[str]) -> bool:
    """Does the answer (or an alias) appear in the context, after normalisation?"""
    text = normalize(
        " ".join(str(o.get("observation", "")) + " " + str(o.get("planning", "")) for o in context)
    )
    return any((n := normalize(a)) and n in text for a in aliases)


def evidence_steps(traj: Trajectory) -> tuple[Step, ...]:
    """The run without its answer-carrying last steps (a final message, a completion with arguments)."""
    steps = list(traj.steps)
    while steps and (
        steps[-1].action is None or (steps[-1].action.tool in COMPLETION_TOOLS and steps[-1].action.args)
    ):
        steps.pop()
    return tuple(steps)


def query_key(query: str) -> str:
    """Runs answering the same question share this key (case and spacing aside)."""
    return " ".join(query.split()).casefold()


#: What `observe` learns: per question (`query_key`), every labelled run's tool calls with planning,
#: as `(trajectory_id, step object)`.
SameQuery = dict[str, tuple[tuple[str, dict[str, Any]], ...]]


def question_group(traj: Trajectory) -> str:
    """The question a run answers, shared by every run of it (their steps may be right, so none is
    another's distractor): APTBench's `traj_id` numbers the question across its models and its
    English and Chinese versions (`Qi Xi(齐溪)'s husband ...` and `齐溪2022年时的丈夫 ...` are both 246),
    elsewhere the query text."""
    if traj.source.format == "aptbench_dr":
        _, _, question = (traj.source.native_id or "").rpartition("/")
        if question:
            return content_id("dr-question", "aptbench", question)
    return content_id("dr-query", traj.task)


@extractor("dr", version=4, reads={"dr"}, tasks=SPECS)
class DeepResearch:
    """Gold next steps and final answers from successful deep-research runs."""

    def __init__(self) -> None:
        self.same_query: SameQuery = {}

    @staticmethod
    def observe(runs: Iterable[Trajectory]) -> SameQuery:
        """Every labelled run's planned tool calls, by question (other models' steps for `plan`)."""
        found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for t in runs:
            calls = [
                (t.trajectory_id, step_object(s))
                for s in t.steps
                if s.action is not None and s.action.tool not in _SKIP_TOOLS and s.thought.strip()
            ]
            found.setdefault(query_key(t.task), []).extend(calls)
        return {k: tuple(v) for k, v in found.items()}

    def use(self, observed: SameQuery) -> None:
        """Take the steps `observe` collected."""
        self.same_query = observed or {}

    def redundant_steps(self, traj: Trajectory, objects: Sequence[dict[str, Any]], i: int) -> list[str]:
        """Other runs' steps for the same question that repeat a call this run made before step `i`
        (its observation is already in view): on topic, and clearly not the next step. Steps that are
        any other call may be as valid as the gold and are never taken."""
        own = {dumps(o) for o in objects}
        out: list[str] = []
        for tid, step in self.same_query.get(query_key(traj.task), ()):
            text = dumps(step)
            if (
                tid == traj.trajectory_id
                or text in own
                or len(text) > MAX_GOLD_CHARS
                or is_completion(step)
                or same_call(step, objects[i])
                or not any(same_call(step, c) for c in objects[:i])
            ):
                continue
            out.append(text)
        return list(dict.fromkeys(out))

    def extract(self, traj: Trajectory, task: str, options: ExtractOptions) -> Iterator[GoldStep | Problem]:
        where = location(traj)
        if (problem := unknown_task(self, traj, task)) is not None:
            yield problem
            return
        lang = language(traj.task)
        common = {
            "traj_id": int(content_id("traj_id", traj.trajectory_id)[:8], 16) & 0x7FFFFFFF,
            "source": "_".join(p for p in (traj.source.format, traj.source.model) if p),
            "query": traj.task,
            "question_instruct": INSTRUCT[(task, lang)],
            "query_answer": traj.gold_answer or "",
        }
        if task == "summ_ans":
            yield from self._summ_ans(traj, common, where, options)
        else:
            yield from self._plan(traj, common, lang, where, options)

    def _gold_step(
        self,
        traj: Trajectory,
        task: str,
        index: int,
        gold: str,
        fields: dict[str, Any],
        options: ExtractOptions,
        candidates: tuple[Candidate, ...] = (),
    ) -> GoldStep:
        return gold_step(
            self.name,
            self.version,
            traj,
            task,
            index,
            gold,
            fields,
            options.seed,
            candidates=candidates,
            group=question_group(traj),
        )

    def _summ_ans(
        self, traj: Trajectory, common: dict[str, Any], where: str, options: ExtractOptions
    ) -> Iterator[GoldStep | Problem]:
        answer = short_answer(traj)
        if answer is None:
            yield Problem(
                where=where,
                stage="extract",
                reason="no_short_answer",
                severity="info",
                detail=f"summ_ans: final answer {str(traj.final_answer)[:80]!r} is missing, multi-line, "
                f"longer than {MAX_ANSWER_CHARS} chars or holds `]`",
            )
            return
        steps = evidence_steps(traj)
        context = fit_context(steps, options) if steps else None
        if not context:
            reason = "no_evidence_steps" if not steps else "context_too_long"
            yield Problem(
                where=where,
                stage="extract",
                reason=reason,
                severity="warning",
                detail=f"summ_ans: {len(steps)} evidence steps, budget {options.max_context_tokens} tokens",
            )
            return
        aliases = answer_aliases(traj, answer)
        if not answer_in(context, aliases):  # truncation cut the evidence: keep its passage in view
            context = fit_context(steps, options, aliases) or context
        if not answer_in(context, aliases):
            yield Problem(
                where=where,
                stage="extract",
                reason="answer_not_in_context",
                severity="info",
                detail=f"summ_ans: neither {answer!r} nor an alias appears in the {len(context)} evidence steps",
            )
            return
        fields = {**common, "traj_len": len(context), "trajectory": dumps(context)}
        yield self._gold_step(traj, "summ_ans", len(traj.steps), answer, fields, options)

    def _plan(
        self, traj: Trajectory, common: dict[str, Any], lang: str, where: str, options: ExtractOptions
    ) -> Iterator[GoldStep | Problem]:
        steps = traj.steps
        calls = [s for s in steps if s.action is not None and s.action.tool not in _SKIP_TOOLS]
        short_run = len(calls) == 2  # a search and an answer: its first step is the only plan item
        eligible = [s.index for s in steps if self._eligible(s, short_run)]
        if not eligible:
            yield Problem(
                where=where,
                stage="extract",
                reason="no_eligible_steps",
                severity="info",
                detail=f"plan: none of {len(steps)} steps qualifies",
            )
            return
        real = {int(k): v for k, v in (traj.meta.get("wrong_next_steps") or {}).items() if str(k).isdigit()}
        posed = [i for i in eligible if real.get(i)]
        rng = random.Random(content_id(options.seed, traj.trajectory_id, "plan"))
        rest = [i for i in eligible if i not in posed]
        n = options.max_items_per_trajectory
        chosen = sorted(posed[:n] + rng.sample(rest, max(0, min(n - len(posed[:n]), len(rest)))))
        specs = tool_specs(traj)
        objects = [
            step_object(s) if s.action else {"planning": s.thought, "execution": {"name": "", "args": {}}}
            for s in steps
        ]
        tools = frozenset(spec_name(t) for t in specs)
        executions = [o["execution"] for o in objects]
        for i in chosen:
            context = fit_context(steps[:i], options)
            if context is None or (not context and not short_run):
                reason = "context_too_long" if context is None else "no_context_steps"
                yield Problem(
                    where=f"{where}#step{i}",
                    stage="extract",
                    reason=reason,
                    severity="warning",
                    detail=f"plan: no tool-call step before step {i} fits {options.max_context_tokens} tokens",
                )
                continue
            gold = dumps(objects[i])
            run = RunView(objects, [s.observation for s in steps], i, traj.task, lang, tools)
            item_rng = random.Random(content_id(options.seed, traj.trajectory_id, "plan", i))
            # never a step of the same run: no candidate repeats any call the run made
            made_steps = [c for c in wrong_steps(run, item_rng) if c.step["execution"] not in executions]
            made = [dumps(c.step) for c in made_steps]
            theirs = [dumps(w) for w in real.get(i, []) if isinstance(w, dict) and "execution" in w]
            again = self.redundant_steps(traj, objects, i)
            origin = {t: "llm:aptbench" for t in theirs}
            origin.update({t: "other_run:redundant_step" for t in again if t not in origin})
            for c, text in zip(made_steps, made, strict=True):
                origin.setdefault(text, f"rule:{c.family}")
            merged = [c for c in dict.fromkeys([*merge_candidates(theirs, made), *again]) if c != gold]
            # no option the same call as the gold, and one completion at most among gold and options
            allowed = one_completion(objects[i], [json.loads(c) for c in merged])
            candidates = tuple(Candidate(text=merged[k], origin=origin[merged[k]]) for k in allowed)
            fields = {
                **common,
                "qid": f"traj_{common['traj_id']}_step_{len(context) - 1}",
                "trajectory": dumps(context),
                "next_step": gold,
                "tool_set": render_tool_set(specs),
                "traj_len": len(context),
            }
            yield self._gold_step(traj, "plan", i, gold, fields, options, candidates)

    @staticmethod
    def _eligible(step: Step, short_run: bool = False) -> bool:
        if (
            (step.index < 1 and not short_run)
            or step.action is None
            or step.action.tool in _SKIP_TOOLS
            or not step.thought.strip()
        ):
            return False
        return len(dumps(step_object(step))) <= MAX_GOLD_CHARS
