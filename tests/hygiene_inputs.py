"""Test inputs for the secret, dedup and contamination tests, built in tmp_path from bundled samples.

`FAKE_SECRETS` are realistic but invented credentials of every kind the scanner must catch (none
is valid anywhere). `plant_secrets` writes a copy of a bundled SWE-agent run with those secrets
in its thoughts, observations and one command; `as_swesmith_row` renders the same run as a
SWE-smith row (text-encoded calls), the way the same run ships in two formats.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

SAMPLES = Path(__file__).resolve().parents[1] / "extractors" / "samples" / "swe_issue_fix"
RUN = "tinycalc__tinycalc-12"
RUN_FILE = SAMPLES / "sweagent_v1" / RUN / f"{RUN}.traj"
SUMMARY = SAMPLES / "sweagent_v1" / "harness_summary.json"

_KEY_BODY = "MIIEowIBAAKCAQEAq7Vx3mKp9TzW2rYc8NbLd4Hs6Gf1Ae8Ui3OjQ5vR7kXm2Pn4Lt9Zw"
#: kind -> a fake secret of that kind (the exact string that must never ship).
FAKE_SECRETS: dict[str, str] = {
    "openai_key": "sk-proj-Q7vT2mXk9LpR4sWn8ZcY1bHd6FgJ3aKe5uNo0iMqT3BlbkFJx8Yw2Vq",
    "anthropic_key": "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA-9x8y7w6v5u4t3s2r1q0pAA",
    "huggingface_token": "hf_QmZkTbWcXnVrYpLsJdHgFaKeUiOyRtPlMn",
    "github_token": "ghp_R8kL2mN5pQ7sT1vW4xY6zA9bC3dE0fG2hJ4k",
    "github_pat": "github_pat_11AQ3TZXY0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTu",
    "github_oauth": "gho_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2",
    "aws_access_key_id": "AKIAQ4XJ7R2M9TPLW3KZ",
    "aws_secret_access_key": "q8Jv3Rk+Lm9/Tz2Xw5Yc7Nb0Pd4Hs6Gf1Ae8Ui3O",
    "slack_token": "xoxb-482910375612-7730925841136-Qk3Lz8Rw2Vt6Yp9Xs4Mn1Bd",
    "jwt": (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhcHRmb3JnZS10ZXN0IiwiaWF0IjoxNzAwMDAwMDAwfQ"
        ".c2lnbmF0dXJlLW5vdC1yZWFsLWF0LWFsbC0xMjM0NQ"
    ),
    "private_key": f"-----BEGIN RSA PRIVATE KEY-----\n{_KEY_BODY}\n{_KEY_BODY[::-1]}\n-----END RSA PRIVATE KEY-----",
    "url_password": "Tr0ub4dor-Horse9",
    "password": "pa55W0rd!Blue42",
}
#: The OpenAI key split over two string literals on two lines (each half alone matches nothing).
SPLIT_KEY = (FAKE_SECRETS["openai_key"][:28], FAKE_SECRETS["openai_key"][28:])
#: Encoded forms of known secret formats, as they appear in configs and URLs.
ENCODED_SECRETS: dict[str, str] = {
    "base64": base64.b64encode(FAKE_SECRETS["github_token"].encode()).decode(),
    "base64url": base64.urlsafe_b64encode(FAKE_SECRETS["anthropic_key"].encode()).decode(),
    "hex": FAKE_SECRETS["huggingface_token"].encode().hex(),
    "percent": "".join(f"%{b:02X}" for b in FAKE_SECRETS["slack_token"].encode()),
}


def leak_needles() -> dict[str, str]:
    """Every string that must never ship: each secret (each line of the key), each half of the
    split key, each encoded form."""
    needles = {f"{k}:{i}": part for k, s in FAKE_SECRETS.items() for i, part in enumerate(s.split("\n"))}
    needles |= {"split_key:0": SPLIT_KEY[0], "split_key:1": SPLIT_KEY[1]}
    return needles | {f"encoded:{k}": v for k, v in ENCODED_SECRETS.items()}


def split_and_encoded_dump() -> str:
    """An observation that prints code holding the split key and a config holding encoded secrets."""
    e = ENCODED_SECRETS
    return (
        "$ cat client.py\n"
        "from openai import OpenAI\n"
        f'client = OpenAI(api_key=("{SPLIT_KEY[0]}"\n'
        f'                         "{SPLIT_KEY[1]}"))\n'
        "$ cat deploy.yaml\n"
        f"github_token_b64: {e['base64']}\n"
        f"anthropic: {e['base64url']}\n"
        f"hub_hex: {e['hex']}\n"
        f"webhook: https://hooks.example.invalid/notify?token={e['percent']}\n"
    )


#: kind -> the placeholder kind it must be redacted to.
PLACEHOLDER_KIND = {k: k for k in FAKE_SECRETS} | {
    "github_pat": "github_token",
    "github_oauth": "github_token",
}


def env_dump() -> str:
    """An observation that prints a `.env` file holding every fake secret (one per line)."""
    s = FAKE_SECRETS
    return "\n".join(
        [
            f"OPENAI_API_KEY={s['openai_key']}",
            f"ANTHROPIC_API_KEY={s['anthropic_key']}",
            f"HF_TOKEN={s['huggingface_token']}",
            f"GITHUB_TOKEN={s['github_token']}",
            f"GH_FINE_GRAINED={s['github_pat']}",
            f"# oauth: {s['github_oauth']}",
            f"AWS_ACCESS_KEY_ID={s['aws_access_key_id']}",
            f"AWS_SECRET_ACCESS_KEY={s['aws_secret_access_key']}",
            f"SLACK_BOT_TOKEN={s['slack_token']}",
            f"SESSION={s['jwt']}",
            f"DB_PASSWORD={s['password']}",
            f"DATABASE_URL=postgres://app:{s['url_password']}@db.internal:5432/app",
            s["private_key"],
        ]
    )


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return str(content or "")


def plant_secrets(dest: Path) -> dict[str, Any]:
    """Write the sample run with secrets in a thought, an observation and a command; return it."""
    data = json.loads(RUN_FILE.read_text())
    s = FAKE_SECRETS
    steps = data["trajectory"]
    steps[0]["observation"] = steps[0]["observation"] + "\n$ cat .env\n" + env_dump()
    steps[0]["thought"] = steps[0]["response"] = (
        f"Let's see which modules the package has. The CI token is {s['github_token']} and the "
        f"Slack hook uses {s['slack_token']}."
    )
    steps[1]["thought"] = steps[1]["response"] = steps[1]["thought"] + f" (auth: Bearer {s['jwt']})"
    steps[1]["observation"] = steps[1]["observation"] + "\n" + split_and_encoded_dump()
    clone = f"git clone https://deploy:{s['url_password']}@git.acme.dev/tinycalc.git /tmp/tinycalc-ref"
    steps[2]["action"] = clone
    actions = [m for m in data["history"] if m.get("role") == "assistant" and m.get("tool_calls")]
    observations = [m for m in data["history"] if m.get("role") == "tool"]
    actions[0]["content"] = actions[0]["thought"] = steps[0]["thought"]
    actions[1]["content"] = actions[1]["thought"] = steps[1]["thought"]
    actions[2]["action"] = clone
    actions[2]["tool_calls"][0]["function"] = {"name": "bash", "arguments": json.dumps({"command": clone})}
    observations[0]["content"] = [{"type": "text", "text": "OBSERVATION:\n" + steps[0]["observation"]}]
    observations[1]["content"] = [{"type": "text", "text": "OBSERVATION:\n" + steps[1]["observation"]}]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=1))
    return data


def _call_text(call: dict[str, Any]) -> str:
    fn = call["function"]
    args = json.loads(fn["arguments"]) if isinstance(fn["arguments"], str) else fn["arguments"]
    params = "".join(
        f"<parameter={k}>{v if isinstance(v, str) else json.dumps(v)}</parameter>\n" for k, v in args.items()
    )
    return f"<function={fn['name']}>\n{params}</function>"


def as_swesmith_row(data: dict[str, Any]) -> dict[str, Any]:
    """The same run as a SWE-smith row: text-encoded calls, observations as user messages."""
    data = copy.deepcopy(data)
    history = [m for m in data["history"] if not m.get("is_demo")]
    messages: list[dict[str, str]] = []
    for m in history:
        if m["role"] in ("system", "user"):
            messages.append({"role": m["role"], "content": _text(m["content"])})
        elif m["role"] == "assistant":
            call = _call_text(m["tool_calls"][0]) if m.get("tool_calls") else ""
            messages.append({"role": "assistant", "content": f"{m.get('thought') or ''}\n\n{call}".strip()})
        elif m["role"] == "tool":
            text = _text(m["content"])
            messages.append(
                {
                    "role": "user",
                    "content": text if text.startswith("OBSERVATION:") else "OBSERVATION:\n" + text,
                }
            )
    problem = json.loads(data["replay_config"])["problem_statement"]
    return {
        "messages": messages,
        "instance_id": problem["id"],
        "resolved": True,
        "model": "gpt-4o-2024-08-06",
        "traj_id": f"{problem['id']}.smith",
        "patch": data["info"]["submission"],
        "id": f"{problem['id']}.smith",
    }
