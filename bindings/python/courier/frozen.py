"""The frozen-request manager: ``courier_frozen_*`` over an engine's journal.

Requests sent with ``freeze=courier.Freeze(...)`` that fail at the network level (or while the
engine says offline) are written to a durable journal and replayed later, by this process or any
other opening the same store; the core decides all of it. Times are seconds since the epoch.
"""
from __future__ import annotations

import ctypes
from ctypes import byref, c_char_p, c_int, c_int64, c_size_t, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import _callbacks as cb
from ._enums import CEnum, Reachability
from ._lib import ERROR, EngineHandle, FROZEN_INFO, lib, sized
from .errors import CourierError, NotFound, Timeout, check, make_error
from .response import Response

__all__ = ["FrozenManager", "FrozenRequest", "FrozenEvent", "FrozenEventKind", "FreezePolicy", "ResendPolicy"]


class FreezePolicy(CEnum):
    """``courier_freeze_policy``: ``"auto"`` resends by itself, ``"manual"`` waits for the app."""
    __c_enum__ = ("courier_freeze_policy", "COURIER_FREEZE_")
    NEVER = 0
    AUTO = 1
    MANUAL = 2


class FrozenEventKind(CEnum):
    """``courier_frozen_event_kind``."""
    __c_enum__ = ("courier_frozen_event_kind", "COURIER_FROZEN_EVENT_")
    FROZEN = 1
    RESENT_SUCCEEDED = 2
    RESENT_FAILED = 3
    EXPIRED = 4
    POLICY_UNKNOWN = 5
    DELETED = 6


class ResendPolicy:
    """The ids of the built-in resend policies (``courier_resend_policy_add``'s reserved ids)."""
    AUTO = "courier.auto"
    MANUAL = "courier.manual"
    ONLINE = "courier.online"
    EXPIRE = "courier.expire"
    START = "courier.start"


def _s(b: Optional[bytes]) -> Optional[str]:
    return b.decode("utf-8", "replace") if b is not None else None


@dataclass(frozen=True)
class FrozenRequest:
    """A snapshot of one frozen request."""
    id: str
    method: str
    url: str
    host: str
    idempotency_key: Optional[str]
    headers: list[tuple[str, str]]
    body: Optional[bytes]
    record: str  # the journal's JSON record, with replay state
    policy: int
    flags: int
    timeout: float
    attempts: int
    last_code: int
    last_status: int
    claimed: bool
    created: float
    expires: float
    next_attempt: float
    last_attempt: float
    resend_policy: str = ""

    @classmethod
    def _from_c(cls, fz: int) -> "FrozenRequest":
        info = sized(FROZEN_INFO)
        check(lib.courier_frozen_get_info(byref(info), fz))
        headers = []
        n, v = c_char_p(), c_char_p()
        for i in range(lib.courier_frozen_header_count(fz)):
            if lib.courier_frozen_header_at(byref(n), byref(v), fz, i) == 0:
                headers.append((_s(n.value) or "", _s(v.value) or ""))
        blen = c_size_t()
        bptr = lib.courier_frozen_body(fz, byref(blen))
        body = ctypes.string_at(bptr, blen.value) if bptr else None
        return cls(_s(lib.courier_frozen_id(fz)) or "", _s(lib.courier_frozen_method(fz)) or "",
                   _s(lib.courier_frozen_url(fz)) or "", _s(lib.courier_frozen_host(fz)) or "",
                   _s(lib.courier_frozen_idempotency_key(fz)), headers, body,
                   _s(lib.courier_frozen_json(fz)) or "", info.policy, info.flags, info.timeout_ms / 1000.0,
                   info.attempts, info.last_code, info.last_status, bool(info.claimed), info.created_ms / 1000.0,
                   info.expires_ms / 1000.0, info.next_attempt_ms / 1000.0, info.last_attempt_ms / 1000.0,
                   _s(lib.courier_frozen_resend_policy(fz)) or "")


@dataclass
class FrozenEvent:
    """An event of the journal, for listeners. ``response`` is lent for the call."""
    kind: FrozenEventKind
    freeze_id: Optional[str]
    request: Optional[FrozenRequest]
    request_id: int
    code: int
    final: bool
    attempts: int
    response: Optional[Response]
    error: Optional[CourierError] = field(default=None)
    reason: Optional[str] = None  # POLICY_UNKNOWN "not_registered", DELETED "can_delete", EXPIRED "expired"

    @classmethod
    def _from_c(cls, ev: Any) -> "FrozenEvent":
        try:
            kind = FrozenEventKind(ev.kind)
        except ValueError:
            kind = ev.kind
        resp = Response._borrow(ev.response) if ev.response else None
        err = None
        if ev.error and ev.error.contents.code:
            err = make_error(ev.error.contents.code, ev.error.contents)
        req = FrozenRequest._from_c(ev.frozen) if ev.frozen else None
        return cls(kind, _s(ev.freeze_id), req, int(ev.request_id), ev.code, bool(ev.final), ev.attempts, resp, err,
                   _s(ev.reason))

    def _release(self) -> None:
        if self.response is not None:
            self.response._release()


