"""The build's Problems held as byte strings (`flows.problem_log.ProblemLog`)."""

from __future__ import annotations

import gc
import pickle

from flows.problem_log import ProblemLog
from schemas import Problem


def _problems(n: int, stage: str = "extract") -> list[Problem]:
    return [
        Problem(
            where=f"runs-{k:03d}.jsonl:{k + 1}",
            stage=stage,
            reason="target_not_derivable" if k % 3 else "bad_json",
            detail=f"step {k}: no command in the reply ✓",
            severity="warning" if k % 5 == 0 else "error",
        )
        for k in range(n)
    ]


def test_problems_come_back_equal_in_the_order_added_on_every_pass():
    first, second, third = _problems(7), _problems(4, "generate"), _problems(2, "read")
    log = ProblemLog(first)
    log += (p for p in second)  # any iterable
    log += []  # an empty batch adds nothing
    both = log + third
    assert len(log) == 11 and len(both) == 13
    assert list(log) == first + second and list(log) == first + second  # read twice
    assert list(both) == first + second + third
    assert [p.model_dump() for p in both] == [p.model_dump() for p in first + second + third]
    assert list(third + log) == third + first + second  # a list on the left
    assert [len(b) for b in both.batches()] == [7, 4, 2]
    assert list(pickle.loads(pickle.dumps(both))) == list(both)
    assert both == first + second + third and log != first and log != [*first, *second[:3], *third[:1]]
    assert not ProblemLog() and list(ProblemLog()) == []


def test_a_batch_keeps_no_problem_object_alive():
    """What a shard made goes with the shard: the log holds bytes, and the Problems it gives back
    are made as it is read."""

    def live() -> int:
        gc.collect()
        return sum(isinstance(o, Problem) for o in gc.get_objects())

    before = live()
    log = ProblemLog(_problems(50))
    assert live() == before
    again = list(log)
    assert len(again) == 50 and live() == before + 50
    del again
    assert live() == before
