"""The dashboard's safety rules: who may look, and what may change.

- Host names (:class:`Hosts`, :class:`HostMiddleware`): a request whose
  ``Host`` is not a name this dashboard serves is refused (400) before any
  page, cookie or token is served. A page on a domain that a DNS rebinding
  points at 127.0.0.1 is same-origin to the browser with that name, not
  with ``localhost``: refusing unknown names is what keeps it out.
- Authentication (:class:`Auth`, :class:`AuthMiddleware`): none, HTTP basic
  (``user:password``) or a bearer token (``bearer:TOKEN``), checked on every
  request, static files included, in constant time.
- Actions are POSTs, refused (403) unless the app was made with
  ``allow_actions=True``, and each must carry a CSRF token (:class:`Csrf`):
  an HMAC, under a per-process secret, of a random value the browser holds
  in a ``SameSite=Strict`` cookie (a signed double-submit cookie), and come
  from a page of this dashboard (``Origin``, else ``Referer``, names an
  allowed host and this request's own, or a trusted origin).
- Every response says what a browser may do with it
  (:class:`HeadersMiddleware`): no framing, no sniffing, scripts and styles
  only from the dashboard's own static files.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from hashlib import sha256
from typing import Final
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..protocol.values.errors import InvalidArgument

CSRF_COOKIE: Final = "alkstore_csrf"
CSRF_FIELD: Final = "csrf_token"
# Where the authenticated user's name is kept in the ASGI scope.
USER_KEY: Final = "alkstore.dashboard.user"
ANONYMOUS: Final = "anonymous"

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


# The names a loopback-only dashboard answers to.
LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")


def host_of(netloc: str) -> str:
    """The host of a ``Host`` header or URL authority, lower case, without
    its port, brackets or a trailing dot (``[::1]:8765`` -> ``::1``)."""
    text = netloc.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        return text[1:end] if end > 0 else ""
    if text.count(":") == 1:
        text = text.partition(":")[0]
    return text.rstrip(".")


@dataclass(frozen=True, slots=True)
class Hosts:
    """The host names a dashboard answers to: exact names or addresses,
    ``*.example.com`` for every subdomain of one, or ``*`` for any (when
    something in front of the app already checks ``Host``)."""

    names: frozenset[str]
    suffixes: tuple[str, ...]
    any: bool

    @classmethod
    def of(cls, patterns: Iterable[str]) -> Hosts:
        """``InvalidArgument`` for a pattern that is not a name, an address,
        ``*.domain`` or ``*``."""
        names: set[str] = set()
        suffixes: list[str] = []
        any_host = False
        for pattern in patterns:
            if not isinstance(pattern, str) or not pattern.strip():
                raise InvalidArgument(f"a trusted host must be a host name, got {pattern!r}")
            text = pattern.strip().lower()
            if text == "*":
                any_host = True
            elif text.startswith("*."):
                suffixes.append(text[1:].rstrip("."))
            elif "*" in text or "/" in text:
                raise InvalidArgument(
                    f"a trusted host is a name, '*.domain' or '*', got {pattern!r}"
                )
            else:
                names.add(host_of(text))
        return cls(frozenset(names), tuple(suffixes), any_host)

    def allows(self, host: str) -> bool:
        """Whether a bare host (see :func:`host_of`) is one of these."""
        if self.any:
            return True
        if not host:
            return False
        return host in self.names or any(host.endswith(s) for s in self.suffixes)

    def describe(self) -> str:
        if self.any:
            return "any host"
        return ", ".join(sorted(self.names) + [f"*{s}" for s in self.suffixes])


class HostMiddleware:
    """Every HTTP request must name an allowed host in ``Host`` (400
    otherwise), before anything else runs."""

    def __init__(self, app: ASGIApp, hosts: Hosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.hosts.allows(host_of(_header(scope, b"host") or "")):
            # The name is not echoed: it is the requester's, to nobody's use.
            await _plain(send, 400, "unknown Host: this dashboard does not serve that name\n")
            return
        await self.app(scope, receive, send)


@dataclass(frozen=True, slots=True)
class Auth:
    """Credentials every request must present: HTTP basic (``user`` and
    ``secret`` the password) or a bearer token (``user`` None)."""

    user: str | None
    secret: str

    @classmethod
    def parse(cls, text: str) -> Auth:
        """``user:password`` (HTTP basic) or ``bearer:TOKEN``;
        ``InvalidArgument`` for anything else (an empty part included)."""
        if not isinstance(text, str):
            raise InvalidArgument("auth must be 'user:password' or 'bearer:TOKEN'")
        kind, sep, rest = text.partition(":")
        if not sep or not kind or not rest:
            raise InvalidArgument("auth must be 'user:password' or 'bearer:TOKEN'")
        if kind == "bearer":
            return cls(None, rest)
        return cls(kind, rest)

    @property
    def scheme(self) -> str:
        return "Bearer" if self.user is None else "Basic"

    def check(self, header: str | None) -> str | None:
        """The user an ``Authorization`` header authenticates (``"bearer"``
        for the token), or None."""
        if not header:
            return None
        scheme, _, value = header.partition(" ")
        value = value.strip()
        if scheme.lower() != self.scheme.lower() or not value:
            return None
        if self.user is None:
            ok = hmac.compare_digest(value.encode(), self.secret.encode())
            return "bearer" if ok else None
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        if not sep:
            return None
        # Both compared, always: the time taken says nothing about which failed.
        user_ok = hmac.compare_digest(user.encode(), self.user.encode())
        password_ok = hmac.compare_digest(password.encode(), self.secret.encode())
        return user if user_ok and password_ok else None


class AuthMiddleware:
    """Every HTTP request must authenticate (401 otherwise); the user's name
    goes into the scope for the action log."""

    def __init__(self, app: ASGIApp, auth: Auth | None) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.auth is None:
            scope[USER_KEY] = ANONYMOUS
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        user = self.auth.check(header)
        if user is None:
            await _plain(send, 401, "authentication required\n", [
                (b"www-authenticate", f'{self.auth.scheme} realm="alkstore"'.encode()),
            ])  # fmt: skip
            return
        scope[USER_KEY] = user
        await self.app(scope, receive, send)


class HeadersMiddleware:
    """Security headers on every response, and no caching of pages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = "/static/" in scope.get("path", "")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin"),
                ]
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class Csrf:
    """Signed double-submit tokens: the browser holds a random value in a
    cookie, each form carries HMAC(secret, value)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def token(self, cookie: str) -> str:
        return hmac.new(self._secret, b"csrf:" + cookie.encode(), sha256).hexdigest()

    @staticmethod
    def new_cookie() -> str:
        return secrets.token_hex(16)

    def cookie_of(self, request: Request) -> tuple[str, bool]:
        """The request's cookie value, or a new one (and True: set it)."""
        value = request.cookies.get(CSRF_COOKIE)
        if value and len(value) == 32 and all(c in "0123456789abcdef" for c in value):
            return value, False
        return self.new_cookie(), True

    def valid(self, request: Request, submitted: object) -> bool:
        cookie = request.cookies.get(CSRF_COOKIE)
        if not cookie or not isinstance(submitted, str) or not submitted:
            return False
        return hmac.compare_digest(self.token(cookie).encode(), submitted.encode())


def same_origin(request: Request, hosts: Hosts, trusted: Iterable[str] = ()) -> bool:
    """Whether a POST comes from a page of this dashboard: its ``Origin``
    (else its ``Referer``) is one of ``trusted`` (``https://admin.example.com``:
    a proxy that rewrites ``Host``), or names an allowed host and is this
    request's own host and port. A request with neither is refused: browsers
    send ``Origin`` with every POST."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return False
    parts = urlsplit(source)
    origin = f"{parts.scheme}://{parts.netloc}".lower()
    if origin in {t.rstrip("/").lower() for t in trusted}:
        return True
    host = request.headers.get("host", "").lower()
    return (
        bool(host)
        and parts.netloc.lower() == host
        and hosts.allows(host_of(parts.netloc))
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _plain(
    send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            *(headers or []),
        ],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})
