"""The review queue on a temporary SQLite file: transactions, conflicts, versions, the log, re-queueing."""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta

import pytest

from annotations import Conflict, Progress, Queue, QueueError, Seen, resolve_status, revised
from annotations.queue import store
from schemas import content_hash
from tests.annotations_support import Clock, filled_queue, question


@pytest.fixture
def queue(tmp_path) -> Queue:
    return filled_queue(tmp_path / "queue.sqlite")


def test_an_enqueued_item_starts_pending_with_its_content_hash(queue):
    view = queue.get("plan-0000")
    assert view.row.status == "pending" and view.row.rev == 0 and view.row.version == 0
    assert view.row.content_hash == content_hash(question(0)) == view.row.built_hash
    assert view.question == question(0)
    assert [e.action for e in view.log] == ["enqueue"]


def test_the_queue_file_runs_in_wal_mode_with_every_table(queue):
    con = sqlite3.connect(queue.path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"items", "versions", "reviews", "log", "meta"} <= tables


def test_accepting_records_reviewer_time_note_and_the_hash_they_saw(queue):
    h = queue.get("plan-0001").row.content_hash
    row = queue.decide("plan-0001", "alice", "accept", seen=Seen(h, 0), note="clear plan")
    assert (row.status, row.reviewer, row.note, row.rev) == ("accepted", "alice", "clear plan", 1)
    assert row.decided_at and row.decided_at.startswith("2026-11-30T09:")
    (review,) = queue.get("plan-0001").reviews
    assert (review.reviewer, review.decision, review.content_hash, review.origin) == (
        "alice",
        "accepted",
        h,
        "app",
    )
    (verdict,) = queue.verdicts()
    assert (verdict.item_id, verdict.content_hash, verdict.status, verdict.reviewer) == (
        "plan-0001",
        h,
        "accepted",
        "alice",
    )


def test_another_reviewers_review_never_makes_my_page_stale(queue):
    alice_saw, bob_saw = queue.seen("plan-0000", "alice"), queue.seen("plan-0000", "bob")
    queue.decide("plan-0000", "alice", "accept", seen=alice_saw)
    row = queue.decide("plan-0000", "bob", "reject", seen=bob_saw, note="wrong gold")
    assert row.status == "pending" and row.disputed  # both reviews count: a tie waits for a ruling
    view = queue.get("plan-0000")
    assert sorted(r.reviewer for r in view.reviews) == ["alice", "bob"]


def test_a_content_change_since_the_page_was_built_is_a_conflict_that_names_no_one(queue):
    bob_saw = queue.seen("plan-0000", "bob")
    edited = revised(queue.get("plan-0000").question, "carol", gold_index=0)
    queue.edit("plan-0000", "carol", edited, seen=queue.seen("plan-0000", "carol"))
    with pytest.raises(Conflict) as caught:
        queue.decide("plan-0000", "bob", "reject", seen=bob_saw, note="wrong gold")
    message = str(caught.value)
    assert caught.value.kind == "content" and "NOT saved" in message and "carol" not in message
    view = queue.get("plan-0000")
    assert view.row.status == "edited" and [r.reviewer for r in view.reviews] == ["carol"]


def test_my_own_decision_in_another_tab_makes_my_older_page_stale(queue):
    tab1 = tab2 = queue.seen("plan-0001", "alice")
    queue.decide("plan-0001", "alice", "accept", seen=tab1)
    with pytest.raises(Conflict) as caught:
        queue.decide("plan-0001", "alice", "reject", seen=tab2, note="changed my mind")
    assert caught.value.kind == "own" and "another tab" in str(caught.value)
    fresh = queue.seen("plan-0001", "alice")
    assert (
        fresh.own_rev > 0
        and queue.decide("plan-0001", "alice", "reject", seen=fresh, note="n").status == "rejected"
    )


