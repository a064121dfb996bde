"""Batch mode for scheduled rebuilds: the OpenAI Batch API and Anthropic Message Batches.

Why: batch APIs cost about half and suit nightly rebuilds, but a batch can outlive the process that
submitted it; a restarted build must collect it, never pay for it twice.

Guarantees:
- A request whose reply is in the response cache is never submitted; one that sits in a submitted,
  uncollected batch (ids kept in the SQLite store) is never submitted again: that batch is polled
  and collected instead, by this run or by the next one after a restart.
- A batch's id and request keys are committed right after the provider accepts it (a crash in that
  instant can orphan at most that batch). Collected replies enter the same cache as online replies,
  in the transaction that closes the batch.
- A batch still running after `max_wait_s` leaves its items as `batch_pending` Problems; a later run
  collects it. Per-request batch errors are recorded and not cached (a later run resubmits them).
- Each submitted request reserves its worst-case cost at the ledger's batch price factor; requests
  that do not fit the budget are not submitted and end as `no_distractors`.
- Output that fails to parse or validate gets one more attempt, in a second batch (as online).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import orjson

from generators.llm.clients import reply_from_anthropic, reply_from_openai, translate_error
from generators.llm.engine import (
    InvalidOutput,
    Job,
    LLMFailure,
    LLMReply,
    LLMRequest,
    Outcome,
    Tally,
    accept_reply,
)
from generators.llm.ledger import BudgetExceeded, Ledger
from generators.llm.store import BatchEntry, PendingBatch, ResponseStore

if TYPE_CHECKING:
    import anthropic
    import openai


class BatchState(NamedTuple):
    """A batch's status at one poll."""

    status: str
    ended: bool


class BatchResult(NamedTuple):
    """The replies and per-request errors of an ended batch, by request key."""

    replies: dict[str, LLMReply]
    errors: dict[str, str]


class BatchAPI(Protocol):
    """One provider's batch endpoints (sync SDK client)."""

    provider: str

    def submit(self, requests: Sequence[LLMRequest]) -> str:
        """Submit requests (custom id = request key); return the batch id."""
        ...

    def poll(self, batch_id: str) -> BatchState:
        """Current status."""
        ...

    def collect(self, batch_id: str) -> BatchResult:
        """Replies and errors of an ended batch."""
        ...

    def close(self) -> None:
        """Close the SDK client."""
        ...


class OpenAIBatches:
    """OpenAI Batch API: upload a JSONL file, create the batch, download output and error files."""

    def __init__(self, client: openai.OpenAI, provider: str = "openai") -> None:
        self.client, self.provider = client, provider

    def submit(self, requests: Sequence[LLMRequest]) -> str:
        """Upload the requests as a `purpose=batch` file and create a 24 h batch."""
        lines = b"".join(
            orjson.dumps(
                {"custom_id": r.key, "method": "POST", "url": "/v1/chat/completions", "body": r.body}
            )
            + b"\n"
            for r in requests
        )
        file = self.client.files.create(file=("aptforge-batch.jsonl", lines), purpose="batch")
        batch = self.client.batches.create(
            input_file_id=file.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"created_by": "aptforge"},
        )
        return batch.id

    def poll(self, batch_id: str) -> BatchState:
        """`validating` / `in_progress` / `finalizing` ... until `completed`, `failed`, `expired`, `cancelled`."""
        status = self.client.batches.retrieve(batch_id).status
        return BatchState(status, status in ("completed", "failed", "expired", "cancelled"))

    def collect(self, batch_id: str) -> BatchResult:
        """Read the output and error files."""
        batch = self.client.batches.retrieve(batch_id)
        replies: dict[str, LLMReply] = {}
        errors: dict[str, str] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for line in self.client.files.content(file_id).text.splitlines():
                if not line.strip():
                    continue
                item = json.loads(line)
                response = item.get("response") or {}
                if response.get("status_code") == 200:
                    replies[item["custom_id"]] = reply_from_openai(response.get("body") or {}, batch=True)
                else:
                    error = (response.get("body") or {}).get("error") or item.get("error") or {}
                    errors[item["custom_id"]] = (
                        f"HTTP {response.get('status_code')}: {error.get('message', error)}"
                    )
        return BatchResult(replies, errors)

    def close(self) -> None:
        """Close the SDK client."""
        self.client.close()


