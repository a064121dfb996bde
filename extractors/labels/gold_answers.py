"""Gold-answer files lying beside deep-research runs: a gold source, never an unknown format.

Reads: JSON or JSONL records with a question (`question`, `query`, `Question`, `prompt`) and an
answer (`answer`, `answers`, `gold`, `gold_answer`, `Final answer`; a string, a list of aliases or
lists of them), optionally an id (`id`, `qid`, `task_id`, `instance_id`) and nothing that makes it
a run (no `messages`, `steps`, `trajectory`, `history`). `join_golds` then gives each deep-research
run without a gold the aliases of the record with the same id, else the same normalised question
(`answers.normalize`: case, punctuation, articles, spacing), and labels it again with
`answers.judge_answer`; the signal names the file (`gold_answers:<file>`). A run that already
carries its own gold keeps it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from extractors.base import Origin
from extractors.labels.answers import gold_aliases, judge_answer, normalize
from schemas import Outcome, Trajectory

_QUESTION = ("question", "query", "Question", "prompt")
_ANSWER = ("answer", "answers", "gold", "gold_answer", "Final answer")
_ID = ("id", "qid", "task_id", "instance_id")
_RUN_KEYS = frozenset({"messages", "steps", "trajectory", "history", "message_history", "serp"})


class FoundGold(NamedTuple):
    """One gold answer met among the inputs."""

    question: str
    aliases: tuple[str, ...]
    id: str
    origin: Origin


def parse_gold(data: Any, origin: Origin) -> FoundGold | None:
    """The gold-answer record `data` is, or None when it is not one."""
    if not isinstance(data, dict) or _RUN_KEYS & set(data):
        return None
    question = next((data[k] for k in _QUESTION if isinstance(data.get(k), str) and data[k].strip()), None)
    raw = next((data[k] for k in _ANSWER if data.get(k) not in (None, "", [])), None)
    aliases = tuple(gold_aliases(raw)) if raw is not None else ()
    if question is None or not aliases:
        return None
    rid = next((str(data[k]) for k in _ID if data.get(k) not in (None, "")), "")
    return FoundGold(question.strip(), aliases, rid, origin)


class GoldIndex(NamedTuple):
    """Gold answers by id and by normalised question."""

    by_id: Mapping[str, FoundGold]
    by_question: Mapping[str, FoundGold]

    def find(self, traj: Trajectory) -> FoundGold | None:
        """The gold for a run: by its instance or native id, else by its question."""
        for key in (traj.source.instance_id, traj.source.native_id):
            if key and key in self.by_id:
                return self.by_id[key]
        return self.by_question.get(normalize(traj.task))


def index_golds(found: Iterable[FoundGold]) -> GoldIndex:
    """Index gold answers (the first record of an id or question wins)."""
    by_id: dict[str, FoundGold] = {}
    by_question: dict[str, FoundGold] = {}
    for g in found:
        if g.id:
            by_id.setdefault(g.id, g)
        by_question.setdefault(normalize(g.question), g)
    return GoldIndex(by_id, by_question)


def join_golds(trajs: Iterable[Trajectory], found: Iterable[FoundGold]) -> Iterator[Trajectory]:
    """Give runs without a gold the one a gold-answer file holds, and label them by it."""
    index = index_golds(found)
    if not index.by_question:
        yield from trajs
        return
    for traj in trajs:
        gold = index.find(traj) if traj.kind == "dr" and not traj.gold_answer else None
        if gold is None:
            yield traj
            continue
        verdict = judge_answer(traj.final_answer, gold.aliases)
        signal = f"gold_answers:{Path(gold.origin.file).name}:{verdict.reason}"
        yield traj.model_copy(
            update={
                "gold_answer": gold.aliases[0],
                "meta": {**traj.meta, "gold_aliases": list(gold.aliases)},
                "outcome": Outcome(label=verdict.label, signal=signal, reason=verdict.reason),
            }
        )
