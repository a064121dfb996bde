"""dr extraction on literal trajectories: APTBench step JSON, row fields, languages, answers, budgets."""

from __future__ import annotations

import json

from extractors.base import ExtractOptions
from extractors.dr import INSTRUCT, DeepResearch, language, render_tool_set
from schemas import Action, GoldStep, Outcome, Problem, Source, Step, Trajectory

OPTS = ExtractOptions(max_items_per_trajectory=5, seed=3)
SERP = (
    "title: Fenwick Bridge - Riverside Heritage\nbody: The iron bridge opened in 1911.\n"
    "url: https://riverside.example.org/fenwick\n"
    "title: Fenwick road closures\nbody: Resurfacing in May.\nurl: https://roads.example.gov/closures\n"
)


def _step(i, planning, tool, args, obs=None) -> Step:
    return Step(index=i, thought=planning, action=Action(tool=tool, args=args, raw=tool), observation=obs)


def _traj(steps, query="Who designed the Fenwick Bridge?", final="Margaret Hale", gold="Margaret Hale", **kw):
    return Trajectory(
        trajectory_id=kw.pop("tid", "a1b2c3d4e5f60718293a4b5c6d7e8f90"),
        kind="dr",
        task=query,
        prompt=query,
        steps=tuple(steps),
        outcome=Outcome(label="success", signal="answer_match:exact_match"),
        source=Source(
            format="tapeagents", file="runs/fenwick.json", instance_id="q-1", model=kw.pop("model", "")
        ),
        final_answer=final,
        gold_answer=gold,
        **kw,
    )


STEPS = [
    _step(
        0,
        "Search for the designer of the Fenwick Bridge.",
        "web_search",
        {"text": "Fenwick Bridge designer"},
        SERP,
    ),
    _step(
        1,
        "Browse the heritage page to find who designed the bridge.",
        "browse_website",
        {"url": "https://riverside.example.org/fenwick", "question": "Who designed the Fenwick Bridge?"},
        "It was designed by the engineer Margaret Hale.",
    ),
    _step(2, "Indicate task completion as the designer has been found.", "task_complete", {}),
]


def _golds(traj, task, opts=OPTS):
    out = list(DeepResearch().extract(traj, task, opts))
    return [g for g in out if isinstance(g, GoldStep)], [p for p in out if isinstance(p, Problem)]


def test_a_plan_gold_is_the_next_step_as_aptbench_json_with_the_steps_before_it_as_context():
    golds, _ = _golds(_traj(STEPS), "plan")
    g = next(g for g in golds if g.step_index == 1)
    assert g.gold == json.dumps(
        {"planning": STEPS[1].thought, "execution": {"name": "browse_website", "args": STEPS[1].action.args}},
        ensure_ascii=False,
    )
    assert g.form == "mcq" and g.fields["next_step"] == g.gold
    context = json.loads(g.fields["trajectory"])
    assert context == [
        {
            "planning": STEPS[0].thought,
            "execution": {"name": "web_search", "args": {"text": "Fenwick Bridge designer"}},
            "observation": SERP,
        }
    ]
    assert g.fields["traj_len"] == 1 and g.fields["qid"] == f"traj_{g.fields['traj_id']}_step_0"
    assert isinstance(g.fields["traj_id"], int) and 0 <= g.fields["traj_id"] < 2**31
    assert g.fields["source"] == "tapeagents" and g.fields["query_answer"] == "Margaret Hale"
    assert g.fields["question_instruct"] == INSTRUCT[("plan", "en")]


def test_the_first_step_and_steps_without_planning_are_never_posed():
    steps = [STEPS[0], STEPS[1].model_copy(update={"thought": "  "}), STEPS[2]]
    golds, _ = _golds(_traj(steps), "plan")
    assert [g.step_index for g in golds] == [2]
    golds, problems = _golds(_traj(STEPS[:1]), "plan")
    assert not golds and [(p.reason, p.severity) for p in problems] == [("no_eligible_steps", "info")]


def test_a_two_step_run_search_then_answer_yields_an_item_for_its_first_step():
    golds, _ = _golds(_traj([STEPS[0], STEPS[-1].model_copy(update={"index": 1})]), "plan")
    assert [g.step_index for g in golds][:1] == [0] and golds[0].fields["trajectory"] == "[]"
    assert golds[0].fields["traj_len"] == 0 and all(c.text != golds[0].gold for c in golds[0].candidates)


def test_the_tool_set_lists_the_aptbench_specs_of_the_infodeepseek_tools():
    g = _golds(_traj(STEPS), "plan")[0][0]
    tool_set = g.fields["tool_set"]
    assert tool_set.startswith("\n    (1) {") and tool_set.endswith("}\n")
    names = [json.loads(line.split(") ", 1)[1])["name"] for line in tool_set.strip("\n").split("\n")]
    assert names == ["web_search", "browse_website", "task_complete"]
    assert render_tool_set([{"name": "x"}]) == '\n    (1) {"name": "x"}\n'


def test_a_chinese_query_gets_aptbench_chinese_wording_and_unescaped_json():
    steps = [
        _step(0, "搜索青石镇图书馆的开放年份", "web_search", {"text": "青石镇图书馆 开放"}, "1998年开放"),
        _step(1, "结束任务", "task_complete", {}),
    ]
    traj = _traj(steps, query="青石镇图书馆是哪一年开放的？", final="1998", gold="1998")
    assert language(traj.task) == "zh" and language("Who?") == "en"
    plan = next(g for g in _golds(traj, "plan")[0] if g.step_index == 1)
    assert plan.fields["question_instruct"] == INSTRUCT[("plan", "zh")]
    assert "结束任务" in plan.gold and "\\u" not in plan.gold + plan.fields["trajectory"]
    summ = _golds(traj, "summ_ans")[0][0]
    assert summ.fields["question_instruct"] == "给定要解决的问题和当前搜集到的信息，写出问题答案"


