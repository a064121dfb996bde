"""What a secret looks like: aptforge's typed patterns, and the names of detect-secrets' findings.

Agent trajectories carry API keys, tokens, `.env` contents and passwords in URLs. `PATTERNS` find
each kind at an exact span (the secret only, never the key name or quotes around it), also inside
JSON-escaped text (a trajectory serialised into a row field: `\\"`, `\\n`), so the placeholder
never breaks the JSON around it. `PRIORITY` orders kinds from most to least specific: when two
findings cover the same text, the more specific kind names the placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

#: Kinds from most to least specific (a lower index wins an overlap).
PRIORITY: tuple[str, ...] = (
    "private_key",
    "anthropic_key",
    "openai_key",
    "huggingface_token",
    "github_token",
    "gitlab_token",
    "aws_access_key_id",
    "aws_secret_access_key",
    "slack_webhook",
    "slack_token",
    "stripe_key",
    "sendgrid_key",
    "npm_token",
    "pypi_token",
    "jwt",
    "bearer_token",
    "url_password",
    "api_key",
    "password",
    "token",
    "secret",
    "email",
    "phone",
)

#: Kinds whose format alone says "secret"; the others are recognised by what surrounds them.
FORMAT_KINDS = frozenset(PRIORITY[: PRIORITY.index("bearer_token")])
#: Kinds found only when the config asks for them (personal data rather than credentials).
PERSONAL_KINDS = frozenset({"email", "phone"})

#: detect-secrets plugins run beside the patterns (high-entropy and IP plugins are left out:
#: they flag commit hashes, base64 test fixtures and addresses in every SWE trajectory).
DETECT_SECRETS_PLUGINS: tuple[str, ...] = (
    "ArtifactoryDetector",
    "AWSKeyDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "CloudantDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "JwtTokenDetector",
    "KeywordDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SoftlayerDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)

#: detect-secrets `secret_type` -> aptforge kind (unknown types become a snake_case slug).
DETECT_SECRETS_KINDS: dict[str, str] = {
    "AWS Access Key": "aws_access_key_id",
    "Artifactory Credentials": "artifactory_token",
    "Azure Storage Account access key": "azure_storage_key",
    "Basic Auth Credentials": "url_password",
    "Cloudant Credentials": "cloudant_credentials",
    "Discord Bot Token": "discord_token",
    "GitHub Token": "github_token",
    "GitLab Token": "gitlab_token",
    "IBM Cloud IAM Key": "ibm_cloud_key",
    "IBM COS HMAC Credentials": "ibm_cos_hmac",
    "JSON Web Token": "jwt",
    "Mailchimp Access Key": "mailchimp_key",
    "NPM tokens": "npm_token",
    "OpenAI Token": "openai_key",
    "Private Key": "private_key",
    "PyPI Token": "pypi_token",
    "SendGrid API Key": "sendgrid_key",
    "Slack Token": "slack_token",
    "SoftLayer Credentials": "softlayer_credentials",
    "Square OAuth Secret": "square_oauth",
    "Stripe Access Key": "stripe_key",
    "Telegram Bot Token": "telegram_token",
    "Twilio API Key": "twilio_key",
    "Secret Keyword": "secret",
}


def ds_kind(secret_type: str) -> str:
    """The aptforge kind of a detect-secrets `secret_type`."""
    return DETECT_SECRETS_KINDS.get(secret_type) or re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


def rank(kind: str) -> int:
    """Specificity rank of a kind (lower wins); kinds met only through detect-secrets sit mid-table."""
    return PRIORITY.index(kind) if kind in PRIORITY else PRIORITY.index("jwt")


class Pattern(NamedTuple):
    """One kind's regex; `group` is the part that is the secret, `accept` vets the candidate."""

    kind: str
    regex: re.Pattern[str]
    group: int | str = 0
    accept: Callable[[re.Match[str]], bool] | None = None
    boundary: bool = False
    """The match must not continue a longer token to its left (checked in Python, so the regex
    starts with its literal prefix and `re` can skip ahead to it)."""
    stems: re.Pattern[str] | None = None
    """Lower-case literals where a match can start: the regex is tried only there (a
    case-insensitive regex tried at every position is ten times slower)."""


_NOT_TOKEN_AFTER = r"(?![A-Za-z0-9_\-])"
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
#: An optional (JSON-escaped) quote: `"`, `'`, `\"`.
_Q = r"(?:\\{0,3}[\"'])?"
_PLACEHOLDER_VALUE = re.compile(
    r"^(?:[$<{%(\[@*#]|x{3,}|X{3,}|\.{3})|redacted|your[_-]|example|placeholder|changeme$|dummy|\*{3}|xxxx",
    re.I,
)
#: Literals and the stock words of test fixtures (`password='password'`, `SECRET_KEY='testing'`).
_LITERALS = frozenset(
    {
        "none",
        "null",
        "true",
        "false",
        "undefined",
        "nil",
        "str",
        "string",
        "bytes",
        "int",
        "optional",
        "required",
        "env",
        "secret",
        "token",
        "password",
        "test",
        "testing",
        "fake",
        "foobar",
        "pass",
        "passwd",
    }
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def escaped(text: str, i: int) -> bool:
    """Whether `text[i]` is the letter of a backslash escape (`\\n` in JSON-escaped text)."""
    backslashes = 0
    while i - 1 - backslashes >= 0 and text[i - 1 - backslashes] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def token_start(text: str, i: int) -> bool:
    """Whether position `i` starts a token: nothing token-like before it but a JSON escape letter."""
    return i == 0 or text[i - 1] not in _TOKEN_CHARS or escaped(text, i - 1)


def key_before(text: str, i: int) -> str:
    """The whole identifier that ends at `i` (`OPENAI_API_KEY` from its `API_KEY` part)."""
    start = i
    while start > 0 and text[start - 1] in _TOKEN_CHARS and not escaped(text, start - 1):
        start -= 1
    return text[start:i]


def _letters_and_digits(m: re.Match[str]) -> bool:
    body = m.group(0)
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body)


