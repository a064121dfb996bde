"""The ingest hot path's shortcuts give exactly what the slow definitions give.

`trusted_step` / `trusted_action` / `trusted_model` build models without validation (their callers
guarantee the types): the instances must be those validation builds. `content_id` writes plain str/int parts
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
from schemas import Action, Outcome, Source, Step, Trajectory, content_id
from schemas.trajectory import trusted_action, trusted_call_step, trusted_model, trusted_step


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


def test_trusted_models_share_one_fields_set_that_no_copy_or_assignment_changes() -> None:
    """A parsed run's models share their fields-given sets (a third of its small objects): one per
    model and fields, never added to, while copies get sets of their own."""
    _, one = _validated_pair()
    other = trusted_call_step(7, "", "bash", {}, "ls", None)
    assert one.model_fields_set is other.model_fields_set
    assert one.action.model_fields_set is other.action.model_fields_set
    source = {"format": "f", "file": "a.jsonl"}
    first, second = trusted_model(Source, dict(source)), trusted_model(Source, {**source, "file": "b.jsonl"})
    assert first.model_fields_set is second.model_fields_set == {"format", "file"}
    assert trusted_model(Source, {**source, "line": 3}).model_fields_set == {"format", "file", "line"}
    shared = set(one.model_fields_set)
    copied = trusted_model(Outcome, {"label": "success"}).model_copy(update={"reason": "r"})
    assert copied.model_fields_set == {"label", "reason"}
    assert trusted_model(Outcome, {"label": "failure"}).model_fields_set == {"label"}
    for changed in (
        one.model_copy(update={"thought": "x"}),
        copy.deepcopy(one),
        pickle.loads(pickle.dumps(one)),
    ):
        assert changed.model_fields_set == shared and changed.model_fields_set is not one.model_fields_set
    with pytest.raises(ValidationError):
        other.thought = "y"  # type: ignore[misc]
    assert one.model_fields_set == shared == other.model_fields_set


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
    row = _row()
    row["messages"][2]["content"] = "first\n\n<function=bash>\n<parameter=command>ls</parameter>\n</function>"
    row["messages"] += [
        {"role": "assistant", "content": "then " + call},
        {"role": "tool", "content": "one"},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "no call here"},
        {"role": "assistant", "content": "```\nls -la\n```"},
    ]
    traj = SweRows().read(row, Origin("rows.jsonl", 1, "rows.jsonl"))
    assert [s.index for s in traj.steps] == [0, 1, 2, 3]
    assert traj.steps[1].observation == "one\ntwo" and traj.steps[2].observation is None
    for step in traj.steps:
        again = Step.model_validate(step.model_dump())
        assert again == step and again.model_dump_json() == step.model_dump_json()


def _same_instance(built, validated) -> None:
    """`built` is what validation gives: equal, same field order, fields set, types and dump."""
    assert type(built) is type(validated)
    assert built == validated
    assert list(built.__dict__) == list(validated.__dict__)
    assert built.model_fields_set == validated.model_fields_set
    assert [type(v) for v in built.__dict__.values()] == [type(v) for v in validated.__dict__.values()]
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None


def test_trusted_model_is_the_validated_one() -> None:
    outcome = {"label": "success", "signal": "row:resolved", "reason": "resolved"}
    _same_instance(trusted_model(Outcome, outcome), Outcome(**outcome))
    _same_instance(trusted_model(Outcome, {}), Outcome())
    source = {"format": "swe_rows", "reader_version": 1, "file": "a.jsonl", "line": 3, "native_id": "n"}
    _same_instance(trusted_model(Source, source), Source(**source))
    values = {
        "trajectory_id": "t",
        "kind": "swe",
        "task": "fix",
        "source": trusted_model(Source, source),
        "steps": (trusted_step(0, "x", None, None),),
        "tool_set": ({"name": "bash"},),
    }
    built = trusted_model(Trajectory, values)
    _same_instance(built, Trajectory(**values))
    assert (
        built.meta == {} and built.meta is not trusted_model(Trajectory, values).meta
    )  # a fresh factory value
    assert built.outcome is Trajectory.model_fields["outcome"].default  # the default object, as validation
    with pytest.raises(TypeError):
        trusted_model(Outcome, {"labl": "success"})
    with pytest.raises(TypeError):
        trusted_model(Source, {"format": "x"})  # `file` missing


class _Str(str):
    pass


def _row(**extra) -> dict:
    row = {
        "instance_id": "acme__pkg.1",
        "traj_id": "acme__pkg.1.0",
        "resolved": True,
        "patch": "diff",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "<pr_description>\nfix it\n</pr_description>"},
            {
                "role": "assistant",
                "content": "go\n<function=bash>\n<parameter=command>ls</parameter>\n</function>",
            },
            {"role": "user", "content": "OBSERVATION:\na.py"},
        ],
    }
    row.update(extra)
    return row


@pytest.mark.parametrize(
    ("row", "origin"),
    [
        (_row(), Origin("rows.jsonl", 1, "rows.jsonl")),
        (_row(resolved="False", exit_status="submitted"), Origin("rows.jsonl", None, "rows.jsonl")),
        (_row(resolved=None), Origin("rows.jsonl", 2, "rows.jsonl")),
        (
            _row(tools=[{"name": "bash", "parameters": {"x": 1}}, "junk"]),
            Origin("rows.jsonl", 1, "rows.jsonl"),
        ),
        # values validation converts or refuses: the reader takes the validated path
        (_row(model=_Str("claude")), Origin("rows.jsonl", 1, "rows.jsonl")),
        (_row(patch=_Str("diff")), Origin("rows.jsonl", 1, "rows.jsonl")),
        (_row(), Origin(_Str("rows.jsonl"), True, "rows.jsonl")),  # type: ignore[arg-type]
    ],
)
def test_swe_rows_trajectory_is_the_validated_one(row: dict, origin: Origin) -> None:
    """A SWE row's Trajectory (built trusted when its values are exactly typed) is what validating
    the same values gives (a trusted build of unconverted values would differ in a type)."""
    traj = SweRows().read(row, origin)
    values = {k: getattr(traj, k) for k in traj.model_fields_set}
    source = {k: getattr(traj.source, k) for k in traj.source.model_fields_set}
    outcome = {k: getattr(traj.outcome, k) for k in traj.outcome.model_fields_set}
    expected = Trajectory(**{**values, "source": Source(**source), "outcome": Outcome(**outcome)})
    _same_instance(traj, expected)
    _same_instance(traj.source, expected.source)
    _same_instance(traj.outcome, expected.outcome)


def test_swe_rows_refuses_what_validation_refuses() -> None:
    with pytest.raises(ValidationError):
        SweRows().read(_row(tools=[{1: "x"}]), Origin("rows.jsonl", 1, "rows.jsonl"))


def test_trusted_call_step_is_step_and_action_built_apart() -> None:
    args = {"command": "view", "path": "/a.py"}
    built = trusted_call_step(
        2, "look", "str_replace_editor", dict(args), "str_replace_editor view /a.py", None
    )
    validated = Step(
        index=2,
        thought="look",
        action=Action(tool="str_replace_editor", args=dict(args), raw="str_replace_editor view /a.py"),
        observation=None,
    )
    _same_instance(built, validated)
    _same_instance(built.action, validated.action)