class AnthropicBatches:
    """Anthropic Message Batches: create with `params` per request, stream the results."""

    provider = "anthropic"

    def __init__(self, client: anthropic.Anthropic) -> None:
        self.client = client

    def submit(self, requests: Sequence[LLMRequest]) -> str:
        """Create a message batch."""
        batch = self.client.messages.batches.create(
            requests=[{"custom_id": r.key, "params": r.body} for r in requests]
        )  # type: ignore[misc]
        return batch.id

    def poll(self, batch_id: str) -> BatchState:
        """`in_progress` / `canceling` until `ended`."""
        status = self.client.messages.batches.retrieve(batch_id).processing_status
        return BatchState(status, status == "ended")

    def collect(self, batch_id: str) -> BatchResult:
        """Stream the results (succeeded, errored, canceled, expired)."""
        replies: dict[str, LLMReply] = {}
        errors: dict[str, str] = {}
        for entry in self.client.messages.batches.results(batch_id):
            result: Any = entry.result
            if result.type == "succeeded":
                replies[entry.custom_id] = reply_from_anthropic(result.message, batch=True)
            elif result.type == "errored":
                errors[entry.custom_id] = (
                    f"errored: {getattr(getattr(result.error, 'error', None), 'message', '')}"
                )
            else:
                errors[entry.custom_id] = str(result.type)
        return BatchResult(replies, errors)

    def close(self) -> None:
        """Close the SDK client."""
        self.client.close()


