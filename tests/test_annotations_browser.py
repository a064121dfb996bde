"""The review app in Debian's headless chromium (Playwright), served by real uvicorn on 127.0.0.1.

One browser for the whole module (the only module that starts one). `evil.example` resolves to
127.0.0.1 inside this browser (`--host-resolver-rules`), as it would after DNS rebinding.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from annotations import Queue
from annotations.app import AppOptions, create_app
from annotations.app.server import running
from tests.annotations_support import filled_queue, question, trajs

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP evil.example 127.0.0.1",
]
TOKENS = {"alice": "alice-token-0123", "bob": "bob-token-4567"}
ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"
REAL_RUN = "matplotlib__matplotlib-26342"  # a resolved mini-swe-agent run of 90 messages

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: `apt-get update && apt-get install -y chromium` (.ci/run does this)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Watch:
    """Collects what a page must never do: dialogs, page errors, console errors."""

    def __init__(self, page) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)


def ready(page) -> None:
    """Wait until the page's script has attached the keyboard shortcuts."""
    page.wait_for_selector("html[data-shortcuts=on]", state="attached")


def login(page, url: str, *, token: str | None = None, name: str | None = None) -> None:
    page.goto(url + "/")
    assert page.url.endswith("/login")
    if token is not None:
        page.fill("#token", token)
    else:
        page.fill("#name", name or "")
    page.click("#login-button")
    page.wait_for_selector("h1:has-text('Review queue')")


def item_of(page) -> str:
    return page.url.split("/items/")[1].split("?")[0]


def test_a_reviewer_logs_in_accepts_one_item_and_rejects_one_with_keys(browser, tmp_path):
    path = tmp_path / "queue.sqlite"
    filled_queue(path)
    with running(create_app(Queue(path), tokens=TOKENS)) as url:
        page = browser.new_page()
        watch = Watch(page)
        login(page, url, token=TOKENS["alice"])
        assert page.inner_text("#reviewer-name") == "alice"
        with page.expect_navigation():
            page.click("#start-link")
        ready(page)
        first = item_of(page)
        with page.expect_navigation(url="**/items/**"):
            page.keyboard.press("a")  # keyboard shortcut: accept
        assert page.inner_text("#flash") == "Decision saved."
        ready(page)
        second = item_of(page)
        assert second != first
        page.keyboard.press("1")  # tick the first preset reason
        page.keyboard.press("r")  # focus the rejection note
        page.keyboard.type("the gold plan repeats the previous step")
        page.keyboard.press("Control+Enter")
        page.wait_for_selector("#flash:has-text('Decision saved.')")
        ready(page)
        page.keyboard.press("p")  # previous: the item I decided last
        page.wait_for_url(f"**/items/{second}**")
        assert watch.dialogs == [] and watch.errors == []
        page.close()

    q = Queue(path)
    accepted, rejected = q.get(first), q.get(second)
    assert (accepted.row.status, accepted.row.reviewer) == ("accepted", "alice")
    assert (rejected.row.status, rejected.row.note) == ("rejected", "the gold plan repeats the previous step")
    assert rejected.reviews[0].reasons == ("gold_wrong",)


def test_planted_script_and_img_onerror_in_a_trajectory_never_run(browser, tmp_path):
    script = "<script>window.__pwned = 1; alert('script ran')</script>"
    img = "<img src=x onerror=\"window.__pwned = 2; alert('img ran')\">"
    svg = '<svg onload="window.__pwned = 3"></svg>'
    long_obs = "\n".join([img] * 40)  # folded block
    steps = trajs(
        {"role": "assistant", "thought": f"Let me look. {script}"},
        {"role": "tool", "content": [{"type": "text", "text": long_obs}]},
        {"role": "assistant", "plan": f"I need to check {svg}"},
    )
    evil = question(0, gold=f"I need to fix {script}", instance=f"x{img}").model_copy(
        update={"fields": {"trajs": steps}}
    )
    q = Queue(tmp_path / "queue.sqlite")
    q.enqueue([evil], batch="v1")
    q.decide("plan-0000", "mallory", "reject", seen=q.seen("plan-0000", "mallory"), note=img + script)
    options = AppOptions(adjudicators=frozenset({"alice"}), guidelines={"plan": f"Check {script} {img}"})
    with running(create_app(q, options=options)) as url:
        page = browser.new_page()
        watch = Watch(page)
        login(page, url, name="alice")
        page.goto(f"{url}/items/plan-0000")
        ready(page)
        page.keyboard.press("o")
        page.click("details.fold > summary")
        page.locator("#reviews").wait_for()
        page.wait_for_timeout(300)  # give any injected handler time to fire
        assert page.evaluate("() => window.__pwned") is None
        assert watch.dialogs == []
        assert page.locator("img").count() == 0 and page.locator("svg").count() == 0
        assert page.locator("script").count() == 1  # the app's own /static/app.js
        body = page.inner_text("main")
        assert script in body and "onerror=" in body and svg in body
        # Defence in depth: the CSP header stops inline script even if escaping ever failed.
        blocked = page.evaluate("""() => { const s = document.createElement('script');
            s.textContent = 'window.__inline = 1'; document.body.appendChild(s); return window.__inline; }""")
        assert blocked is None
        page.close()
    assert json.loads(evil.fields["trajs"])[2]["thought"].endswith(script)


