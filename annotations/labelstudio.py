"""Label Studio interchange: export queue items as Label Studio JSON tasks, import its export as decisions.

Why: teams that already review in Label Studio can do aptforge's verification there. Export writes one
task per item (readable plain-text context, the options with the gold marked, and the item id and content
hash the annotator will see) plus a labeling config whose controls are `decision` (accept / reject /
edit), `note` and `corrected`. Import reads Label Studio's JSON export and applies each annotation
through the queue, checked against the exported content hash: an item that changed since the export is
reported as stale, never decided blindly. Guarantees: bad input yields a `Problem` naming the file, the
line of the task and the reason; re-importing the same export changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotations.context import as_text, field_views
from annotations.queue import Queue
from annotations.records import DECISION_ALIASES, Conflict, QueueError, Seen
from annotations.rules import revised
from schemas import LETTERS, Problem, Question, content_hash

STAGE = "review_import"

#: The Label Studio labeling config matching `export_tasks` (variables are the task `data` keys).
LABEL_CONFIG = """<View>
  <Header value="$title"/>
  <Text name="context" value="$context"/>
  <Header value="Options (the gold is marked)"/>
  <Text name="options" value="$options"/>
  <Choices name="decision" toName="context" choice="single-radio" required="true" showInline="true">
    <Choice value="accept" hotkey="a"/>
    <Choice value="reject" hotkey="r"/>
    <Choice value="edit" hotkey="e"/>
  </Choices>
  <TextArea name="note" toName="context" placeholder="Note (say why when you reject)" rows="2" maxSubmissions="1"/>
  <TextArea name="corrected" toName="context" placeholder="With edit: the corrected gold answer" rows="3" maxSubmissions="1"/>
</View>
"""


def options_text(question: Question) -> str:
    """The options as `(A) ...` lines with the gold marked, or the gold answer of a completion item."""
    if question.form != "mcq":
        return f"GOLD ANSWER:\n{question.gold}"
    return "\n".join(
        f"({LETTERS[i]}) {'[GOLD] ' if i == question.gold_index else ''}{opt}"
        for i, opt in enumerate(question.options)
    )


def export_tasks(queue: Queue, *, status: str = "pending", task: str | None = None) -> list[dict[str, Any]]:
    """Label Studio tasks (`[{"data": {...}}]`) for the queue's items with `status` (pending by default)."""
    tasks = []
    offset = 0
    while rows := queue.items(status=status, task=task, limit=500, offset=offset):
        offset += len(rows)
        for row in rows:
            q = queue.get(row.item_id).question
            tasks.append(
                {
                    "data": {
                        "item_id": row.item_id,
                        "content_hash": row.content_hash,
                        "scenario": row.scenario,
                        "task": row.task,
                        "source": row.source,
                        "form": q.form,
                        "title": f"{row.scenario} / {row.task} / {row.instance_id or row.item_id} ({row.source})",
                        "context": as_text(field_views(q.fields)),
                        "options": options_text(q),
                        "gold": q.gold,
                    }
                }
            )
    return tasks


@dataclass(frozen=True)
class Annotation:
    """One Label Studio annotation, located in the export file."""

    where: str
    item_id: str
    content_hash: str
    reviewer: str
    decision: str
    note: str
    corrected: str
    at: str | None


@dataclass
class ImportResult:
    """What an import did."""

    applied: int = 0
    unchanged: int = 0
    problems: list[Problem] = field(default_factory=list)


