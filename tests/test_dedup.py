"""Dedup: one run read from several files or formats, and duplicate items within a version."""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hygiene_inputs import RUN, RUN_FILE, SAMPLES, SUMMARY, as_swesmith_row

from extractors.base import Origin
from extractors.discovery import discover_readers
from extractors.ingest.sniff import read_file
from extractors.labels.reports import ReportVerdict, RunVerdict
from extractors.labels.runs import run_key
from flows import stages
from flows.config import load_config
from generators.hygiene import dedup
from generators.hygiene.dedup import dedup_questions, duplicate_runs, run_fingerprint, shingles
from schemas import Outcome, Provenance, Question, Trajectory

ROOT = Path(__file__).resolve().parents[1]


def _read(path: Path) -> Trajectory:
    (traj,) = [t for t in read_file(discover_readers(), str(path), None) if isinstance(t, Trajectory)]
    return traj


@pytest.fixture()
def copies(tmp_path) -> tuple[Trajectory, Trajectory, Trajectory]:
    """The sample run as a `.traj`, as a copy in another folder, and as a SWE-smith row."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(RUN_FILE, tmp_path / "a" / f"{RUN}.traj")
    shutil.copy(RUN_FILE, tmp_path / "b" / f"{RUN}.traj")
    row = as_swesmith_row(json.loads(RUN_FILE.read_text()))
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    return (
        _read(tmp_path / "a" / f"{RUN}.traj"),
        _read(tmp_path / "b" / f"{RUN}.traj"),
        _read(tmp_path / "rows.jsonl"),
    )


def test_one_run_read_from_two_files_and_two_formats_has_one_fingerprint(copies):
    a, b, row = copies
    assert len({a.trajectory_id, b.trajectory_id, row.trajectory_id}) == 3
    assert {a.source.format, row.source.format} == {"swe_agent_traj", "swe_rows"}
    assert run_fingerprint(a) == run_fingerprint(b) == run_fingerprint(row) is not None


def test_another_run_has_another_fingerprint(copies):
    other = _read(SAMPLES / "sweagent_v1" / "slugkit__slugkit-7" / "slugkit__slugkit-7.traj")
    assert run_fingerprint(other) != run_fingerprint(copies[0])
    assert run_fingerprint(copies[0].model_copy(update={"steps": ()})) is None


def test_of_several_copies_a_labelled_one_is_kept_and_the_others_are_reported_with_the_reason(copies):
    a, b, row = copies
    row = row.with_outcome(Outcome(label="success", signal="row:resolved", reason="resolved"))
    found = duplicate_runs([a, b, row])  # the .traj copies carry no verdict yet: the labelled row wins
    assert set(found) == {a.trajectory_id, b.trajectory_id}
    assert all(
        p.stage == "dedup" and p.reason == "duplicate_trajectory" and p.severity == "info"
        for p in found.values()
    )
    assert all(row.source.file in p.detail and "kept that one" in p.detail for p in found.values())
    assert found[b.trajectory_id].where == b.source.file


def test_with_equal_labels_the_first_by_format_and_file_is_kept(copies):
    a, b, row = copies
    assert row.outcome.label == "success"  # the row carries its own verdict; give the files one too
    a, b = (t.with_outcome(row.outcome) for t in (a, b))
    found = duplicate_runs([row, b, a])
    assert set(found) == {b.trajectory_id, row.trajectory_id}  # swe_agent_traj < swe_rows, then a/ < b/


def test_a_record_read_twice_is_left_to_the_keep_stage(copies):
    a, _, _ = copies
    assert duplicate_runs([a, a]) == {}


def test_label_and_keep_drops_copies_from_other_files_as_duplicate_trajectory(copies):
    a, b, row = copies
    verdicts = [
        ReportVerdict(RunVerdict(RUN, True, "resolved", "test:resolved", 2), Origin("r.json"), run)
        for run in sorted({run_key(t).root for t in (a, b, row)})
    ]
    kept = stages.label_and_keep([b, row, a], verdicts, [], frozenset({"swe"}), False)
    assert [t.trajectory_id for t in kept.kept] == [a.trajectory_id]
    assert kept.dropped["duplicate_trajectory"] == 2
    assert sorted(p.where for p in kept.problems if p.stage == "dedup") == sorted(
        [b.source.file, row.source.file + ":1"]
    )


def _q(item: str, traj: str, context: str, gold: str, task: str = "plan") -> Question:
    return Question(
        item_id=item,
        scenario="swe_issue_fix",
        task=task,
        form="completion",
        trajectory_id=traj,
        step_index=1,
        fields={"trajs": context},
        gold=gold,
        provenance=Provenance(source_file="f", source_format="x", extractor="swe_issue_fix"),
    )


_CTX = " ".join(
    f"step {i}: ran pytest on module_{i} and read the failing assertion in test_{i}" for i in range(40)
)


def test_an_exact_duplicate_item_is_dropped_and_names_the_item_kept():
    result = dedup_questions(
        [_q("b", "t2", _CTX, "I need to fix ops.py"), _q("a", "t1", _CTX + "  ", "I need to fix ops.py!")]
    )
    assert [q.item_id for q in result.kept] == ["a"] and (result.exact, result.near) == (1, 0)
    assert (
        result.problems[0].where == "b"
        and result.problems[0].reason == "duplicate_item"
        and "item a" in result.problems[0].detail
    )


def test_a_near_duplicate_item_from_another_run_is_dropped():
    near = _CTX.replace("module_7", "module_seven")
    result = dedup_questions(
        [_q("a", "t1", _CTX, "I need to fix ops.py"), _q("b", "t2", near, "I need to fix ops.py")]
    )
    assert [q.item_id for q in result.kept] == ["a"] and (result.exact, result.near) == (0, 1)
    assert result.problems[0].reason == "near_duplicate_item" and result.problems[0].severity == "error"


def test_near_identical_contexts_are_kept_when_the_answers_differ_or_the_run_is_the_same():
    near = _CTX.replace("module_7", "module_seven")
    other_gold = [
        _q("a", "t1", _CTX, "I need to fix ops.py"),
        _q("b", "t2", near, "I need to rerun the tests"),
    ]
    same_run = [_q("a", "t1", _CTX, "I need to fix ops.py"), _q("b", "t1", near, "I need to fix ops.py")]
    other_task = [
        _q("a", "t1", _CTX, "I need to fix ops.py"),
        _q("b", "t2", _CTX, "I need to fix ops.py", "action"),
    ]
    for items in (other_gold, same_run, other_task):
        assert len(dedup_questions(items).kept) == 2


def _baseline() -> type:
    """`bench/bench_dedup.py`'s `LshLayout`: `TaskDedup.offer`'s rule written with datasketch's own
    `MinHashLSH` and `MinHash.jaccard` (the index `TaskDedup` lays out compactly)."""
    spec = importlib.util.spec_from_file_location("bench_dedup", ROOT / "bench" / "bench_dedup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LshLayout


def _varied(n: int, seed: int) -> list[Question]:
    """Items over a few base contexts, each with up to 4 words changed (near duplicates, and items
    that share some bands only), from a few runs, with answers that agree or not."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(200)]
    bases = [[rng.choice(words) for _ in range(rng.choice([3, 80, 150]))] for _ in range(n // 5)]
    out = []
    for i in range(n):
        ctx = list(rng.choice(bases))
        for _ in range(rng.choice([0, 0, 1, 1, 4])):
            ctx[rng.randrange(len(ctx))] = rng.choice(words)
        gold = rng.choice(
            ["I need to fix ops.py", "I need to fix ops.py!", "I need to run the tests", f"edit {i}"]
        )
        out.append(_q(f"{rng.getrandbits(64):016x}", f"t{rng.randrange(n // 4)}", " ".join(ctx), gold))
    return sorted(out, key=lambda q: q.item_id)


def test_the_compact_index_drops_what_datasketch_lsh_drops():
    """The same Problems as the `MinHashLSH` reference, item by item, exact and near duplicates both met."""
    items = _varied(400, seed=7)
    task = dedup.TaskDedup()
    reference = _baseline()()
    got = [task.offer(q) for q in items]
    assert got == [reference.offer(q) for q in items]
    assert task.exact > 10 and task.near > 10, (task.exact, task.near)
    assert sum(p is None for p in got) == len(task._ids)


@pytest.mark.parametrize("collide", [False, True])
def test_a_candidate_shares_a_bands_values_not_only_its_key(monkeypatch, collide):
    """Before each item is offered, the kept items it is compared with are `MinHashLSH.query`'s, in
    id order; with every band key the same (`collide`) as well."""
    from datasketch import MinHash, MinHashLSH

    if collide:
        monkeypatch.setattr(dedup, "_band_key", lambda values: b"same")
    task, lsh = dedup.TaskDedup(), MinHashLSH(threshold=0.9, num_perm=128)
    compared = 0
    for q in _varied(300, seed=3):
        mh = MinHash(num_perm=128, seed=1, hashfunc=zlib.crc32, scheme="affine32")
        mh.update_batch(list(shingles("\n".join(q.fields.values()))))
        keys = [dedup._band_key(mh.hashvalues[lo:hi]) for lo, hi in task._bands]
        found = [task._ids[i] for i, _ in task._candidates(mh.hashvalues, keys)]
        assert found == sorted(lsh.query(mh))
        compared += len(found)
        if task.offer(q) is None:
            lsh.insert(q.item_id, mh)
    assert compared > 20


def test_shingles_are_word_five_grams_of_the_normalised_text():
    assert shingles("A b, C d e F") == {b"a b c d e", b"b c d e f"}
    assert shingles("Too short") == {b"too short"}


# --- a real build: the same run in three inputs gives the items of one ---------------------------


def _build(root: Path, name: str, sources: list[Path]) -> tuple[dict, Path]:
    from flows.build import run_build

    cfg = root / f"{name}.yaml"
    cfg.write_text(
        json.dumps(
            {
                "scenario": "swe_issue_fix",
                "version": "v-dedup",
                "seed": 5,
                "out_dir": f"out-{name}",
                "sources": [str(s) for s in sources],
                "tasks": {
                    "plan": {"max_items_per_trajectory": 50},
                    "action": {"max_items_per_trajectory": 50},
                },
            }
        )
    )
    report = run_build(load_config(cfg)).model_dump(mode="json")
    return report, root / f"out-{name}" / "swe_issue_fix" / "v-dedup"


@pytest.mark.flow
def test_duplicated_input_runs_build_the_same_items_as_one_copy_and_are_counted(prefect_harness, tmp_path):
    single = tmp_path / "inputs" / "sweagent"
    (single / RUN).mkdir(parents=True)
    shutil.copy(RUN_FILE, single / RUN / f"{RUN}.traj")
    shutil.copy(SUMMARY, single / "harness_summary.json")
    extra = tmp_path / "zz_copies"  # sorts after the original, so the original is the copy kept
    (extra / "mirror").mkdir(parents=True)
    shutil.copy(RUN_FILE, extra / "mirror" / f"{RUN}.traj")
    (extra / "rows.jsonl").write_text(json.dumps(as_swesmith_row(json.loads(RUN_FILE.read_text()))) + "\n")

    base_report, base = _build(tmp_path, "single", [single])
    dup_report, dup = _build(tmp_path, "dup", [single, extra])
    assert dup_report["counts"]["trajectories_read"] == base_report["counts"]["trajectories_read"] + 2
    for task in ("plan", "action"):
        table = pq.read_table(dup / "candidates" / f"{task}.parquet")
        assert table.equals(pq.read_table(base / "candidates" / f"{task}.parquet"))
    # plan distractors never come from the run itself, so a one-run build may pose none; actions need none
    assert pq.read_table(dup / "candidates" / "action.parquet").num_rows > 0
    assert dup_report["dedup"] == {"trajectories": 2, "items_exact": 0, "items_near": 0}
    assert base_report["dedup"]["trajectories"] == 0
    assert dup_report["dropped_by_reason"]["duplicate_trajectory"] == 2