def _leaks(page, other: str, note: str, item_id: str) -> list[str]:
    """Where `page`'s reviewer can see `other`'s decision on `item_id` before deciding it (HTML and API)."""
    found = []
    html = page.content()
    if other in html or note in html:
        found.append(f"item page of {item_id}")
    api = page.context.request.get(page.url.split("/items/")[0] + f"/api/items/{item_id}").json()
    if api["reviews"] or other in json.dumps(api) or note in json.dumps(api) or api["item"]["reviewer"]:
        found.append(f"GET /api/items/{item_id}")
    listing = page.context.request.get(page.url.split("/items/")[0] + "/api/items?limit=1000").json()
    row = json.dumps(next(r for r in listing["items"] if r["item_id"] == item_id))
    if other in row or note in row:
        found.append(f"GET /api/items row of {item_id}")
    queue_page = page.context.request.get(page.url.split("/items/")[0] + "/").text()
    line = re.search(rf'<tr data-item="{item_id}">.*?</tr>', queue_page, re.S).group(0)
    if other in line or "rejected" in line or "accepted" in line:
        found.append(f"list row of {item_id}")
    return found


def test_two_reviewers_at_once_review_20_items_blind_with_no_lost_decision_and_no_false_conflict(
    browser, tmp_path
):
    path = tmp_path / "queue.sqlite"
    queue = filled_queue(path, n_plan=12, n_action=8, reviews_per_item=2)
    decided: dict[tuple[str, str], str] = {}
    conflicts, leaks = 0, []
    with running(create_app(Queue(path), tokens=TOKENS)) as url:
        pages = {}
        for who in ("alice", "bob"):
            pages[who] = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            login(pages[who], url, token=TOKENS[who])
        for n in range(20):
            first, second = ("alice", "bob") if n % 2 == 0 else ("bob", "alice")
            for who in (first, second):  # both open the item before either decides (the old false conflict)
                pages[who].goto(f"{url}/next")
                ready(pages[who])
            item_id = item_of(pages[first])
            assert item_of(pages[second]) == item_id  # it needs both: both are sent to it
            for who in (first, second):
                page = pages[who]
                other = second if who == first else first
                leaks += _leaks(page, other, f"note by {other}", item_id)
                reject = (n + (who == "bob")) % 3 == 0
                if reject:
                    page.check("#reasons input[value=ambiguous]")
                    page.fill("#reject-note", f"note by {who}")
                with page.expect_navigation():
                    page.click("#reject-button" if reject else "#accept-button")
                conflicts += page.locator("#conflict").count()
                assert page.locator("#error").count() == 0, page.inner_text("#error")
                decided[(item_id, who)] = "rejected" if reject else "accepted"
        # every decision is there, and each side sees the other's only now that both decided
        page = pages["alice"]
        page.goto(f"{url}/items/{item_id}")
        assert "note by bob" in page.inner_text("#reviews") or decided[(item_id, "bob")] == "accepted"

        # A real content edit in between: bob has the page open and types an edit, alice edits first.
        queue.enqueue([question(90)], batch="extra", tasks=[])
        bob, alice = pages["bob"], pages["alice"]
        bob.goto(f"{url}/items/plan-0090")
        ready(bob)
        alice.goto(f"{url}/items/plan-0090")
        alice.keyboard.press("e")
        alice.fill("#option-0", "I need to open the reader module first")
        alice.click("#edit-button")
        alice.wait_for_selector("#flash:has-text('Edit saved')")
        bob.keyboard.press("e")
        bob.fill("#option-2", "I need to rerun the failing test after the fix")
        bob.keyboard.press("Escape")
        bob.keyboard.press("Alt+D")  # keys pick the gold in the edit form
        assert bob.is_checked("#edit-form input[data-letter=D]")
        bob.fill("#edit-note", "C was vague")
        bob.click("#edit-button")
        banner = bob.wait_for_selector("#conflict")
        assert "content changed" in banner.inner_text() and "NOT saved" in banner.inner_text()
        assert "alice" not in banner.inner_text()
        assert bob.input_value("#option-2") == "I need to rerun the failing test after the fix"
        assert bob.input_value("#edit-note") == "C was vague" and bob.input_value("#reject-note") == ""
        assert bob.is_checked("#edit-form input[data-letter=D]")
        for p in pages.values():
            p.context.close()

    q = Queue(path)
    reviews = {(r.item_id, r.reviewer): r.decision for r in q.reviews() if r.item_id != "plan-0090"}
    assert reviews == decided and len(decided) == 40  # 0 lost decisions
    assert conflicts == 0  # 0 false conflicts
    assert leaks == []  # 0 leaks before deciding
    assert all(q.get(i).row.status != "pending" or q.get(i).row.disputed for i, _ in decided)
    assert [r.reviewer for r in q.get("plan-0090").reviews] == ["alice"]