def test_summ_ans_gold_is_the_short_final_answer_and_an_answer_call_is_cut_from_the_context():
    steps = [
        *STEPS[:2],
        _step(
            2, "The page names Margaret Hale.", "gaia_answer", {"success": True, "answer": "Margaret Hale"}
        ),
    ]
    golds, _ = _golds(_traj(steps), "summ_ans")
    (g,) = golds
    assert g.gold == "Margaret Hale" and g.form == "completion"
    context = json.loads(g.fields["trajectory"])
    assert [s["execution"]["name"] for s in context] == ["web_search", "browse_website"]
    assert g.fields["traj_len"] == 2 and "answer" not in g.fields
    # an argument-free task_complete is evidence-free and stays, as in APTBench
    g2 = _golds(_traj(STEPS), "summ_ans")[0][0]
    assert json.loads(g2.fields["trajectory"])[-1] == {
        "planning": STEPS[2].thought,
        "execution": {"name": "task_complete", "args": {}},
    }


def test_a_verbose_answer_falls_back_to_the_reference_of_a_successful_run_else_a_problem():
    long = "The bridge was designed by Margaret Hale, an engineer who won the 1907 competition " * 2
    assert _golds(_traj(STEPS, final=long), "summ_ans")[0][0].gold == "Margaret Hale"
    for final, gold in ((long, long), ("a\nb", None), ("[Hale]", None), (None, None)):
        golds, problems = _golds(_traj(STEPS, final=final, gold=gold), "summ_ans")
        assert not golds and [p.reason for p in problems] == ["no_short_answer"], final


def test_real_wrong_steps_of_aptbench_rows_lead_the_candidates():
    real = [
        {
            "planning": "Search for road closures.",
            "execution": {"name": "web_search", "args": {"text": "closures"}},
        },
        {"planning": "Ending the task.", "execution": {"name": "task_complete", "args": {}}},
    ]
    traj = _traj(STEPS, meta={"wrong_next_steps": {"1": real}})
    golds, _ = _golds(traj, "plan")
    g = next(g for g in golds if g.step_index == 1)
    assert json.loads(g.candidates[0].text) == real[0] and json.loads(g.candidates[2].text) == real[1]
    texts = [c.text for c in g.candidates]
    assert g.gold not in texts and len(set(texts)) == len(texts)
    # with one item per run, the step APTBench posed is the one chosen
    one = _golds(traj, "plan", OPTS._replace(max_items_per_trajectory=1))[0]
    assert [x.step_index for x in one] == [1]


def test_long_observations_are_cut_and_an_impossible_budget_is_a_problem():
    big = _step(0, "Search widely.", "web_search", {"text": "bridge"}, "x" * 9000)
    traj = _traj([big, *STEPS[1:]])
    g = _golds(traj, "plan", OPTS._replace(max_observation_chars=1000))[0][0]
    obs = json.loads(g.fields["trajectory"])[0]["observation"]
    assert len(obs) < 1100 and "characters omitted" in obs
    tight = OPTS._replace(max_context_tokens=256, max_observation_chars=4000)
    g = _golds(traj, "plan", tight)[0][0]
    assert len(g.fields["trajectory"]) <= 4 * 256 and g.fields["traj_len"] == 1
    huge = _step(0, "p" * 5000, "web_search", {"text": "bridge"}, "ok")
    _, problems = _golds(_traj([huge, *STEPS[1:]]), "plan", tight)
    assert {p.reason for p in problems} == {"context_too_long"}


def test_selection_and_candidates_are_reproducible_from_the_seed():
    a = _golds(_traj(STEPS), "plan")[0]
    b = _golds(_traj(STEPS), "plan")[0]
    assert [(g.step_id, g.candidates) for g in a] == [(g.step_id, g.candidates) for g in b]


def test_an_unknown_task_is_a_problem_not_a_crash():
    _, problems = _golds(_traj(STEPS), "locate")
    assert [p.reason for p in problems] == ["unknown_task"]


def test_other_runs_for_the_same_question_give_only_steps_that_repeat_a_call_already_made():
    mine = _traj(STEPS)
    other_steps = [
        _step(0, "Look the bridge designer up.", "web_search", {"text": "fenwick bridge designer"}),
        _step(1, "Try the bridge's own site.", "browse_website", {"url": "https://fenwick.example/"}),
        _step(2, "Done.", "task_complete", {}),
    ]
    other = _traj(other_steps, tid="ffff" * 8, model="other-model")
    elsewhere = _traj(other_steps, query="Who built the Orme viaduct?", tid="eeee" * 8)
    ex = DeepResearch()
    ex.use(DeepResearch.observe([mine, other, elsewhere]))
    g = next(g for g in ex.extract(mine, "plan", OPTS) if isinstance(g, GoldStep) and g.step_index == 1)
    theirs = [c for c in g.candidates if c.origin.startswith("other_run")]
    # the repeated search (its result is already in view) only: their other browse may be as valid
    # as the gold, and their completion would be a second completion beside the run's own
    assert [json.loads(c.text)["planning"] for c in theirs] == ["Look the bridge designer up."]
    assert {c.origin for c in theirs} == {"other_run:redundant_step"}
