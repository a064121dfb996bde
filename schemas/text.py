"""The one text-cutting rule shared by extractors (observations in a context) and generators (prompts).

Lives in the bottom layer so both sides use the same omission marker without importing each other.
"""

from __future__ import annotations


def truncate_middle(text: str, limit: int, *, head: int | None = None) -> str:
    """Keep `head` characters (default `limit // 2`) and the rest of the budget from the end of `text`.

    The omitted middle becomes `[... N characters omitted ...]`. With the default the head and the tail
    are each `limit // 2` characters; with an explicit `head` the tail is `limit - head`.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    start = limit // 2 if head is None else head
    end = start if head is None else limit - head
    return f"{text[:start]}\n[... {len(text) - start - end} characters omitted ...]\n{text[-end:]}"
