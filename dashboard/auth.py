"""Dashboard accounts and sessions: a users file (``name:password`` or ``name:sha256:<hex>`` lines), a signed
session cookie, and the middleware that sends anyone without one to the login page."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

COOKIE = "orbitmq_dashboard"
SESSION_S = 12 * 3600
OPEN_PATHS = ("/login", "/static/")


class UsersFileError(ValueError):
    """A users file line that cannot be read; the message names the line."""


@dataclass(frozen=True)
class Users:
    hashes: dict[str, str]  # name -> sha256 hex of the password

    @classmethod
    def load(cls, path: Path) -> Users:
        hashes: dict[str, str] = {}
        for n, line in enumerate(path.read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, rest = line.partition(":")
            if not sep or not name or not rest:
                raise UsersFileError(f"{path}:{n}: expected name:password or name:sha256:<hex>")
            scheme, sep2, digest = rest.partition(":")
            hashes[name] = digest.lower() if sep2 and scheme == "sha256" else _sha256(rest)
        if not hashes:
            raise UsersFileError(f"{path}: no account")
        return cls(hashes)

    @classmethod
    def one_time(cls) -> tuple[Users, str]:
        """An ``admin`` account with a random password (printed at start when no users file is given)."""
        password = secrets.token_urlsafe(12)
        return cls({"admin": _sha256(password)}), password

    def check(self, name: str, password: str) -> bool:
        expected = self.hashes.get(name)
        return expected is not None and hmac.compare_digest(expected, _sha256(password))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Sessions:
    key: bytes

    def issue(self, user: str) -> str:
        payload = f"{user}|{int(time.time()) + SESSION_S}".encode()
        mac = hmac.new(self.key, payload, hashlib.sha256).hexdigest()
        return base64.urlsafe_b64encode(payload).decode() + "." + mac

    def user(self, cookie: str | None) -> str | None:
        if not cookie or "." not in cookie:
            return None
        raw, _, mac = cookie.partition(".")
        try:
            payload = base64.urlsafe_b64decode(raw.encode())
        except ValueError:
            return None
        if not hmac.compare_digest(mac, hmac.new(self.key, payload, hashlib.sha256).hexdigest()):
            return None
        user, _, expires = payload.decode(errors="replace").rpartition("|")
        return user if expires.isdigit() and int(expires) > time.time() else None


def login_required(
    sessions: Sessions,
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    async def middleware(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        if path.startswith(OPEN_PATHS):
            return await call_next(request)
        user = sessions.user(request.cookies.get(COOKIE))
        if user is None:
            return RedirectResponse(f"/login?next={path}", status_code=303)
        request.state.user = user
        return await call_next(request)

    return middleware
