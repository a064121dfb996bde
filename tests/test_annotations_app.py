"""The review app through FastAPI's TestClient: auth, CSP, escaping, decisions, conflicts, restarts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from annotations import Queue
from annotations.app import CSP, create_app
from annotations.app.auth import check_binding, is_loopback, parse_tokens
from tests.annotations_support import filled_queue, question, trajs

TOKENS = {"alice": "alice-token-0123", "bob": "bob-token-4567"}
LOCAL = ("127.0.0.1", 50000)
TEMPLATES = Path(__file__).resolve().parents[1] / "annotations" / "app" / "templates"


@pytest.fixture
def queue(tmp_path) -> Queue:
    return filled_queue(tmp_path / "queue.sqlite")


def client(
    queue: Queue, who: str | None = "alice", tokens: dict[str, str] | None = TOKENS, **kw
) -> TestClient:
    c = TestClient(create_app(queue, tokens=tokens), client=LOCAL, **kw)
    if who:
        r = c.post("/login", data={"token": tokens[who]} if tokens else {"name": who})
        assert r.status_code == 200 and "Review queue" in r.text
    return c


def form(page: str, form_id: str) -> dict[str, str]:
    """The hidden inputs of one form on a page."""
    block = re.search(rf'<form[^>]*id="{form_id}".*?</form>', page, re.DOTALL).group(0)
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', block))


def test_every_response_carries_a_strict_content_security_policy(queue):
    c = client(queue)
    for path in (
        "/login",
        "/",
        "/items/plan-0000",
        "/static/app.js",
        "/items/nope",
        "/api/items",
        "/agreement",
    ):
        r = c.get(path)
        assert r.headers["content-security-policy"] == CSP, path
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "default-src 'none'" in CSP
    assert c.get("/items/nope").status_code == 404


def test_with_tokens_every_page_and_api_call_needs_a_valid_token(queue):
    anon = client(queue, who=None, follow_redirects=False)
    assert anon.get("/").status_code == 303 and anon.get("/").headers["location"] == "/login"
    assert anon.get("/api/items").status_code == 401
    assert anon.post("/login", data={"token": "guessed-token"}).status_code == 401
    assert anon.get("/api/items", headers={"Authorization": "Bearer bob-token-4567"}).json()["total"] == 5
    assert anon.get("/api/items", headers={"Authorization": "Bearer bob-token-4568"}).status_code == 401
    page = client(queue, "bob").get("/").text
    assert 'id="reviewer-name">bob<' in page and "bob-token-4567" not in page


def test_open_mode_serves_loopback_only_and_binding_beyond_it_needs_tokens(queue):
    assert client(queue, "carol", tokens=None).get("/").status_code == 200
    remote = TestClient(create_app(queue), client=("10.1.2.3", 40000))
    assert remote.get("/login").status_code == 403
    assert (
        TestClient(create_app(queue, tokens=TOKENS), client=("10.1.2.3", 40000)).get("/login").status_code
        == 200
    )
    check_binding("127.0.0.1", {})
    check_binding("::1", {})
    check_binding("0.0.0.0", TOKENS)
    for host in ("0.0.0.0", "192.168.1.5", "example.org", "::"):
        with pytest.raises(ValueError, match="tokens are required"):
            check_binding(host, {})
    assert is_loopback("localhost") and is_loopback("127.0.0.2") and not is_loopback("0.0.0.0")


def test_token_specs_parse_and_errors_never_show_the_token():
    assert parse_tokens("alice:alice-token-0123, bob:bob-token-4567") == TOKENS
    for spec in ("alice:short", "alice-token-0123", "al ice:alice-token-0123", "a:xxxxxxxx1,b:xxxxxxxx1"):
        with pytest.raises(ValueError) as caught:
            parse_tokens(spec)
        assert "xxxxxxxx1" not in str(caught.value) and "alice-token-0123" not in str(caught.value)


def test_accepting_from_the_item_page_saves_and_moves_to_the_next_item(queue):
    c = client(queue)
    page = c.get("/items/plan-0000?task=plan").text
    r = c.post("/items/plan-0000/decision?task=plan", data=form(page, "accept-form"), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/next?task=plan")
    nxt = c.get(r.headers["location"], follow_redirects=False)
    assert nxt.headers["location"].startswith("/items/plan-0001?task=plan")
    assert "Decision saved." in c.get(nxt.headers["location"]).text
    row = queue.get("plan-0000").row
    assert (row.status, row.reviewer) == ("accepted", "alice")


def test_a_rejection_needs_a_note_and_keeps_it(queue):
    c = client(queue)
    data = form(c.get("/items/action-0000").text, "reject-form")
    refused = c.post("/items/action-0000/decision", data={**data, "note": "  "})
    assert refused.status_code == 422 and "needs a note" in refused.text
    assert queue.get("action-0000").row.status == "pending"
    c.post(
        "/items/action-0000/decision", data={**data, "note": "the command is a typo fix, not the next step"}
    )
    row = queue.get("action-0000").row
    assert (row.status, row.note) == ("rejected", "the command is a typo fix, not the next step")


def test_a_second_reviewer_deciding_a_stale_page_gets_a_clear_conflict_and_nothing_is_overwritten(queue):
    alice, bob = client(queue, "alice"), client(queue, "bob")
    alice_page, bob_page = alice.get("/items/plan-0001").text, bob.get("/items/plan-0001").text
    assert alice.post("/items/plan-0001/decision", data=form(alice_page, "accept-form")).status_code == 200
    r = bob.post(
        "/items/plan-0001/decision", data={**form(bob_page, "reject-form"), "note": "my careful note"}
    )
    assert r.status_code == 409
    assert (
        'id="conflict"' in r.text
        and "alice" in r.text
        and "NOT saved" in r.text
        and "my careful note" in r.text
    )
    view = queue.get("plan-0001")
    assert view.row.status == "accepted" and [x.reviewer for x in view.reviews] == ["alice"]
    api = bob.post("/api/items/plan-0001/decision", json={"decision": "reject", "rev": 0, "note": "late"})
    assert api.status_code == 409 and api.json()["error"] == "conflict" and api.json()["current_rev"] == 1


def test_the_json_api_lists_filters_and_decides(queue):
    c = client(queue, "bob")
    assert [i["item_id"] for i in c.get("/api/items?task=action").json()["items"]] == [
        "action-0000",
        "action-0001",
    ]
    assert c.post("/api/items/plan-0002/decision", json={"decision": "reject", "rev": 0}).status_code == 422
    ok = c.post(
        "/api/items/plan-0002/decision", json={"decision": "reject", "rev": 0, "note": "leaks the answer"}
    )
    assert ok.status_code == 200 and ok.json()["item"]["status"] == "rejected"
    assert c.get("/api/items?status=rejected").json()["total"] == 1
    detail = c.get("/api/items/plan-0002").json()
    assert (
        detail["question"]["gold"] == question(2).gold and detail["reviews"][0]["note"] == "leaks the answer"
    )


def test_an_edit_from_the_item_page_creates_a_version_and_keeps_the_original(queue):
    c = client(queue)
    data = form(c.get("/items/plan-0002").text, "edit-form")
    options = list(question(2).options)
    options[3] = "I need to rerun the reproduction script"
    r = c.post(
        "/items/plan-0002/edit", data={**data, "option": options, "gold_index": "3", "note": "gold moved"}
    )
    assert r.status_code == 200 and "Edit saved" in r.text
    view = queue.get("plan-0002")
    assert view.row.status == "edited" and view.question.gold == options[3] and view.question.gold_index == 3
    assert view.versions[0].question == question(2)
    page = c.get("/items/plan-0002").text
    assert 'id="original"' in page and question(2).gold in page


def test_untrusted_trajectory_text_is_escaped_everywhere(tmp_path):
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    q = Queue(tmp_path / "queue.sqlite")
    q.enqueue([question(0, context=evil, gold=f"I need {evil}", instance=f"inst{evil}")], batch="v1")
    q.decide("plan-0000", "alice", "reject", expected_rev=0, note=evil)
    page = client(q, "alice").get("/items/plan-0000").text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in page
    assert page.count("<script") == 1  # the app's own /static/app.js
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text()
        assert (
            "|safe" not in text.replace(" ", "") and "autoescape false" not in text and "Markup" not in text
        )


def test_decisions_survive_an_app_restart(queue):
    c = client(queue)
    c.post("/items/plan-0000/decision", data=form(c.get("/items/plan-0000").text, "accept-form"))
    restarted = client(Queue(queue.path), "bob")
    assert restarted.get("/api/items/plan-0000").json()["item"]["status"] == "accepted"
    assert (
        '<span class="badge status-accepted" id="item-status">accepted</span>'
        in restarted.get("/items/plan-0000").text
    )


def test_agreement_figures_appear_once_items_have_two_reviews(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", n_plan=3, n_action=0, reviews_per_item=2)
    alice, bob = client(q, "alice"), client(q, "bob")
    assert "No item has two reviews yet" in alice.get("/agreement").text
    for i, (a, b) in enumerate([("accept", "accept"), ("accept", "reject"), ("reject", "reject")]):
        for c, d in ((alice, a), (bob, b)):
            c.post(
                f"/api/items/plan-000{i}/decision",
                json={"decision": d, "rev": q.get(f"plan-000{i}").row.rev, "note": "n"},
            )
    page = alice.get("/agreement").text
    assert '<td class="kappa">0.400</td>' in page  # (2/3 - 4/9) / (1 - 4/9) = 0.4
    assert alice.get("/api/agreement").json()["plan"]["items"] == 3
    assert 'class="badge disputed"' in alice.get("/?task=plan").text


def test_blind_review_hides_other_decisions_until_you_decide(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", reviews_per_item=2)
    q.decide("plan-0000", "alice", "reject", expected_rev=0, note="alice's secret reason")
    bob = client(q, "bob")
    assert "alice's secret reason" not in bob.get("/items/plan-0000").text
    bob.post("/api/items/plan-0000/decision", json={"decision": "accept", "rev": 1})
    assert "secret reason" in bob.get("/items/plan-0000").text


def test_cross_site_form_posts_are_refused(queue):
    c = client(queue)
    data = form(c.get("/items/plan-0000").text, "accept-form")
    r = c.post("/items/plan-0000/decision", data=data, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and queue.get("plan-0000").row.status == "pending"


def test_the_item_page_shows_steps_code_and_the_gold_readably(tmp_path):
    long_obs = "\n".join(f"line {i}" for i in range(60))
    q = Queue(tmp_path / "queue.sqlite")
    steps = trajs(
        {"role": "assistant", "thought": "Run it:\n```bash\npython -m pytest -x\n```"},
        {"role": "tool", "content": [{"type": "text", "text": long_obs}]},
        {"role": "assistant", "plan": "I need to check the table"},
    )
    q.enqueue([question(0).model_copy(update={"fields": {"trajs": steps}})], batch="v1")
    page = client(q, "alice", tokens=None).get("/items/plan-0000").text
    assert page.count('<details class="step"') == 5 and page.count('<details class="step" open>') == 3
    assert '<pre class="code"><code data-lang="bash">python -m pytest -x</code></pre>' in page
    assert '<details class="fold">' in page and "line 59" in page
    gold = re.search(r'<li class="option gold" data-letter="B">.*?</li>', page, re.DOTALL).group(0)
    assert "✓ gold" in gold and question(0).gold in gold
