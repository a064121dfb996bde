"""Item-quality gates: pure functions returning Problems, each counted in the report.

Every gate takes an `OptionSet` (where, options, gold position, context text) or a `Question`
(converted with `option_set`), so the same gates run at build time on questions and in
`aptforge audit` on anyone's published rows. `check_question` runs every per-item gate; an
`error` Problem drops the item from candidates, a `warning` keeps it and is only counted.

Gates: answer among the options, duplicate options, a distractor near-equal to the gold, the
gold leaked into the context, a distractor stating its own flaw (English and Chinese flaw
words, tool names such as `web_search_wrong`), and option-length outliers.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from rapidfuzz import fuzz

from generators.text import looks_like_code, normalise, option_key, similarity
from schemas import Problem, Question, TaskSpec
from schemas.tasks import find_spec, non_context_keys

#: Row keys that carry (part of) the answer or only bookkeeping: never part of the context.
#: Words by which an option admits it is the wrong one (APTBench DR plan: "irrelevant", 无关 ...).
FLAW_WORDS_EN = (
    "irrelevant",
    "unrelated",
    "not relevant",
    "wrong",
    "wrongly",
    "incorrect",
    "incorrectly",
    "premature",
    "prematurely",
    "redundant",
    "redundantly",
    "unnecessary",
    "unnecessarily",
    "mistaken",
    "mistakenly",
    "erroneous",
    "erroneously",
    "off-topic",
    "off topic",
    "misspelled",
    "misspelt",
    "useless",
    "pointless",
    "flawed",
    "bogus",
    "nonsensical",
    "nonexistent",
    "non-existent",
    "without verifying",
)
FLAW_WORDS_ZH = (
    "无关",
    "不相关",
    "错误",
    "不正确",
    "不准确",
    "重复",
    "冗余",
    "多余",
    "无效",
    "不必要",
    "过早",
    "提前结束",
    "直接结束",
    "仓促",
    "偏离",
    "跑题",
    "拼写错误",
    "无意义",
    "笼统",
    "泛泛",
    "模糊",
)
_FLAW_EN = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in FLAW_WORDS_EN) + r")(?![\w-])", re.I)
_FLAW_ZH = re.compile("|".join(re.escape(w) for w in FLAW_WORDS_ZH))
#: Tool or function names that carry a flaw marker: `web_search_wrong`, `wrong_tool`, `fake_search`.
_FLAW_NAME = re.compile(
    r"\b(?:[A-Za-z]\w*_(?:wrong|incorrect|fake|bogus|broken)|(?:wrong|incorrect|fake|bogus)_\w+)\b", re.I
)
#: JSON keys whose values are the option's own prose (DR steps: `planning`); tool names sit under `name`.
_PROSE_KEYS = frozenset({"planning", "plan", "thought", "reasoning", "rationale", "description"})


#: Options are normalised by several gates in turn; a small cache keyed by the text itself.
_norm = lru_cache(maxsize=256)(normalise)


class OptionSet(NamedTuple):
    """What every gate looks at: one MCQ item's options, its gold position and its context."""

    where: str
    """Item id or `file:line`."""
    options: tuple[str, ...]
    """Options in display order."""
    gold_index: int | None
    """Position of the gold in `options` (None: unknown or not an MCQ)."""
    context: str = ""
    """Everything the question shows besides the options, joined."""


def context_text(fields: Mapping[str, Any], spec: TaskSpec | None = None) -> str:
    """Join the context fields of a question or row, in their order.

    Left out: the fields `spec` says are not context (answer carriers, ids, lengths); for a row of
    an unknown task, every key that no registered task counts as context.
    """
    hidden = spec.non_context if spec is not None else non_context_keys()
    return "\n".join(str(v) for k, v in fields.items() if k not in hidden and isinstance(v, str))


def option_set(q: Question | OptionSet) -> OptionSet:
    """The gate view of a question (an `OptionSet` is returned as is)."""
    if isinstance(q, OptionSet):
        return q
    return OptionSet(
        q.item_id, tuple(q.options), q.gold_index, context_text(q.fields, find_spec(q.scenario, q.task))
    )


