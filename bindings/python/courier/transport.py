"""Custom transports (``courier_config_register_transport``; HTNetworking's request types).

A transport receives the final request as a :class:`Call` on the engine's worker thread and
completes it exactly once, from any thread, with an :class:`courier.Answer` or an error:

>>> class Loopback(courier.Transport):
...     def start(self, call):
...         call.complete(courier.Answer(200, body=call.body or b""))
>>> engine = courier.Engine(transports={"loop": Loopback()})
>>> engine.post("http://x/echo", body=b"hi", transport="loop").body
b'hi'

The engine judges what the transport answers like any response (status, validator, cache...).
"""
from __future__ import annotations

import ctypes
import threading
from ctypes import byref, c_char_p, c_size_t
from typing import Any, Optional, Union

from . import _callbacks as cb
from ._lib import lib
from .errors import CourierError, InvalidArgument, check
from .response import build_response

__all__ = ["Transport", "Call"]


class Transport:
    """Subclass and override :meth:`start` (and :meth:`cancel`, optional)."""

    def start(self, call: "Call") -> None:
        """Begin the call; complete it now or later with :meth:`Call.complete`. Raising fails the
        request (a :class:`courier.CourierError` with its code) and the call must not be completed."""
        raise NotImplementedError

    def cancel(self, call: "Call") -> None:
        """Asked to stop early (worker thread, at most once, between start and completion); the
        call must still be completed."""


def _s(b: Optional[bytes]) -> Optional[str]:
    return b.decode("utf-8", "replace") if b is not None else None


class Call:
    """One request handed to a custom transport (``courier_call``). Its fields are read when it
    starts; it is usable until :meth:`complete`."""

    def __init__(self, ptr: int) -> None:
        self._ptr: Optional[int] = ptr
        self._lock = threading.Lock()
        self.method: str = _s(lib.courier_call_method(ptr)) or ""
        self.url: str = _s(lib.courier_call_url(ptr)) or ""
        self.request_id: int = int(lib.courier_call_request_id(ptr))
        self.timeout: float = lib.courier_call_timeout_ms(ptr) / 1000.0
        n, v = c_char_p(), c_char_p()
        self.headers: list[tuple[str, str]] = []
        for i in range(lib.courier_call_header_count(ptr)):
            if lib.courier_call_header_at(byref(n), byref(v), ptr, i) == 0:
                self.headers.append((_s(n.value) or "", _s(v.value) or ""))
        ln = c_size_t()
        p = lib.courier_call_body(ptr, byref(ln))
        self.body: Optional[bytes] = ctypes.string_at(p, ln.value) if p else None
        self.cancelled = False
        self._key = ptr
        self._owner: Optional[dict] = None

    def header(self, name: str) -> Optional[str]:
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)

    def complete(self, answer: Any = None, error: Union[BaseException, int, None] = None,
                 message: Optional[str] = None) -> None:
        """Ends the call, exactly once, from any thread: an answer (``courier.Answer``, a status,
        or ``(status, body)``), or an error with an optional answer to attach: a code, or an
        exception, which the send re-raises as it is (``courier_call_raise``; a CourierError
        fails the request with its code, another exception with ``COURIER_E_INTERNAL``)."""
        with self._lock:
            ptr, self._ptr = self._ptr, None
        if not ptr:
            raise InvalidArgument("this call was already completed")
        if self._owner is not None and self._owner.get(self._key) is self:
            self._owner.pop(self._key, None)
        resp = build_response(answer) if answer is not None else None
        if isinstance(error, BaseException):
            message = message or (error.message if isinstance(error, CourierError) else None)
            check(lib.courier_call_raise(ptr, cb.code_of(error), resp, message.encode() if message else None,
                                         cb.register(error), cb.user_free))
            return
        code = int(error) if error is not None else 0
        check(lib.courier_call_complete(ptr, code, resp, message.encode() if message else None))


def _transport_start(call: Optional[int], user: Optional[int]) -> int:
    """A custom transport's start (see courier._callbacks)."""
    slot = cb.lookup(user)
    if slot is None or not call:
        return cb.E_INTERNAL
    slot.note_worker()
    c = Call(call)
    c._owner = slot.extra  # the same Call for cancel, until it completes
    slot.extra[call] = c
    try:
        slot.fn.start(c)
        return 0
    except BaseException as e:
        slot.extra.pop(call, None)
        return cb.raise_in_send(slot, e, c.request_id)


def _transport_cancel(call: Optional[int], user: Optional[int]) -> None:
    slot = cb.lookup(user)
    if slot is None:
        return
    c = slot.extra.get(call)
    if c is None:
        return
    c.cancelled = True
    try:
        slot.fn.cancel(c)
    except BaseException as e:
        slot.keep(e, c.request_id)


c_transport_start = cb.TRANSPORT_START_FN(_transport_start)
c_transport_cancel = cb.TRANSPORT_CANCEL_FN(_transport_cancel)
