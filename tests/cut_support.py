"""Options cut with an ellipsis: what the tests over the real runs' builds look for.

An option is cut when it carries a truncation marker of ours (`[... N characters omitted ...]`,
`[... truncated ...]`) or an ellipsis (`...`, `…`) that the runs themselves never wrote: the
text just before it and the ellipsis do not occur in the runs' own texts (a doctest's `...`, a
GAIA question's `page 245. ... brush up`, a script's `print("Working...")` do). Options that are
JSON step objects are read as the strings they hold (the run wrote `"Working..."`, not its
escaped form).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

ELLIPSIS = re.compile(r"\.\.\.|…")
MARKERS = ("characters omitted ...]", "[... truncated ...]")
#: Characters before an ellipsis that must occur with it in the runs' texts for it to be theirs.
LEAD = 24


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value (dict keys skipped)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def squash(text: str) -> str:
    return " ".join(text.split())


def _texts(option: str) -> list[str]:
    if option.lstrip().startswith("{"):
        try:
            return list(strings(json.loads(option)))
        except ValueError:
            pass
    return [option]


def cut_options(options: Iterable[str], sources: Iterable[str]) -> list[str]:
    """The options of `options` cut with an ellipsis the runs' texts (`sources`) do not hold."""
    source = "\n".join(squash(s) for s in sources)
    out = []
    for option in options:
        if any(m in option for m in MARKERS):
            out.append(option)
            continue
        for text in map(squash, _texts(option)):
            if any(text[max(0, m.start() - LEAD) : m.end()] not in source for m in ELLIPSIS.finditer(text)):
                out.append(option)
                break
    return out


def run_texts(runs: Iterable[Any]) -> list[str]:
    """Every string of the runs (pydantic trajectories), the texts an option may quote."""
    return [s for run in runs for s in strings(run.model_dump(mode="json"))]