def _gold(v: OptionSet) -> str | None:
    if v.gold_index is None or not 0 <= v.gold_index < len(v.options):
        return None
    return v.options[v.gold_index]


def _problem(v: OptionSet, reason: str, detail: str, severity: str = "error") -> Problem:
    return Problem(where=v.where, stage="check", reason=reason, detail=detail, severity=severity)  # type: ignore[arg-type]


def gate_answer_in_options(q: Question) -> Iterator[Problem]:
    """MCQ gold must sit at `gold_index` among the declared number of options."""
    if q.form != "mcq":
        if not q.gold.strip():
            yield Problem(
                where=q.item_id, stage="check", reason="empty_gold", detail="completion target is empty"
            )
        return
    if q.gold_index is None or not 0 <= q.gold_index < len(q.options) or q.options[q.gold_index] != q.gold:
        yield Problem(
            where=q.item_id,
            stage="check",
            reason="answer_not_in_options",
            detail=f"gold_index {q.gold_index} of {len(q.options)} options",
        )


def gate_duplicate_options(q: Question | OptionSet) -> Iterator[Problem]:
    """Two options that normalise to the same text (code: the same tokens, `text.option_key`)."""
    v = option_set(q)
    seen: dict[str, int] = {}
    for i, opt in enumerate(v.options):
        key = option_key(opt)
        if key in seen:
            yield _problem(v, "duplicate_option", f"options {seen[key]} and {i} are the same text")
        seen.setdefault(key, i)


def gate_near_gold(q: Question | OptionSet, threshold: float = 0.9) -> Iterator[Problem]:
    """A distractor equal or near-equal to the gold (normalised similarity >= `threshold`).

    Code options (patches, scripts, code windows) are exempt: there one changed token is a real
    difference (a reverted condition, an off-by-one), so only equal tokens make a copy, which
    `duplicate_option` reports.
    """
    v = option_set(q)
    gold = _gold(v)
    if gold is None:
        return
    key = _norm(gold)
    gold_code = looks_like_code(gold)
    for i, opt in enumerate(v.options):
        norm = _norm(opt)
        if i == v.gold_index or norm == key or (gold_code and looks_like_code(opt)):
            continue  # exact copies are `duplicate_option`
        # difflib's ratio never exceeds the Indel (LCS) ratio, so this cheap test only skips misses.
        if fuzz.ratio(norm, key) < threshold * 100:
            continue
        sim = similarity(opt, gold)
        if sim >= threshold:
            yield _problem(v, "distractor_near_gold", f"option {i} similarity {sim:.2f} >= {threshold}")


GOLD_IN_CONTEXT_CHARS = 20


def found_in_context(
    texts: Sequence[str], context: str, min_chars: int = GOLD_IN_CONTEXT_CHARS
) -> list[bool]:
    """Which texts appear verbatim (after normalisation) in the context; texts shorter than
    `min_chars` once normalised never count (a bare `ls` occurs anywhere by chance)."""
    return found_in_normalised([_norm(t) for t in texts], normalise(context) if context else "", min_chars)


def found_in_normalised(
    keys: Sequence[str], context: str, min_chars: int = GOLD_IN_CONTEXT_CHARS
) -> list[bool]:
    """`found_in_context` of texts and a context already through `normalise` (callers that test
    many texts against one context, or one text against many)."""
    return [bool(context) and len(k) >= min_chars and k in context for k in keys]


def gate_gold_in_context(
    q: Question | OptionSet, min_chars: int = GOLD_IN_CONTEXT_CHARS
) -> Iterator[Problem]:
    """The gold's text appears in the context.

    An `error` when the gold is the only option found there (copying from the context answers the
    question), a `warning` when some distractor is found there too. Golds shorter than `min_chars`
    after normalisation (a bare `ls`) are not checked: they occur anywhere by chance.
    """
    v = option_set(q)
    if _gold(v) is None or not v.context:
        return
    found = found_in_context(v.options, v.context, min_chars)
    if not found[v.gold_index]:
        return
    also = [i for i, hit in enumerate(found) if hit and i != v.gold_index]
    if also:
        yield _problem(v, "gold_in_context", f"gold found in the context, as are options {also}", "warning")
    else:
        yield _problem(v, "gold_in_context", "gold text found verbatim in the context, no distractor is")


