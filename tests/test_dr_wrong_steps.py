"""Rule-made wrong next steps: APTBench's families, made from the run, never confessing their flaw."""

from __future__ import annotations

import json
import random

from extractors.dr.wording import listed, vague_query
from extractors.dr.wrong_steps import (
    RunView,
    answer_guess,
    is_completion,
    off_topic_browse,
    one_completion,
    premature_completion,
    same_call,
    wrong_arg,
    wrong_steps,
    wrong_tool,
)
from generators.quality.gates import flaw_terms


def _s(planning, name, **args):
    return {"planning": planning, "execution": {"name": name, "args": args}}


SERP = (
    "title: Fenwick Bridge - Riverside Heritage\nbody: The iron bridge opened in 1911.\n"
    "url: https://riverside.example.org/fenwick\n"
    "title: Tamsin valley cheese fair\nbody: Stalls and music every June.\nurl: https://fair.example.com/\n"
    "title: Bridge icon\nurl: https://cdn.example.com/icon.png\n"
)
STEPS = [
    _s("Search for the designer of the Fenwick Bridge.", "web_search", text="Fenwick Bridge designer 1911"),
    _s(
        "Browse the heritage page to find the designer.",
        "browse_website",
        url="https://riverside.example.org/fenwick",
        question="Who designed the Fenwick Bridge?",
    ),
    _s("Search for Margaret Hale's other bridges.", "web_search", text="Margaret Hale engineer bridges"),
    _s("Indicate task completion as the designer has been found.", "task_complete"),
]
OBS = [SERP, "It was designed by the engineer Margaret Hale.", "Hale also built the Orme viaduct.", None]
TOOLS = frozenset({"web_search", "browse_website", "task_complete"})


def _run(gold_index=1, steps=STEPS, obs=OBS, query="Who designed the Fenwick Bridge?", lang="en"):
    return RunView(steps, obs, gold_index, query, lang, TOOLS)


def test_premature_completion_never_offers_the_runs_own_completion_step():
    assert not list(
        premature_completion(_run(), random.Random(0))
    )  # the run completes later: a step of the run
    assert not list(premature_completion(_run(gold_index=3), random.Random(0)))  # the gold already ends it
    answer = [*STEPS[:3], _s("Answer.", "gaia_answer", answer="Margaret Hale")]
    assert not list(premature_completion(_run(steps=answer), random.Random(0)))  # would show the answer


def test_no_candidate_is_a_step_of_the_run_and_synthetic_planning_borrows_the_runs_own():
    for gold in range(1, len(STEPS)):
        run = _run(gold_index=gold)
        steps = wrong_steps(run, random.Random(gold))
        assert steps
        for c in steps:
            assert c.step not in STEPS and c.step["execution"] not in [s["execution"] for s in STEPS]
    plannings = {s["planning"] for s in STEPS}
    made = [c for g in range(1, 4) for c in wrong_steps(_run(gold_index=g), random.Random(g))]
    assert sum(c.step["planning"] in plannings for c in made) >= len(made) // 2


def test_a_run_without_a_completion_step_gets_task_complete_in_the_querys_language():
    (c,) = premature_completion(_run(steps=STEPS[:3], obs=OBS[:3], lang="zh"), random.Random(1))
    assert c.step["execution"] == {"name": "task_complete", "args": {}}
    assert any("\u4e00" <= ch <= "\u9fff" for ch in c.step["planning"])


