"""Rule-made wrong next steps for the deep-research `plan` task (offline distractor candidates).

APTBench's DR plan distractors are LLM-written wrong steps of a few kinds: a premature
`task_complete`, a wrong tool name, a wrong argument name, an off-topic browse and a redundant
search. Offline, the same kinds are made here by rules from the run itself, so every option stays
in the run's language, tools and sites. Each family returns `(family, step)` pairs; a step is the
APTBench object `{"planning": ..., "execution": {"name": ..., "args": {...}}}`.

- `premature_completion`: `task_complete` before the evidence is in, with a stock phrase in the query's language
  (the phrasings APTBench's own rows use: "结束任务", "Indicate task completion"). Answer-carrying
  completions (`gaia_answer{answer: ...}`) are never moved: they would show the run's final answer.
- `wrong_tool` / `wrong_arg` (one of them per item): a call under a near-miss tool name that is not
  in the run's tool set, or with one argument under a near-miss name (`text` -> `query`); applied
  to a copy of the gold or, in place, to one of the candidates above (see `wrong_steps`).
- `vague_search`: the gold's (or the latest) search narrowed to its first content words.
- `question_search`: when the gold ends the run, one more search for the question's own words.
- `answer_guess`: for runs ending in an answer-carrying call with a numeric answer, that call
  with another number seen before the gold.
- `off_topic_browse`: a page listed in an earlier observation that the run never opens, the one
  sharing the fewest words with the question.

Guarantees: no rule writes a judgement of the step (no "irrelevant", "prematurely", 无关, and no
`*_wrong` tool names); a step keeps the run's own planning where it has one, and synthetic planning
restates the call with real agents' openers (`wording`). The gold itself is never returned;
near-duplicates are left to the generator.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from extractors.dr.wording import (
    ARG_MISSES,
    COMPLETION_TOOLS,
    GOAL_KEYS,
    STOCK_COMPLETE,
    STOPWORDS,
    call,
    listed,
    near_miss,
    plain_planning,
    search_key,
    url_key,
    vague_query,
)

_WORD = re.compile(r"\w+", re.U)
_TERM = re.compile(r"https?://\S+|[\u3400-\u9fff\uf900-\ufaff]{2,}|[^\W_]{3,}", re.U)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


class Candidate(NamedTuple):
    """One rule-made wrong step and the family that made it."""

    family: str
    step: dict[str, Any]


class RunView(NamedTuple):
    """What the families need to know about the run around the gold step."""

    steps: Sequence[dict[str, Any]]
    """Every step of the run as `{planning, execution}` objects (observations apart)."""
    observations: Sequence[str | None]
    """Observation of each step."""
    gold_index: int
    """Index of the gold step."""
    query: str
    """The task question."""
    lang: str
    """`en` or `zh`."""
    tools: frozenset[str]
    """Tool names of the run's tool set."""


def premature_completion(run: RunView, rng: random.Random) -> Iterator[Candidate]:
    """The run's completion step moved early, or `task_complete` with a stock phrase."""
    gold = run.steps[run.gold_index]["execution"]["name"]
    if gold in COMPLETION_TOOLS:
        return
    if any(s["execution"]["name"] in COMPLETION_TOOLS for s in run.steps[run.gold_index + 1 :]):
        return  # the run's own completion would be a step of the same run
    names = sorted(run.tools & COMPLETION_TOOLS)
    if names and names[0] == "task_complete":
        yield Candidate(
            "premature_completion", call("task_complete", {}, rng.choice(STOCK_COMPLETE[run.lang]))
        )


def _planning_for(run: RunView, base: dict[str, Any], rng: random.Random) -> str | None:
    """Keep a real step's own planning; the gold's is restated (a copy would be a near-duplicate)."""
    if base is not run.steps[run.gold_index] and base["planning"].strip():
        return base["planning"]
    return register_planning(run, base["execution"]["name"], base["execution"]["args"], rng)


def register_planning(run: RunView, tool: str, args: dict[str, Any], rng: random.Random) -> str | None:
    """Planning in the run's own register: that of the run's nearest other step calling `tool`
    (before the gold first), else its nearest other planning at all, else a plain restatement.

    Template wording ("Find X.", "Browse the Y page") is the commonest option-only tell where the
    run's own planning reads otherwise (key: value notes, JSON plan lists, long reasoning).
    """
    gold = run.steps[run.gold_index]
    order = [*reversed(run.steps[: run.gold_index]), *run.steps[run.gold_index + 1 :]]
    own = [s["planning"] for s in order if s["planning"].strip() and s["planning"] != gold["planning"]]
    same_tool = [s["planning"] for s in order if s["execution"]["name"] == tool and s["planning"] in own]
    if same_tool:
        return same_tool[0]
    if own:  # the run's latest reasoning, carried on to another call
        return own[0]
    return plain_planning(tool, args, run.lang, rng)


