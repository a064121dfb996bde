"""APTBench's evaluation protocol as pure functions over a task's declared `AptbenchPrompt`.

Why: `aptforge eval` must score a base model the way APTBench does (APTBENCH.md §5-6) and the way the
release's lm-eval tasks do, so both read one declaration per task file, its TaskSpec's
`schemas.AptbenchPrompt` (usually from `extractors/<scenario>/aptbench_prompts.yaml`): the query block (a Jinja template over
the row ending in the answer cue), how a solved demo's answer follows the cue (`{{answer}})`), the
extraction regex, what is ignored before the exact match, the delimiter between demos, the output
budget and the metrics. Nothing here names a task.

- aptbench: demos (`prompt` + `answer`, from the release's `fewshot` split) and the item, joined by
  the delimiter; greedy generation stopped at the delimiter; the first match of `extract`; exact
  match after removing `ignore` and surrounding space; ROUGE-L F1 where declared. Empty or
  unmatched outputs count as wrong (APTBench drops empty ones, a shrinking denominator, §6).
- loglik: the same context; the continuations are the option letters followed by the answer's
  closer (`A)`, as in `lm_eval/<config>_loglik.yaml`); for `acc_norm` the option texts after the cue
  line without its opening bracket, as in `<config>_loglik_options.yaml`, normalised by length.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from schemas import LETTERS, AptbenchPrompt

_ROUGE_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)


@cache
def _template(body: str) -> Any:
    from jinja2 import BaseLoader, Environment, StrictUndefined

    env = Environment(loader=BaseLoader(), undefined=StrictUndefined, keep_trailing_newline=True)
    return env.from_string(body)


def render(template: str, row: Mapping[str, Any]) -> str:
    """A Jinja template over a row (as lm-eval renders `doc_to_text`)."""
    return _template(template).render(**row)


SHOTS = 3


def prompt_sha256(p: AptbenchPrompt) -> str:
    """Hash of a task's declared protocol (provenance)."""
    return hashlib.sha256(repr(p.as_tuple()).encode("utf-8")).hexdigest()


def closer(p: AptbenchPrompt) -> str:
    """What follows the answer in a solved demo (`)`, `]`, a closing fence)."""
    return p.answer.replace("{{answer}}", "")


def reference(p: AptbenchPrompt, row: Mapping[str, Any]) -> str:
    """The gold answer as the exact match compares it."""
    return re.sub(p.ignore, "", render(p.answer, row)).strip()


def build_prompt(p: AptbenchPrompt, demos: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> str:
    """The solved demos, then the item, joined by the task's delimiter."""
    blocks = [render(p.prompt, d) + render(p.answer, d) for d in demos]
    return p.fewshot_delimiter.join([*blocks, render(p.prompt, row)])


def options_prompt(p: AptbenchPrompt, demos: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> str:
    """Context for scoring option texts: the cue without its opening bracket; demos end with their gold text."""
    body = p.prompt.rstrip("(").rstrip()
    blocks = [render(body, d) + " " + d["options"][d["gold_index"]] for d in demos]
    return p.fewshot_delimiter.join([*blocks, render(body, row)])


def letter_continuations(p: AptbenchPrompt, n: int) -> list[str]:
    """`A)`, `B)`, ... for an item with `n` options."""
    return [f"{letter}{closer(p)}" for letter in LETTERS[:n]]


def extract(p: AptbenchPrompt, output: str | None) -> str | None:
    """The first match of the task's extraction regex (its first group), None when nothing matches."""
    if output is None:
        return None
    m = re.search(p.extract, output)
    if m is None:
        return None
    return (m.group(1) if m.groups() else m.group(0)).strip()


def exact_match(p: AptbenchPrompt, prediction: str | None, gold: str) -> bool:
    """Exact match after removing `ignore` and surrounding space from the prediction."""
    return prediction is not None and re.sub(p.ignore, "", prediction).strip() == gold


class _Words:
    """ROUGE tokens: lower-cased words, each CJK character on its own (as the release's lm-eval metric)."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return _ROUGE_TOKEN.findall(text.lower())


@cache
def _rouge() -> Any:
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"], tokenizer=_Words())


def rouge_l(prediction: str | None, gold: str) -> float:
    """ROUGE-L F1 (`rouge_score`)."""
    if not prediction or not gold:
        return 0.0
    return float(_rouge().score(gold, prediction)["rougeL"].fmeasure)


__all__ = [
    "SHOTS",
    "build_prompt",
    "closer",
    "exact_match",
    "extract",
    "letter_continuations",
    "options_prompt",
    "prompt_sha256",
    "reference",
    "render",
    "rouge_l",
]
