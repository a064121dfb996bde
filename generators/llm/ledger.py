"""Token and cost ledger of one build, with an optional budget cap.

Why: LLM distractors cost money; a build must say what it spent per task and per model, and must stop
cleanly when a budget is reached instead of overspending or crashing.

Guarantees: costs come only from the prices passed in (USD per million tokens, per model); a request
first reserves its worst case (estimated prompt tokens plus its `max_tokens`), so requests in flight
can never push the spend past the budget (up to the prompt-size estimate). A reservation that fits
only once requests in flight have settled (their real cost is far below their worst case) raises
`BudgetPending` when the caller can wait (`pending_ok`): it waits for a settlement and asks again.
Only a request that would pass the budget with nothing in flight is refused; then the budget is
marked exhausted and every later request is refused too, so the stop is clean and deterministic,
and the build has spent close to its budget (the last worst case short of it). Cache hits cost this
build nothing and are counted separately. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import NamedTuple

from schemas.report import LLMUsage, Usage


class Price(NamedTuple):
    """Price of one model in USD per million tokens."""

    input: float
    output: float


class BudgetExceeded(Exception):
    """A request would take the build past its budget (the item ends as `no_distractors`)."""


class BudgetPending(Exception):
    """A request fits the budget only if requests in flight settle below their worst case: wait, then ask again."""


class Ledger:
    """Spend, reservations and usage of one build (see the module docstring)."""

    def __init__(
        self, prices: Mapping[str, Price], budget_usd: float | None = None, batch_factor: float = 0.5
    ) -> None:
        """Start an empty ledger.

        Args:
            prices: USD per million tokens per model id.
            budget_usd: Cap on what this build may spend; None for no cap.
            batch_factor: Price multiplier of batch-API requests (both providers: half price).
        """
        self.prices = dict(prices)
        self.budget_usd = budget_usd
        self.batch_factor = batch_factor
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self.in_flight = 0
        """Reservations not yet settled or released (a count, so float drift can never fake one)."""
        self.exhausted = False
        self._usage: dict[tuple[str, str], Counter[str]] = {}
        self._lock = threading.Lock()

    def require_prices(self, model: str) -> None:
        """Refuse a budget that cannot be enforced because `model` has no price.

        Raises:
            ValueError: a budget is set and `model` has no price.
        """
        if self.budget_usd is not None and model not in self.prices:
            raise ValueError(
                f"budget_usd is set but model {model!r} has no price; add it under generator.prices"
            )

    def cost(self, model: str, tokens_in: int, tokens_out: int, factor: float = 1.0) -> float:
        """Cost of some tokens (0 for a model without a price)."""
        price = self.prices.get(model)
        if price is None:
            return 0.0
        return factor * (tokens_in * price.input + tokens_out * price.output) / 1_000_000

    def _entry(self, task: str, model: str) -> Counter[str]:
        return self._usage.setdefault((task, model), Counter())

    def reserve(
        self, model: str, tokens_in: int, tokens_out: int, factor: float = 1.0, *, pending_ok: bool = False
    ) -> float:
        """Reserve a request's worst-case cost before sending it.

        Returns:
            The amount reserved (pass it to `settle` or `release`).

        Raises:
            BudgetPending: (`pending_ok` only) it fits once requests in flight settle; ask again then.
            BudgetExceeded: the budget is exhausted or this request would exceed it.
        """
        amount = self.cost(model, tokens_in, tokens_out, factor)
        with self._lock:
            if self.budget_usd is None:
                return 0.0
            over = self.spent_usd + self.reserved_usd + amount > self.budget_usd
            if over and not self.exhausted and pending_ok and self.in_flight > 0:
                raise BudgetPending(f"${self.reserved_usd:.6f} in flight")
            if self.exhausted or over:
                self.exhausted = True
                raise BudgetExceeded(
                    f"budget of ${self.budget_usd:g} reached (spent ${self.spent_usd:.6f}, "
                    f"in flight ${self.reserved_usd:.6f}, this request up to ${amount:.6f})"
                )
            self.reserved_usd += amount
            self.in_flight += 1
            return amount

    def _unreserve(self, reserved: float) -> None:
        # called under the lock; with nothing in flight the sum is exactly zero again (no float drift)
        self.in_flight = max(0, self.in_flight - 1)
        self.reserved_usd = max(0.0, self.reserved_usd - reserved) if self.in_flight else 0.0

    def release(self, reserved: float) -> None:
        """Give back a reservation whose request failed without a reply."""
        with self._lock:
            self._unreserve(reserved)

    def settle(
        self, reserved: float, task: str, model: str, tokens_in: int, tokens_out: int, factor: float = 1.0
    ) -> float:
        """Replace a reservation by the actual cost of the reply; returns that cost."""
        cost = self.cost(model, tokens_in, tokens_out, factor)
        with self._lock:
            self._unreserve(reserved)
            self.spent_usd += cost
            self._entry(task, model).update(
                {"requests": 1, "tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost}
            )
        return cost

    def count(self, task: str, model: str, field: str, n: int = 1) -> None:
        """Count an event (`cache_hits`, `retries`, `refusals`, `failures`, `no_distractors`, `requests`)."""
        with self._lock:
            if field not in Usage.model_fields:
                raise ValueError(f"unknown usage field {field!r}")
            self._entry(task, model)[field] += n

    def report(self) -> LLMUsage:
        """Per task and model, per model, and in total, plus the budget state."""
        with self._lock:
            usage = {k: Counter(v) for k, v in self._usage.items()}
            spent, exhausted = self.spent_usd, self.exhausted
        by_model: dict[str, Counter[str]] = {}
        total: Counter[str] = Counter()
        for (_task, model), counts in sorted(usage.items()):
            by_model.setdefault(model, Counter()).update(counts)
            total.update(counts)
        by_task: dict[str, dict[str, Usage]] = {}
        for (task, model), counts in sorted(usage.items()):
            by_task.setdefault(task, {})[model] = _usage(counts)
        return LLMUsage(
            budget_usd=self.budget_usd,
            spent_usd=round(spent, 6),
            budget_exhausted=exhausted,
            priced_models=sorted(self.prices),
            unpriced_models=sorted(m for m in by_model if m not in self.prices),
            by_task=by_task,
            by_model={m: _usage(c) for m, c in sorted(by_model.items())},
            total=_usage(total),
        )


def _usage(counts: Counter[str]) -> Usage:
    """Counts as a report entry (cost rounded to micro-dollars)."""
    return Usage(**{**counts, "cost_usd": round(counts.get("cost_usd", 0.0), 6)})


__all__ = ["BudgetExceeded", "BudgetPending", "Ledger", "Price"]
