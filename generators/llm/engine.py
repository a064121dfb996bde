"""The LLM layer every LLM generator shares: adapters on the official SDKs, limiter, cache, ledger, retries.

Why: distractor generation must be fast (async, many requests in flight), cheap (a request that
completed is never paid twice) and safe (bounded concurrency and rates, a budget cap, no crash on
one bad reply). The provider differences stay in two thin adapters over `openai.AsyncOpenAI` and
`anthropic.AsyncAnthropic`; everything else is provider-agnostic.

Guarantees:
- A request is identified by the SHA-256 of its canonical JSON (provider + body, keys sorted); a
  stored reply is reused, so a rerun or a resumed run makes no request that had completed. The
  reply is committed (on a writer thread, so a slow disk never stalls the event loop) before the
  request's concurrency slot is released.
- HTTP-level retries (408/409/429/5xx, connection errors, timeouts) are the SDK's, honouring
  `retry-after-ms`/`retry-after`. On top, one tenacity retry for output that does not parse or
  validate, is cut at the token limit, or arrives as a malformed JSON body (the SDKs raise a bare
  `json.JSONDecodeError` for that and do not retry it). A refusal is final.
- Every job ends as an `Outcome`: a value, or a snake_case reason with a detail from which known
  secrets are redacted. Authentication, permission and unknown-model errors stop the engine: later
  jobs fail at once with the same reason and make no request.
- The engine owns one event loop in a daemon thread; `run()` may be called from any number of
  threads at once (shards), all sharing the loop, the HTTP connection pool, the limiter and ledger.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, NamedTuple, Protocol

import orjson
from aiolimiter import AsyncLimiter
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from generators.llm.ledger import BudgetExceeded, BudgetPending, Ledger
from generators.llm.store import ResponseStore


class LLMRequest(NamedTuple):
    """One canonical request: the provider's body, its key and its worst-case size."""

    provider: str
    """`openai` (also any OpenAI-compatible server) or `anthropic`."""
    model: str
    """Model id requested."""
    body: dict[str, Any]
    """Keyword arguments of `chat.completions.create` / `messages.create` (also the batch body)."""
    key: str
    """SHA-256 of the canonical JSON of provider and body."""
    est_in: int
    """Prompt tokens, estimated high (serialised bytes / 3)."""
    est_out: int
    """The request's output token limit."""


def make_request(provider: str, body: dict[str, Any]) -> LLMRequest:
    """Key and size a request body (pure)."""
    blob = orjson.dumps({"provider": provider, "body": body}, option=orjson.OPT_SORT_KEYS)
    est_out = int(body.get("max_tokens") or body.get("max_completion_tokens") or 4096)
    return LLMRequest(
        provider,
        str(body.get("model", "")),
        body,
        hashlib.sha256(blob).hexdigest(),
        len(blob) // 3 + 1,
        est_out,
    )


class LLMReply(NamedTuple):
    """A provider reply reduced to what generation needs (also the cached form)."""

    text: str | None
    """Assistant text, or a forced tool's arguments as JSON text."""
    refusal: str | None
    """Refusal text when the model declined, else None."""
    finish: str
    """`stop`, `length` (cut at the token limit), `refusal`, or the provider's own value."""
    tokens_in: int
    tokens_out: int
    model: str
    """Model id the provider reports (may be a dated snapshot of the one requested)."""
    batch: bool = False
    """Answered through a batch API (priced with the batch factor)."""
    logprobs: dict[str, Any] | None = None
    """A text completion's `logprobs` (tokens, token_logprobs, top_logprobs, text_offset), if asked for."""

    def to_json(self) -> dict[str, Any]:
        """The cached form."""
        return self._asdict()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LLMReply:
        """Rebuild a cached reply."""
        return cls(**{k: data[k] for k in cls._fields if k in data})


class LLMFailure(Exception):
    """A request or reply that ends its item as a Problem (`reason` is the Problem reason)."""

    def __init__(self, reason: str, detail: str, *, fatal: bool = False) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.fatal = reason, detail, fatal


class InvalidOutput(LLMFailure):
    """Output that may succeed on a second attempt: unparseable, invalid, cut, or a malformed body."""


