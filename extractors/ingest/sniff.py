"""Route each raw record to the reader that recognises it, and turn failures into Problems.

`read_file` is the whole read stage for one file: decode, sniff (or use the reader the config
names), read; harness reports met among the inputs are handed back as verdicts, gold-answer
files (`question` + `answer`) as `FoundGold` records, and known non-trajectory artefacts
(predictions files) are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from pydantic import ValidationError

from extractors.base import Origin, ReadError
from extractors.ingest.records import Record, iter_records
from extractors.labels.gold_answers import FoundGold, parse_gold
from extractors.labels.reports import RunVerdict, parse_report
from schemas import Problem, Trajectory


class FoundVerdict(NamedTuple):
    """A harness verdict met while reading inputs."""

    verdict: RunVerdict
    origin: Origin


def _is_predictions(data: Any) -> bool:
    if isinstance(data, dict) and "model_patch" in data and "instance_id" in data and len(data) <= 4:
        return True
    if isinstance(data, dict) and "fix_patch" in data and {"org", "repo", "number"} <= set(data):
        return True  # Multi-SWE-bench `patch.jsonl` rows beside OpenHands outputs
    return (
        isinstance(data, dict)
        and bool(data)
        and all(isinstance(v, dict) and "model_patch" in v for v in list(data.values())[:5])
    )


@lru_cache(maxsize=256)
def _sniffer(cls: Any) -> Any:
    # one instance per reader class for sniffing: a sniff reads only the record, never the instance,
    # so building each reader anew for each record was wasted work
    return cls()


Sniffs = tuple[tuple[Any, Any], ...]


def sniffs_of(readers: Mapping[str, Any]) -> Sniffs:
    """(reader class, its sniff) in priority order: what `sniff_reader` tries, looked up once per file
    (a reader that cannot be built is left out: its sniff could accept nothing)."""
    found = []
    for cls in readers.values():
        try:
            found.append((cls, _sniffer(cls).sniff))
        except Exception:  # a sniff must never stop the run
            continue
    return tuple(found)


def sniff_reader(readers: Mapping[str, Any], data: Any, sniffs: Sniffs | None = None) -> Any | None:
    """The first reader (in priority order) whose sniff accepts `data` (`sniffs`: `sniffs_of(readers)`)."""
    for cls, sniff in sniffs_of(readers) if sniffs is None else sniffs:
        try:
            if sniff(data):
                return cls
        except Exception:  # a sniff must never stop the run
            continue
    return None


def read_record(
    readers: Mapping[str, Any], rec: Record, forced: str | None = None, sniffs: Sniffs | None = None
) -> Trajectory | Problem | FoundVerdict | FoundGold | list[FoundVerdict] | None:
    """Read one record; None for a skipped artefact (`sniffs`: `sniffs_of(readers)`, when known)."""
    cls = readers.get(forced) if forced else sniff_reader(readers, rec.data, sniffs)
    if cls is None:
        try:
            verdicts = [FoundVerdict(v, rec.origin) for v in parse_report(rec.data, rec.origin)]
        except Exception:  # a malformed report-like record is just not a report
            verdicts = []
        if verdicts:
            return verdicts
        if (gold := parse_gold(rec.data, rec.origin)) is not None:
            return gold
        if _is_predictions(rec.data):
            return None
        keys = ", ".join(sorted(rec.data)[:8]) if isinstance(rec.data, dict) else type(rec.data).__name__
        return Problem(
            where=str(rec.origin),
            stage="read",
            reason="unknown_format",
            detail=f"no reader recognises this record (top-level: {keys})",
        )
    try:
        return cls().read(rec.data, rec.origin)
    except ReadError as exc:
        return Problem(
            where=str(rec.origin), stage="read", reason=exc.reason, detail=f"{cls.name}: {exc.detail}"
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return Problem(
            where=str(rec.origin),
            stage="read",
            reason="wrong_type",
            detail=f"{cls.name}: {loc}: {first['msg']}",
        )
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        return Problem(
            where=str(rec.origin),
            stage="read",
            reason="malformed_record",
            detail=f"{cls.name}: {type(exc).__name__}: {exc}",
        )
    except Exception as exc:  # anything else a reader trips on (RecursionError...) is quarantined too
        return Problem(
            where=str(rec.origin),
            stage="read",
            reason="reader_error",
            detail=f"{cls.name}: {type(exc).__name__}: {exc}",
        )


def read_file(
    readers: Mapping[str, Any], file: str, forced: str | None = None, root: str | None = None
) -> Iterator[Trajectory | Problem | FoundVerdict | FoundGold]:
    """Read every record of one file (`root`: the input folder it was found under, for stable ids)."""
    sniffs = None if forced else sniffs_of(readers)
    for rec in iter_records(file, root):
        if isinstance(rec, Problem):
            yield rec
            continue
        out = read_record(readers, rec, forced, sniffs)
        if out is None:
            continue
        if isinstance(out, list):
            yield from out
        else:
            yield out
