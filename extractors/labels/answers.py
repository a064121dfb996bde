"""Deep-research success labels: find the final answer, match it against the gold, say how sure.

`final_answer_of` takes the agent's answer from `<answer>...</answer>`, `\\boxed{...}`, a
`Final answer:` line, or else the whole last message. `judge_answer` compares it with the gold
and its aliases after normalisation (Unicode NFKC, case, punctuation while keeping math symbols
such as `¬ → ∨`, English articles, numbers written with separators, units, trailing zeros or as words up to ninety,
comma/semicolon lists, CJK characters as tokens):

- `success`: equal after normalisation (`exact_match`, `number_match`, `list_match`), or a gold
  alias appears as a whole phrase inside a longer answer that neither hedges (`or`, `not`...)
  nor names another number (`contains_gold`);
- `failure` only when clearly wrong (`no_answer`, a different number, a list of another length
  or with a wrong item, opposite yes/no, two short answers sharing no word);
- otherwise `unknown` with reason `needs_judge`, for an LLM judge to decide later.

The rules follow the GAIA scorer (numbers as floats, lists item by item, strings without
punctuation or spaces), so a strict exact-match count agrees with it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any, NamedTuple

from schemas import Label, Outcome
from schemas.answer_text import CJK, NUM_TOKEN, normalize, tokens

_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.S | re.I)
_FINAL_LINE = re.compile(r"(?:^|\n)\s*\**final answer\**\s*[:：]\s*(.+?)\s*$", re.I | re.S)
_YES = frozenset({"yes", "true", "correct"})
_NO = frozenset({"no", "false", "incorrect"})
_HEDGES = frozenset({"or", "not", "never", "neither", "nor", "unclear", "unknown", "either"})
_NUMBER = re.compile(r"^[\s$€£¥]*([-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+)\s*%?\s*$")
_SHORT = 4


class AnswerVerdict(NamedTuple):
    """How a final answer compares with the gold."""

    label: Label
    reason: str
    """`exact_match`, `number_match`, `list_match`, `contains_gold`, `no_answer`, `wrong_answer`,
    `wrong_number`, `wrong_list`, `needs_judge`, `no_gold`."""

    def outcome(self) -> Outcome:
        """The Outcome this verdict gives a trajectory."""
        return Outcome(label=self.label, signal=f"answer_match:{self.reason}", reason=self.reason)


def boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (nested braces allowed), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None


def final_answer_of(text: str | None) -> str | None:
    """The answer stated in a final message: `<answer>`, `\\boxed{}`, `Final answer:`, else the text."""
    if text is None or not text.strip():
        return None
    tags = _ANSWER_TAG.findall(text)
    if tags and tags[-1].strip():
        return tags[-1].strip()
    box = boxed(text)
    if box:
        return box
    line = _FINAL_LINE.findall(text)
    if line and line[-1].strip():
        return line[-1].strip()
    return text.strip()


def gold_aliases(value: Any) -> list[str]:
    """Gold answers as a flat list of non-empty strings (a string, a list, or lists of aliases)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if v.strip():
                out.append(v.strip())
        elif isinstance(v, bool):
            out.append("yes" if v else "no")
        elif isinstance(v, (int, float)):
            out.append(str(v))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
    return list(dict.fromkeys(out))


def number(text: str) -> float | None:
    """`text` as a number when it is only a number (`$1,000`, `5%`, `89706.00`), else None."""
    m = _NUMBER.match(unicodedata.normalize("NFKC", text))
    if not m:
        return None
    try:
        return float(m.group(1).replace(",", ""))
    except ValueError:
        return None


def _split_list(text: str) -> list[str] | None:
    if "," not in text and ";" not in text:
        return None
    items = [x.strip() for x in re.split(r"[,;]", text)]
    return items if len(items) > 1 and all(items) else None


def _contains(hay: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))


def _one(answer: str, gold: str) -> AnswerVerdict:
    a_num, g_num = number(answer), number(gold)
    if g_num is not None and a_num is not None:
        return (
            AnswerVerdict("success", "number_match")
            if a_num == g_num
            else AnswerVerdict("failure", "wrong_number")
        )
    g_items, a_items = _split_list(gold), _split_list(answer)
    if g_items and a_items:
        if len(g_items) != len(a_items):
            return AnswerVerdict("failure", "wrong_list")
        parts = [_one(a, g) for a, g in zip(a_items, g_items, strict=True)]
        if all(p.label == "success" for p in parts):
            return AnswerVerdict("success", "list_match")
        if any(p.label == "failure" for p in parts):
            return AnswerVerdict("failure", "wrong_list")
        return AnswerVerdict("unknown", "needs_judge")
    a_tok, g_tok = tokens(answer), tokens(gold)
    if (a_tok and a_tok == g_tok) or (normalize(answer) and normalize(answer) == normalize(gold)):
        return AnswerVerdict("success", "exact_match")
    if len(a_tok) > len(g_tok) and _contains(a_tok, g_tok):
        others = [t for t in a_tok if NUM_TOKEN.match(t) and t not in g_tok]
        if not (_HEDGES & set(a_tok)) and not others:
            return AnswerVerdict("success", "contains_gold")
        return AnswerVerdict("unknown", "needs_judge")
    a_set, g_set = set(a_tok), set(g_tok)
    g_nums = [t for t in g_tok if NUM_TOKEN.match(t)]
    if a_num is not None and len(g_nums) == 1 and len(g_tok) <= 3:  # "1555" vs "1,555 m"
        same = float(g_nums[0]) == a_num
        return AnswerVerdict("success", "number_match") if same else AnswerVerdict("failure", "wrong_number")
    opposite = (g_set & _YES and a_set & _NO) or (g_set & _NO and a_set & _YES)
    if opposite and len(a_tok) <= _SHORT:
        return AnswerVerdict("failure", "wrong_answer")
    # two short answers with no word in common; not for CJK, where synonyms share no character
    if len(a_tok) <= _SHORT and len(g_tok) <= _SHORT and not a_set & g_set and not CJK.search(answer + gold):
        return AnswerVerdict("failure", "wrong_answer")
    return AnswerVerdict("unknown", "needs_judge")


_RANK = {"success": 0, "unknown": 1, "failure": 2}


def judge_answer(answer: str | None, golds: Iterable[str]) -> AnswerVerdict:
    """Compare `answer` with every gold alias; the most favourable verdict wins."""
    aliases = [g for g in golds if g and g.strip()]
    if not aliases:
        return AnswerVerdict("unknown", "no_gold")
    if answer is None or not tokens(answer):
        return AnswerVerdict("failure", "no_answer")
    return min((_one(answer.strip(), g) for g in aliases), key=lambda v: _RANK[v.label])
