"""Who is reviewing: per-reviewer tokens and roles, the login cookie, and the `reviewer` dependency.

Guarantees: with tokens configured, every page and API call needs a valid token (login form -> HttpOnly,
SameSite=Strict cookie, or an `Authorization: Bearer` header), compared in constant time; tokens never
appear in URLs, pages or logs. Without tokens (open mode: a reviewer types a name) the app refuses to
bind beyond loopback and answers 403 to any non-loopback client. A token entry may carry a role
(`name:token:adjudicator`); adjudicators see every review and settle disputes.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Mapping
from typing import NamedTuple

from fastapi import Request

COOKIE = "aptforge_review"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
ROLES = ("reviewer", "adjudicator")


class NotLoggedIn(Exception):
    """Raised by the reviewer dependency; the app answers with the login page (or 401 for the API)."""


class Forbidden(Exception):
    """A request the app refuses outright (non-loopback client in open mode, cross-site post, no role)."""


class Reviewer(NamedTuple):
    """The person behind a request."""

    name: str
    adjudicator: bool = False


class Accounts(NamedTuple):
    """Parsed `APTFORGE_REVIEW_TOKENS`: reviewer -> token, and who adjudicates."""

    tokens: dict[str, str]
    adjudicators: frozenset[str]


def parse_accounts(spec: str) -> Accounts:
    """`name:token[:role][,...]` -> tokens and adjudicators. Errors name the entry's position, never the token.

    Raises:
        ValueError: a malformed entry, a bad reviewer name, a token shorter than 8 characters, or a
            name or token used twice.
    """
    out: dict[str, str] = {}
    judges: set[str] = set()
    for pos, entry in enumerate(p.strip() for p in spec.split(",")):
        if not entry:
            continue
        name, sep, token = entry.partition(":")
        name, token = name.strip(), token.strip()
        role = "reviewer"
        head, colon, tail = token.rpartition(":")
        if colon and tail.strip() in ROLES:
            token, role = head.strip(), tail.strip()
        if not sep or not NAME.match(name):
            raise ValueError(
                f"review token entry #{pos + 1}: expected `name:token[:role]` with a plain reviewer name"
            )
        if len(token) < 8:
            raise ValueError(f"review token of {name!r}: at least 8 characters are required")
        if name in out or token in out.values():
            raise ValueError(f"review token entry #{pos + 1}: reviewer {name!r} or its token is given twice")
        out[name] = token
        if role == "adjudicator":
            judges.add(name)
    return Accounts(out, frozenset(judges))


def parse_tokens(spec: str) -> dict[str, str]:
    """`name:token[,name:token...]` -> {name: token} (see `parse_accounts`)."""
    return parse_accounts(spec).tokens


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1); False for 0.0.0.0 and the rest."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, tokens: Mapping[str, str]) -> None:
    """Refuse to listen beyond loopback without reviewer tokens.

    Raises:
        ValueError: `host` is not loopback and no tokens are configured.
    """
    if not tokens and not is_loopback(host):
        raise ValueError(
            f"the review app listens on {host}, beyond loopback: reviewer tokens are required "
            "(set APTFORGE_REVIEW_TOKENS='name:token,...')"
        )


class Auth:
    """Resolves the reviewer of a request from its cookie or bearer token."""

    def __init__(
        self, tokens: Mapping[str, str] | None = None, adjudicators: frozenset[str] = frozenset()
    ) -> None:
        """`tokens` maps reviewer name -> token (empty: open, loopback-only mode); `adjudicators` are names."""
        self._tokens = dict(tokens or {})
        self._judges = frozenset(adjudicators)

    @property
    def open(self) -> bool:
        """No tokens: reviewers identify by name, loopback only."""
        return not self._tokens

    def reviewer_for_token(self, token: str) -> str | None:
        """The reviewer owning `token` (every token is compared, in constant time)."""
        found = None
        for name, known in self._tokens.items():
            if hmac.compare_digest(known.encode("utf-8"), token.encode("utf-8")):
                found = name
        return found

    def login_value(self, name: str, token: str) -> str | None:
        """The cookie value for a login form, or None when the credentials are wrong."""
        if self.open:
            return name if NAME.match(name) else None
        return token if self.reviewer_for_token(token) else None

    def bearer(self, request: Request) -> str | None:
        """The reviewer of a valid `Authorization: Bearer` header (token mode only)."""
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer ") and not self.open:
            return self.reviewer_for_token(header[7:].strip())
        return None

    def reviewer(self, request: Request) -> Reviewer | None:
        """The request's reviewer (with their role), or None."""
        name = self.bearer(request)
        if name is None:
            value = request.cookies.get(COOKIE, "")
            if not value:
                return None
            name = (value if NAME.match(value) else None) if self.open else self.reviewer_for_token(value)
        return None if name is None else Reviewer(name, name in self._judges)