def test_wrong_tool_and_wrong_argument_names_are_near_misses_outside_the_tool_set():
    rng = random.Random(4)
    for _ in range(20):
        (t,) = wrong_tool(_run(), STEPS[0], rng)
        name = t.step["execution"]["name"]
        assert name not in TOOLS and name != "web_search_wrong" and not flaw_terms(json.dumps(t.step))
        (a,) = wrong_arg(_run(), STEPS[0], rng)
        assert list(a.step["execution"]["args"]) != ["text"] and a.step["execution"]["name"] == "web_search"
        assert list(a.step["execution"]["args"].values()) == ["Fenwick Bridge designer 1911"]
    # an earlier step keeps its own planning
    assert t.step["planning"] == STEPS[0]["planning"]
    (g,) = wrong_tool(_run(gold_index=0), STEPS[0], rng)
    # the gold's own planning is never copied; another step's of the same tool keeps the run's register
    assert g.step["planning"] != STEPS[0]["planning"] and g.step["planning"] == STEPS[2]["planning"]


def test_off_topic_browse_opens_a_listed_page_the_run_never_opens_and_skips_assets():
    assert [x.url for x in listed(SERP)] == [
        "https://riverside.example.org/fenwick",
        "https://fair.example.com/",
    ]
    (c,) = off_topic_browse(_run(gold_index=2), random.Random(0))
    args = c.step["execution"]["args"]
    assert args["url"] == "https://fair.example.com/" and c.step["execution"]["name"] == "browse_website"
    assert args["question"] == "Tamsin valley cheese fair"


def test_a_vague_query_keeps_only_the_first_content_words():
    assert vague_query("who designed the Fenwick Bridge in 1911", "en") == "designed Fenwick"
    assert vague_query("Fenwick Bridge designer history archive", "en") == "Fenwick Bridge designer"
    assert vague_query("青石镇图书馆 开放 年份", "zh") == "青石镇图书馆 开放"
    assert vague_query("bridge", "en") == ""


def test_answer_guess_swaps_the_numeric_answer_for_another_number_seen_before():
    steps = [
        _s("Search the opening year.", "search", query="Fenwick Bridge opened"),
        _s(
            "The page says 1911.",
            "gaia_answer",
            success=True,
            answer="1911",
            long_answer="It opened in 1911.",
        ),
    ]
    run = RunView(
        steps,
        ["Works began in 1907; it opened in 1911 with 3 arches.", None],
        1,
        "When?",
        "en",
        frozenset({"search", "gaia_answer"}),
    )
    (c,) = answer_guess(run, random.Random(0))
    assert c.step["execution"]["args"] == {"success": True, "answer": "1907"}


def test_no_family_confesses_its_flaw_or_returns_the_gold():
    for k in range(1, 4):
        for seed in range(10):
            made = wrong_steps(_run(gold_index=k), random.Random(seed))
            assert made and all(c.step != STEPS[k] for c in made)
            assert not [c for c in made if flaw_terms(json.dumps(c.step, ensure_ascii=False))]
            real = [c.step["planning"] in {s["planning"] for s in STEPS} for c in made]
            assert real == sorted(real, reverse=True)  # steps under the run's own planning come first


def test_no_option_is_the_gold_call_again_and_at_most_one_completes_the_run():
    search = _s("Search for the designer.", "web_search", text="Fenwick Bridge designer 1911")
    again = _s("Look it up once more.", "web_search", text="fenwick bridge  designer 1911.")
    renamed = _s("Search for the designer.", "web_search", query="Fenwick Bridge designer 1911")
    browse = _s("Open it.", "browse_website", url="https://a.example/x", question="Who?")
    other_question = _s(
        "Open it for the year.", "browse_website", url="https://a.example/x", question="When?"
    )
    assert same_call(search, again) and same_call(browse, other_question)
    assert not same_call(search, renamed)  # a wrong argument name is a schema fault, not the same call
    done = _s("Terminate planning.", "task_complete")
    near = _s("The answer is found.", "finish_task")
    answer = _s("Answer.", "gaia_answer", answer="Margaret Hale")
    assert all(map(is_completion, (done, near, answer))) and not is_completion(search)
    # a completion gold: no completion option, nor the gold's own call
    assert one_completion(done, [near, answer, again, browse]) == [2, 3]
    # any other gold: the first completion option only
    assert one_completion(search, [again, done, renamed, near, answer, browse]) == [1, 2, 5]