def test_undo_search_stats_and_an_adjudicator_ruling_in_the_browser(browser, tmp_path):
    path = tmp_path / "queue.sqlite"
    q = filled_queue(path, reviews_per_item=2)
    q.decide("plan-0000", "bob", "reject", seen=q.seen("plan-0000", "bob"), reasons=["distractor_correct"])
    tokens = {**TOKENS, "judy": "judy-token-89ab:adjudicator"}
    from annotations.app.auth import parse_accounts

    accounts = parse_accounts(",".join(f"{k}:{v}" for k, v in tokens.items()))
    options = AppOptions(adjudicators=accounts.adjudicators)
    with running(create_app(Queue(path), tokens=accounts.tokens, options=options)) as url:
        alice = browser.new_context().new_page()
        watch = Watch(alice)
        login(alice, url, token=TOKENS["alice"])
        alice.fill("#search", "repo-2")
        with alice.expect_navigation():
            alice.press("#search", "Enter")
        assert (
            alice.locator("#items tbody tr").count() == 1 and alice.locator("tr[data-item=plan-0002]").count()
        )
        alice.goto(f"{url}/items/plan-0000")
        ready(alice)
        assert alice.locator("#blind").count() == 1 and "bob" not in alice.content()
        with alice.expect_navigation(url="**/items/**"):
            alice.keyboard.press("a")
        ready(alice)
        with alice.expect_navigation(url="**/items/plan-0000**"):
            alice.keyboard.press("u")  # undo: back to the item, decision withdrawn
        assert "withdrawn" in alice.inner_text("#flash") and Queue(path).get("plan-0000").row.reviews == 1
        ready(alice)
        with alice.expect_navigation(url="**/items/**"):
            alice.keyboard.press("a")
        alice.goto(f"{url}/agreement")
        assert alice.locator("#reviewer-stats tr[data-reviewer=alice] .n").inner_text() == "1"
        assert (
            alice.locator("#reason-counts tr[data-task=plan] td[data-reason=distractor_correct]").inner_text()
            == "1"
        )
        judy = browser.new_context().new_page()
        login(judy, url, token="judy-token-89ab")
        # under load the click returns before the page is there: wait for it
        with judy.expect_navigation(url="**/disputes**"):
            judy.click("#disputes-link")
        card = judy.locator("section.dispute[data-item=plan-0000]")
        card.wait_for()
        assert (
            card.locator(".review-col").count() == 2 and "a distractor is also correct" in card.inner_text()
        )
        card.locator("input[name=note]").fill("B really is right")
        with judy.expect_navigation():
            card.locator("button[value=reject]").click()
        assert judy.locator("#no-disputes").count() == 1
        assert watch.errors == []
        alice.context.close()
        judy.context.close()
    view = Queue(path).get("plan-0000")
    assert view.row.status == "rejected" and {r.role for r in view.reviews} == {"reviewer", "adjudicator"}