class FrozenManager:
    """``engine.frozen``: list, inspect, remove and replay frozen requests; listen to events."""

    def __init__(self, engine: EngineHandle) -> None:
        self._engine = engine

    def _h(self) -> int:
        return self._engine._handle()

    def list(self) -> list[FrozenRequest]:
        """Every frozen request of the store, oldest first."""
        lst = c_void_p()
        err = ERROR()
        check(lib.courier_frozen_list_requests(byref(lst), self._h(), byref(err)), err)
        try:
            return [FrozenRequest._from_c(lib.courier_frozen_list_at(lst, i))
                    for i in range(lib.courier_frozen_list_count(lst))]
        finally:
            lib.courier_frozen_list_free(lst)

    __iter__ = lambda self: iter(self.list())  # noqa: E731

    def get(self, freeze_id: str) -> Optional[FrozenRequest]:
        out = c_void_p()
        err = ERROR()
        code = lib.courier_frozen_get(byref(out), self._h(), freeze_id.encode(), byref(err))
        if code == NotFound.CODE:
            return None
        check(code, err)
        try:
            return FrozenRequest._from_c(out.value or 0)
        finally:
            lib.courier_frozen_free(out)

    def remove(self, freeze_id: str) -> bool:
        err = ERROR()
        code = lib.courier_frozen_remove(self._h(), freeze_id.encode(), byref(err))
        if code == NotFound.CODE:
            return False
        check(code, err)
        return True

    def clear(self) -> int:
        n = c_int64()
        err = ERROR()
        check(lib.courier_frozen_remove_all(byref(n), self._h(), byref(err)), err)
        return n.value

    def count(self) -> int:
        n = c_int64()
        err = ERROR()
        check(lib.courier_frozen_count(byref(n), self._h(), byref(err)), err)
        return n.value

    __len__ = count

    def last_outcome(self, freeze_id: str) -> Optional[tuple[int, int, float]]:
        """(code, http_status, at) of a request that left the journal, or None."""
        code, status, at = c_int(), c_int(), c_int64()
        err = ERROR()
        rc = lib.courier_frozen_last_outcome(byref(code), byref(status), byref(at), self._h(), freeze_id.encode(),
                                             byref(err))
        if rc == NotFound.CODE:
            return None
        check(rc, err)
        return code.value, status.value, at.value / 1000.0

    def replay(self, manual: bool = False) -> None:
        """Replays every due request now (with ``manual``, MANUAL ones too). Returns at once."""
        err = ERROR()
        check(lib.courier_frozen_replay(self._h(), 0x1 if manual else 0, byref(err)), err)

    def resend(self, freeze_id: str) -> None:
        """Sends one frozen request now, whatever its policy or backoff."""
        err = ERROR()
        check(lib.courier_frozen_resend(self._h(), freeze_id.encode(), byref(err)), err)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Waits until the journal has nothing this engine would send now; False on timeout."""
        code = lib.courier_frozen_wait_idle(self._h(), int(timeout * 1000))
        if code == Timeout.CODE:
            return False
        check(code)
        return True

    def pause(self) -> None:
        check(lib.courier_frozen_pause(self._h()))

    def resume(self) -> None:
        check(lib.courier_frozen_resume(self._h()))

    def add_listener(self, fn: Callable[[FrozenEvent], None]) -> int:
        """``fn(event)`` for this engine's journal events, on its journal thread. Returns a token."""
        key = cb.register(cb.Slot(fn, None, self._engine))
        tok = ctypes.c_uint64()
        check(lib.courier_frozen_add_listener(byref(tok), self._h(), c_frozen_event, key, cb.user_free))
        return tok.value

    def add_resend_policy(self, policy_id: str, can_send: Optional[Callable[[FrozenRequest, float, Any], bool]] = None,
                          can_delete: Optional[Callable[[FrozenRequest, float, Any], bool]] = None) -> None:
        """Registers a resend policy under ``policy_id`` (replacing one registered before):
        ``can_send(request, age, reachability)`` and ``can_delete(...)`` (age in seconds, a
        :class:`courier.Reachability`) run on the engine's journal or worker thread before each
        automatic replay of a request that names the id; None means "always send" / "never delete".
        An exception answers no and is kept for the engine."""
        key = cb.register(cb.Slot(None, None, self._engine, {"can_send": can_send, "can_delete": can_delete}))
        err = ERROR()
        check(lib.courier_resend_policy_add(self._h(), policy_id.encode(), c_resend_can_send, c_resend_can_delete, key,
                                            cb.user_free, byref(err)), err, arg="policy_id")

    def remove_resend_policy(self, policy_id: str) -> bool:
        """Removes the policy registered under ``policy_id``; False if there was none."""
        err = ERROR()
        try:
            check(lib.courier_resend_policy_remove(self._h(), policy_id.encode(), byref(err)), err)
        except NotFound:
            return False
        return True

    def remove_listener(self, token: int) -> None:
        check(lib.courier_frozen_remove_listener(self._h(), ctypes.c_uint64(token)), arg="token")


def _frozen_event(event: Any, user: Optional[int]) -> None:
    """The frozen-event listener trampoline (see courier._callbacks)."""
    cb.deliver(user, lambda: FrozenEvent._from_c(event.contents))


c_frozen_event = cb.FROZEN_EVENT_FN(_frozen_event)


def _resend_policy(ask: str, frozen: Optional[int], age_ms: int, reach: int, user: Optional[int]) -> int:
    """A resend policy's question (``extra`` holds can_send and can_delete): ``fn(request, age,
    reachability)`` returns a truth value; a raised exception answers no and is kept for the engine."""
    slot = cb.lookup(user)
    fn = slot.extra[ask] if slot is not None else None
    if fn is None or not frozen:
        return 1 if ask == "can_send" else 0
    slot.note_worker()
    try:
        return 1 if fn(FrozenRequest._from_c(frozen), age_ms / 1000.0, Reachability(reach)) else 0
    except BaseException as e:
        slot.keep(e)
        return 0


c_resend_can_send = cb.RESEND_POLICY_FN(lambda f, a, r, u: _resend_policy("can_send", f, a, r, u))
c_resend_can_delete = cb.RESEND_POLICY_FN(lambda f, a, r, u: _resend_policy("can_delete", f, a, r, u))
