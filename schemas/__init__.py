"""aptforge's shared vocabulary: pydantic models (frozen, no I/O) and explicit Arrow schemas.

The bottom layer: everything else imports from here, and this package imports nothing else
from aptforge.
"""

from schemas.ids import content_id, uuid_for
from schemas.items import Item, Status, Verdict
from schemas.problems import Problem
from schemas.provenance import Provenance
from schemas.questions import LETTERS, Distractor, Question
from schemas.rows import candidate_schema, content_hash, question_row, rows_table
from schemas.steps import CANDIDATE_SOURCES, Candidate, Form, GoldStep, candidate_source
from schemas.tasks import AptbenchPrompt, TaskLimits, TaskSpec, register_tasks, registered_tasks, task_spec
from schemas.trajectory import Action, Label, Outcome, Source, Step, Trajectory

__all__ = [
    "CANDIDATE_SOURCES",
    "LETTERS",
    "Action",
    "AptbenchPrompt",
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
    "TaskLimits",
    "TaskSpec",
    "Trajectory",
    "Verdict",
    "candidate_schema",
    "candidate_source",
    "content_hash",
    "content_id",
    "question_row",
    "register_tasks",
    "registered_tasks",
    "rows_table",
    "task_spec",
    "uuid_for",
]