@pytest.mark.parametrize("tokens", [None, TOKENS], ids=["open", "tokens"])
def test_a_rebinding_host_and_a_null_origin_are_refused(browser, tmp_path, tokens):
    path = tmp_path / "queue.sqlite"
    filled_queue(path)
    with running(create_app(Queue(path), tokens=tokens)) as url:
        port = url.rsplit(":", 1)[1]
        page = browser.new_context().new_page()
        r = page.goto(f"http://evil.example:{port}/api/items")  # DNS rebinding: evil.example -> 127.0.0.1
        assert r.status == 400 and "Invalid host" in page.content()
        raw = httpx.get(f"{url}/api/items", headers={"Host": f"evil.example:{port}"})
        assert raw.status_code == 400
        # a form posted from an opaque origin (a data: page, a sandboxed frame) carries `Origin: null`
        field = '<input name="name" value="mallory"><input name="token" value="alice-token-0123">'
        page.goto(f"data:text/html,<form method=post action='{url}/login'>{field}<button>go</button></form>")
        with page.expect_navigation():
            page.click("button")
        assert "needs an Origin header" in page.content()
        page.context.close()
    assert not [e for e in Queue(path).log() if e.reviewer == "mallory"]


def _real_queue(tmp_path: Path, shared_dir: Path) -> Path:
    """Build the bundled SWE sample plus one real 90-message run from `$APTFORGE_SHARED` into a queue."""
    run = shared_dir / "trajectories" / "minisweagent-v1-gemini3pro-swebench-verified" / "swebench_results"
    run = run / "20251118_gemini-3-pro-74pct"
    src = tmp_path / "real"
    for rel in (f"trajs/{REAL_RUN}/{REAL_RUN}.traj.json", f"logs/{REAL_RUN}/report.json"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(run / rel, src / rel)
    config = yaml.safe_load((ROOT / "configs" / "swe_issue_fix.yaml").read_text())
    config["sources"] = [{"path": str(ROOT / "extractors" / "samples" / "swe_issue_fix")}, {"path": str(src)}]
    for task in config["tasks"].values():
        task.update(max_items_per_trajectory=40, max_context_tokens=200_000, max_observation_chars=1500)
    config.update(out_dir=str(tmp_path / "out"), version="screens")
    (tmp_path / "shots.yaml").write_text(yaml.safe_dump(config))
    from flows.cli import app

    result = CliRunner().invoke(app, ["build", str(tmp_path / "shots.yaml")])
    assert result.exit_code == 0, result.output
    return tmp_path / "out" / "swe_issue_fix" / "queue.sqlite"


@pytest.mark.flow
@pytest.mark.shared
def test_screenshots_of_plan_action_a_90_step_real_run_and_the_list(
    browser, tmp_path, shared_dir, prefect_harness
):
    q = Queue(_real_queue(tmp_path, shared_dir))
    rows = q.items(limit=10_000)
    real = [r for r in rows if r.instance_id == REAL_RUN and r.task == "plan"]
    assert real, "the real run gave no plan item"
    deepest = max(real, key=lambda r: q.get(r.item_id).question.step_index)
    steps = len(json.loads(q.get(deepest.item_id).question.fields["trajs"]))
    assert steps >= 80, steps
    plan = next(r for r in rows if r.task == "plan" and r.instance_id != REAL_RUN)
    action = next(r for r in rows if r.task == "action")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    options = AppOptions(guidelines={"plan": "The gold plan must name **what** the agent does next and why."})
    with running(create_app(q, options=options)) as url:
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        watch = Watch(page)
        login(page, url, name="alice")
        page.screenshot(path=str(ARTIFACTS / "review-list.png"), full_page=True)
        for name, row in (
            ("review-plan-item", plan),
            ("review-action-item", action),
            ("review-real-90-steps", deepest),
        ):
            page.goto(f"{url}/items/{row.item_id}")
            ready(page)
            assert page.locator("details.step.statement[open]").count() == 1  # the task statement is open
            previews = page.locator(
                "details.step.role-tool .step-preview, details.step.role-user .step-preview"
            )
            texts = [t for t in previews.all_inner_texts() if t]
            assert texts and not [t for t in texts if t.startswith("OBSERVATION")]
            side, ctx = page.locator("aside.side").bounding_box(), page.locator("#context").bounding_box()
            assert (
                side["x"] > ctx["x"] + ctx["width"] - 1 and ctx["width"] > 800
            )  # question beside the context
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        assert page.locator("details.step").count() == steps
        page.locator("details.step").last.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "review-real-90-steps-end.png"))
        page.keyboard.press("c")  # every step closed: one line each, its command or the call it answers
        page.locator("details.step").nth(steps // 2).scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "review-real-90-steps-closed.png"))
        assert watch.errors == []
    for name in ("review-list", "review-plan-item", "review-action-item", "review-real-90-steps"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000
    assert re.search(r"\d", str(steps))