def test_two_reviewers_deciding_at_once_both_count_and_nothing_is_lost(tmp_path):
    path = tmp_path / "queue.sqlite"
    filled_queue(path, reviews_per_item=2)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def decide(name: str, decision: str) -> None:
        own = Queue(path)  # each reviewer has their own connection, as two app workers would
        seen = own.seen("plan-0002", name)
        barrier.wait()
        try:
            outcomes[name] = own.decide(
                "plan-0002", name, decision, seen=seen, note=f"{name} says {decision}"
            )
        except Conflict as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=decide, args=a) for a in (("alice", "accept"), ("bob", "accept"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not [o for o in outcomes.values() if isinstance(o, Conflict)]
    view = Queue(path).get("plan-0002")
    assert view.row.status == "accepted" and sorted(r.reviewer for r in view.reviews) == ["alice", "bob"]
    assert len([e for e in view.log if e.action == "accept"]) == 2


def test_next_leases_an_item_so_two_reviewers_get_different_ones_and_a_lease_expires(tmp_path):
    clock = Clock()
    q = filled_queue(tmp_path / "queue.sqlite", n_plan=2, n_action=0, clock=clock)
    assert q.next_for("alice", lease_seconds=60) == "plan-0000"
    assert q.next_for("alice", lease_seconds=60) == "plan-0000"  # my lease comes back to me first
    assert q.next_for("bob", lease_seconds=60) == "plan-0001"
    assert q.next_for("carol", lease_seconds=60) is None
    assert q.progress("carol") == Progress(done=0, assigned=0, left=0)
    assert q.progress("alice") == Progress(done=0, assigned=1, left=1)
    clock.now += timedelta(seconds=61)
    assert q.next_for("carol", lease_seconds=60) == "plan-0000"  # alice's lease expired by itself
    assert q.next_for("carol", after="plan-0000") == "plan-0001"  # skip: passes on an item


def test_with_two_reviews_per_item_both_reviewers_are_sent_the_same_item(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", n_plan=2, n_action=0, reviews_per_item=2)
    assert q.next_for("alice") == q.next_for("bob") == "plan-0000"
    assert q.next_for("carol") == "plan-0001"  # plan-0000 already has its two reviewers
    q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice"))
    assert q.progress("alice") == Progress(done=1, assigned=0, left=1)
    assert q.next_for("alice") == "plan-0001"
    row = q.get("plan-0000").row
    assert q.get("plan-0000").reviews[0].seconds is not None and row.reviews == 1


def test_undo_withdraws_my_last_decision_within_the_window(tmp_path):
    clock = Clock()
    q = filled_queue(tmp_path / "queue.sqlite", clock=clock)
    q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice"))
    row = q.undo("alice")
    assert (row.item_id, row.status, row.reviewer, row.reviews) == ("plan-0000", "pending", None, 0)
    with pytest.raises(QueueError, match="no decision of yours"):
        q.undo("alice")
    q.decide(
        "plan-0001", "alice", "reject", seen=q.seen("plan-0001", "alice"), note="n", reasons=["ambiguous"]
    )
    clock.now += timedelta(minutes=11)
    with pytest.raises(QueueError, match="undo works for"):
        q.undo("alice")
    assert [e.action for e in q.log("plan-0000")] == ["enqueue", "accept", "undo"]


def test_rejection_reasons_are_stored_structured_and_unknown_ones_refused(queue):
    queue.decide(
        "plan-0000",
        "alice",
        "reject",
        seen=queue.seen("plan-0000", "alice"),
        reasons=["gold_wrong", "ambiguous"],
    )
    (review,) = queue.get("plan-0000").reviews
    assert review.reasons == ("ambiguous", "gold_wrong")
    with pytest.raises(QueueError, match="unknown rejection reason"):
        queue.decide("plan-0001", "alice", "reject", seen=queue.seen("plan-0001", "alice"), reasons=["meh"])


def test_an_adjudicator_ruling_settles_a_tie(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", reviews_per_item=2)
    q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice"))
    q.decide("plan-0000", "bob", "reject", seen=q.seen("plan-0000", "bob"), note="B is also right")
    assert [r.item_id for r in q.disputed()] == ["plan-0000"]
    row = q.adjudicate("plan-0000", "judge", "reject", seen=q.seen("plan-0000", "judge"), note="bob is right")
    assert row.status == "rejected" and q.disputed() == [] and row.reviews == 2


def test_search_and_sort_find_items_by_instance_or_text(tmp_path):
    q = Queue(tmp_path / "queue.sqlite", clock=Clock())
    q.enqueue(
        [question(0, instance="django__django-1"), question(1, context="look at 50%_done.py")], batch="v1"
    )
    assert [r.item_id for r in q.items(search="django")] == ["plan-0000"]
    assert [r.item_id for r in q.items(search="50%_done")] == ["plan-0001"]
    assert q.items(search="5_%") == [] and q.count(search="module 0") == 1
    assert [r.item_id for r in q.items(sort="instance")] == ["plan-0000", "plan-0001"]
    q.decide("plan-0001", "alice", "accept", seen=q.seen("plan-0001", "alice"))
    assert [r.item_id for r in q.items(sort="recent")] == ["plan-0001", "plan-0000"]


def test_a_schema_1_queue_file_is_upgraded_in_place(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    old_reviews = store.DDL.split("CREATE TABLE IF NOT EXISTS reviews")[1].split(");")[0]
    for col in ("reasons", "role", "seconds"):
        old_reviews = "\n".join(line for line in old_reviews.splitlines() if not line.strip().startswith(col))
    con.executescript("CREATE TABLE reviews" + old_reviews + ");")
    con.execute("INSERT INTO reviews VALUES ('x', 'h', 'alice', 'accepted', '', 't', 'app')")
    con.commit()
    con.close()
    Queue(path)
    con = sqlite3.connect(path)
    assert con.execute("SELECT reasons, role FROM reviews").fetchone() == ("[]", "reviewer")


def test_an_edit_stores_a_new_version_and_keeps_the_original(queue):
    original = queue.get("plan-0000").question
    options = list(original.options)
    options[1] = "I need to swap operator.add for operator.sub in ops_0.py"
    edited = revised(original, "carol", options=options)
    row = queue.edit("plan-0000", "carol", edited, seen=queue.seen("plan-0000", "carol"), note="sharper gold")
    assert (row.status, row.version, row.reviewer) == ("edited", 1, "carol")
    assert row.content_hash == content_hash(edited) != row.built_hash
    view = queue.get("plan-0000")
    assert [(v.version, v.kind, v.author) for v in view.versions] == [
        (0, "build", "build"),
        (1, "edit", "carol"),
    ]
    assert view.versions[0].question == original and view.question.gold == options[1]
    assert {d.origin for d in view.question.distractors} == {d.origin for d in original.distractors}
    (item,) = queue.verified()
    assert item.status == "edited" and content_hash(item.question) == item.content_hash


def test_an_edit_that_changes_nothing_or_the_identity_is_refused(queue):
    current = queue.get("plan-0001").question
    with pytest.raises(QueueError, match="identical"):
        queue.edit("plan-0001", "carol", current, seen=queue.seen("plan-0001", "carol"))
    with pytest.raises(QueueError, match="content only"):
        queue.edit(
            "plan-0001",
            "carol",
            current.model_copy(update={"task": "action"}),
            seen=queue.seen("plan-0001", "carol"),
        )
    with pytest.raises(QueueError, match="distinct"):
        revised(current, "carol", options=["same", "same", "x", "y"])
    assert queue.get("plan-0001").row.rev == 0


def test_the_decision_log_is_append_only(queue):
    queue.decide("action-0000", "alice", "reject", seen=queue.seen("action-0000", "alice"), note="ambiguous")
    con = sqlite3.connect(queue.path)
    for sql in ("UPDATE log SET note = 'forged'", "DELETE FROM log"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute(sql)
    assert [e.action for e in queue.log("action-0000")] == ["enqueue", "reject"]


def test_a_failed_enqueue_leaves_nothing_half_written(tmp_path):
    q = Queue(tmp_path / "queue.sqlite")
    broken = question(9).model_copy(update={"fields": {}})  # no `trajs`: its row cannot be rendered
    with pytest.raises(ValueError, match="lacks field"):
        q.enqueue([question(1), question(2), broken], batch="v1")
    assert q.count() == 0 and list(q.log()) == []


def test_a_rebuild_keeps_the_verdict_of_an_unchanged_item_and_requeues_a_changed_one(queue):
    queue.decide("plan-0000", "alice", "accept", seen=queue.seen("plan-0000", "alice"))
    queue.decide("plan-0001", "alice", "reject", seen=queue.seen("plan-0001", "alice"), note="two golds")
    changed = question(1, gold="I need to read the failing test first")
    result = queue.enqueue(
        [question(0), changed, question(2), question(0, "action"), question(1, "action")], batch="v2"
    )
    assert (result.unchanged, result.requeued, result.new) == (4, 1, 0)
    assert queue.get("plan-0000").row.status == "accepted"
    view = queue.get("plan-0001")
    assert view.row.status == "pending" and view.row.version == 1 and view.reviews == ()
    assert view.row.content_hash == content_hash(changed) and view.question == changed
    assert view.versions[0].question == question(1)
    assert [e.action for e in view.log] == ["enqueue", "reject", "requeue"]


def test_a_rebuild_keeps_a_reviewers_edit_while_the_built_content_is_unchanged(queue):
    base = queue.get("plan-0002").question
    queue.edit(
        "plan-0002", "carol", revised(base, "carol", gold_index=0), seen=queue.seen("plan-0002", "carol")
    )
    queue.enqueue([question(i) for i in range(3)], batch="v2", tasks=["plan"])
    row = queue.get("plan-0002").row
    assert row.status == "edited" and row.version == 1


def test_items_missing_from_a_rebuild_are_retired_and_restored_when_they_return(queue):
    result = queue.enqueue([question(0), question(1)], batch="v2", tasks=["plan"])
    assert result.retired == 1 and queue.count(task="plan") == 2
    assert queue.count(task="plan", include_retired=True) == 3
    with pytest.raises(QueueError, match="retired"):
        queue.decide("plan-0002", "alice", "accept", seen=queue.seen("plan-0002", "alice"))
    assert queue.enqueue([question(i) for i in range(3)], batch="v3", tasks=["plan"]).restored == 1
    assert queue.count(task="plan") == 3 and queue.count(task="action") == 2


def test_decisions_survive_reopening_the_queue(tmp_path):
    path = tmp_path / "queue.sqlite"
    first = filled_queue(path)
    first.decide("plan-0000", "alice", "accept", seen=first.seen("plan-0000", "alice"))
    first.decide(
        "action-0001", "bob", "reject", seen=first.seen("action-0001", "bob"), note="not the next command"
    )
    again = Queue(path)
    assert again.get("plan-0000").row.status == "accepted"
    assert (again.get("action-0001").row.status, again.get("action-0001").row.note) == (
        "rejected",
        "not the next command",
    )
    assert len(list(again.log())) == 5 + 2


def test_an_item_needs_the_configured_reviews_and_a_tie_waits_for_one_more(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", reviews_per_item=2)
    assert q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice")).status == "pending"
    row = q.decide(
        "plan-0000", "bob", "reject", seen=q.seen("plan-0000", "bob"), note="distractor B is also right"
    )
    assert row.status == "pending" and row.disputed and row.reviews == 2
    assert q.decide("plan-0000", "carol", "accept", seen=q.seen("plan-0000", "carol")).status == "accepted"
    assert q.next_for("alice", task="plan") == "plan-0001"
    assert q.next_for("dave", task="plan") == "plan-0001"


def test_changing_reviews_per_item_re_resolves_statuses(queue):
    queue.decide("plan-0000", "alice", "accept", seen=queue.seen("plan-0000", "alice"))
    assert queue.set_reviews_per_item(2) == 1
    assert queue.get("plan-0000").row.status == "pending" and queue.reviews_per_item == 2
    assert queue.set_reviews_per_item(1) == 1 and queue.get("plan-0000").row.status == "accepted"
    with pytest.raises(QueueError):
        queue.set_reviews_per_item(0)


def test_lists_filter_by_task_status_and_source(tmp_path):
    q = Queue(tmp_path / "queue.sqlite", clock=Clock())
    q.enqueue([question(0), question(1, source="swe_agent_traj"), question(0, "action")], batch="v1")
    q.decide("plan-0001", "alice", "accept", seen=q.seen("plan-0001", "alice"))
    assert [r.item_id for r in q.items(task="plan")] == ["plan-0000", "plan-0001"]
    assert [r.item_id for r in q.items(status="accepted")] == ["plan-0001"]
    assert [r.item_id for r in q.items(source="swe_agent_traj")] == ["plan-0001"]
    assert [r.item_id for r in q.items(unreviewed_by="alice")] == ["action-0000", "plan-0000"]
    assert q.facets()["status"] == {"accepted": 1, "pending": 2}


def test_a_decision_without_a_content_hash_or_on_an_unknown_item_is_refused(queue):
    with pytest.raises(QueueError, match="content hash it was made on"):
        queue.decide("plan-0000", "alice", "accept", seen=None)
    with pytest.raises(QueueError, match="no item"):
        queue.decide("nope", "alice", "accept", seen=Seen("h", 0))
    with pytest.raises(QueueError, match="unknown decision"):
        queue.decide("plan-0000", "alice", "maybe", seen=queue.seen("plan-0000", "alice"))


@pytest.mark.parametrize(
    ("decisions", "required", "expected"),
    [
        ([], 1, "pending"),
        (["accepted"], 1, "accepted"),
        (["rejected"], 1, "rejected"),
        (["edited"], 1, "edited"),
        (["accepted"], 2, "pending"),
        (["accepted", "rejected"], 2, "pending"),
        (["accepted", "rejected", "rejected"], 2, "rejected"),
        (["edited", "accepted"], 2, "edited"),
    ],
)
def test_the_majority_of_current_reviews_decides_the_status(decisions, required, expected):
    assert resolve_status(decisions, required) == expected