class _Parts(NamedTuple):
    prose: str
    names: str
    structured: bool


def _parts(text: str) -> _Parts:
    """The option's own prose and its tool names (JSON steps: `planning` and `execution.name`).

    A JSON argument whose whole value is a flaw word (`"extra_param": "irrelevant"`) counts as prose.
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return _Parts("" if looks_like_code(text) else text, text, False)
    prose: list[str] = []
    names: list[str] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, val in node.items():
                walk(val, str(k))
        elif isinstance(node, list):
            for val in node:
                walk(val, key)
        elif isinstance(node, str):
            if key in _PROSE_KEYS or _FLAW_EN.fullmatch(node.strip()) or _FLAW_ZH.fullmatch(node.strip()):
                prose.append(node)
            elif key in {"name", "tool", "function"}:
                names.append(node)

    walk(data)
    return _Parts("\n".join(prose), "\n".join(names), True)


def flaw_terms(text: str) -> list[str]:
    """Flaw words and flaw-marked tool names an option contains (lower-cased, in order, unique)."""
    parts = _parts(text)
    found = [m.group(0).lower() for m in _FLAW_EN.finditer(parts.prose)]
    found += [m.group(0) for m in _FLAW_ZH.finditer(parts.prose)]
    found += [m.group(0).lower() for m in _FLAW_NAME.finditer(parts.names)]
    return list(dict.fromkeys(found))


def gate_self_admitted_flaw(q: Question | OptionSet) -> Iterator[Problem]:
    """A distractor that states its own flaw ("irrelevant", 无关, a tool named `*_wrong`).

    A term the gold also uses does not count. For free-text options a term the context uses does
    not count either, so a plan quoting the issue ("returns the wrong value") is not taken for a
    confession; a structured step's `planning` is the agent's own voice, and web pages in the
    context saying 错误 somewhere excuse nothing.
    """
    v = option_set(q)
    gold = _gold(v)
    if gold is None:
        return
    in_gold, in_context = gold.lower(), v.context.lower()
    for i, opt in enumerate(v.options):
        if i == v.gold_index:
            continue
        structured = _parts(opt).structured
        terms = [t for t in flaw_terms(opt) if t not in in_gold and (structured or t not in in_context)]
        if terms:
            yield _problem(
                v, "distractor_admits_flaw", f"option {i} says {', '.join(repr(t) for t in terms)}"
            )


def gate_length_outlier(q: Question | OptionSet, ratio: float = 3.0, min_diff: int = 40) -> Iterator[Problem]:
    """An option at least `ratio` times longer or shorter than the median of the others (a warning).

    Differences below `min_diff` characters are ignored: `ls` against `cd src` is not a tell.
    """
    v = option_set(q)
    if len(v.options) < 3:
        return
    lengths = [len(o.strip()) for o in v.options]
    for i, n in enumerate(lengths):
        med = statistics.median(lengths[:i] + lengths[i + 1 :])
        if abs(n - med) < min_diff:
            continue
        if n >= ratio * med or n * ratio <= med:
            who = "gold" if i == v.gold_index else "distractor"
            yield _problem(
                v,
                "option_length_outlier",
                f"{who} option {i} has {n} chars, others' median {med:g}",
                "warning",
            )


def check_options(v: OptionSet, near_gold: float = 0.9) -> list[Problem]:
    """Every option-level gate on one item view (what `aptforge audit` runs on rows)."""
    return [
        *gate_duplicate_options(v),
        *gate_near_gold(v, near_gold),
        *gate_gold_in_context(v),
        *gate_self_admitted_flaw(v),
        *gate_length_outlier(v),
    ]


def check_question(q: Question) -> list[Problem]:
    """All per-item gates."""
    found = list(gate_answer_in_options(q))
    if q.form == "mcq" and not found:
        found += check_options(option_set(q))
    return found


def count_reasons(problems: Sequence[Problem]) -> dict[str, int]:
    """Findings per reason (`stage.reason`), sorted by name."""
    counts: dict[str, int] = {}
    for p in problems:
        counts[f"{p.stage}.{p.reason}"] = counts.get(f"{p.stage}.{p.reason}", 0) + 1
    return dict(sorted(counts.items()))
