"""aptforge's shared vocabulary: pydantic models (frozen, no I/O) and explicit Arrow schemas.

The bottom layer: everything else imports from here, and this package imports nothing else
from aptforge.
"""

from schemas.ids import content_id, uuid_for
from schemas.items import Item, Status, Verdict
from schemas.problems import Problem
from schemas.provenance import Provenance
from schemas.questions import LETTERS, Distractor, Question
from schemas.rows import TASKS, TaskSpec, candidate_schema, content_hash, question_row, rows_table, task_spec
from schemas.steps import CANDIDATE_SOURCES, Candidate, Form, GoldStep, candidate_source
from schemas.trajectory import Action, Label, Outcome, Source, Step, Trajectory

__all__ = [
    "CANDIDATE_SOURCES",
    "LETTERS",
    "TASKS",
    "Action",
    "Candidate",
    "Distractor",
    "Form",
    "GoldStep",
    "Item",
    "Label",
    "Outcome",
    "Problem",
    "Provenance",
    "Question",
    "Source",
    "Status",
    "Step",
    "TaskSpec",
    "Trajectory",
    "Verdict",
    "candidate_schema",
    "candidate_source",
    "content_hash",
    "content_id",
    "question_row",
    "rows_table",
    "task_spec",
    "uuid_for",
]
