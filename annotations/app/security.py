"""What every request passes before a route sees it: Host allow-list, client and Origin checks, headers.

Why: trajectory text is untrusted and unpublished items are private. A Host allow-list (loopback names
in open mode; loopback plus configured names with tokens) stops DNS rebinding: a page on
`evil.example` that resolves to 127.0.0.1 can neither read items nor post decisions. A state-changing
request needs an `Origin` equal to this app's own, or a bearer token (a cookie session with no Origin
or `Origin: null` is refused: browsers send a real Origin on every same-origin POST). Every response
carries a strict Content-Security-Policy (scripts and styles only from this app's static files).
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import Request

from annotations.app.auth import Auth, Forbidden, is_loopback

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer browsers send `Origin: null` on same-origin form
    # posts, which the Origin check must refuse; cross-origin requests still get no referrer.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
#: Host names every mode accepts (the Host header's name, without port; IPv6 in brackets).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def allowed_hosts(auth: Auth, extra: Iterable[str] = ()) -> list[str]:
    """Loopback names in open mode; with tokens also `extra` (config / `--allowed-host`, `*.domain` allowed)."""
    names = list(LOOPBACK_HOSTS)
    if not auth.open:
        names += [h.strip().lower() for h in extra if h.strip() and h.strip() not in names]
    return names


def check_request(auth: Auth, request: Request) -> None:
    """Refuse non-loopback clients in open mode and state-changing requests from another origin.

    Raises:
        Forbidden: with the reason shown to the client.
    """
    client = request.client.host if request.client else ""
    if auth.open and not is_loopback(client):
        raise Forbidden("open review mode serves loopback clients only")
    if request.method in SAFE_METHODS or auth.bearer(request) is not None:
        return
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if not origin or origin == "null":
        raise Forbidden("a state-changing request needs an Origin header (or a bearer token)")
    if origin.lower() != own.lower():
        raise Forbidden("cross-site request refused")
