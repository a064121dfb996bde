"""Per-reviewer statistics and rejection-reason counts, from the reviews of current content.

Why: a lead wants to see who reviewed how much, how long an item takes, and whose labels agree with
the others'; a task whose rejections pile up on one reason needs a better generator or guidelines.
Guarantees: pure functions over `Review`s; adjudicators' rulings are not reviews for agreement.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from statistics import median

from annotations.agreement import label_of
from annotations.records import REASONS, Review


@dataclass(frozen=True)
class ReviewerStats:
    """One reviewer's figures."""

    reviewer: str
    reviews: int
    """Reviews of current content (adjudications excluded)."""
    accepted: int
    rejected: int
    edited: int
    median_seconds: float | None
    """Median time from opening (lease) to decision, over reviews where it is known."""
    pairs: int
    """Comparisons with another reviewer on the same item and content."""
    agreement: float | None
    """Share of those comparisons with the same label (keep / reject)."""

    def as_dict(self) -> dict[str, object]:
        """JSON-ready figures."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def reviewer_stats(reviews: Iterable[Review]) -> list[ReviewerStats]:
    """Figures per reviewer, sorted by name."""
    own: dict[str, list[Review]] = defaultdict(list)
    units: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for r in reviews:
        if r.role == "adjudicator":
            continue
        own[r.reviewer].append(r)
        units[(r.item_id, r.content_hash)][r.reviewer] = label_of(r.decision)
    out = []
    for name, mine in sorted(own.items()):
        pairs = agree = 0
        for unit in units.values():
            if name in unit:
                for other, label in unit.items():
                    if other != name:
                        pairs += 1
                        agree += label == unit[name]
        times = [r.seconds for r in mine if r.seconds is not None]
        counts = Counter(r.decision for r in mine)
        out.append(
            ReviewerStats(
                reviewer=name,
                reviews=len(mine),
                accepted=counts["accepted"],
                rejected=counts["rejected"],
                edited=counts["edited"],
                median_seconds=median(times) if times else None,
                pairs=pairs,
                agreement=agree / pairs if pairs else None,
            )
        )
    return out


def reason_counts(reviews: Iterable[Review]) -> dict[str, dict[str, int]]:
    """Per task, how often each preset rejection reason was given (every reason listed, zeros included)."""
    out: dict[str, dict[str, int]] = {}
    for r in reviews:
        counts = out.setdefault(r.task, dict.fromkeys(REASONS, 0))
        if r.decision == "rejected":
            for reason in r.reasons:
                counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(out.items()))