class Checked(NamedTuple):
    """A generator's verdict on a reply: the value, or why there is none."""

    value: Any
    reason: str = ""


class Job(NamedTuple):
    """One item's generation: how to build each attempt's request, how to check a reply."""

    where: str
    """Item id (the Problem's `where`)."""
    task: str
    """Task name (ledger key)."""
    request: Callable[[int, LLMFailure | None], LLMRequest]
    """`(attempt, previous failure) -> request`; attempt 1 has no previous failure."""
    check: Callable[[LLMReply], Checked]
    """Parse and validate a reply (pure)."""
    truncation_ok: bool = False
    """A reply cut at the token limit is an answer (base-model scoring caps output on purpose)."""


class Outcome(NamedTuple):
    """How a job ended, with what its attempts cost (cached attempts at their original cost)."""

    value: Any
    reason: str
    detail: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    model: str
    attempts: int
    cached: int


class LLMClient(Protocol):
    """One provider endpoint: send a request body, get a reply (SDK errors translated)."""

    provider: str

    async def send(self, body: dict[str, Any]) -> LLMReply:
        """Send one request (the SDK retries HTTP failures); raise `LLMFailure` when it gives up."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        ...


class OrderedSlots:
    """At most `n` holders at once; waiters are let in lowest `(rank, arrival)` first.

    With one rank per `LLMEngine.run()` call (a shard), the shard that started first gets every free
    slot before later ones (its re-asks too), so shards finish one after another instead of all at
    once: while a finished shard's thread prepares the next one, the others keep the pool full.
    """

    def __init__(self, n: int) -> None:
        self._free = n
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    async def acquire(self, rank: int = 0) -> None:
        """Wait for a slot."""
        if self._free > 0:  # (only ever so with no one waiting: a release hands a slot to a waiter first)
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (rank, next(self._arrivals), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted as it was cancelled: hand the slot on
            raise

    def release(self) -> None:
        """Give a slot back: to the first waiter by `(rank, arrival)`, else to the free count."""
        while self._waiters:
            future = heapq.heappop(self._waiters)[2]
            if not future.done():  # skip waiters cancelled while queued
                future.set_result(None)
                return
        self._free += 1

    @asynccontextmanager
    async def held(self, rank: int = 0) -> AsyncIterator[None]:
        """Hold one slot for the block."""
        await self.acquire(rank)
        try:
            yield
        finally:
            self.release()


class Limiter:
    """Per-provider limits: requests in flight, requests per minute, tokens per minute."""

    def __init__(
        self, max_concurrency: int = 16, rpm: int | None = None, tpm: int | None = None, period: float = 60.0
    ) -> None:
        """Limits; `rpm` and `tpm` are leaky buckets of that capacity refilled over `period` seconds."""
        self.max_concurrency, self.rpm, self.tpm, self.period = max_concurrency, rpm, tpm, period
        self._sem: OrderedSlots | None = None
        self._rpm: AsyncLimiter | None = None
        self._tpm: AsyncLimiter | None = None

    @asynccontextmanager
    async def slot(self, tokens: int, rank: int = 0) -> AsyncIterator[None]:
        """Hold one concurrency slot (lower `rank` first), after the rate limiters let the request go."""
        if self._sem is None:  # built on first use, inside the engine's loop
            self._sem = OrderedSlots(self.max_concurrency)
            self._rpm = AsyncLimiter(self.rpm, self.period) if self.rpm else None
            self._tpm = AsyncLimiter(self.tpm, self.period) if self.tpm else None
        async with self._sem.held(rank):
            if self._rpm is not None:
                await self._rpm.acquire()
            if self._tpm is not None and self.tpm:
                await self._tpm.acquire(min(tokens, self.tpm))
            yield


class Tally:
    """What one job's attempts cost so far (cached replies at their original cost)."""

    __slots__ = ("attempts", "cached", "cost", "model", "tokens_in", "tokens_out")

    def __init__(self) -> None:
        self.tokens_in = self.tokens_out = self.attempts = self.cached = 0
        self.cost = 0.0
        self.model = ""

    def add(self, request: LLMRequest, reply: LLMReply, ledger: Ledger) -> None:
        """Count one reply."""
        factor = ledger.batch_factor if reply.batch else 1.0
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        self.cost += ledger.cost(request.model, reply.tokens_in, reply.tokens_out, factor)
        self.model = reply.model or request.model

    def outcome(self, value: Any, reason: str = "", detail: str = "") -> Outcome:
        """The job's end."""
        return Outcome(
            value,
            reason,
            detail,
            self.tokens_in,
            self.tokens_out,
            self.cost,
            self.model,
            self.attempts,
            self.cached,
        )


