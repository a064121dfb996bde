"""The ingest hot path's shortcuts give exactly what the slow definitions give.

`trusted_step` / `trusted_action` build models without validation (their callers guarantee the
types): the instances must be those validation builds. `content_id` writes plain str/int parts
without `json.dumps`: the ids must be the ones `json.dumps` canonicalisation gives.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pickle

import pytest
from pydantic import ValidationError

from extractors.base import Origin
from extractors.readers.swe_rows import SweRows
from schemas import Action, Step, content_id
from schemas.trajectory import trusted_action, trusted_step


def _validated_pair() -> tuple[Step, Step]:
    args = {"command": "grep -rn 'x' /testbed | head -n 5", "path": "/testbed/a.py"}
    validated = Step.model_validate(
        {
            "index": 3,
            "thought": "look for it",
            "action": {"tool": "bash", "args": dict(args), "raw": args["command"]},
            "observation": "OBS",
        }
    )
    trusted = trusted_step(3, "look for it", trusted_action("bash", dict(args), args["command"]), "OBS")
    return validated, trusted


def test_trusted_models_are_the_validated_ones() -> None:
    validated, trusted = _validated_pair()
    assert trusted == validated
    assert type(trusted) is Step and type(trusted.action) is Action
    assert trusted.model_dump_json() == validated.model_dump_json()
    assert repr(trusted) == repr(validated)
    assert trusted.model_fields_set == validated.model_fields_set
    assert trusted.action.model_fields_set == validated.action.model_fields_set
    assert pickle.loads(pickle.dumps(trusted)) == validated
    assert copy.deepcopy(trusted) == validated
    assert trusted.model_copy(update={"index": 4}).index == 4
    with pytest.raises(ValidationError):  # still frozen
        trusted.index = 5  # type: ignore[misc]


def test_trusted_step_without_action_or_observation() -> None:
    assert trusted_step(0, "", None, None) == Step(index=0)
    assert (
        trusted_step(0, "", None, None).model_dump()
        == Step.model_validate({"index": 0, "thought": "", "action": None, "observation": None}).model_dump()
    )


@pytest.mark.parametrize(
    "parts",
    [
        (),
        ("swe_rows",),
        ("swe_rows", "data/x.jsonl", 'id "quoted" \\ back\nnew\ttab\x01\x7f é \u2028 😀'),
        ("a", 0, -7, 10**30, "b"),
        ("a", True),  # bool: not a plain int, the json.dumps path
        ("a", None),
        ("a", 1.5),
        ("a", ["b", {"z": 1, "a": 2}]),
    ],
)
def test_content_id_is_the_json_canonical_hash(parts: tuple) -> None:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    assert content_id(*parts) == hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]
    assert content_id(*parts, length=12) == hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def test_swe_rows_steps_validate_to_themselves() -> None:
    """Every trusted Step a SWE-smith row gives is what validating its own dump gives."""
    call = "<function=str_replace_editor>\n<parameter=command>view</parameter>\n<parameter=path>/a.py</parameter>\n</function>"
    row = {
        "instance_id": "acme__pkg.1",
        "traj_id": "acme__pkg.1.0",
        "resolved": True,
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "<pr_description>\nfix it\n</pr_description>"},
            {
                "role": "assistant",
                "content": "first\n\n<function=bash>\n<parameter=command>ls</parameter>\n</function>",
            },
            {"role": "user", "content": "OBSERVATION:\na.py"},
            {"role": "assistant", "content": "then " + call},
            {"role": "tool", "content": "one"},
            {"role": "user", "content": [{"type": "text", "text": "two"}]},
            {"role": "assistant", "content": "no call here"},
            {"role": "assistant", "content": "```\nls -la\n```"},
        ],
    }
    traj = SweRows().read(row, Origin("rows.jsonl", 1, "rows.jsonl"))
    assert [s.index for s in traj.steps] == [0, 1, 2, 3]
    assert traj.steps[1].observation == "one\ntwo" and traj.steps[2].observation is None
    for step in traj.steps:
        again = Step.model_validate(step.model_dump())
        assert again == step and again.model_dump_json() == step.model_dump_json()