def _mixed_case(m: re.Match[str]) -> bool:
    body = m.group(0)[3:]
    return any(c.isupper() for c in body) and (
        any(c.islower() for c in body) or any(c.isdigit() for c in body)
    )


def plausible_value(value: str, quoted: bool, env_style: bool) -> bool:
    """Whether the value of a `KEY=value` pair looks like a real secret, not code or a placeholder.

    Refused: placeholders (`$VAR`, `<token>`, `${...}`, `xxx`, `your-key-here`, `<REDACTED:...>`),
    literals (`None`, `true`), pure numbers, paths, and, for unquoted lower-case keys (code
    rather than a `.env` line), bare identifiers such as `tokenize` or `self.token`.
    """
    if len(value) < 4 or _PLACEHOLDER_VALUE.search(value) or value.lower() in _LITERALS:
        return False
    if value.isdigit() or value.startswith(("/", "./", "../", "~/", "http://", "https://")):
        return False
    return quoted or env_style or not _IDENTIFIER.match(value)


def _assignment(m: re.Match[str]) -> bool:
    key, after = key_before(m.string, m.end("key")), m.string[m.end("value") : m.end("value") + 1]
    if after == "(":
        return False
    return plausible_value(m.group("value"), bool(m.group("q")), key.isupper())


def _url_password(m: re.Match[str]) -> bool:
    return plausible_value(m.group("pw"), True, True)


def _bearer(m: re.Match[str]) -> bool:
    return _letters_and_digits(m) and not _PLACEHOLDER_VALUE.search(m.group("tok"))


def _phone(m: re.Match[str]) -> bool:
    return sum(c.isdigit() for c in m.group(0)) >= 9


_KEY_WORDS = (
    r"api[_-]?key|apikey|client[_-]?secret|secret[_-]?key|secret|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|token|password|passwd|pass[_-]?phrase|private[_-]?key|access[_-]?key(?:[_-]?id)?|"
    r"credentials?"
)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.{0,20000}?-----END[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=:, \t\r\n-]|\\[nrt])*)",
            re.S,
        ),
    ),
    Pattern("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{20,}"), boundary=True),
    Pattern(
        "openai_key",
        re.compile(r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        0,
        _letters_and_digits,
        True,
    ),
    Pattern("huggingface_token", re.compile(r"hf_[A-Za-z0-9]{30,}" + _NOT_TOKEN_AFTER), 0, _mixed_case, True),
    Pattern("github_token", re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"), boundary=True),
    Pattern("github_token", re.compile(r"github_pat_[A-Za-z0-9_]{30,}"), boundary=True),
    Pattern("gitlab_token", re.compile(r"glpat-[A-Za-z0-9_\-]{20,}"), boundary=True),
    Pattern(
        "aws_access_key_id",
        re.compile(r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
        boundary=True,
    ),
    Pattern(
        "aws_secret_access_key",
        re.compile(
            r"(?i:(?:aws_?)?secret_?access_?key|aws_?secret_?key)"
            + _Q
            + r"\s*[:=]\s*"
            + _Q
            + r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        "v",
        stems=re.compile("aws|secret"),
    ),
    Pattern("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}")),
    Pattern("slack_token", re.compile(r"xox[baprso]-[A-Za-z0-9-]{10,}"), boundary=True),
    Pattern("stripe_key", re.compile(r"[sr]k_live_[A-Za-z0-9]{20,}"), boundary=True),
    Pattern(
        "jwt", re.compile(r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"), boundary=True
    ),
    Pattern(
        "bearer_token",
        re.compile(r"(?i:bearer)\s+(?P<tok>[A-Za-z0-9._~+/\-]{20,}=*)"),
        "tok",
        _bearer,
        stems=re.compile("bearer"),
    ),
    Pattern(
        "url_password",
        re.compile(r"://[^\s:/@'\"\\<>]{1,64}:(?P<pw>[^\s/@'\"\\<>]{1,128})@"),
        "pw",
        _url_password,
    ),
    Pattern(
        "secret",
        re.compile(
            r"(?P<key>"
            + _KEY_WORDS
            + r")(?![A-Za-z0-9_])"
            + _Q
            + r"[ \t]*(?:=|:)[ \t]*(?P<q>"
            + _Q
            + r")(?P<value>[^\s'\"\\,;()\[\]{}<>`]{4,200})",
            re.I,
        ),
        "value",
        _assignment,
        stems=re.compile("api|client|secret|access|auth|refresh|token|pass|private|credential"),
    ),
    Pattern(
        "email",
        re.compile(
            r"(?<![\w.+\-:/])(?!git@)[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b"
        ),
    ),
    Pattern(
        "phone",
        re.compile(
            r"(?<![\w+])(?:\+\d{1,3}[ \-]?)?(?:\(\d{2,4}\)[ \-]?|\d{2,4}[ \-])\d{3,4}[ \-]\d{3,4}(?![\w\-])"
        ),
        0,
        _phone,
    ),
)


def assignment_kind(key: str) -> str:
    """Name the secret of a `KEY=value` line by its key: password, api_key, token or secret."""
    k = key.lower().replace("-", "_")
    if "pass" in k:
        return "password"
    if "api_key" in k or "apikey" in k:
        return "api_key"
    if k.endswith("token"):
        return "token"
    return "secret"
