"""The build's last question stages on disk (`flows.finish`): the same items, order, positions and
Problems as the in-memory stages, with a bucket of questions held at a time."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from annotations.queue import Queue
from flows import finish, hygiene, stages, work
from flows.build_report import Timer
from flows.config import load_config
from flows.io import write_jsonl, write_parquet, write_parquet_batches
from generators.hygiene.dedup import TaskDedup, dedup_questions
from generators.hygiene.scrub import redact_questions
from generators.quality.balance import balance_positions, place, positions_for, slot_of
from schemas import question_row
from tests.publish_support import questions as sample_questions

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _corpus(samples_dir):
    """The SWE sample's questions with a token planted in some contexts, an exact copy of one item
    under another id and run, in the order they were posed (positions as generated)."""
    qs = sample_questions(samples_dir)
    out = []
    for i, q in enumerate(qs):
        if i % 5 == 0:
            key = next(iter(q.fields))
            q = q.model_copy(
                update={"fields": {**q.fields, key: f"{q.fields[key]}\nexport GH_TOKEN={TOKEN}"}}
            )
        out.append(q)
    copy = out[1].model_copy(update={"item_id": "f" * 32, "trajectory_id": "another-run"})
    return [*out, copy]


def _filtered(tmp_path, qs, tasks):
    area = work.spill_area()
    files = {t: work.spill_path(tmp_path, area, f"filtered-{t}") for t in tasks}
    counts = {t: 0 for t in tasks}
    with work.Appender() as out:
        for q in qs:
            out.add(files[q.task], q)
            counts[q.task] += 1
    return finish.Filtered(area, files, counts, [], {})


def _in_memory(cfg, qs):
    """The stages as the build ran them on lists (what `finish_questions` must reproduce)."""
    redactor = hygiene.make_redactor(cfg.privacy)
    red = redact_questions(qs, redactor)
    dd = dedup_questions(red.questions, cfg.dedup.near_duplicate_threshold, cfg.dedup.num_perm)
    passed, found = stages.check_stage(dd.kept)
    cont = hygiene.contamination_stage(passed, cfg.contamination)
    balanced = balance_positions(cont.kept, cfg.seed)
    return balanced, red.problems + dd.problems + found + cont.problems, red, dd, cont, redactor


@pytest.mark.parametrize("contaminated", [False, True])
def test_the_streamed_stages_give_the_in_memory_stages_items_order_positions_and_problems(
    tmp_path, samples_dir, monkeypatch, contaminated
):
    monkeypatch.setattr(finish, "BUCKET_ITEMS", 3)  # several buckets per task
    monkeypatch.setattr(finish, "LEARN_BATCH", 4)  # redaction learns in several batches
    qs = _corpus(samples_dir)
    cfg = load_config(ROOT / "configs" / "swe_issue_fix.yaml", out_dir=tmp_path / "out")
    if contaminated:  # two items' contexts are in a reference corpus: they (and their neighbours) go
        ref = tmp_path / "reference.jsonl"
        write_jsonl(ref, [question_row(q) for q in qs[2:4]])
        cfg = cfg.model_copy(
            update={
                "contamination": cfg.contamination.model_copy(
                    update={"reference": [str(ref)], "drop": True, "ngram": 5}
                )
            }
        )
    tasks = sorted({q.task for q in qs}, reverse=True)  # not name order: the scenario's
    expected, problems, red, dd, cont, ref_redactor = _in_memory(cfg, qs)
    assert dd.exact >= 1 and red.redacted and (0 < cont.report.dropped < len(qs) // 2) is contaminated

    filtered = _filtered(tmp_path / "out", qs, tasks)
    redactor = hygiene.make_redactor(cfg.privacy)
    done = finish.finish_questions(cfg, filtered, redactor, Timer())
    got = list(done.questions)
    assert got == expected  # items, their order (task name, then id), options and gold positions
    assert len(done.questions) == len(expected)
    assert [list(done.questions.of(t)) for t in tasks] == [
        [q for q in expected if q.task == t] for t in tasks
    ]
    assert done.problems == problems
    assert done.redacted.redacted == red.redacted and redactor.found == ref_redactor.found
    assert (done.deduped.exact, done.deduped.near) == (dd.exact, dd.near)
    assert done.contamination.report == cont.report
    assert all(TOKEN not in str(q.model_dump()) for q in got)
    folder = work.work_dir(tmp_path / "out") / filtered.area
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"checked-{t}" for t in tasks)  # buckets gone
    done.questions.remove()
    assert not folder.exists()


def test_non_hex_ids_take_one_bucket_and_still_come_out_in_id_order(tmp_path, samples_dir, monkeypatch):
    monkeypatch.setattr(finish, "BUCKET_ITEMS", 2)
    qs = sample_questions(samples_dir)
    qs = [q.model_copy(update={"item_id": f"item-{len(qs) - i:03d}"}) for i, q in enumerate(qs)]
    cfg = load_config(ROOT / "configs" / "swe_issue_fix.yaml", out_dir=tmp_path / "out")
    expected = _in_memory(cfg, qs)[0]
    done = finish.finish_questions(
        cfg, _filtered(tmp_path / "out", qs, ["plan", "action"]), hygiene.make_redactor(cfg.privacy), Timer()
    )
    assert list(done.questions) == expected


def test_positions_from_slots_place_each_item_as_balancing_the_list_does(samples_dir):
    qs = sample_questions(samples_dir)
    slots = [s for q in reversed(qs) if (s := slot_of(q)) is not None]  # any order
    positions = positions_for(slots, 7)
    assert [
        place(q, positions[q.item_id], 7) if q.item_id in positions else q for q in qs
    ] == balance_positions(qs, 7)
    assert {positions[q.item_id] for q in qs if q.item_id in positions} == set(range(4))


def test_task_dedup_keeps_signatures_not_the_questions(samples_dir):
    qs = sorted((q for q in sample_questions(samples_dir) if q.task == "plan"), key=lambda q: q.item_id)
    dedup = TaskDedup()
    first = qs[0].model_copy()
    assert dedup.offer(first) is None
    ref = weakref.ref(first)
    del first
    gc.collect()
    assert ref() is None  # the kept item itself is not held
    assert dedup.offer(qs[0]).reason == "duplicate_item"  # yet its copy is still found
    offered = [p for q in qs[1:] if (p := dedup.offer(q)) is not None]
    assert offered == dedup_questions(qs).problems  # the rest as over the list


def test_a_redactor_learning_in_released_batches_finds_and_counts_as_one_learning_pass():
    texts = [
        f"step {i}: export GH_TOKEN={TOKEN}" if i % 3 == 0 else f"plain step {i} of the run"
        for i in range(12)
    ]
    texts += texts[:4]  # repeated texts count once
    whole = hygiene.make_redactor(load_config(ROOT / "configs" / "swe_issue_fix.yaml").privacy)
    whole.learn(texts)
    batched = hygiene.make_redactor(load_config(ROOT / "configs" / "swe_issue_fix.yaml").privacy)
    for i in range(0, len(texts), 5):
        batched.learn(texts[i : i + 5])
        batched.release()
    assert batched.found == whole.found and sum(whole.found.values()) == 4
    assert [batched.redact(t) for t in texts] == [whole.redact(t) for t in texts]
    assert batched.found == whole.found  # redacting texts learnt before a release counts nothing again


def test_batched_parquet_is_one_row_group_per_table_and_one_table_writes_write_parquets_bytes(tmp_path):
    schema = pa.schema([("item_id", pa.string()), ("n", pa.int64())])
    parts = [
        pa.Table.from_pylist([{"item_id": f"i{k}{j}", "n": j} for j in range(3)], schema=schema)
        for k in range(3)
    ]
    assert write_parquet_batches(tmp_path / "b.parquet", iter(parts)) == 9
    f = pq.ParquetFile(tmp_path / "b.parquet")
    assert f.metadata.num_row_groups == 3 and f.read().to_pylist() == pa.concat_tables(parts).to_pylist()
    write_parquet(tmp_path / "one.parquet", parts[0])
    write_parquet_batches(tmp_path / "two.parquet", [parts[0]])
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "two.parquet").read_bytes()
    with pytest.raises(ValueError, match="no table to write"):
        write_parquet_batches(tmp_path / "none.parquet", [])
    assert not (tmp_path / "none.parquet").exists()


def test_the_queue_takes_questions_read_once(tmp_path, samples_dir):
    qs = sample_questions(samples_dir)
    queue = Queue(tmp_path / "queue.sqlite")
    first = queue.enqueue(iter(qs), batch="b1")
    assert first.new == len(qs)
    again = queue.enqueue(iter(qs[1:]), batch="b2", tasks=iter(["plan", "action"]))
    assert (again.unchanged, again.retired) == (len(qs) - 1, 1)  # the item left out is retired


def test_appended_values_replay_in_order_across_sessions(tmp_path):
    path = work.spill_path(tmp_path, "spill-1-ab", "stream")
    assert list(work.replay(path)) == []  # nothing written yet
    with work.Appender() as out:
        out.add(path, {"a": 1})
        out.add(path, [2])
    with work.Appender() as out:
        out.add(path, "three")
    assert list(work.replay(path)) == [{"a": 1}, [2], "three"]
    assert list(work.replay(path)) == [{"a": 1}, [2], "three"]  # read as often as needed


def _spilled(out_dir, qs, shard):
    from flows.build_stages import Spilled

    area = work.spill_area()
    out = []
    for task in ("plan", "action"):
        mine = [q for q in qs if q.task == task]
        refs = [
            work.spill(out_dir, area, f"questions-{task}", i, mine[k : k + shard])
            for i, k in enumerate(range(0, len(mine), shard))
        ]
        out.append(Spilled(task, area, refs))
    return out


@pytest.mark.parametrize("enabled", [True, False])
def test_the_filter_over_spilled_shards_a_block_at_a_time_gives_the_filter_over_the_list(
    tmp_path, samples_dir, enabled
):
    from flows.filtering import filter_questions

    qs = _corpus(samples_dir)
    assert any(q.reserve for q in qs)  # there is something to filter
    cfg = load_config(ROOT / "configs" / "swe_issue_fix.yaml", out_dir=tmp_path / "out")
    af = cfg.adversarial.model_copy(update={"block_items": 5, "enabled": enabled})
    cfg = cfg.model_copy(update={"adversarial": af})
    expected, problems, stats = stages.adversarial_stage(list(qs), cfg)
    got = filter_questions(cfg, _spilled(tmp_path / "out", qs, shard=4), Timer())
    assert list(got.files) == ["plan", "action"]  # the scenario's order of tasks
    for task, path in got.files.items():
        mine = list(work.replay(path))
        assert mine == [q for q in expected if q.task == task] and got.counts[task] == len(mine)
    assert got.problems == problems and got.tasks == stats
    assert (not enabled) or sum(s.candidates_scored for s in stats.values()) > 0  # the filter did work
    left = sorted(p.name for p in (work.work_dir(tmp_path / "out") / got.area).iterdir())
    assert left == ["filtered-action", "filtered-plan"]  # blocks and shards gone, generate spills too


def test_gold_steps_go_to_their_tasks_files_in_shard_order_with_their_pools(tmp_path, samples_dir):
    from flows.build_stages import Golds, Scenario, _batches, chunks, resolve_scenario

    cfg = load_config(ROOT / "configs" / "swe_issue_fix.yaml", out_dir=tmp_path / "out")
    scenario: Scenario = resolve_scenario(cfg)
    from schemas import GoldStep

    golds_in = [
        GoldStep(
            step_id=q.item_id,
            scenario=q.scenario,
            task=q.task,
            form=q.form,
            trajectory_id=q.trajectory_id,
            step_index=0,
            gold=q.gold,
            provenance=q.provenance,
        )
        for q in sample_questions(samples_dir)
    ]
    stray = golds_in[0].model_copy(update={"task": "not_posed"})
    golds = Golds.start(cfg, scenario)
    with work.Appender() as out:
        for shard in chunks([*golds_in, stray], 4):  # as the extract shards come
            golds.add(out, shard)
    assert golds.total == len(golds_in) + 1 and golds.counts["not_posed"] == 1  # counted, not kept
    for task in scenario.specs:
        mine = [g for g in golds_in if g.task == task]
        assert list(work.replay(golds.files[task])) == mine
        spec = scenario.specs[task]
        # an MCQ task's pool holds its golds; a completion task has none (its steps take no distractors)
        pool = stages.pool_of(mine, spec.other_runs_as_distractors) if spec.form == "mcq" else []
        assert list(golds.pool(task)) == pool == work.load_lists(str(golds.pools[task]))
        assert golds.pools[task].exists() == (spec.form == "mcq") and bool(mine)
    assert list(_batches(iter(golds_in), 5)) == chunks(golds_in, 5)
    assert list(_batches(iter([]), 5)) == []


def test_the_write_stage_holds_one_row_group_of_rows_at_a_time(samples_dir, monkeypatch):
    """Rows go to the Parquet writer in lists of at most `ROW_GROUP` (the stage's working memory is
    one group's rows and Arrow table), every question once and in order; no question, one empty list."""
    from flows import build_stages

    qs = sample_questions(samples_dir)
    assert len(qs) > 5
    monkeypatch.setattr(build_stages, "ROW_GROUP", 4)
    batches = list(build_stages._row_batches(iter(qs), build_stages.ROW_GROUP))
    assert [len(b) for b in batches] == [4] * (len(qs) // 4) + ([len(qs) % 4] if len(qs) % 4 else [])
    assert [r["item_id"] for b in batches for r in b] == [q.item_id for q in qs]
    assert list(build_stages._row_batches(iter([]))) == [[]]
    assert build_stages.ROW_GROUP <= 2048  # 8,192 rows of 6 KB items held ~120 MiB of Arrow buffers
