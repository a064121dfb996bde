"""Inter-reviewer agreement per task: Cohen's kappa, Fleiss' kappa, Krippendorff's alpha (nominal).

Why: several reviewers per item are only useful if we can say how much they agree; a task whose
reviewers disagree needs clearer guidelines before its items are trusted. Guarantees: pure functions
over labels, no I/O; each coefficient follows its textbook definition (tests check published worked
examples) and returns None where it is undefined (fewer than two rated units, or no variation at all:
0/0), never a made-up number. A review counts as `keep` (accepted or edited) or `reject`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from statistics import mean

from annotations.records import Review


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters who labelled the same units (`a[i]`, `b[i]` = unit i).

    kappa = (p_o - p_e) / (1 - p_e), with p_o the observed agreement and p_e the agreement expected
    from each rater's own label frequencies. None for no units or when p_e == 1.
    """
    if len(a) != len(b):
        raise ValueError(f"both raters must label the same units ({len(a)} != {len(b)})")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return None if p_e == 1 else (p_o - p_e) / (1 - p_e)


def fleiss_kappa(units: Sequence[Mapping[Hashable, int]]) -> float | None:
    """Fleiss' kappa: each unit maps category -> how many raters chose it; every unit has the same total n.

    P_i = (sum_j n_ij^2 - n) / (n (n - 1)); kappa = (mean P_i - P_e) / (1 - P_e), P_e = sum_j p_j^2.
    None for no units, n < 2, or P_e == 1.
    """
    if not units:
        return None
    totals = {sum(u.values()) for u in units}
    if len(totals) != 1:
        raise ValueError(f"Fleiss' kappa needs the same number of ratings per unit, got {sorted(totals)}")
    n = totals.pop()
    if n < 2:
        return None
    p_bar = mean((sum(c * c for c in u.values()) - n) / (n * (n - 1)) for u in units)
    column: Counter[Hashable] = Counter()
    for u in units:
        column.update(u)
    p_e = sum((c / (len(units) * n)) ** 2 for c in column.values())
    return None if p_e == 1 else (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha(units: Iterable[Sequence[Hashable]]) -> float | None:
    """Krippendorff's alpha for nominal data; each unit lists the values its raters gave (any number).

    Units with fewer than two values are not pairable and are ignored. From the coincidence matrix
    o_ck = sum_u (pairs (c, k) in u) / (m_u - 1): alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c n_k.
    None when no unit is pairable or all pairable values are equal (expected disagreement 0).
    """
    observed = 0.0
    n_c: Counter[Hashable] = Counter()
    for values in units:
        m = len(values)
        if m < 2:
            continue
        counts = Counter(values)
        n_c.update(counts)
        observed += sum(counts[c] * counts[k] for c in counts for k in counts if c != k) / (m - 1)
    n = sum(n_c.values())
    expected = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k)
    if n == 0 or expected == 0:
        return None
    return 1 - (n - 1) * observed / expected


def label_of(decision: str) -> str:
    """The agreement label of a decision: `keep` for accepted/edited, `reject` for rejected."""
    return "reject" if decision == "rejected" else "keep"


@dataclass(frozen=True)
class TaskAgreement:
    """Agreement figures of one task over items with at least two reviews of the same content."""

    task: str
    items: int
    """Items with two or more reviews of their current content."""
    reviewers: int
    """Distinct reviewers among those items."""
    ratings: int
    """Reviews among those items."""
    percent_agreement: float | None
    """Share of agreeing reviewer pairs, over all pairs within items."""
    cohen_kappa: float | None
    """Two reviewers: Cohen's kappa on their shared items; more: the mean over pairs (Light's kappa)."""
    fleiss_kappa: float | None
    """Fleiss' kappa over the items that have the most common number of reviews (`fleiss_items`)."""
    fleiss_items: int
    krippendorff_alpha: float | None
    """Krippendorff's alpha (nominal), every item with two or more reviews."""

    def as_dict(self) -> dict[str, object]:
        """JSON-ready figures, rounded to 4 places."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def task_agreement(reviews: Iterable[Review]) -> dict[str, TaskAgreement]:
    """Agreement per task from reviews of current content (several per item when reviewers overlap)."""
    by_task: dict[str, dict[tuple[str, str], dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for r in reviews:
        if r.role != "adjudicator":  # a ruling settles a dispute; it is not an independent rating
            by_task[r.task][(r.item_id, r.content_hash)][r.reviewer] = label_of(r.decision)
    return {task: _one_task(task, units) for task, units in sorted(by_task.items())}


def _one_task(task: str, units: Mapping[tuple[str, str], Mapping[str, str]]) -> TaskAgreement:
    rated = [u for u in units.values() if len(u) >= 2]
    reviewers = sorted({name for u in rated for name in u})
    pairs = [(u[x], u[y]) for u in rated for x, y in combinations(sorted(u), 2)]
    percent = sum(a == b for a, b in pairs) / len(pairs) if pairs else None
    kappas = []
    for x, y in combinations(reviewers, 2):
        shared = [u for u in rated if x in u and y in u]
        if len(shared) >= 2:
            k = cohen_kappa([u[x] for u in shared], [u[y] for u in shared])
            if k is not None:
                kappas.append(k)
    sizes = Counter(len(u) for u in rated)
    modal = max(sizes, key=lambda s: (sizes[s], s)) if sizes else 0
    fleiss_units = [Counter(u.values()) for u in rated if len(u) == modal]
    return TaskAgreement(
        task=task,
        items=len(rated),
        reviewers=len(reviewers),
        ratings=sum(len(u) for u in rated),
        percent_agreement=percent,
        cohen_kappa=mean(kappas) if kappas else None,
        fleiss_kappa=fleiss_kappa(fleiss_units) if len(fleiss_units) >= 2 else None,
        fleiss_items=len(fleiss_units),
        krippendorff_alpha=krippendorff_alpha([list(u.values()) for u in rated]) if len(rated) >= 2 else None,
    )
