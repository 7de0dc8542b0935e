"""Cookies, authentication schemes and challenges: the Python side of ``courier_cookie``,
``courier_auth_scheme`` and ``courier_challenge``. The jar, the schemes and when a handler is asked
are the C core's; this module converts values."""
from __future__ import annotations

import concurrent.futures
import threading
from ctypes import byref
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from . import _callbacks as cb
from ._enums import CEnum
from ._lib import COOKIE, lib, sized
from .errors import check, coerce

__all__ = ["AuthScheme", "Cookie", "Challenge", "Credentials"]


class AuthScheme(CEnum):
    """``courier_auth_scheme``: the schemes credentials may answer a challenge with. A set of them is
    an int (``AuthScheme.DIGEST | AuthScheme.NTLM``); ``AuthScheme.ANY_SAFE`` (every scheme but
    Basic: the strongest the server offers) and ``AuthScheme.ANY`` are such sets."""
    __c_enum__ = ("courier_auth_scheme", "COURIER_AUTH_")
    BASIC = 1
    DIGEST = 2
    NEGOTIATE = 4
    NTLM = 8

    @staticmethod
    def available() -> int:
        """The schemes this libcurl can answer, a set (``courier_auth_available``)."""
        return int(lib.courier_auth_available())


# The header's COURIER_AUTH_ANY_SAFE and COURIER_AUTH_ANY: sets, not members.
AuthScheme.ANY_SAFE = AuthScheme.DIGEST | AuthScheme.NEGOTIATE | AuthScheme.NTLM  # type: ignore[attr-defined]
AuthScheme.ANY = AuthScheme.BASIC | AuthScheme.ANY_SAFE  # type: ignore[attr-defined]
AuthScheme._c_sets = {"ANY_SAFE": AuthScheme.ANY_SAFE, "ANY": AuthScheme.ANY}  # type: ignore[attr-defined]  # coerce's names


# (user, password) or (user, password, schemes). Without schemes: AuthScheme.ANY.
Credentials = Union[Sequence[Any], None]


def auth_schemes(value: Any, option: str = "credentials") -> int:
    """A set of schemes as the C int: an :class:`AuthScheme`, its name in any case (``"digest"``,
    ``"any_safe"``, ``"any"``), an int set (``AuthScheme.DIGEST | AuthScheme.NTLM``), or a list of
    those (``["digest", "ntlm"]``). :class:`courier.InvalidArgument` for a name that is none,
    naming the option and listing the names."""
    if isinstance(value, (list, tuple, set, frozenset)):
        out = 0
        for v in value:
            out |= int(coerce(AuthScheme, v, option, allow_int=True))
        return out
    return int(coerce(AuthScheme, value, option, allow_int=True))


def credentials_args(creds: Credentials, option: str = "credentials") -> tuple[Optional[bytes], Optional[bytes], int]:
    """The C arguments of a credentials value (user None: none); ``option`` names it in errors."""
    if creds is None:
        return None, None, 0
    items = list(creds)
    if len(items) not in (2, 3):
        raise TypeError(f"{option}: (user, password) or (user, password, schemes)")
    schemes = auth_schemes(items[2], option) if len(items) == 3 else int(AuthScheme.ANY)  # type: ignore[attr-defined]
    return str(items[0]).encode(), str(items[1]).encode(), schemes


@dataclass(frozen=True)
class Cookie:
    """One cookie of an engine's jar (``courier_cookie``). ``expires`` is seconds since the epoch,
    0 for a session cookie; ``include_subdomains`` marks a Domain cookie (else host-only)."""
    name: str
    value: str
    domain: str
    path: str = "/"
    expires: int = 0
    include_subdomains: bool = False
    secure: bool = False
    http_only: bool = False

    def _c(self) -> COOKIE:
        c = sized(COOKIE)
        check(lib.courier_cookie_init(byref(c)))
        c.domain, c.path = self.domain.encode(), self.path.encode()
        c.name, c.value = self.name.encode(), self.value.encode()
        c.expires = int(self.expires)
        c.include_subdomains, c.secure, c.http_only = int(self.include_subdomains), int(self.secure), int(self.http_only)
        return c

    @classmethod
    def _from_c(cls, c: COOKIE) -> "Cookie":
        def s(b: Optional[bytes]) -> str:
            return b.decode("utf-8", "replace") if b else ""
        return cls(s(c.name), s(c.value), s(c.domain), s(c.path) or "/", int(c.expires),
                   bool(c.include_subdomains), bool(c.secure), bool(c.http_only))


class Challenge:
    """A 401 (or a proxy's 407) given to a challenge handler: ``status``, ``url``, ``header`` (the
    WWW-Authenticate or Proxy-Authenticate values) and ``request_id``.

    The handler returns the answer: ``(user, password)`` or ``(user, password, schemes)``, or None to
    decline (the request then ends with the 401 or 407), or a ``concurrent.futures.Future`` of one of
    those to answer later (the request waits off the wire meanwhile). It runs on the engine's worker
    thread and is asked at most once per request, never for an origin other than the request's own.
    """

    __slots__ = ("_ptr", "status", "url", "header", "request_id", "_lock")

    def __init__(self, ptr: int) -> None:
        self._ptr = ptr
        self._lock = threading.Lock()
        self.status = int(lib.courier_challenge_status(ptr)) if ptr else 0
        url = lib.courier_challenge_url(ptr) if ptr else None
        header = lib.courier_challenge_header(ptr) if ptr else None
        self.url = url.decode("utf-8", "replace") if url else ""
        self.header = header.decode("utf-8", "replace") if header else ""
        self.request_id = int(lib.courier_challenge_request_id(ptr)) if ptr else 0

    def __repr__(self) -> str:
        return f"<courier.Challenge {self.status} {self.url}>"

    def answer(self, credentials: Credentials) -> None:
        """Answers once (later calls do nothing); None declines."""
        with self._lock:
            ptr, self._ptr = self._ptr, 0
        if not ptr:
            return
        user, password, schemes = credentials_args(credentials)
        check(lib.courier_challenge_answer(ptr, user, password, schemes))

    def decline(self) -> None:
        self.answer(None)

    def _answer_with(self, result: Any) -> None:
        if isinstance(result, concurrent.futures.Future):
            def done(f: concurrent.futures.Future) -> None:
                try:
                    self.answer(None if f.cancelled() or f.exception() else f.result())
                except Exception:
                    self.decline()
            result.add_done_callback(done)
            return
        self.answer(result)


def _challenge(challenge: Optional[int], user: Optional[int]) -> None:
    """The challenge-handler trampoline (see courier._callbacks)."""
    slot = cb.lookup(user)
    ch = Challenge(challenge or 0)
    if slot is None:
        ch.decline()
        return
    slot.note_worker()
    try:
        ch._answer_with(slot.fn(ch))
    except BaseException as e:  # declined; the send re-raises it
        cb.raise_in_send(slot, e, ch.request_id)
        ch.decline()


c_challenge = cb.CHALLENGE_FN(_challenge)
