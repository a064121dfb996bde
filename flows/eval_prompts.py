"""APTBench's evaluation protocol as pure functions: few-shot prompts, answer extraction, metrics.

Why: `aptforge eval` must score a base model the way APTBench's `predict.py` / `get_results.py` do
(APTBENCH.md §5-6), from the release alone, and a task is described by its prompt pieces only
(instruction line, body template with `{{field}}` placeholders, answer cue), which every task
declares. Everything else follows from the cue, so no table here names a task:

- the cue opens the answer, and its closer ends it: `(` -> `)` (a letter, MCQ), `[` -> `]` (a short
  answer), a Markdown fence (```` ```bash\\n ````) -> a closing fence (a command);
- extraction is APTBench's rule for that closer: MCQ the first letter followed by `)` or a newline
  (after removing `*`); a fenced command the first line, then the part before the first `;`; a
  bracketed answer the text before `]`, none when there is no `]`; each stripped;
- demos are rendered like the test item and end with their answer and its closer; APTBench's
  templates JSON-escape the demo fields but insert test fields raw (§10.7), here both are raw.

Metrics: ACC for MCQ; EM and ROUGE-L (F1 over words, each CJK character a word) for completions.
APTBench drops items whose output is empty (a shrinking denominator, §6); here they count as wrong.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, NamedTuple

from schemas import LETTERS

_LETTER = re.compile(r"\b([A-Za-z])[\)\n]")
_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\s\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

#: Output budget per form when a run does not set one (APTBench: 10 for MCQ, 30 for most completions;
#: its issue-fix action's 10 cuts most gold commands, §10.6, so completions get 30 here).
MAX_TOKENS = {"mcq": 10, "completion": 30}
SHOTS = 3


class TaskPrompt(NamedTuple):
    """A task's prompt pieces."""

    instruction: str
    body: str
    """Template of one item: `{{field}}` placeholders for the row's APTBench fields."""
    cue: str
    """The text the answer follows (`The answer is (`)."""

    def sha256(self) -> str:
        """Hash of the pieces (provenance)."""
        return hashlib.sha256("\x00".join(self).encode("utf-8")).hexdigest()


def closer(cue: str) -> str:
    """What ends an answer after `cue`."""
    tail = cue.rstrip("\n")
    if tail.endswith("("):
        return ")"
    if tail.endswith("["):
        return "]"
    if "```" in tail[-12:]:
        return "\n```"
    return "\n"


@cache
def _template(body: str) -> Any:
    from jinja2 import BaseLoader, Environment, StrictUndefined

    return Environment(
        loader=BaseLoader(), undefined=StrictUndefined, keep_trailing_newline=True
    ).from_string(body)


def render(body: str, row: Mapping[str, Any]) -> str:
    """One item's body with its fields inserted raw."""
    return _template(body).render(**row)


def item_block(prompt: TaskPrompt, row: Mapping[str, Any]) -> str:
    """A test item: its body and the cue."""
    return render(prompt.body, row) + prompt.cue


def demo_block(prompt: TaskPrompt, row: Mapping[str, Any], answer: str) -> str:
    """A solved example: the item, its answer and the closer."""
    return item_block(prompt, row) + answer + closer(prompt.cue)


def build_prompt(
    prompt: TaskPrompt, demos: Sequence[tuple[Mapping[str, Any], str]], row: Mapping[str, Any]
) -> str:
    """Instruction, the solved demos, then the item, each separated by a blank line."""
    parts = [prompt.instruction] if prompt.instruction else []
    parts += [demo_block(prompt, d, a) for d, a in demos]
    parts.append(item_block(prompt, row))
    return "\n\n".join(parts)


def extract(cue: str, output: str | None) -> str | None:
    """APTBench's answer extraction for the closer of `cue` (None: no answer found)."""
    if output is None:
        return None
    end = closer(cue)
    if end == ")":
        m = _LETTER.search(output.replace("*", ""))
        return m.group(1) if m else None
    if end == "]":
        return output.split("]")[0].strip() if "]" in output else None
    if end == "\n```":
        return (output.split("\n")[0].split(";")[0] if "\n" in output else output).strip()
    return output.split("\n")[0].strip()


def words(text: str) -> list[str]:
    """ROUGE tokens: runs of non-space characters, each CJK character on its own."""
    return _WORD.findall(text)


class _Words:
    """`rouge_score` tokenizer: `words`, case kept (APTBench compares case-sensitively)."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return words(text)


@cache
def _rouge() -> Any:
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"], tokenizer=_Words())


def rouge_l(prediction: str | None, reference: str) -> float:
    """ROUGE-L F1 of two texts over `words` (longest common subsequence), by `rouge_score`."""
    if not prediction or not reference:
        return 0.0
    return float(_rouge().score(reference, prediction)["rougeL"].fmeasure)


def letters(n: int) -> list[str]:
    """Option letters of an item with `n` options."""
    return list(LETTERS[:n])


__all__ = [
    "MAX_TOKENS",
    "SHOTS",
    "TaskPrompt",
    "build_prompt",
    "closer",
    "demo_block",
    "extract",
    "item_block",
    "letters",
    "render",
    "rouge_l",
    "words",
]
