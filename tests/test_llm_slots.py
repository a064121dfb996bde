"""OrderedSlots: the engine's concurrency limit serves earlier shards (lower rank) first, FIFO within one."""

from __future__ import annotations

import asyncio

from generators.llm.engine import OrderedSlots


def test_waiters_are_let_in_by_rank_then_arrival() -> None:
    async def main() -> list[str]:
        slots = OrderedSlots(1)
        order: list[str] = []
        await slots.acquire()

        async def waiter(name: str, rank: int) -> None:
            async with slots.held(rank):
                order.append(name)
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(waiter(n, r)) for n, r in (("c", 3), ("a1", 1), ("b", 2), ("a2", 1))]
        await asyncio.sleep(0)  # all four queue behind the held slot
        slots.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == ["a1", "a2", "b", "c"]


def test_never_more_holders_than_slots_and_a_cancelled_waiter_leaks_nothing() -> None:
    async def main() -> tuple[int, int]:
        slots = OrderedSlots(2)
        held = peak = 0

        async def worker(rank: int) -> None:
            nonlocal held, peak
            async with slots.held(rank):
                held += 1
                peak = max(peak, held)
                await asyncio.sleep(0.001)
                held -= 1

        await slots.acquire()
        await slots.acquire()
        doomed = asyncio.create_task(slots.acquire(0))
        await asyncio.sleep(0)
        doomed.cancel()  # queued, then cancelled: must not take a slot with it
        await asyncio.gather(doomed, return_exceptions=True)
        slots.release()
        slots.release()
        await asyncio.gather(*(worker(i % 3) for i in range(20)))
        # both slots are free again: two acquisitions succeed at once
        await asyncio.wait_for(asyncio.gather(slots.acquire(5), slots.acquire(5)), timeout=1)
        return peak, held

    assert asyncio.run(main()) == (2, 0)
