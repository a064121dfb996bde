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

from flows.eval_prompts import MAX_TOKENS, extract, letters, rouge_l

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


def continuation_logprob(logprobs: Mapping[str, Any] | None, start: int, end: int) -> float | None:
    """Sum of the log-probabilities of the tokens that begin in `[start, end)` of the echoed prompt.

    When no token begins there (one token spans the boundary), the token covering `start` counts.
    """
    if not logprobs or not logprobs.get("text_offset"):
        return None
    pairs = list(zip(logprobs["text_offset"], logprobs["token_logprobs"], strict=False))
    inside = [lp for off, lp in pairs if start <= off < end]
    if not inside:
        inside = [lp for off, lp in pairs if off < start][-1:]
    if not inside or any(lp is None for lp in inside):
        return None
    return float(sum(inside))


def _loglik_check(start: int, end: int) -> Callable[[Any], Any]:
    from generators.llm.engine import Checked

    def check(reply: Any) -> Any:
        value = continuation_logprob(reply.logprobs, start, end)
        return Checked(
            value, "no prompt log-probabilities in the reply (the server must support echo + logprobs)"
        )

    return check


def item_units(task: EvalTask, index: int, prompt: str, cfg: EvalConfig) -> list[Unit]:
    """The requests one item needs under the configured protocol."""
    from generators.llm.completions import SCORE_FROM

    row = task.rows[index]
    if cfg.protocol == "loglik" and task.form == "mcq":
        units = []
        for kind, conts in (("letter", letters(len(row["options"]))), ("text", list(row["options"]))):
            for j, cont in enumerate(conts):
                body = {
                    "model": cfg.model,
                    "prompt": prompt + cont,
                    "max_tokens": 1,
                    "temperature": 0,
                    "echo": True,
                    "logprobs": 1,
                    SCORE_FROM: max(0, len(prompt) - 16),
                }
                units.append(Unit(index, kind, j, body, _loglik_check(len(prompt), len(prompt) + len(cont))))
        return units
    body = {
        "model": cfg.model,
        "prompt": prompt,
        "max_tokens": cfg.max_tokens or MAX_TOKENS[task.form],
        "temperature": 0,
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
    row = task.rows[index]
    gold = str(row[task.answer_key]).strip()
    out: dict[str, Any] = {
        "task": task.name,
        "item_id": row["item_id"],
        "uuid": str(row.get("uuid", "")),
        "protocol": "loglik" if units[0].kind != "generate" else "aptbench",
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
    if units[0].kind == "generate":
        out["completion"] = values[0]
        pred = extract(task.prompt.cue, values[0])
        out["extracted"] = pred
        out["correct"] = pred is not None and pred == gold
        if task.form == "completion":
            out["rouge_l"] = rouge_l(pred, gold)
        return out
    by_kind: dict[str, list[float | None]] = {"letter": [], "text": []}
    for unit, value in zip(units, values, strict=True):
        by_kind[unit.kind].append(value)
    names = letters(len(row["options"]))
    best = _argmax(by_kind["letter"])
    best_norm = _argmax(by_kind["text"], [max(1.0, float(len(o))) for o in row["options"]])
    out["letter_logprobs"] = by_kind["letter"] if best is not None else None
    out["option_logprobs"] = by_kind["text"] if best_norm is not None else None
    out["extracted"] = names[best] if best is not None else None
    out["extracted_norm"] = names[best_norm] if best_norm is not None else None
    out["correct"] = out["extracted"] == gold
    out["correct_norm"] = out["extracted_norm"] == gold
    return out


__all__ = ["PREDICTION_SCHEMA", "Unit", "continuation_logprob", "item_units", "score_item"]