def wrong_tool(run: RunView, base: dict[str, Any], rng: random.Random) -> Iterator[Candidate]:
    """`base`'s call under a near-miss tool name."""
    ex = base["execution"]
    planning = _planning_for(run, base, rng)
    name = near_miss(ex["name"], run.tools, rng)
    if planning and name:
        yield Candidate("wrong_tool", call(name, dict(ex["args"]), planning))


def wrong_arg(run: RunView, base: dict[str, Any], rng: random.Random) -> Iterator[Candidate]:
    """`base`'s call with one argument renamed to a near miss."""
    ex = base["execution"]
    planning = _planning_for(run, base, rng)
    key = search_key(ex["args"]) or url_key(ex["args"]) or next(iter(ex["args"]), None)
    if not planning or key is None:
        return
    misses = [m for m in ARG_MISSES.get(key, (f"{key}_value",)) if m not in ex["args"]]
    if misses:
        new = misses[rng.randrange(len(misses))]
        args = {(new if k == key else k): v for k, v in ex["args"].items()}
        yield Candidate("wrong_arg", call(ex["name"], args, planning))


def question_search(run: RunView, rng: random.Random) -> Iterator[Candidate]:
    """After the last step: one more search, for the question's own words (the answer is already in)."""
    if run.steps[run.gold_index]["execution"]["name"] not in COMPLETION_TOOLS:
        return
    template = _search_template(run)
    if template is None:
        return
    base, key = template
    name, args = base["execution"]["name"], base["execution"]["args"]
    words = run.query.split()
    if run.lang == "en":
        words = [w.strip("\"'?,.") for w in words if w.casefold().strip("\"'?,.") not in STOPWORDS]
    q = " ".join(words[:8]) if len(words) > 1 else run.query.strip("？?")[:30]
    if q and q != args[key]:
        new = {**args, key: q}
        yield Candidate("question_search", call(name, new, register_planning(run, name, new, rng) or q))


def _search_template(run: RunView) -> tuple[dict[str, Any], str] | None:
    """The latest search step before the gold, else the gold itself, with its query key."""
    for s in (*reversed(run.steps[: run.gold_index]), run.steps[run.gold_index]):
        key = search_key(s["execution"]["args"])
        if key:
            return s, key
    return None


def vague_search(run: RunView, rng: random.Random) -> Iterator[Candidate]:
    """The latest search (else the gold's) narrowed to its first content words, under its own planning."""
    template = _search_template(run)
    if template is None:
        return
    base, key = template
    name, args = base["execution"]["name"], base["execution"]["args"]
    q = vague_query(args[key], run.lang)
    if q and q != args[key]:
        new = {**args, key: q}
        yield Candidate("vague_search", call(name, new, register_planning(run, name, new, rng) or q))


def off_topic_browse(run: RunView, rng: random.Random) -> Iterator[Candidate]:
    """Open listed pages the run never opens, those sharing the fewest words with the question (up to 3).

    The first asks the gold's own question of the wrong page when the gold opens a page; the
    others (and all, otherwise) ask for the listed page's title.
    """
    gold = run.steps[run.gold_index]["execution"]
    template = next(
        (
            s["execution"]
            for s in (run.steps[run.gold_index], *reversed(run.steps))
            if url_key(s["execution"]["args"])
        ),
        None,
    )
    if template is None:
        if "browse_website" not in run.tools:
            return
        template = {"name": "browse_website", "args": {"url": "", "question": ""}}
    ukey = url_key(template["args"]) or "url"
    gkey = next((k for k in GOAL_KEYS if k in template["args"]), None)
    opened = {str(v) for s in run.steps for v in s["execution"]["args"].values()}
    query_words = {w.casefold() for w in _WORD.findall(run.query)} | set(_CJK.findall(run.query))
    found: dict[str, tuple[int, str]] = {}
    for obs in run.observations[: run.gold_index]:
        for item in listed(obs or ""):
            if item.url not in opened and item.url not in found and item.title:
                words = {w.casefold() for w in _WORD.findall(item.block)} | set(_CJK.findall(item.block))
                title = " ".join(item.title.replace("…", " ").replace("...", " ").split())
                found[item.url] = (len(words & query_words), title)
    for k, url in enumerate(sorted(found, key=lambda u: (found[u][0], u))[:3]):
        args = {**template["args"], ukey: url}
        if gkey and not (k == 0 and url_key(gold["args"])):
            args[gkey] = found[url][1]
        yield Candidate(
            "off_topic_browse",
            call(template["name"], args, register_planning(run, template["name"], args, rng) or url),
        )


def _terms(text: str) -> set[str]:
    """Words of 3+ characters (case-folded) and CJK runs: what a call's arguments name."""
    return {w.casefold() for w in _TERM.findall(text)}


