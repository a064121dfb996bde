"""The LLM layer's response store and cost ledger as plain objects, and the exact similarity prefilter."""

from __future__ import annotations

import random
import sqlite3
import threading

import pytest

from generators.llm.generator import close_to
from generators.llm.ledger import BudgetExceeded, Ledger, Price
from generators.llm.store import BatchEntry, ResponseStore, StoreError
from generators.text import normalise, similarity


def test_replies_survive_reopening_and_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "cache.sqlite"
    stores = [ResponseStore(path), ResponseStore(path)]  # two workers (as two processes would)

    def write(n: int) -> None:
        for i in range(50):
            stores[n % 2].put(f"k{n}-{i}", "openai", "m", {"body": i}, {"text": f"{n}-{i}"})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    again = ResponseStore(path)
    assert again.count() == 200 and again.get("k3-49") == {"text": "3-49"} and again.get("missing") is None


def test_a_store_from_another_schema_version_or_not_sqlite_is_refused(tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("PRAGMA user_version=99")
    with pytest.raises(StoreError, match="schema 99"):
        ResponseStore(other)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="not a usable LLM store"):
        ResponseStore(junk)


def test_batch_ids_are_kept_until_collected(tmp_path):
    store = ResponseStore(tmp_path / "cache.sqlite")
    store.add_batch(
        "batch_1", "openai", [BatchEntry("a", "plan", "m", 0.1), BatchEntry("b", "plan", "m", 0.2)]
    )
    (pending,) = store.pending_batches("openai")
    assert pending.batch_id == "batch_1" and [e.key for e in pending.entries] == ["a", "b"]
    assert store.pending_batches("anthropic") == []
    store.finish_batch(
        "batch_1",
        "completed",
        [("a", "openai", "m", {"batch_id": "batch_1"}, {"text": "x"})],
        {"b": "HTTP 500"},
    )
    assert store.pending_batches("openai") == [] and store.get("a") == {"text": "x"}
    assert store.batch_errors("batch_1") == {"b": "HTTP 500"} and store.batch_status("batch_1") == "completed"


def test_the_ledger_reserves_the_worst_case_and_reports_per_task_and_model():
    ledger = Ledger({"m": Price(1.0, 2.0)}, budget_usd=0.01)
    held = ledger.reserve("m", 1000, 1000)  # $0.003 worst case
    assert held == pytest.approx(0.003)
    assert ledger.settle(held, "plan", "m", 500, 100) == pytest.approx(0.0007)
    ledger.count("plan", "m", "cache_hits", 2)
    ledger.settle(ledger.reserve("m", 10, 10), "plan", "other", 0, 0)
    with pytest.raises(BudgetExceeded, match=r"budget of \$0.01"):
        ledger.reserve("m", 5000, 5000)
    with pytest.raises(BudgetExceeded):  # exhausted stays exhausted, even for a small request
        ledger.reserve("m", 1, 1)
    report = ledger.report().model_dump()
    assert report["spent_usd"] == pytest.approx(0.0007) and report["budget_exhausted"]
    assert (
        report["by_task"]["plan"]["m"]["tokens_in"] == 500
        and report["by_task"]["plan"]["m"]["cache_hits"] == 2
    )
    assert report["by_model"]["other"]["requests"] == 1 and report["unpriced_models"] == ["other"]
    assert report["total"]["requests"] == 2
    with pytest.raises(ValueError, match="no price"):
        Ledger({}, budget_usd=1.0).require_prices("m")


def test_the_rapidfuzz_prefilter_agrees_exactly_with_text_similarity():
    rng = random.Random(20261130)
    words = [
        "I need to",
        "open",
        "edit",
        "the",
        "parser",
        "tests",
        "module",
        "config",
        "run",
        "`pytest -x`",
        "again",
    ]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(150)]
    for threshold in (0.6, 0.85, 0.95):
        for a, b in zip(texts, texts[1:] + texts[:1], strict=True):
            expected = similarity(a, b) >= threshold
            assert (close_to(a, normalise(a), [(b, normalise(b))], threshold) is not None) == expected