def accept_reply(job: Job, request: LLMRequest, reply: LLMReply, ledger: Ledger) -> Any:
    """The value of a reply, or the failure it is (refusal: final; cut or invalid: retryable).

    Raises:
        LLMFailure: `llm_refused`.
        InvalidOutput: `llm_truncated_output` or `llm_invalid_output`.
    """
    if reply.refusal is not None:
        ledger.count(job.task, request.model, "refusals")
        raise LLMFailure("llm_refused", f"the model refused: {reply.refusal[:300]}")
    if reply.finish == "length" and not job.truncation_ok:
        raise InvalidOutput(
            "llm_truncated_output", f"the reply was cut at the output limit of {request.est_out} tokens"
        )
    checked = job.check(reply)
    if checked.value is None:
        raise InvalidOutput("llm_invalid_output", checked.reason or "the reply did not validate")
    return checked.value


class LLMEngine:
    """Runs jobs through cache, ledger, limiter and client (see the module docstring)."""

    def __init__(
        self,
        client: LLMClient,
        store: ResponseStore,
        ledger: Ledger,
        limiter: Limiter,
        *,
        attempts: int = 2,
        secrets: Sequence[str] = (),
    ) -> None:
        """Wire the parts; nothing starts until the first `run()`.

        Args:
            client: Provider adapter (owned: closed by `close()`).
            store: Response cache (not owned).
            ledger: Token and cost ledger of the build (not owned).
            limiter: Concurrency and rate limits of the provider.
            attempts: Attempts per job for invalid output (2 = one tenacity retry).
            secrets: Strings to redact from every Problem detail (API keys).
        """
        self.client, self.store, self.ledger, self.limiter = client, store, ledger, limiter
        self.attempts = attempts
        self._secrets = [s for s in secrets if s]
        self._fatal: LLMFailure | None = None
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="aptforge-llm-store")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._budget_changed: asyncio.Event | None = None  # set when a reservation settles or is released
        self._runs = itertools.count()  # one rank per run() call: earlier shards are served first

    def redact(self, text: str) -> str:
        """`text` with every known secret replaced by `***`."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="aptforge-llm", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, jobs: Iterable[Job]) -> list[Outcome]:
        """Run jobs concurrently on the engine's loop; blocks; callable from any thread.

        Each job is handed to the loop as soon as `jobs` yields it, so a shard's first requests are
        in flight while the caller still builds its later ones (prompt rendering is not a barrier).
        """
        if isinstance(jobs, Sequence) and not jobs:
            return []
        loop = self._ensure_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError("LLMEngine.run() called from its own loop; await arun() instead")
        rank = next(self._runs)
        futures = [asyncio.run_coroutine_threadsafe(self._job(job, rank), loop) for job in jobs]
        return [future.result() for future in futures]

    async def arun(self, jobs: Sequence[Job]) -> list[Outcome]:
        """Run jobs concurrently on the current loop (their requests before those of later calls)."""
        rank = next(self._runs)
        return list(await asyncio.gather(*(self._job(job, rank) for job in jobs)))

    async def _job(self, job: Job, rank: int = 0) -> Outcome:
        acc = Tally()
        failure: LLMFailure | None = None
        model = ""
        invalid: list[str] = []  # keys of replies that did not validate
        try:
            retrying = AsyncRetrying(
                stop=stop_after_attempt(self.attempts),
                retry=retry_if_exception_type(InvalidOutput),
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    request = job.request(attempt.retry_state.attempt_number, failure)
                    model = request.model
                    if attempt.retry_state.attempt_number > 1:
                        self.ledger.count(job.task, model, "retries")
                    try:
                        reply = await self._call(job.task, request, acc, rank)
                        value = accept_reply(job, request, reply, self.ledger)
                    except InvalidOutput as exc:
                        failure = exc
                        invalid.append(request.key)
                        raise
            return acc.outcome(value)
        except BudgetExceeded as exc:
            self.ledger.count(job.task, model, "no_distractors")
            self.ledger.count(job.task, model, "failures")
            return acc.outcome(None, "no_distractors", str(exc))
        except LLMFailure as exc:
            self.ledger.count(job.task, model, "failures")
            if isinstance(exc, InvalidOutput) and invalid:  # not a final answer: the next run asks again
                await asyncio.get_running_loop().run_in_executor(
                    self._writer, partial(self.store.forget, invalid)
                )
            return acc.outcome(None, exc.reason, self.redact(exc.detail))
        except Exception as exc:  # one item never stops the build
            self.ledger.count(job.task, model, "failures")
            return acc.outcome(None, "llm_error", self.redact(f"{type(exc).__name__}: {exc}"))

    async def _call(self, task: str, request: LLMRequest, acc: Tally, rank: int = 0) -> LLMReply:
        acc.attempts += 1
        if self._fatal is not None:
            raise LLMFailure(self._fatal.reason, f"not sent: {self._fatal.detail}")
        stored = self.store.get(request.key)
        if stored is not None:
            reply = LLMReply.from_json(stored)
            self.ledger.count(task, request.model, "cache_hits")
            acc.cached += 1
        else:
            # Fatal state and budget are checked once a slot is held, so queued jobs see the latest
            # state and at most `max_concurrency` reservations are outstanding.
            async with self.limiter.slot(request.est_in + request.est_out, rank):
                if self._fatal is not None:
                    raise LLMFailure(self._fatal.reason, f"not sent: {self._fatal.detail}")
                reserved = await self._reserve(request)
                try:
                    reply = await self.client.send(request.body)
                except LLMFailure as exc:
                    self._budget_settled(self.ledger.release, reserved)
                    self.ledger.count(task, request.model, "requests")
                    if exc.fatal:
                        self._fatal = exc
                    raise
                except BaseException:
                    self._budget_settled(self.ledger.release, reserved)
                    raise
                self._budget_settled(
                    self.ledger.settle, reserved, task, request.model, reply.tokens_in, reply.tokens_out
                )  # paid, whatever follows
                # Committed before the slot is released: a kill never loses a completed reply.
                await asyncio.get_running_loop().run_in_executor(
                    self._writer,
                    partial(
                        self.store.put,
                        request.key,
                        request.provider,
                        request.model,
                        {"provider": request.provider, "body": request.body},
                        reply.to_json(),
                    ),
                )
        acc.add(request, reply, self.ledger)
        return reply

    async def _reserve(self, request: LLMRequest) -> float:
        """Reserve the request's worst case; while it fits only once requests in flight settle, wait for
        each settlement and ask again (refused only if it would pass the budget with nothing in flight)."""
        while True:
            if self._budget_changed is None:
                self._budget_changed = asyncio.Event()
            changed = self._budget_changed  # taken before asking, so no settlement is missed
            try:
                return self.ledger.reserve(request.model, request.est_in, request.est_out, pending_ok=True)
            except BudgetPending:
                await changed.wait()

    def _budget_settled(self, settle: Callable[..., Any], *args: Any) -> None:
        settle(*args)
        if self._budget_changed is not None:
            self._budget_changed.set()
            self._budget_changed = None

    def close(self) -> None:
        """Close the client and stop the loop and writer threads (idempotent)."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        self._writer.shutdown(wait=True)
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.client.aclose(), loop).result(timeout=30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=30)
            loop.close()


__all__ = [
    "Checked",
    "InvalidOutput",
    "Job",
    "LLMClient",
    "LLMEngine",
    "LLMFailure",
    "LLMReply",
    "LLMRequest",
    "Limiter",
    "OrderedSlots",
    "Outcome",
    "Tally",
    "accept_reply",
    "make_request",
]