_ANSWER_KEYS = ("answer", "final_answer", "result")
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def answer_guess(run: RunView, rng: random.Random) -> Iterator[Candidate]:
    """An answer-carrying completion (`gaia_answer{answer}`) with other numbers seen before the gold.

    Only for runs that end with such a call and a numeric answer: up to two guesses, numbers of
    the same digit count (else any) from the observations before the gold that are not the answer.
    The first answers right after the previous step's own reasoning (its planning), the second
    says so plainly. Other answer fields that could hold the real answer (`long_answer`) are left out.
    """
    final = run.steps[-1]["execution"]
    key = next((k for k in _ANSWER_KEYS if isinstance(final["args"].get(k), (str, int, float))), None)
    if final["name"] not in COMPLETION_TOOLS or key is None:
        return
    answer = str(final["args"][key]).strip()
    if not _NUMBER.fullmatch(answer):
        return
    seen = [n for obs in run.observations[: run.gold_index] for n in _NUMBER.findall(obs or "")]
    guesses = [n for n in dict.fromkeys(seen) if n.replace(",", "") != answer.replace(",", "")]
    same = [n for n in guesses if len(n.replace(",", "")) == len(answer.replace(",", ""))]
    pool = same or guesses
    rng.shuffle(pool)
    before = run.steps[run.gold_index - 1]["planning"].strip() if run.gold_index else ""
    plannings = [p for p in (before,) if p != run.steps[run.gold_index]["planning"]] or [""]
    for pick, planning in zip(pool, plannings, strict=False):
        args = {
            k: (pick if k == key else v)
            for k, v in final["args"].items()
            if k == key or (not (isinstance(v, str) and answer in v) and k != "long_answer")
        }
        planning = planning or (f"回答：{pick}" if run.lang == "zh" else f"The answer is {pick}.")
        yield Candidate("answer_guess", call(final["name"], args, planning))


CONTENT_FAMILIES = (
    premature_completion,
    vague_search,
    question_search,
    off_topic_browse,
    answer_guess,
)
FAULT_FAMILIES = (wrong_tool, wrong_arg)


_COMPLETION_NAME = re.compile(r"complet|finish|answer|submit|terminat|end_?task|^(?:stop|done|end)$")


def is_completion(step: dict[str, Any]) -> bool:
    """Does the step end the run (a completion tool, or a near-miss name of one: `finish_task`)?"""
    name = str((step.get("execution") or {}).get("name", ""))
    return name in COMPLETION_TOOLS or bool(_COMPLETION_NAME.search(name.casefold()))


def _fold(value: Any) -> str:
    return " ".join(str(value).casefold().split()).strip(" .?!。？")


def same_call(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Are two steps the same next step: one tool with the same arguments, or the same query or page
    under the same argument name (another planning or another browse question changes nothing)?

    A call under another argument name (`query` for `text`) is a schema fault, not the same call.
    """
    ea, eb = a.get("execution") or {}, b.get("execution") or {}
    if ea.get("name") != eb.get("name"):
        return False
    if ea.get("args") == eb.get("args"):
        return True
    if not (isinstance(ea.get("args"), dict) and isinstance(eb.get("args"), dict)):
        return False
    for key in (search_key, url_key):
        ka, kb = key(ea["args"]), key(eb["args"])
        if ka and ka == kb and _fold(ea["args"][ka]) == _fold(eb["args"][kb]):
            return True
    return False


def one_completion(gold: dict[str, Any], steps: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes of `steps` that may be options beside `gold`: none the same call as the gold, and at most
    one completion among gold and options (a completion gold admits none; else the first one stays)."""
    done = is_completion(gold)
    out: list[int] = []
    for k, step in enumerate(steps):
        if same_call(step, gold):
            continue
        if is_completion(step):
            if done:
                continue
            done = True
        out.append(k)
    return out


def wrong_steps(run: RunView, rng: random.Random) -> list[Candidate]:
    """Every family's candidates, those under a real planning of the run first, each group one of
    each family first (families in a seeded order), then the rest.

    The content families come from the run. Then one schema fault (a seeded choice of wrong tool or
    wrong argument name) breaks the call of either a copy of the gold or one of those candidates,
    which it replaces. Faulting only the gold would make the gold the option closest to all others
    (APTBench's medoid artefact); faulting a candidate in place keeps it from having a twin.
    """
    gold = run.steps[run.gold_index]
    per_family = [[c for c in family(run, rng) if c.step != gold] for family in CONTENT_FAMILIES]
    slots = [
        (f, i)
        for f, cands in enumerate(per_family)
        for i, c in enumerate(cands)
        if search_key(c.step["execution"]["args"]) or url_key(c.step["execution"]["args"])
    ]
    fault = FAULT_FAMILIES[rng.randrange(len(FAULT_FAMILIES))]
    pick = rng.randrange(len(slots) + 1)
    if pick == len(slots):
        per_family.append([c for c in fault(run, gold, rng) if c.step != gold])
    else:
        f, i = slots[pick]
        broken = list(fault(run, per_family[f][i].step, rng))
        if broken:
            per_family[f][i] = broken[0]
    rng.shuffle(per_family)
    ordered: list[Candidate] = []
    for round_ in range(max((len(f) for f in per_family), default=0)):
        ordered += [f[round_] for f in per_family if round_ < len(f)]
    gold_words = {s["planning"] for s in run.steps}
    # Real planning first: restated planning ("Search for X.") is the commonest option-only tell.
    return sorted(ordered, key=lambda c: c.step["planning"] not in gold_words)
