"""The review app in Debian's headless chromium (Playwright), served by real uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from annotations import Queue
from annotations.app import create_app
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
]
TOKENS = {"alice": "alice-token-0123", "bob": "bob-token-4567"}

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


def test_a_reviewer_logs_in_accepts_one_item_and_rejects_one_with_a_note(browser, tmp_path):
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
        first = page.url.split("/items/")[1].split("?")[0]
        with page.expect_navigation(url="**/items/**"):
            page.keyboard.press("a")  # keyboard shortcut: accept
        assert page.inner_text("#flash") == "Decision saved."
        ready(page)
        second = page.url.split("/items/")[1].split("?")[0]
        assert second != first
        page.keyboard.press("r")  # focus the rejection note
        page.keyboard.type("the gold plan repeats the previous step")
        page.keyboard.press("Control+Enter")
        page.wait_for_selector("#flash:has-text('Decision saved.')")
        assert watch.dialogs == [] and watch.errors == []
        page.close()

    q = Queue(path)
    accepted, rejected = q.get(first).row, q.get(second).row
    assert (accepted.status, accepted.reviewer) == ("accepted", "alice")
    assert (rejected.status, rejected.reviewer, rejected.note) == (
        "rejected",
        "alice",
        "the gold plan repeats the previous step",
    )
    assert [e.action for e in q.log() if e.action in ("accept", "reject")] == ["accept", "reject"]

    with running(
        create_app(Queue(path), tokens=TOKENS)
    ) as url:  # the app restarted: decisions are still there
        page = browser.new_page()
        login(page, url, token=TOKENS["bob"])
        page.select_option("select[name=status]", "accepted")
        page.click("#filters button[type=submit]")
        page.wait_for_selector(f"tr[data-item='{first}']")
        assert page.locator("#items tbody tr").count() == 1
        page.goto(f"{url}/items/{second}")
        assert page.inner_text("#item-status") == "rejected"
        page.close()


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
    q.decide("plan-0000", "mallory", "reject", expected_rev=0, note=img + script)
    with running(create_app(q)) as url:
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


def test_a_second_reviewer_on_a_stale_page_sees_a_conflict_and_nothing_is_lost(browser, tmp_path):
    path = tmp_path / "queue.sqlite"
    filled_queue(path)
    with running(create_app(Queue(path), tokens=TOKENS)) as url:
        alice, bob = browser.new_context().new_page(), browser.new_context().new_page()
        login(alice, url, token=TOKENS["alice"])
        login(bob, url, token=TOKENS["bob"])
        for page in (alice, bob):
            page.goto(f"{url}/items/plan-0001")
        alice.click("#accept-button")
        alice.wait_for_selector("#flash")
        bob.fill("#reject-note", "distractor C is also correct")
        bob.click("#reject-button")
        banner = bob.wait_for_selector("#conflict")
        text = banner.inner_text()
        assert "alice" in text and "NOT saved" in text
        assert bob.input_value("#reject-note") == "distractor C is also correct"
        assert bob.inner_text("#item-status") == "accepted"
        alice.context.close()
        bob.context.close()
    view = Queue(path).get("plan-0001")
    assert view.row.status == "accepted" and [r.reviewer for r in view.reviews] == ["alice"]