def _tasks_with_lines(text: str, where: str) -> Iterator[tuple[int, Any] | Problem]:
    """Decode a top-level JSON array element by element, so each task knows the line it starts on."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if not text.startswith("[", pos):
        yield Problem(
            where=f"{where}:1",
            stage=STAGE,
            reason="not_a_task_list",
            detail="a Label Studio JSON export is an array of tasks",
        )
        return
    pos += 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            yield Problem(where=f"{where}:{exc.lineno}", stage=STAGE, reason="invalid_json", detail=exc.msg)
            return
        yield line, value


def _reviewer(completed_by: Any, names: Mapping[str, str]) -> str:
    if isinstance(completed_by, dict):
        key = str(completed_by.get("email") or completed_by.get("id") or "")
    else:
        key = str(completed_by) if completed_by is not None else ""
    return names.get(key) or (key if "@" in key else f"labelstudio-{key or 'unknown'}")


def _result_values(result: Any) -> dict[str, str]:
    values: dict[str, str] = {}
    for r in result if isinstance(result, list) else []:
        value = r.get("value") if isinstance(r, dict) else None
        if not isinstance(value, dict):
            continue
        picked = value.get("choices") or value.get("text") or []
        values[str(r.get("from_name"))] = (
            "\n".join(str(v) for v in picked) if isinstance(picked, list) else str(picked)
        )
    return values


def read_export(
    path: str | Path, reviewers: Mapping[str, str] | None = None
) -> Iterator[Annotation | Problem]:
    """Every non-cancelled annotation of a Label Studio JSON export, or a Problem per bad task."""
    path, names = Path(path), reviewers or {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield Problem(where=str(path), stage=STAGE, reason="unreadable_file", detail=str(exc))
        return
    for entry in _tasks_with_lines(text, str(path)):
        if isinstance(entry, Problem):
            yield entry
            continue
        line, task = entry
        where = f"{path}:{line}"
        data = task.get("data") if isinstance(task, dict) else None
        if not isinstance(data, dict) or not data.get("item_id") or not data.get("content_hash"):
            yield Problem(
                where=where,
                stage=STAGE,
                reason="not_an_aptforge_task",
                detail="task data lacks item_id / content_hash (was it exported by aptforge?)",
            )
            continue
        for ann in task.get("annotations") or []:
            if not isinstance(ann, dict) or ann.get("was_cancelled"):
                continue
            values = _result_values(ann.get("result"))
            yield Annotation(
                where,
                str(data["item_id"]),
                str(data["content_hash"]),
                _reviewer(ann.get("completed_by"), names),
                values.get("decision", "").strip().lower(),
                values.get("note", "").strip(),
                values.get("corrected", "").strip(),
                ann.get("updated_at") or ann.get("created_at"),
            )


def import_export(queue: Queue, path: str | Path, reviewers: Mapping[str, str] | None = None) -> ImportResult:
    """Apply a Label Studio export to the queue (oldest annotation first); returns counts and Problems."""
    result = ImportResult()
    annotations = []
    for out in read_export(path, reviewers):
        (result.problems if isinstance(out, Problem) else annotations).append(out)
    for a in sorted(annotations, key=lambda a: a.at or ""):
        try:
            applied = _apply(queue, a)
        except Conflict as exc:
            result.problems.append(
                Problem(where=a.where, stage=STAGE, reason="stale_content", detail=str(exc))
            )
            continue
        except QueueError as exc:
            result.problems.append(Problem(where=a.where, stage=STAGE, reason=exc.reason, detail=str(exc)))
            continue
        if applied:
            result.applied += 1
        else:
            result.unchanged += 1
    return result


def _apply(queue: Queue, a: Annotation) -> bool:
    """Apply one annotation; False when the queue already holds exactly this review."""
    view = queue.get(a.item_id)
    if a.decision in ("accept", "reject"):
        mine = view.review_by(a.reviewer)
        same = mine is not None and mine.decision == DECISION_ALIASES[a.decision] and mine.note == a.note
        if same and view.row.content_hash == a.content_hash:
            return False
        queue.decide(
            a.item_id,
            a.reviewer,
            a.decision,
            seen=Seen(a.content_hash),
            note=a.note,
            origin="labelstudio",
            at=a.at,
        )
        return True
    if a.decision != "edit":
        raise QueueError(
            "no_decision" if not a.decision else "bad_decision",
            f"annotation by {a.reviewer} has decision {a.decision!r}; expected accept, reject or edit",
        )
    if not a.corrected:
        raise QueueError(
            "edit_without_text", f"annotation by {a.reviewer} chose edit but left `corrected` empty"
        )
    base = queue.question_at(a.item_id, a.content_hash)
    if base is None:
        raise QueueError("unknown_version", f"item {a.item_id} never had content {a.content_hash}")
    if base.form == "mcq":
        opts = list(base.options)
        opts[base.gold_index or 0] = a.corrected
        edited = revised(base, a.reviewer, options=opts)
    else:
        edited = revised(base, a.reviewer, gold=a.corrected)
    mine = view.review_by(a.reviewer)
    if mine and mine.decision == "edited" and view.row.content_hash == content_hash(edited):
        return False
    queue.edit(
        a.item_id,
        a.reviewer,
        edited,
        seen=Seen(a.content_hash),
        note=a.note,
        origin="labelstudio",
        at=a.at,
    )
    return True
