"""The review queue on a temporary SQLite file: transactions, conflicts, versions, the log, re-queueing."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from annotations import Conflict, Queue, QueueError, resolve_status, revised
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
    row = queue.decide("plan-0001", "alice", "accept", expected_rev=0, seen_hash=h, note="clear plan")
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


def test_a_decision_on_a_stale_revision_is_a_conflict_that_names_who_changed_it(queue):
    queue.decide("plan-0000", "alice", "accept", expected_rev=0)
    with pytest.raises(Conflict) as caught:
        queue.decide("plan-0000", "bob", "reject", expected_rev=0, note="wrong gold")
    message = str(caught.value)
    assert (
        "alice" in message and "NOT saved" in message and "revision 0" in message and "revision 1" in message
    )
    view = queue.get("plan-0000")
    assert view.row.status == "accepted" and [r.reviewer for r in view.reviews] == ["alice"]


def test_two_reviewers_deciding_at_once_never_lose_an_update(tmp_path):
    path = tmp_path / "queue.sqlite"
    filled_queue(path)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def decide(name: str, decision: str) -> None:
        own = Queue(path)  # each reviewer has their own connection, as two app workers would
        rev = own.get("plan-0002").row.rev
        barrier.wait()
        try:
            outcomes[name] = own.decide(
                "plan-0002", name, decision, expected_rev=rev, note=f"{name} says {decision}"
            )
        except Conflict as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=decide, args=a) for a in (("alice", "accept"), ("bob", "reject"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    conflicts = [o for o in outcomes.values() if isinstance(o, Conflict)]
    saved = [o for o in outcomes.values() if not isinstance(o, Conflict)]
    assert len(conflicts) == 1 and len(saved) == 1
    view = Queue(path).get("plan-0002")
    assert len(view.reviews) == 1 and view.reviews[0].reviewer == saved[0].reviewer
    assert [e.action for e in view.log if e.action in ("accept", "reject")] == [saved[0].status[:6]]


def test_an_edit_stores_a_new_version_and_keeps_the_original(queue):
    original = queue.get("plan-0000").question
    options = list(original.options)
    options[1] = "I need to swap operator.add for operator.sub in ops_0.py"
    edited = revised(original, "carol", options=options)
    row = queue.edit("plan-0000", "carol", edited, expected_rev=0, note="sharper gold")
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
        queue.edit("plan-0001", "carol", current, expected_rev=0)
    with pytest.raises(QueueError, match="content only"):
        queue.edit("plan-0001", "carol", current.model_copy(update={"task": "action"}), expected_rev=0)
    with pytest.raises(QueueError, match="distinct"):
        revised(current, "carol", options=["same", "same", "x", "y"])
    assert queue.get("plan-0001").row.rev == 0


def test_the_decision_log_is_append_only(queue):
    queue.decide("action-0000", "alice", "reject", expected_rev=0, note="ambiguous")
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
    queue.decide("plan-0000", "alice", "accept", expected_rev=0)
    queue.decide("plan-0001", "alice", "reject", expected_rev=0, note="two golds")
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
    queue.edit("plan-0002", "carol", revised(base, "carol", gold_index=0), expected_rev=0)
    queue.enqueue([question(i) for i in range(3)], batch="v2", tasks=["plan"])
    row = queue.get("plan-0002").row
    assert row.status == "edited" and row.version == 1


def test_items_missing_from_a_rebuild_are_retired_and_restored_when_they_return(queue):
    result = queue.enqueue([question(0), question(1)], batch="v2", tasks=["plan"])
    assert result.retired == 1 and queue.count(task="plan") == 2
    assert queue.count(task="plan", include_retired=True) == 3
    with pytest.raises(QueueError, match="retired"):
        queue.decide("plan-0002", "alice", "accept", expected_rev=queue.get("plan-0002").row.rev)
    assert queue.enqueue([question(i) for i in range(3)], batch="v3", tasks=["plan"]).restored == 1
    assert queue.count(task="plan") == 3 and queue.count(task="action") == 2


def test_decisions_survive_reopening_the_queue(tmp_path):
    path = tmp_path / "queue.sqlite"
    first = filled_queue(path)
    first.decide("plan-0000", "alice", "accept", expected_rev=0)
    first.decide("action-0001", "bob", "reject", expected_rev=0, note="not the next command")
    again = Queue(path)
    assert again.get("plan-0000").row.status == "accepted"
    assert (again.get("action-0001").row.status, again.get("action-0001").row.note) == (
        "rejected",
        "not the next command",
    )
    assert len(list(again.log())) == 5 + 2


def test_an_item_needs_the_configured_reviews_and_a_tie_waits_for_one_more(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", reviews_per_item=2)
    assert q.decide("plan-0000", "alice", "accept", expected_rev=0).status == "pending"
    row = q.decide("plan-0000", "bob", "reject", expected_rev=1, note="distractor B is also right")
    assert row.status == "pending" and row.disputed and row.reviews == 2
    assert q.decide("plan-0000", "carol", "accept", expected_rev=2).status == "accepted"
    assert q.next_for("alice", task="plan") == "plan-0001"
    assert q.next_for("dave", task="plan") == "plan-0001"


def test_changing_reviews_per_item_re_resolves_statuses(queue):
    queue.decide("plan-0000", "alice", "accept", expected_rev=0)
    assert queue.set_reviews_per_item(2) == 1
    assert queue.get("plan-0000").row.status == "pending" and queue.reviews_per_item == 2
    assert queue.set_reviews_per_item(1) == 1 and queue.get("plan-0000").row.status == "accepted"
    with pytest.raises(QueueError):
        queue.set_reviews_per_item(0)


def test_lists_filter_by_task_status_and_source(tmp_path):
    q = Queue(tmp_path / "queue.sqlite", clock=Clock())
    q.enqueue([question(0), question(1, source="swe_agent_traj"), question(0, "action")], batch="v1")
    q.decide("plan-0001", "alice", "accept", expected_rev=0)
    assert [r.item_id for r in q.items(task="plan")] == ["plan-0000", "plan-0001"]
    assert [r.item_id for r in q.items(status="accepted")] == ["plan-0001"]
    assert [r.item_id for r in q.items(source="swe_agent_traj")] == ["plan-0001"]
    assert [r.item_id for r in q.items(unreviewed_by="alice")] == ["action-0000", "plan-0000"]
    assert q.facets()["status"] == {"accepted": 1, "pending": 2}


def test_a_decision_without_a_revision_or_hash_or_on_an_unknown_item_is_refused(queue):
    with pytest.raises(QueueError, match="revision or content hash"):
        queue.decide("plan-0000", "alice", "accept", expected_rev=None)
    with pytest.raises(QueueError, match="no item"):
        queue.decide("nope", "alice", "accept", expected_rev=0)
    with pytest.raises(QueueError, match="unknown decision"):
        queue.decide("plan-0000", "alice", "maybe", expected_rev=0)


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
