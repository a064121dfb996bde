"""What one item asks of the endpoint under each protocol, and how the replies score it (pure).

Under `aptbench` an item is one greedy generation; under `loglik` an MCQ item is one echoed request
per option letter and one per option text, each scored by the log-probabilities of the tokens that
begin inside the continuation (the token the server generates after the prompt is ignored; a token
spanning the boundary counts when no token begins inside). Ties go to the first option, as in
lm-eval's argmax. Each item becomes one `PREDICTION_SCHEMA` row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from flows.eval_prompts import (
    exact_match,
    extract,
    letter_continuations,
    options_prompt,
    reference,
    render,
    rouge_l,
)
from schemas import LETTERS

if TYPE_CHECKING:
    from flows.evaluate import EvalConfig, EvalTask


class Unit(NamedTuple):
    """One request of an item: a generation, or the score of one continuation."""

    item: int
    kind: str
    """`generate`, `letter` or `text`."""
    option: int
    body: dict[str, Any]
    check: Callable[[Any], Any]


def _generate_check(reply: Any) -> Any:
    from generators.llm.engine import Checked

    return Checked(reply.text if reply.text is not None else None, "no text in the completion")


def _positions(logprobs: Mapping[str, Any], start: int, end: int) -> list[int]:
    offsets = logprobs.get("text_offset") or []
    inside = [i for i, off in enumerate(offsets) if start <= off < end]
    return inside or [i for i, off in enumerate(offsets) if off < start][-1:]


def continuation_logprob(logprobs: Mapping[str, Any] | None, start: int, end: int) -> float | None:
    """Sum of the log-probabilities of the tokens that begin in `[start, end)` of the echoed prompt.

    When no token begins there (one token spans the boundary), the token covering `start` counts.
    """
    if not logprobs or not logprobs.get("text_offset"):
        return None
    values = [logprobs["token_logprobs"][i] for i in _positions(logprobs, start, end)]
    if not values or any(v is None for v in values):
        return None
    return float(sum(values))


def continuation_is_greedy(logprobs: Mapping[str, Any] | None, start: int, end: int) -> bool:
    """Whether every token of the continuation is the most likely one there (`top_logprobs`)."""
    if not logprobs or not logprobs.get("top_logprobs"):
        return False
    for i in _positions(logprobs, start, end):
        top = logprobs["top_logprobs"][i]
        if not top or logprobs["token_logprobs"][i] < max(top.values()) - 1e-9:
            return False
    return True


def _loglik_check(start: int, end: int) -> Callable[[Any], Any]:
    from generators.llm.engine import Checked

    def check(reply: Any) -> Any:
        value = continuation_logprob(reply.logprobs, start, end)
        if value is None:
            return Checked(
                None, "no prompt log-probabilities in the reply (the server must support echo + logprobs)"
            )
        return Checked((value, continuation_is_greedy(reply.logprobs, start, end)))

    return check


def _echo_unit(index: int, kind: str, option: int, context: str, cont: str, cfg: EvalConfig) -> Unit:
    """Score `cont` after `context` from the echoed prompt; trailing space moves into the continuation (lm-eval)."""
    from generators.llm.completions import SCORE_FROM

    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, cont = context[: len(context) - spaces], context[len(context) - spaces :] + cont
    body = {
        "model": cfg.model,
        "prompt": context + cont,
        "max_tokens": 1,
        "temperature": 0,
        "echo": True,
        "logprobs": 1,
        SCORE_FROM: max(0, len(context) - 16),
    }
    return Unit(index, kind, option, body, _loglik_check(len(context), len(context) + len(cont)))


def item_units(task: EvalTask, index: int, prompt: str, cfg: EvalConfig) -> list[Unit]:
    """The requests one item needs under the configured protocol."""
    row, p = task.rows[index], task.prompt
    if cfg.protocol == "loglik" and task.form == "mcq":
        letters = letter_continuations(p, len(row["options"]))
        texts = options_prompt(p, task.demos, row)
        return [_echo_unit(index, "letter", j, prompt, c, cfg) for j, c in enumerate(letters)] + [
            _echo_unit(index, "text", j, texts, " " + o, cfg) for j, o in enumerate(row["options"])
        ]
    if cfg.protocol == "loglik":
        return [_echo_unit(index, "gold", 0, prompt, render(p.answer, row), cfg)]
    body = {
        "model": cfg.model,
        "prompt": prompt,
        "max_tokens": cfg.max_tokens or p.max_gen_toks,
        "temperature": 0,
        "stop": [p.fewshot_delimiter],
    }
    return [Unit(index, "generate", 0, body, _generate_check)]


def _argmax(values: Sequence[float | None], weights: Sequence[float] | None = None) -> int | None:
    if not values or any(v is None for v in values):
        return None
    scored = [v / (weights[i] if weights else 1.0) for i, v in enumerate(values)]  # type: ignore[operator]
    return max(range(len(scored)), key=lambda i: (scored[i], -i))


PREDICTION_SCHEMA = pa.schema(
    [
        pa.field("task", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("uuid", pa.string(), nullable=False),
        pa.field("protocol", pa.string(), nullable=False),
        pa.field("prompt_sha256", pa.string(), nullable=False),
        pa.field("completion", pa.string()),
        pa.field("letter_logprobs", pa.list_(pa.float64())),
        pa.field("option_logprobs", pa.list_(pa.float64())),
        pa.field("extracted", pa.string()),
        pa.field("extracted_norm", pa.string()),
        pa.field("gold", pa.string(), nullable=False),
        pa.field("correct", pa.bool_(), nullable=False),
        pa.field("correct_norm", pa.bool_()),
        pa.field("rouge_l", pa.float64()),
        pa.field("error", pa.string()),
    ]
)


def score_item(
    task: EvalTask,
    index: int,
    prompt: str,
    units: Sequence[Unit],
    values: Sequence[Any],
    errors: Sequence[str],
) -> dict[str, Any]:
    """One predictions row from an item's request outcomes."""
    row, p = task.rows[index], task.prompt
    gold = reference(p, row)
    kind = units[0].kind
    out: dict[str, Any] = {
        "task": task.name,
        "item_id": row["item_id"],
        "uuid": str(row.get("uuid", "")),
        "protocol": "aptbench" if kind == "generate" else "loglik",
        "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
        "completion": None,
        "letter_logprobs": None,
        "option_logprobs": None,
        "extracted": None,
        "extracted_norm": None,
        "gold": gold,
        "correct": False,
        "correct_norm": None,
        "rouge_l": None,
        "error": "; ".join(e for e in errors if e) or None,
    }
    if kind == "generate":
        out["completion"] = values[0]
        pred = extract(p, values[0])
        out["extracted"] = pred
        out["correct"] = exact_match(p, pred, gold)
        if task.form == "completion":
            out["rouge_l"] = rouge_l(pred, gold)
        return out
    if kind == "gold":  # a completion under loglik: the gold's log-likelihood; right when it is greedy
        if values[0] is not None:
            out["letter_logprobs"] = [values[0][0]]
            out["correct"] = bool(values[0][1])
        return out
    by_kind: dict[str, list[float | None]] = {"letter": [], "text": []}
    for unit, value in zip(units, values, strict=True):
        by_kind[unit.kind].append(None if value is None else value[0])
    names = list(LETTERS[: len(row["options"])])
    best = _argmax(by_kind["letter"])
    best_norm = _argmax(by_kind["text"], [max(1.0, float(len(o))) for o in row["options"]])
    out["letter_logprobs"] = by_kind["letter"] if best is not None else None
    out["option_logprobs"] = by_kind["text"] if best_norm is not None else None
    out["extracted"] = names[best] if best is not None else None
    out["extracted_norm"] = names[best_norm] if best_norm is not None else None
    out["correct"] = out["extracted"] == gold
    out["correct_norm"] = out["extracted_norm"] == gold
    return out


__all__ = [
    "PREDICTION_SCHEMA",
    "Unit",
    "continuation_is_greedy",
    "continuation_logprob",
    "item_units",
    "score_item",
]
