"""The review app through FastAPI's TestClient: auth, CSP, escaping, decisions, conflicts, restarts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from annotations import Queue
from annotations.app import CSP, AppOptions, create_app
from annotations.app.auth import check_binding, is_loopback, parse_tokens
from schemas import Problem
from tests.annotations_support import filled_queue, question, trajs

TOKENS = {"alice": "alice-token-0123", "bob": "bob-token-4567"}
LOCAL = ("127.0.0.1", 50000)
BASE = "http://127.0.0.1:8765"
SAME_ORIGIN = {"Origin": BASE}
TEMPLATES = Path(__file__).resolve().parents[1] / "annotations" / "app" / "templates"


@pytest.fixture
def queue(tmp_path) -> Queue:
    return filled_queue(tmp_path / "queue.sqlite")


def client(
    queue: Queue, who: str | None = "alice", tokens: dict[str, str] | None = TOKENS, **kw
) -> TestClient:
    kw.setdefault("options", None)
    options = kw.pop("options")
    c = TestClient(
        create_app(queue, tokens=tokens, options=options),
        client=LOCAL,
        base_url=BASE,
        headers=SAME_ORIGIN,
        **kw,
    )
    if who:
        r = c.post("/login", data={"token": tokens[who]} if tokens else {"name": who})
        assert r.status_code == 200 and "Review queue" in r.text
    return c


def form(page: str, form_id: str) -> dict[str, str]:
    """The hidden inputs of one form on a page."""
    block = re.search(rf'<form[^>]*id="{form_id}".*?</form>', page, re.DOTALL).group(0)
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', block))


def api_seen(c: TestClient, item_id: str) -> dict[str, object]:
    """What a decision through the API must name, as the client reads it."""
    body = c.get(f"/api/items/{item_id}").json()
    return {"content_hash": body["content_hash"], "own_rev": body["own_rev"]}


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
    remote = TestClient(create_app(queue), client=("10.1.2.3", 40000), base_url=BASE)
    assert remote.get("/login").status_code == 403
    assert (
        TestClient(create_app(queue, tokens=TOKENS), client=("10.1.2.3", 40000), base_url=BASE)
        .get("/login")
        .status_code
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
    assert refused.status_code == 422 and "needs a reason or a note" in refused.text
    assert queue.get("action-0000").row.status == "pending"
    c.post(
        "/items/action-0000/decision", data={**data, "note": "the command is a typo fix, not the next step"}
    )
    row = queue.get("action-0000").row
    assert (row.status, row.note) == ("rejected", "the command is a typo fix, not the next step")


def test_two_reviewers_deciding_the_same_page_both_save_and_no_one_gets_a_false_conflict(tmp_path):
    queue = filled_queue(tmp_path / "queue.sqlite", reviews_per_item=2)
    alice, bob = client(queue, "alice"), client(queue, "bob")
    alice_page, bob_page = alice.get("/items/plan-0001").text, bob.get("/items/plan-0001").text
    assert alice.post("/items/plan-0001/decision", data=form(alice_page, "accept-form")).status_code == 200
    r = bob.post(
        "/items/plan-0001/decision", data={**form(bob_page, "reject-form"), "note": "C is also right"}
    )
    assert r.status_code == 200 and 'id="conflict"' not in r.text
    view = queue.get("plan-0001")
    assert view.row.status == "pending" and sorted(x.reviewer for x in view.reviews) == ["alice", "bob"]


def test_a_real_edit_in_between_gives_a_clear_conflict_that_keeps_what_was_typed(queue):
    alice, bob = client(queue, "alice"), client(queue, "bob")
    bob_page = bob.get("/items/plan-0001").text
    edit = form(alice.get("/items/plan-0001").text, "edit-form")
    options = list(question(1).options)
    options[0] = "I need to open the reader module instead"
    alice.post(
        "/items/plan-0001/edit", data={**edit, "option": options, "gold_index": "1", "note": "sharper A"}
    )
    r = bob.post(
        "/items/plan-0001/decision",
        data={**form(bob_page, "reject-form"), "note": "my careful note", "reason": ["ambiguous"]},
    )
    assert r.status_code == 409 and 'id="conflict"' in r.text and "NOT saved" in r.text
    assert "my careful note" in r.text and 'value="ambiguous" data-key="5" checked' in r.text
    assert "alice" not in r.text.split('id="conflict"')[1].split("</div>")[0]  # blind: no name
    # an edit that loses the race keeps the typed options and note in the edit form, not the reject box
    mine = list(question(1).options)
    mine[2] = "I need to submit after running the tests"
    lost = bob.post(
        "/items/plan-0001/edit",
        data={**form(bob_page, "edit-form"), "option": mine, "gold_index": "1", "note": "why C"},
    )
    assert lost.status_code == 409 and '<details id="edit" class="edit" open>' in lost.text
    assert "I need to submit after running the tests</textarea>" in lost.text
    assert (
        'id="edit-note" name="note" rows="2" placeholder="What did you change and why?">why C<' in lost.text
    )
    assert (
        'id="reject-note" name="note" rows="2" placeholder="What is wrong? (Ctrl+Enter sends)"></textarea>'
        in lost.text
    )
    assert [x.reviewer for x in queue.get("plan-0001").reviews] == ["alice"]
    api = bob.post(
        "/api/items/plan-0001/decision",
        json={
            "decision": "reject",
            "content_hash": question(1).model_copy() and form(bob_page, "accept-form")["content_hash"],
            "note": "late",
        },
    )
    assert api.status_code == 409 and api.json()["kind"] == "content"
    assert api.json()["content_hash"] == queue.get("plan-0001").row.content_hash


def test_the_json_api_lists_filters_and_decides(queue):
    c = client(queue, "bob")
    assert [i["item_id"] for i in c.get("/api/items?task=action").json()["items"]] == [
        "action-0000",
        "action-0001",
    ]
    seen = api_seen(c, "plan-0002")
    assert c.post("/api/items/plan-0002/decision", json={"decision": "reject", **seen}).status_code == 422
    ok = c.post(
        "/api/items/plan-0002/decision",
        json={"decision": "reject", **seen, "note": "leaks the answer", "reasons": ["answer_leaked"]},
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
    q.decide("plan-0000", "alice", "reject", seen=q.seen("plan-0000", "alice"), note=evil)
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
                json={"decision": d, **api_seen(c, f"plan-000{i}"), "note": "n"},
            )
    page = alice.get("/agreement").text
    assert '<td class="kappa">0.400</td>' in page  # (2/3 - 4/9) / (1 - 4/9) = 0.4
    assert alice.get("/api/agreement").json()["plan"]["items"] == 3
    assert 'class="badge disputed"' in alice.get("/?task=plan").text


def test_blind_review_hides_other_decisions_until_you_decide_on_pages_and_in_the_api(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", reviews_per_item=2)
    q.decide("plan-0000", "alice", "reject", seen=q.seen("plan-0000", "alice"), note="alice's secret reason")
    bob = client(q, "bob")
    for text in (
        bob.get("/items/plan-0000").text,
        bob.get("/api/items/plan-0000").text,
        bob.get("/").text,
        bob.get("/api/items").text,
    ):
        assert (
            "secret reason" not in text
            and "alice" not in text
            and "rejected"
            not in text.replace("status-rejected", "")
            .replace('value="rejected"', "")
            .replace(">rejected<", "")
        )
    bob.post("/api/items/plan-0000/decision", json={"decision": "accept", **api_seen(bob, "plan-0000")})
    assert "secret reason" in bob.get("/items/plan-0000").text
    assert bob.get("/api/items/plan-0000").json()["reviews"][0]["note"] == "alice's secret reason"


def test_an_adjudicator_sees_disputes_side_by_side_and_rules(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", reviews_per_item=2)
    q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice"))
    q.decide("plan-0000", "bob", "reject", seen=q.seen("plan-0000", "bob"), reasons=["distractor_correct"])
    tokens = {**TOKENS, "judy": "judy-token-89ab"}
    app_options = AppOptions(adjudicators=frozenset({"judy"}))
    assert client(q, "bob", tokens=tokens, options=app_options).get("/disputes").status_code == 403
    judy = client(q, "judy", tokens=tokens, options=app_options)
    page = judy.get("/disputes").text
    card = re.search(r'<section class="card dispute" data-item="plan-0000">.*?</section>', page, re.S).group(
        0
    )
    assert "alice" in card and "bob" in card and "a distractor is also correct" in card
    data = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', card))
    r = judy.post("/items/plan-0000/adjudicate", data={**data, "decision": "reject", "note": "B is right"})
    assert r.status_code == 200 and "No disputed item." in r.text
    assert q.get("plan-0000").row.status == "rejected"


def test_host_and_origin_checks_refuse_dns_rebinding_and_null_origins_in_both_modes(queue):
    for tokens, who in ((None, "carol"), (TOKENS, "alice")):
        c = client(queue, who, tokens=tokens)
        evil = {"Host": "evil.example:8765", "Origin": "http://evil.example:8765"}
        assert c.get("/api/items", headers=evil).status_code == 400
        assert (
            c.post("/login", data={"name": "carol", "token": "alice-token-0123"}, headers=evil).status_code
            == 400
        )
        data = form(c.get("/items/plan-0000").text, "accept-form")
        for origin in ("null", "http://evil.example", "http://127.0.0.1:9999"):
            r = c.post("/items/plan-0000/decision", data=data, headers={"Origin": origin})
            assert r.status_code == 403, origin
        assert c.post("/items/plan-0000/decision", data=data, headers={"Origin": ""}).status_code == 403
        assert queue.get("plan-0000").row.status == "pending"
    bearer = TestClient(create_app(queue, tokens=TOKENS), client=LOCAL, base_url=BASE)
    seen = bearer.get("/api/items/plan-0000", headers={"Authorization": "Bearer bob-token-4567"}).json()
    ok = bearer.post(  # a bearer token is not ambient: no Origin needed
        "/api/items/plan-0000/decision",
        json={"decision": "accept", "content_hash": seen["content_hash"], "own_rev": seen["own_rev"]},
        headers={"Authorization": "Bearer bob-token-4567"},
    )
    assert ok.status_code == 200
    extra = TestClient(
        create_app(queue, tokens=TOKENS, options=AppOptions(allowed_hosts=("review.example.org",))),
        client=LOCAL,
        base_url="http://review.example.org",
    )
    assert extra.get("/login").status_code == 200
    assert (
        TestClient(
            create_app(queue, options=AppOptions(allowed_hosts=("review.example.org",))),
            client=LOCAL,
            base_url="http://review.example.org",
        )
        .get("/login")
        .status_code
        == 400
    )


def test_out_of_range_numbers_are_a_400_never_a_500(queue):
    c = client(queue)
    for path in (
        "/?page=99999999999999999999",
        "/?page=0",
        "/?page=x",
        "/api/items?limit=0",
        "/api/items?offset=-1",
        "/api/items?limit=99999999999999999999",
    ):
        r = c.get(path)
        assert r.status_code == 400, path
    assert "page" in c.get("/?page=99999999999999999999").text
    assert c.get("/?page=500").status_code == 200  # beyond the last page: the last page
    data = form(c.get("/items/plan-0000").text, "accept-form")
    assert (
        c.post("/items/plan-0000/decision", data={**data, "own_rev": "99999999999999999999"}).status_code
        == 400
    )


def test_a_note_over_the_limit_is_refused_by_api_and_form_and_the_form_keeps_the_text(queue):
    c = client(queue)
    huge = "x" * 10_001
    r = c.post(
        "/api/items/plan-0000/decision", json={"decision": "reject", **api_seen(c, "plan-0000"), "note": huge}
    )
    assert r.status_code == 400 and r.json()["error"] == "bad_request" and "note" in r.json()["message"]
    data = form(c.get("/items/plan-0000").text, "reject-form")
    page = c.post("/items/plan-0000/decision", data={**data, "note": huge})
    assert page.status_code == 400 and "10,001 characters; the limit is 10,000" in page.text
    assert f">{huge}</textarea>" in page.text
    assert queue.get("plan-0000").row.status == "pending" and len(list(queue.log("plan-0000"))) == 1


def test_guidelines_reasons_progress_undo_and_gate_warnings_on_the_item_page(queue):
    warn = Problem(
        where="plan-0000",
        stage="check",
        reason="length_outlier",
        detail="option B is 3x longer",
        severity="warning",
    )
    opts = AppOptions(
        guidelines={
            "plan": "Accept only if the plan names **the file** to change. <script>alert(1)</script>"
        },
        gates=lambda q: [warn] if q.item_id == "plan-0000" else [],
    )
    c = client(queue, options=opts)
    page = c.get("/items/plan-0000?task=plan").text
    assert "<strong>the file</strong>" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "What to check" in page and "<strong>Accept</strong> when the option marked" in page
    assert 'id="warnings"' in page and "length_outlier" in page and "option B is 3x longer" in page
    assert "you: 0 done · 1 assigned · 3 left" in page
    data = form(page, "reject-form")
    c.post("/items/plan-0000/decision?task=plan", data={**data, "reason": ["gold_wrong", "answer_leaked"]})
    (review,) = queue.get("plan-0000").reviews
    assert review.reasons == ("answer_leaked", "gold_wrong")
    stats = c.get("/api/stats").json()
    assert stats["reasons"]["plan"]["gold_wrong"] == 1 and stats["reviewers"][0]["reviews"] == 1
    nxt = c.get("/items/plan-0001?task=plan").text
    assert 'id="previous-link"' in nxt and "/items/plan-0000" in nxt and 'id="undo-button"' in nxt
    r = c.post("/undo")
    assert r.status_code == 200 and "Your last decision was withdrawn" in r.text
    assert queue.get("plan-0000").row.status == "pending" and queue.get("plan-0000").reviews == ()
    assert c.get("/api/me").json()["progress"] == {"done": 0, "assigned": 2, "left": 5}


def test_search_and_sort_on_the_list(queue):
    c = client(queue)
    page = c.get("/?q=repo-1").text
    assert (
        'data-item="plan-0001"' in page
        and 'data-item="action-0001"' in page
        and 'data-item="plan-0000"' not in page
    )
    assert [i["item_id"] for i in c.get("/api/items?q=ops_2").json()["items"]] == ["plan-0002"]
    assert c.get("/?sort=nonsense").status_code == 200


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
    steps = re.findall(r'<details class="step ([^"]*)" (open)?>', page)
    assert len(steps) == 5 and sum(1 for _, o in steps if o) == 4  # the task statement + the last three
    assert steps[1][0] == "role-user statement" and steps[1][1] == "open"
    assert (
        '<span class="step-preview">→ python -m pytest -x · line 0</span>' in page
    )  # the tool step names its call
    assert '<pre class="code"><code data-lang="bash">python -m pytest -x</code></pre>' in page
    assert '<details class="fold">' in page and "line 59" in page
    gold = re.search(r'<li class="option gold" data-letter="B">.*?</li>', page, re.DOTALL).group(0)
    assert "✓ gold" in gold and question(0).gold in gold
