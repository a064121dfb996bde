"""Duplicates: the same run arriving from several files or formats, the same item twice in a version.

Runs. The same agent run often ships twice: a `.traj` file and its SWE-smith row, a file copied
into two folders, two releases of one dataset. `run_fingerprint` hashes what the agent saw and
did (task, thoughts, actions, observations), normalised so that each reader's rendering of the
same step compares equal, and ignores where the run was read from. One run per fingerprint is
kept: a labelled copy before an unlabelled one, then the first by (format, file, line). Each
other copy is reported as an `info` Problem naming the copy kept.

Items. Within one task, two items are exact duplicates when their context and gold normalise to
the same text, and near duplicates when the MinHash (datasketch, word 5-gram shingles) Jaccard of
their contexts reaches the threshold and their golds are as similar. Items of the same
trajectory are never near duplicates of each other (consecutive steps share most of their
context by construction). The first item by id is kept; later ones are dropped with an `error`
Problem (`duplicate_item` / `near_duplicate_item`) naming the item kept.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from generators.text import normalise, similarity
from schemas import Problem, Question, Trajectory, content_id

_LABEL_RANK = {"success": 0, "failure": 0, "unknown": 1}


def _action_text(step: Any) -> str:
    a = step.action
    if a is None:
        return ""
    if a.args:
        return normalise(a.tool + " " + " ".join(str(v) for _, v in sorted(a.args.items())))
    return normalise(a.raw or a.tool)


def run_fingerprint(traj: Trajectory) -> str | None:
    """Content hash of a run independent of its file and format; None for a run without steps."""
    if not traj.steps:
        return None
    steps = [(normalise(s.thought), _action_text(s), normalise(s.observation or "")) for s in traj.steps]
    return content_id(traj.kind, normalise(traj.task), steps)


def _where(traj: Trajectory) -> str:
    src = traj.source
    return src.file if src.line is None else f"{src.file}:{src.line}"


def _order(traj: Trajectory) -> tuple[int, str, str, int]:
    src = traj.source
    return (_LABEL_RANK.get(traj.outcome.label, 1), src.format, src.file, src.line or 0)


def duplicate_runs(trajs: Sequence[Trajectory]) -> dict[str, Problem]:
    """Trajectory ids of runs that copy another one, each with the Problem reporting it.

    Records sharing one trajectory id (the same record read twice) are not reported here: the
    keep stage already drops repeated ids.
    """
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        fp = run_fingerprint(t)
        if fp is not None:
            groups[fp].append(t)
    found: dict[str, Problem] = {}
    for members in groups.values():
        kept = min(members, key=_order)
        for t in members:
            if t.trajectory_id != kept.trajectory_id and t.trajectory_id not in found:
                found[t.trajectory_id] = Problem(
                    where=_where(t),
                    stage="dedup",
                    reason="duplicate_trajectory",
                    severity="info",
                    detail=f"same run as {_where(kept)} ({kept.source.format}, trajectory {kept.trajectory_id}); kept that one",
                )
    return found


class ItemDedup(NamedTuple):
    """Items kept, Problems for the dropped ones, and counts."""

    kept: list[Question]
    problems: list[Problem]
    exact: int
    near: int


def _context(q: Question) -> str:
    return "\n".join(str(v) for _, v in sorted(q.fields.items()))


def _ident(context: str, answer: str) -> bytes:
    """A 128-bit digest of a normalised (context, answer) pair: equal pairs, equal digests."""
    first = context.encode("utf-8", "surrogatepass")
    h = hashlib.blake2b(len(first).to_bytes(8, "big"), digest_size=16)  # length first: no ambiguous split
    h.update(first)
    h.update(answer.encode("utf-8", "surrogatepass"))
    return h.digest()


def shingles(text: str, size: int = 5, normalised: bool = False) -> set[bytes]:
    """Word `size`-grams of the normalised text (the whole text when shorter)."""
    words = (text if normalised else normalise(text)).split()
    if len(words) <= size:
        return {" ".join(words).encode("utf-8")}
    return {" ".join(words[i : i + size]).encode("utf-8") for i in range(len(words) - size + 1)}


class _Signatures:
    """MinHash signatures of the kept items, rows of one growing array (each a MinHash's
    `hashvalues`, no MinHash object kept)."""

    def __init__(self, num_perm: int, dtype: np.dtype) -> None:
        self.rows = np.zeros((16, num_perm), dtype=dtype)
        self.n = 0

    def add(self, values: np.ndarray) -> int:
        if self.n == len(self.rows):  # doubled when full: amortised constant per item
            grown = np.zeros((2 * len(self.rows), self.rows.shape[1]), dtype=self.rows.dtype)
            grown[: self.n] = self.rows
            self.rows = grown
        self.rows[self.n] = values
        self.n += 1
        return self.n - 1


class TaskDedup:
    """Duplicates within one (scenario, task), offered one item at a time in item-id order.

    It keeps what later items are compared with, not the items: a digest per (context, answer), and
    per kept item its MinHash signature, gold and trajectory in a banded index. So a task streams
    through with memory in its signatures (`dedup_questions` is the same over a list).

    The banded index is datasketch's LSH laid out compactly. `MinHashLSH` keeps, per item and band,
    the band's bytes as a key and a set of item ids, and the item's MinHash: 3.3-3.6 KB per small
    item, about 1 GB for the 300,000 completion items of 100,000 small runs, held to the end of the
    task's dedup (here 1.4-1.5 KB per item, `bench/bench_dedup.py`). Here the bands and rows per
    band are the `MinHashLSH`'s own for the threshold (`b`, `r`), a band's key is a 64-bit digest of
    its values pointing at the first kept item with that band (later ones in a list), the
    signatures are rows of one array (`_Signatures`) and a trajectory id is kept once. A candidate
    is an item whose band values equal the query's in some band (checked on the signatures, so a
    digest collision adds nothing): the candidates of `MinHashLSH.query`, compared in item-id order
    as before.
    """

    def __init__(self, threshold: float = 0.9, num_perm: int = 128, shingle: int = 5) -> None:
        from datasketch import MinHash, MinHashLSH

        self.threshold, self.num_perm, self.shingle = threshold, num_perm, shingle
        self.exact = self.near = 0
        self._minhash = MinHash
        # deterministic (crc32, fixed seed) and computed once: MinHash's own setup dominates otherwise
        self._permutations = MinHash(num_perm=num_perm, seed=1, scheme="affine32").permutations
        self._seen: dict[bytes, int] = {}  # digest of (context, answer) -> kept item: no texts kept
        self._bands = MinHashLSH(threshold=threshold, num_perm=num_perm).hashranges
        self._index: list[dict[bytes, int | list[int]]] = [{} for _ in self._bands]
        self._signatures: _Signatures | None = None
        self._ids: list[str] = []  # per kept item: its id, gold and trajectory (`_trajectories`)
        self._golds: list[str] = []
        self._trajectory: list[int] = []
        self._trajectories: dict[str, int] = {}

    def offer(self, q: Question) -> Problem | None:
        """None when `q` is kept (and remembered), else the Problem dropping it."""
        ctx = normalise(_context(q))
        ident = _ident(ctx, normalise(q.gold))
        if ident in self._seen:
            self.exact += 1
            return exact_problem(q, self._ids[self._seen[ident]])
        sig = self.sketch(ctx).hashvalues
        keys = [_band_key(sig[start:end]) for start, end in self._bands]
        trajectory = self._trajectories.get(q.trajectory_id, -1)
        for other, values in self._candidates(sig, keys):
            if self._trajectory[other] == trajectory:
                continue
            # MinHash.jaccard's estimate: the share of equal values
            jac = float(np.count_nonzero(values == sig)) / float(self.num_perm)
            if jac >= self.threshold and similarity(q.gold, self._golds[other]) >= self.threshold:
                self.near += 1
                return near_problem(q, jac, self._ids[other])
        self._keep(q, ident, sig, keys, trajectory)
        return None

    def sketch(self, ctx: str) -> Any:
        """The MinHash of a normalised context (its word shingles)."""
        mh = self._minhash(
            num_perm=self.num_perm,
            seed=1,
            hashfunc=zlib.crc32,
            permutations=self._permutations,
            scheme="affine32",
        )
        mh.update_batch(list(shingles(ctx, self.shingle, normalised=True)))
        return mh

    def _candidates(self, sig: np.ndarray, keys: list[bytes]) -> list[tuple[int, np.ndarray]]:
        """The kept items sharing a band with `sig` (values equal in all its rows), in item-id
        order, each with its signature."""
        if self._signatures is None:
            return []
        rows = self._signatures.rows
        found: set[int] = set()
        for (start, end), key, table in zip(self._bands, keys, self._index, strict=True):
            hit = table.get(key)
            if hit is None:
                continue
            for i in (hit,) if isinstance(hit, int) else hit:
                if i not in found and np.array_equal(rows[i, start:end], sig[start:end]):
                    found.add(i)
        return [(i, rows[i]) for i in sorted(found, key=self._ids.__getitem__)]

    def _keep(self, q: Question, ident: bytes, sig: np.ndarray, keys: list[bytes], trajectory: int) -> None:
        if self._signatures is None:
            self._signatures = _Signatures(self.num_perm, sig.dtype)
        at = self._signatures.add(sig)
        self._seen[ident] = at
        self._ids.append(q.item_id)
        self._golds.append(q.gold)
        if trajectory < 0:
            trajectory = self._trajectories[q.trajectory_id] = len(self._trajectories)
        self._trajectory.append(trajectory)
        for key, table in zip(keys, self._index, strict=True):
            hit = table.setdefault(key, at)
            if hit != at:
                if isinstance(hit, int):
                    table[key] = [hit, at]
                else:
                    hit.append(at)


def exact_problem(q: Question, kept: str) -> Problem:
    """The Problem dropping `q`, of the same context and answer as the kept item `kept`."""
    return Problem(
        where=q.item_id,
        stage="dedup",
        reason="duplicate_item",
        detail=f"same context and answer as item {kept}",
    )


def near_problem(q: Question, jaccard: float, kept: str) -> Problem:
    """The Problem dropping `q`, a near duplicate (context MinHash Jaccard `jaccard`) of the kept
    item `kept`."""
    return Problem(
        where=q.item_id,
        stage="dedup",
        reason="near_duplicate_item",
        detail=f"context Jaccard ~{jaccard:.2f} and same answer as item {kept}",
    )


def _band_key(values: np.ndarray) -> bytes:
    """A 64-bit digest of a band's values: the index's key (8 bytes where the values take 100)."""
    return hashlib.blake2b(values.tobytes(), digest_size=8).digest()


def dedup_questions(
    questions: Iterable[Question], threshold: float = 0.9, num_perm: int = 128, shingle: int = 5
) -> ItemDedup:
    """Drop exact and near-duplicate items within each (scenario, task); the first by id is kept."""
    by_task: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for q in questions:
        by_task[(q.scenario, q.task)].append(q)
    kept: list[Question] = []
    problems: list[Problem] = []
    exact = near = 0
    for key in sorted(by_task):
        dedup = TaskDedup(threshold, num_perm, shingle)
        for q in sorted(by_task[key], key=lambda q: q.item_id):
            problem = dedup.offer(q)
            if problem is None:
                kept.append(q)
            else:
                problems.append(problem)
        exact += dedup.exact
        near += dedup.near
    return ItemDedup(kept, problems, exact, near)


__all__ = [
    "ItemDedup",
    "TaskDedup",
    "dedup_questions",
    "duplicate_runs",
    "exact_problem",
    "near_problem",
    "run_fingerprint",
    "shingles",
]
