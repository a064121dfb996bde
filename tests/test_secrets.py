"""Secret scanning and redaction: unit tests of the scanner, and a real build with planted secrets."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hygiene_inputs import (
    ENCODED_SECRETS,
    FAKE_SECRETS,
    PLACEHOLDER_KIND,
    RUN,
    SPLIT_KEY,
    SUMMARY,
    as_swesmith_row,
    env_dump,
    leak_needles,
    plant_secrets,
)

from flows.config import load_config
from flows.hygiene import assert_release_clean, scan_release
from generators.hygiene import secrets as secrets_mod
from generators.hygiene.scrub import (
    _QUESTION_KEEP,
    redact_problems,
    redact_question,
    redact_questions,
    redacted_texts,
)
from generators.hygiene.secrets import (
    PrivacyOptions,
    Redactor,
    Scanner,
    SecretsFound,
    Span,
    assert_clean,
    placeholder,
    scan_rows,
    strings_of,
)
from schemas import Distractor, Problem, Provenance, Question


def _redact(text: str, options: PrivacyOptions | None = None) -> str:
    redactor = Redactor(Scanner(options))
    redactor.learn([text])
    return redactor.redact(text).text


@pytest.mark.parametrize("name", sorted(FAKE_SECRETS))
def test_every_listed_kind_is_replaced_by_its_typed_placeholder(name):
    secret = FAKE_SECRETS[name]
    out = _redact(env_dump() + f"\nand once more inline: {secret} .")
    assert secret not in out
    assert placeholder(PLACEHOLDER_KIND[name]) in out


def test_a_secret_is_found_without_detect_secrets_too():
    out = _redact(env_dump(), PrivacyOptions(detect_secrets=False))
    assert not [k for k, s in FAKE_SECRETS.items() if s in out]


@pytest.mark.parametrize(
    "text",
    [
        f'client = OpenAI(api_key=("{SPLIT_KEY[0]}"\n    "{SPLIT_KEY[1]}"))',
        f'key = "{SPLIT_KEY[0]}" + \\\n  "{SPLIT_KEY[1]}"',
        json.dumps({"cmd": f'x = ("{SPLIT_KEY[0]}"\n "{SPLIT_KEY[1]}")'}),  # JSON-escaped quotes, \n
    ],
    ids=["parenthesised", "plus-continuation", "json-escaped"],
)
def test_a_key_split_over_string_literals_is_redacted_in_every_piece(text):
    red = _redact(text)
    assert SPLIT_KEY[0] not in red and SPLIT_KEY[1] not in red
    assert red.count("<REDACTED:openai_key>") == 2
    if text.startswith("{"):
        assert json.loads(red)  # still valid JSON


@pytest.mark.parametrize(
    ("form", "kind"),
    [
        ("base64", "github_token"),
        ("base64url", "anthropic_key"),
        ("hex", "huggingface_token"),
        ("percent", "slack_token"),
    ],
)
def test_an_encoded_secret_of_a_known_format_is_redacted_whole(form, kind):
    red = _redact(f"config: value={ENCODED_SECRETS[form]} end")
    assert red == f"config: value=<REDACTED:{kind}> end"


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b and tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "greeting=" + base64.b64encode(b"hello world, nothing to hide here at all").decode(),
        "path=/usr/lib/python3/dist-packages/setuptools_scm/version.py",
        "url=https://example.com/search?q=caf%C3%A9%20au%20lait%20recipes",
        'names = ("alpha_beta" "gamma_delta")',
    ],
)
def test_encoded_or_split_text_without_a_secret_is_left_alone(text):
    assert _redact(text) == text


def test_the_key_of_a_key_value_line_is_kept_and_only_the_value_replaced():
    out = _redact(
        f"export AWS_ACCESS_KEY_ID={FAKE_SECRETS['aws_access_key_id']}\nDB_PASSWORD='{FAKE_SECRETS['password']}'"
    )
    assert out == "export AWS_ACCESS_KEY_ID=<REDACTED:aws_access_key_id>\nDB_PASSWORD='<REDACTED:password>'"


def test_the_same_secret_reads_the_same_everywhere_even_where_no_pattern_sees_it():
    pw = FAKE_SECRETS["password"]
    redactor = Redactor()
    texts = [f"DB_PASSWORD={pw}", f"mysql -h db -u app --pass {pw} -e 'select 1'"]
    assert Scanner().spans(texts[1]) == []  # alone, the second text looks harmless
    redactor.learn(texts)
    assert [redactor.redact(t).text for t in texts] == [
        "DB_PASSWORD=<REDACTED:password>",
        "mysql -h db -u app --pass <REDACTED:password> -e 'select 1'",
    ]


def test_a_released_redactor_keeps_its_values_and_counts_but_not_the_texts():
    pw = FAKE_SECRETS["password"]
    redactor = Redactor()
    texts = [f"DB_PASSWORD={pw}", "a line long enough to be scanned by detect-secrets 1234abcd"]
    redactor.learn(texts)
    found = dict(redactor.found)
    redactor.release()
    assert redactor._spans == {} and redactor.scanner._ds_cache == {}  # no scanned text is held
    assert redactor.redact(f"mysql --pass {pw}").text == "mysql --pass <REDACTED:password>"
    assert dict(redactor.found) == found  # the counts of what was found before stay


def test_a_redactor_remembers_a_bounded_number_of_clean_texts_and_counts_each_finding_once(monkeypatch):
    """A build meets millions of texts: the digests of those without findings are kept for the last
    CLEAN_MEMORY to twice as many (scanning one again finds nothing again), those with findings all
    (each counts once however often it is learnt)."""
    monkeypatch.setattr(secrets_mod, "CLEAN_MEMORY", 8)
    pw = FAKE_SECRETS["password"]
    redactor = Redactor()
    clean = [f"an ordinary line of build output number {i}" for i in range(50)]
    redactor.learn([*clean, f"DB_PASSWORD={pw}"])
    assert len(redactor._clean) + len(redactor._clean_old) <= 16
    found = dict(redactor.found)
    assert found
    for _ in range(2):  # learnt again after a release, the clean texts evicted and rescanned
        redactor.release()
        redactor.learn([f"DB_PASSWORD={pw}", *clean])
        assert dict(redactor.found) == found
    assert [redactor.redact(t).text for t in clean] == clean


def test_learning_groups_tells_which_groups_hold_a_finding_even_one_learnt_before_a_release():
    pw = FAKE_SECRETS["password"]
    redactor = Redactor()
    assert redactor.learn_groups([["plain words here"], [f"DB_PASSWORD={pw}", "more plain words"]]) == [
        False,
        True,
    ]
    redactor.release()
    assert redactor.learn_groups([["other plain words"], ["", f"DB_PASSWORD={pw}"]]) == [False, True]


def _full_question(text: str) -> Question:
    return Question(
        item_id="q",
        scenario="swe_issue_fix",
        task="plan",
        form="mcq",
        trajectory_id="t",
        step_index=1,
        fields={"trajs": text, "nested": {"list": ["a", ("b", text)]}},
        gold="gold",
        options=("gold", "d1"),
        gold_index=0,
        distractors=(Distractor(text="d1", origin="other_run:x"),),
        reserve=(Distractor(text="r1", origin="rule:y"),),
        provenance=Provenance(source_file="f", source_format="x", extractor="swe_issue_fix"),
    )


def test_the_texts_learnt_of_a_question_are_every_string_its_redaction_reads():
    q = _full_question("context")
    dumped = {k: v for k, v in q.model_dump().items() if k not in _QUESTION_KEEP}
    assert sorted(redacted_texts(q)) == sorted(strings_of(dumped))


def test_a_question_learnt_clean_is_redacted_for_known_values_only():
    pw = FAKE_SECRETS["password"]
    redactor = Redactor()
    plain = _full_question("the context says nothing secret")
    assert redactor.learn_groups([redacted_texts(plain)]) == [False]
    same, counts, _ = redact_question(plain, redactor, scanned=True)
    assert same is plain and not counts  # no value learnt: nothing to look for
    redactor.learn([f"DB_PASSWORD={pw}"])
    quoting = _full_question(f"mysql -h db --pass {pw}")
    red, counts, _ = redact_question(quoting, redactor, scanned=True)
    assert red.fields["trajs"] == "mysql -h db --pass <REDACTED:password>" and counts["password"] == 2


def test_a_weak_password_is_redacted_where_assigned_but_not_in_every_command():
    redactor = Redactor()
    texts = ["PGPASSWORD=postgres", "psql -U postgres -h localhost"]
    redactor.learn(texts)
    assert [redactor.redact(t).text for t in texts] == ["PGPASSWORD=<REDACTED:password>", texts[1]]


def test_json_escaped_text_stays_valid_json_with_the_same_redaction():
    raw = env_dump() + "\n" + FAKE_SECRETS["github_token"] + "\n\t" + FAKE_SECRETS["huggingface_token"]
    escaped = json.dumps([{"role": "tool", "content": raw}])
    redactor = Redactor()
    redactor.learn([raw, escaped])
    assert json.loads(redactor.redact(escaped).text)[0]["content"] == redactor.redact(raw).text
    assert not [k for k, s in FAKE_SECRETS.items() if s.split("\n")[0] in redactor.redact(escaped).text]


def test_a_keyword_value_with_backslashes_in_json_text_is_redacted_without_breaking_the_json():
    raw = 'conn(password = "pass:word\\\\with special chars")\nPGPASSWORD value: pass:word\\with special chars\n'
    escaped = json.dumps([{"role": "tool", "content": raw}])
    redactor = Redactor()
    redactor.learn([raw, escaped])
    decoded = json.loads(redactor.redact(escaped).text)[0]["content"]
    assert "pass:word" not in decoded and "<REDACTED:password>" in decoded


def test_a_detect_secrets_value_is_widened_to_its_token_but_never_into_a_key_or_an_escape():
    line = 'TOKEN=ghp_x + "ab12cd34\\" \\nghp_y'
    spans = list(Scanner._locate(line, 100, "secret", "ab12cd34\\"))
    assert [line[s.start - 100 : s.end - 100] for s in spans] == ["ab12cd34"]
    assert [line[s.start - 100 : s.end - 100] for s in Scanner._locate(line, 100, "github_token", "ghp")] == [
        "ghp_x",
        "ghp_y",
    ]


class _SplittingScanner(Scanner):
    """A scanner whose span ends inside a JSON escape, to exercise the redaction guard."""

    def spans(self, text):
        i = text.find("\\n")
        return [Span(0, i + 1, "secret")] if text.startswith("[") and i > 0 else []


def test_a_question_whose_json_context_redaction_would_break_is_refused_not_shipped():
    q = Question(
        item_id="i",
        scenario="swe_issue_fix",
        task="action",
        form="completion",
        trajectory_id="t",
        step_index=1,
        fields={"trajs": json.dumps(["line one\nline two"])},
        gold="ls",
        provenance=Provenance(source_file="f", source_format="x", extractor="swe_issue_fix"),
    )
    kept, _, refused = redact_questions([q], Redactor(_SplittingScanner()))
    assert kept == [] and [(p.where, p.reason, p.severity) for p in refused] == [
        ("i", "redaction_broke_json", "error")
    ]


@pytest.mark.parametrize(
    "line",
    [
        "token = tokenize(source)",
        'password = os.environ["PASSWORD"]',
        "api_key: str | None = None",
        "export OPENAI_API_KEY=$OPENAI_API_KEY",
        "password='password'",
        "max_tokens=4000",
        "GITHUB_TOKEN=<REDACTED:github_token>",
        "git checkout 3f9a2c1e8be04d71c21f5e90aa11bb22cc33dd44",
        "id = '9f1c2e4a-7b3d-4c5e-8f6a-0b1c2d3e4f5a'",
        "sk-learn is not a key",
        "PWD=/testbed/tinycalc",
        "secret_key: ${{ secrets.SECRET_KEY }}",
        "https://user:<REDACTED:url_password>@example.org/x",
    ],
)
def test_code_placeholders_and_ids_are_not_taken_for_secrets(line):
    assert Scanner().spans(line) == []


def test_emails_and_phones_are_redacted_only_when_the_config_asks():
    text = "Contact alice.smith@acme.dev or +1 415-555-0142; remote git@github.com:acme/x.git"
    assert _redact(text) == text
    out = _redact(text, PrivacyOptions(redact_emails=True, redact_phones=True))
    assert out == "Contact <REDACTED:email> or <REDACTED:phone>; remote git@github.com:acme/x.git"


def test_publish_guard_refuses_rows_with_a_secret_and_names_kind_and_place_only():
    rows = [
        {
            "item_id": "i1",
            "trajs": f"token {FAKE_SECRETS['github_token']}",
            "options": ["a", FAKE_SECRETS["jwt"]],
        }
    ]
    findings = scan_rows(rows)
    assert {(f.kind, f.where, f.field) for f in findings} == {
        ("github_token", "i1", "trajs"),
        ("jwt", "i1", "options"),
    }
    with pytest.raises(SecretsFound) as err:
        assert_clean(rows)
    assert "github_token" in str(err.value) and FAKE_SECRETS["github_token"] not in str(err.value)
    redactor = Redactor()
    counts: Counter[str] = Counter()
    clean = [{k: redactor.redact_value(v, counts) for k, v in r.items()} for r in rows]
    assert counts == {"github_token": 1, "jwt": 1}
    assert_clean(clean)  # redacted rows pass: placeholders are never findings


def test_problem_details_that_quote_a_secret_are_redacted():
    problem = Problem(
        where="in/tokens.json",
        stage="read",
        reason="unknown_format",
        detail=f"no reader recognises this record (top-level: {FAKE_SECRETS['github_pat']}, x)",
    )
    (out,) = redact_problems([problem], Redactor())
    assert FAKE_SECRETS["github_pat"] not in out.detail and "<REDACTED:github_token>" in out.detail


def test_a_secret_learnt_in_a_later_batch_of_problems_is_redacted_in_an_earlier_one():
    from flows.build_stages import _redacted
    from flows.problem_log import ProblemLog

    pw = FAKE_SECRETS["password"]
    log = ProblemLog([Problem(where="a", stage="read", reason="x", detail=f"mysql --pass {pw}")])
    log.extend([Problem(where="b", stage="read", reason="x", detail=f"DB_PASSWORD={pw}")])
    assert [p.detail for p in _redacted(log, Redactor())] == [
        "mysql --pass <REDACTED:password>",
        "DB_PASSWORD=<REDACTED:password>",
    ]


def test_redaction_keeps_the_gold_among_the_options():
    clone = f"git clone https://deploy:{FAKE_SECRETS['url_password']}@git.acme.dev/x.git"
    q = Question(
        item_id="i",
        scenario="swe_issue_fix",
        task="plan",
        form="mcq",
        trajectory_id="t",
        step_index=1,
        fields={"trajs": json.dumps([{"role": "tool", "content": env_dump()}])},
        gold=clone,
        options=("ls", clone, "pytest -q", "cat setup.py"),
        gold_index=1,
        provenance=Provenance(source_file="f", source_format="x", extractor="swe_issue_fix"),
    )
    (red,), counts, refused = redact_questions([q], Redactor())
    assert (
        red.options[red.gold_index]
        == red.gold
        == "git clone https://deploy:<REDACTED:url_password>@git.acme.dev/x.git"
    )
    assert (
        refused == []
        and counts["url_password"] >= 2
        and not [s for s in FAKE_SECRETS.values() if s in red.model_dump_json()]
    )


# --- a real build with planted secrets -------------------------------------------------------------


def _inputs(root: Path) -> Path:
    """Planted run + harness summary, a copy of the run in another folder, the run as a SWE-smith row,
    and a record whose top-level keys are tokens (its quarantine detail would quote them)."""
    inputs = root / "inputs"
    data = plant_secrets(inputs / "sweagent" / RUN / f"{RUN}.traj")
    shutil.copy(SUMMARY, inputs / "sweagent" / "harness_summary.json")
    (inputs / "mirror").mkdir()
    shutil.copy(inputs / "sweagent" / RUN / f"{RUN}.traj", inputs / "mirror" / f"{RUN}.traj")
    (inputs / "smith").mkdir()
    (inputs / "smith" / "rows.jsonl").write_text(json.dumps(as_swesmith_row(data)) + "\n")
    (inputs / "junk").mkdir()
    (inputs / "junk" / "tokens.json").write_text(
        json.dumps({FAKE_SECRETS["github_pat"]: "ci", FAKE_SECRETS["huggingface_token"]: "hub"})
    )
    return inputs


def _texts_of(folder: Path) -> dict[str, str]:
    """Every output file as text: Parquet decoded to rows, SQLite dumped, Prefect's cached results
    (JSON with a base64 pickle) decoded, the rest decoded bytes."""
    texts = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        if path.suffix == ".parquet":
            texts[str(path)] = json.dumps(pq.read_table(path).to_pylist(), ensure_ascii=False, default=str)
        elif path.suffix == ".sqlite" or raw[:15] == b"SQLite format 3":
            with sqlite3.connect(path) as db:
                texts[str(path)] = "\n".join(db.iterdump())
        elif raw[:12] == b'{"metadata":':
            record = json.loads(raw)
            texts[str(path)] = base64.b64decode(record["result"]).decode("utf-8", errors="replace")
        else:
            texts[str(path)] = raw.decode("utf-8", errors="replace")
    return texts


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def planted_build(prefect_harness, tmp_path_factory):
    from flows.build import run_build

    root = tmp_path_factory.mktemp("planted")
    _inputs(root)
    (root / "build.yaml").write_text(
        "scenario: swe_issue_fix\nversion: v-secrets\nsources: [inputs]\nseed: 11\nout_dir: out\n"
        "tasks: {plan: {max_items_per_trajectory: 50}, action: {max_items_per_trajectory: 50}}\n"
    )
    capture = _Capture()
    loggers = [logging.getLogger(), logging.getLogger("prefect")]
    for lg in loggers:
        lg.addHandler(capture)
    try:
        report = run_build(load_config(root / "build.yaml")).model_dump(mode="json")
    finally:
        for lg in loggers:
            lg.removeHandler(capture)
    return root / "out", report, capture.lines


@pytest.mark.flow
def test_no_planted_secret_reaches_any_output_file_or_log(planted_build, capfd):
    out, _, logs = planted_build
    texts = _texts_of(out)
    assert any(p.endswith("plan.parquet") for p in texts) and any(
        p.endswith("quarantine.jsonl") for p in texts
    )
    assert any(p.endswith(".sqlite") for p in texts), "the review queue is an output too"
    cached = [p for p in texts if "/.cache/" in p]
    assert any("<REDACTED:" in texts[p] for p in cached)  # the cache holds redacted runs, read decoded
    leaks = {
        (Path(p).name, k)
        for p, text in texts.items()
        for k, needle in leak_needles().items()
        if needle in text
    }
    assert leaks == set()
    modes = {oct(p.stat().st_mode & 0o777) for p in (out / ".cache").rglob("*") if p.is_file()}
    assert modes == {"0o600"}
    captured = capfd.readouterr()
    assert not [k for k, s in FAKE_SECRETS.items() if s in "\n".join(logs) + captured.out + captured.err]


@pytest.mark.flow
def test_each_planted_secret_shows_up_redacted_with_its_typed_placeholder(planted_build):
    out, report, _ = planted_build
    version = out / "swe_issue_fix" / "v-secrets"
    rows = [
        r
        for t in ("plan", "action")
        for r in pq.read_table(version / "candidates" / f"{t}.parquet").to_pylist()
    ]
    shown = json.dumps(rows)
    assert {k for k, kind in PLACEHOLDER_KIND.items() if placeholder(kind) not in shown} == set()
    # the clone is no action gold (its URL and folder appear nowhere before it: unreachable by exact
    # match), but later items show it, redacted, in their context
    assert "git clone https://deploy:<REDACTED:url_password>@git.acme.dev/tinycalc.git /tmp/tinycalc-ref" in (
        shown.replace('\\"', '"')
    )
    secrets = report["secrets"]
    assert set(PLACEHOLDER_KIND.values()) <= set(secrets["redacted_in_trajectories"])
    assert secrets["items_with_redactions"] == len([r for r in rows if "<REDACTED:" in json.dumps(r)])
    listed = [json.loads(line) for line in (version / "redactions.jsonl").read_text().splitlines()]
    assert {r["item_id"] for r in listed} == {r["item_id"] for r in rows if "<REDACTED:" in json.dumps(r)}
    quarantine = [json.loads(line) for line in (version / "quarantine.jsonl").read_text().splitlines()]
    unknown = [q for q in quarantine if q["reason"] == "unknown_format"]
    assert unknown and "<REDACTED:github_token>" in unknown[0]["detail"]


@pytest.mark.flow
def test_the_copied_run_yields_one_set_of_items_and_a_dedup_count(planted_build):
    out, report, _ = planted_build
    version = out / "swe_issue_fix" / "v-secrets"
    rows = [
        r
        for t in ("plan", "action")
        for r in pq.read_table(version / "candidates" / f"{t}.parquet").to_pylist()
    ]
    assert len({r["trajectory_id"] for r in rows}) == 1 and {r["source_format"] for r in rows} == {
        "swe_agent_traj"
    }
    assert report["dedup"]["trajectories"] == 2 and report["dropped_by_reason"]["duplicate_trajectory"] == 2
    quarantine = [json.loads(line) for line in (version / "quarantine.jsonl").read_text().splitlines()]
    copies = [q for q in quarantine if q["stage"] == "dedup" and q["reason"] == "duplicate_trajectory"]
    assert len(copies) == 2 and all("kept that one" in q["detail"] for q in copies)


@pytest.mark.flow
def test_the_release_guard_passes_the_built_folder_and_refuses_a_planted_file(planted_build, tmp_path):
    out, _, _ = planted_build
    version = out / "swe_issue_fix" / "v-secrets"
    assert scan_release(version) == []
    assert_release_clean(version)
    release = tmp_path / "release"
    shutil.copytree(version, release)
    (release / "README.md").write_text(f"# card\nexport HF_TOKEN={FAKE_SECRETS['huggingface_token']}\n")
    with pytest.raises(SecretsFound) as err:
        assert_release_clean(release)
    assert "README.md:2" in str(err.value) and FAKE_SECRETS["huggingface_token"] not in str(err.value)
    # every file is scanned, whatever its name or size; split and encoded forms too
    (release / "README.md").unlink()
    (release / "blob.bin").write_text("x" * 2_000_000 + f"\ntoken: {ENCODED_SECRETS['base64']}\n")
    (release / "client.py").write_text(f'k = ("{SPLIT_KEY[0]}"\n     "{SPLIT_KEY[1]}")\n')
    findings = {(f.where, f.kind) for f in scan_release(release)}
    assert findings == {
        ("blob.bin:2", "github_token"),
        ("client.py:1", "openai_key"),
        ("client.py:2", "openai_key"),
    }


@pytest.mark.flow
def test_accepting_everything_and_publishing_ships_no_secret_only_placeholders(planted_build, tmp_path):
    """Issue 10's end to end: planted secrets -> build -> accept all -> publish (dry run renders every file)."""
    from annotations.queue import Queue
    from flows.publish import prepare, write_release
    from schemas.report import BuildReport

    out, report, _ = planted_build
    cfg = load_config(out.parent / "build.yaml")
    queue = Queue(cfg.queue_path())
    for row in queue.items():
        queue.decide(row.item_id, "ana", "accept", seen=queue.seen(row.item_id, "ana"))
    files, plan = prepare(cfg, queue.verified(), BuildReport.model_validate(report), "aptforge/secrets")
    assert sum(plan.counts.values()) == len(queue.verified()) > 0
    release = tmp_path / "release"
    write_release(release, files, check=assert_release_clean)
    texts = _texts_of(release)
    shipped = "\n".join(texts.values())
    assert {k for k, needle in leak_needles().items() if needle in shipped} == set()
    assert "<REDACTED:" in shipped