class BatchRunner:
    """Runs jobs through a batch API with the shared cache and ledger (see the module docstring)."""

    def __init__(
        self,
        api: BatchAPI,
        store: ResponseStore,
        ledger: Ledger,
        *,
        poll_s: float = 30.0,
        max_wait_s: float = 86400.0,
        attempts: int = 2,
        max_batch: int = 10000,
        secrets: Sequence[str] = (),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api, self.store, self.ledger = api, store, ledger
        self.poll_s, self.max_wait_s, self.attempts, self.max_batch = poll_s, max_wait_s, attempts, max_batch
        self._secrets = [s for s in secrets if s]
        self._sleep = sleep
        self._lock = threading.Lock()
        self._reserved_here: set[str] = set()

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def run(self, jobs: Iterable[Job]) -> list[Outcome]:
        """Every job's outcome; blocks until its batches end or `max_wait_s` passes."""
        jobs = list(jobs)  # a batch is sent whole: take every job first
        tallies = [Tally() for _ in jobs]
        failures: list[LLMFailure | None] = [None] * len(jobs)
        done: dict[int, Outcome] = {}

        def fail(i: int, reason: str, detail: str, model: str) -> None:
            self.ledger.count(jobs[i].task, model, "failures")
            if reason == "no_distractors":
                self.ledger.count(jobs[i].task, model, "no_distractors")
            done[i] = tallies[i].outcome(None, reason, self._redact(detail))

        for attempt in range(1, self.attempts + 1):
            requests: dict[int, LLMRequest] = {}
            for i in range(len(jobs)):
                if i in done:
                    continue
                try:
                    requests[i] = jobs[i].request(attempt, failures[i])
                except Exception as exc:  # one item never stops the build
                    fail(i, "llm_error", f"{type(exc).__name__}: {exc}", "")
            if not requests:
                break
            if attempt > 1:
                for i, req in requests.items():
                    self.ledger.count(jobs[i].task, req.model, "retries")
            for i, (reason, detail) in self._resolve(jobs, requests, tallies).items():
                fail(i, reason, detail, requests[i].model)
            for i, req in requests.items():
                stored = self.store.get(req.key)
                if i in done or stored is None:
                    if i not in done:
                        fail(i, "llm_error", "no reply was stored for this request", req.model)
                    continue
                reply = LLMReply.from_json(stored)
                tallies[i].attempts += 1
                tallies[i].add(req, reply, self.ledger)
                try:
                    done[i] = tallies[i].outcome(accept_reply(jobs[i], req, reply, self.ledger))
                except InvalidOutput as exc:
                    failures[i] = exc
                    if attempt == self.attempts:
                        fail(i, exc.reason, exc.detail, req.model)
                except LLMFailure as exc:
                    fail(i, exc.reason, exc.detail, req.model)
        return [done[i] for i in range(len(jobs))]

    def _resolve(
        self, jobs: Sequence[Job], requests: dict[int, LLMRequest], tallies: list[Tally]
    ) -> dict[int, tuple[str, str]]:
        """Get every request's reply into the store; return the jobs that cannot have one, with why."""
        users: dict[str, list[int]] = {}
        for i, req in requests.items():
            users.setdefault(req.key, []).append(i)
        missing = {key for key in users if self.store.get(key) is None}
        for key in users.keys() - missing:
            for i in users[key]:
                self.ledger.count(jobs[i].task, requests[i].model, "cache_hits")
                tallies[i].cached += 1
        fails: dict[int, tuple[str, str]] = {}
        if not missing:
            return fails
        provider = self.api.provider
        waiting = {
            b.batch_id: b
            for b in self.store.pending_batches(provider)
            if any(e.key in missing for e in b.entries)
        }
        queued = {e.key for b in waiting.values() for e in b.entries}
        entries: list[tuple[LLMRequest, BatchEntry]] = []
        for key in sorted(missing - queued):
            req, task = requests[users[key][0]], jobs[users[key][0]].task
            try:
                reserved = self.ledger.reserve(req.model, req.est_in, req.est_out, self.ledger.batch_factor)
            except BudgetExceeded as exc:
                fails.update({i: ("no_distractors", str(exc)) for i in users[key]})
                continue
            entries.append((req, BatchEntry(key, task, req.model, reserved)))
        for start in range(0, len(entries), self.max_batch):
            chunk = entries[start : start + self.max_batch]
            try:
                batch_id = self.api.submit([r for r, _ in chunk])
            except Exception as exc:
                failure = translate_error(exc)
                for _, entry in chunk:
                    self.ledger.release(entry.reserved_usd)
                    fails.update({i: (failure.reason, failure.detail) for i in users[entry.key]})
                continue
            self.store.add_batch(batch_id, provider, [e for _, e in chunk])
            self._reserved_here.add(batch_id)
            waiting[batch_id] = PendingBatch(batch_id, provider, tuple(e for _, e in chunk))
        notes: dict[str, str] = {}
        collected: list[str] = []
        deadline = time.monotonic() + self.max_wait_s
        while waiting:
            for batch_id in list(waiting):
                try:
                    state = self.api.poll(batch_id)
                except Exception as exc:  # the SDK already retried; poll again later
                    notes[batch_id] = f"polling failed: {translate_error(exc).detail}"
                    continue
                if state.ended:
                    trouble = self._collect(waiting[batch_id], state)
                    if trouble is None:
                        collected.append(batch_id)
                        del waiting[batch_id]
                    else:
                        notes[batch_id] = f"collecting failed: {trouble}"
                        deadline = min(deadline, time.monotonic())
            if not waiting or time.monotonic() >= deadline:
                break
            self._sleep(self.poll_s)
        for batch_id, batch in waiting.items():
            why = notes.get(batch_id, "still running")
            for entry in batch.entries:
                fails.update(
                    {
                        i: ("batch_pending", f"batch {batch_id}: {why}; a later run collects it")
                        for i in users.get(entry.key, ())
                    }
                )
        errors: dict[str, str] = {}
        for batch_id in collected:
            errors.update(self.store.batch_errors(batch_id))
        for key in missing:
            if self.store.get(key) is None:
                for i in users[key]:
                    fails.setdefault(
                        i, ("llm_error", f"batch request failed: {errors.get(key, 'no result')}")
                    )
        return fails

    def _collect(self, batch: PendingBatch, state: BatchState) -> str | None:
        """Move an ended batch's replies into the store and the ledger, once; returns a failure or None."""
        with self._lock:
            if self.store.batch_status(batch.batch_id) != "submitted":
                return None  # another shard's thread collected it
            try:
                result = self.api.collect(batch.batch_id)
            except Exception as exc:  # e.g. a cut results stream: keep the batch, collect it later
                return translate_error(exc).detail
            mine = batch.batch_id in self._reserved_here
            rows, errors = [], {}
            for entry in batch.entries:
                reply = result.replies.get(entry.key)
                reserved = entry.reserved_usd if mine else 0.0
                if reply is None:
                    errors[entry.key] = result.errors.get(entry.key, f"no result (batch {state.status})")
                    self.ledger.release(reserved)
                    continue
                rows.append(
                    (entry.key, self.api.provider, entry.model, {"batch_id": batch.batch_id}, reply.to_json())
                )
                self.ledger.settle(
                    reserved,
                    entry.task,
                    entry.model,
                    reply.tokens_in,
                    reply.tokens_out,
                    self.ledger.batch_factor,
                )
            self.store.finish_batch(batch.batch_id, state.status, rows, errors)
            return None

    def close(self) -> None:
        """Close the SDK client."""
        self.api.close()


__all__ = ["AnthropicBatches", "BatchAPI", "BatchResult", "BatchRunner", "BatchState", "OpenAIBatches"]
