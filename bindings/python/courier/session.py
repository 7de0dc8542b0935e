"""Adapters, retriers and the authenticator: the Python side of ``courier_adaptation``,
``courier_retry_question`` and ``courier_authenticator`` (include/courier/hooks.h, "Sessions").

When each runs, in which order, what a refresh does for the requests waiting on it, and what the
journal stores are the C core's; this module converts values and runs the Python functions:

* an **adapter** is ``fn(outgoing)`` (a :class:`courier.Outgoing` whose ``body``, ``body_file``,
  ``method``, ``url`` and headers it may change) run on the engine's worker thread before each
  attempt; a coroutine function's coroutine (or a ``concurrent.futures.Future`` it returns) runs on
  the :class:`courier.AsyncEngine`'s event loop (else a thread of its own) and the attempt waits,
  off the wire, without holding the worker. An exception fails the request with it.
* a **retrier** is ``fn(question) -> decision`` asked after a failure the fixed retry rule did not
  retry (:class:`RetryQuestion`): None or False: do not retry; True or 0: retry now; a number: retry
  after that many seconds; or an awaitable / Future of one of those.
* an :class:`Authenticator` owns the engine's credential: ``refresh`` runs on a thread of its own
  (or the event loop, for a coroutine function) and never on the worker.
"""
from __future__ import annotations

import ctypes
import inspect
import threading
from ctypes import CFUNCTYPE, c_char_p, c_int, c_void_p
from typing import Any, Callable, Optional, Union

from . import _callbacks as cb
from ._lib import lib
from .errors import CourierError, check, lib_code, make_error
from .request import Outgoing, RetryQuestion, _code_of, _later, c_adapter, c_retrier
from .response import Response, borrowed_response

__all__ = ["Authenticator", "RetryQuestion", "DO_NOT_RETRY"]

E_USER_CODE = lib_code("COURIER_E_USER")

#: A retrier's "no" (None and False say the same).
DO_NOT_RETRY = None

AUTH_APPLIES_FN = CFUNCTYPE(c_int, c_char_p, c_void_p)
AUTH_APPLY_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, c_void_p)
AUTH_REFUSED_FN = CFUNCTYPE(c_int, c_int, c_void_p, c_void_p)
AUTH_REFRESH_FN = CFUNCTYPE(None, c_void_p, c_void_p)
USER_RETAIN_FN = CFUNCTYPE(c_void_p, c_void_p)


class AUTHENTICATOR(ctypes.Structure):
    """courier_authenticator."""
    _fields_ = [("size", ctypes.c_size_t), ("applies", c_void_p), ("apply", c_void_p), ("refused", c_void_p),
                ("refresh", c_void_p)]


# ---- the authenticator -------------------------------------------------------------------------

def _seconds_to_ms(expires: Optional[float]) -> int:
    return int(round(float(expires) * 1000)) if expires else 0


class Authenticator:
    """The engine's credential and what to do with it (``courier_authenticator``). Pass functions or
    subclass and override:

    * ``refresh(credential) -> new`` (required): gets a new credential; the old one (or None) is
      given. ``new`` is the credential (a str), or ``(credential, expires_at)`` with ``expires_at``
      in seconds since the epoch, or an awaitable / Future of one of those. It runs on a thread of
      its own (a coroutine function on the :class:`courier.AsyncEngine`'s loop), never on the
      engine's worker, once however many requests wait for it. A request it sends to the same
      origin must say ``authenticated=False``. An exception fails every waiting request with it.
    * ``apply(outgoing, credential)``: puts the credential on an attempt (default:
      ``Authorization: Bearer <credential>``).
    * ``refused(error, response) -> bool``: whether a failure means the credential was refused
      (default: a 401).
    * ``applies(url) -> bool``: whether a URL of the origin gets the credential (default: all).

    ``origin`` ("https://api.example.com") is the only origin the credential is ever sent to;
    ``credential`` and ``expires`` (seconds since the epoch) are the one the engine starts with
    (None: the first request refreshes).
    """

    def __init__(self, origin: str, refresh: Optional[Callable[[Optional[str]], Any]] = None, *,
                 credential: Optional[str] = None, expires: Optional[float] = None,
                 apply: Optional[Callable[[Outgoing, str], None]] = None,
                 refused: Optional[Callable[[CourierError, Optional[Response]], bool]] = None,
                 applies: Optional[Callable[[str], bool]] = None) -> None:
        self.origin = origin
        self.credential = credential
        self.expires = expires
        if refresh is not None:
            self.refresh = refresh  # type: ignore[method-assign]
        if apply is not None:
            self.apply = apply  # type: ignore[method-assign]
        if refused is not None:
            self.refused = refused  # type: ignore[method-assign]
        if applies is not None:
            self.applies = applies  # type: ignore[method-assign]

    def refresh(self, credential: Optional[str]) -> Any:
        raise NotImplementedError("an Authenticator needs a refresh function")

    apply: Optional[Callable[[Outgoing, str], None]] = None
    refused: Optional[Callable[[CourierError, Optional[Response]], bool]] = None
    applies: Optional[Callable[[str], bool]] = None

    def _install(self, c: int, engine: Any) -> None:
        """Sets it on a configuration (``courier_config_set_authenticator`` and ``_set_credential``)."""
        a = AUTHENTICATOR(ctypes.sizeof(AUTHENTICATOR), cb.ptr(c_auth_applies) if self.applies else None,
                          cb.ptr(c_auth_apply) if self.apply else None,
                          cb.ptr(c_auth_refused) if self.refused else None, cb.ptr(c_auth_refresh))
        key = cb.register(cb.Slot(self, None, engine))
        check(lib.courier_config_set_authenticator(c, self.origin.encode(), ctypes.byref(a), key, cb.user_free),
              arg="authenticator")
        if self.credential is not None:
            check(lib.courier_config_set_credential(c, self.credential.encode(), _seconds_to_ms(self.expires)),
                  arg="authenticator")


def _auth_applies(url: Optional[bytes], user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    try:
        return 1 if slot.fn.applies((url or b"").decode("utf-8", "replace")) else 0
    except BaseException as e:
        slot.keep(e)
        return 0


def _auth_apply(outgoing: Optional[int], credential: Optional[bytes], user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    view = Outgoing(outgoing, writable=True)
    try:
        slot.fn.apply(view, (credential or b"").decode("utf-8", "replace"))
        return 0
    except BaseException as e:
        return cb.raise_in_send(slot, e)
    finally:
        view._release()


def _auth_refused(code: int, response: Optional[int], user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    resp = borrowed_response(response)
    try:
        err = make_error(code if code else lib_code("COURIER_E_HTTP_STATUS"), None, resp)
        return 1 if slot.fn.refused(err, resp) else 0
    except BaseException as e:
        slot.keep(e)
        return 0
    finally:
        if resp is not None:
            resp._release()


def _retain(user: Optional[int]) -> Optional[int]:
    obj = cb.lookup(user)
    return cb.register(obj) if obj is not None else None


c_user_retain = USER_RETAIN_FN(_retain)


def _refresh_fail(ptr: int, exc: BaseException) -> None:
    lib.courier_refresh_fail(ptr, _code_of(exc), str(exc).encode("utf-8", "replace")[:190], cb.register(exc),
                             cb.user_free, c_user_retain)


def _refresh_done(ptr: int, value: Any, exc: Optional[BaseException]) -> None:
    if exc is not None:
        _refresh_fail(ptr, exc)
        return
    try:
        if isinstance(value, (tuple, list)):
            credential, expires = value[0], value[1] if len(value) > 1 else None
        else:
            credential, expires = value, None
        if not isinstance(credential, str):
            raise TypeError(f"refresh returned {credential!r}, not a str credential")
    except BaseException as e:
        _refresh_fail(ptr, e)
        return
    lib.courier_refresh_complete(ptr, credential.encode(), _seconds_to_ms(expires))


def _auth_refresh(refresh: Optional[int], user: Optional[int]) -> None:
    slot = cb.lookup(user)
    if slot is None or not refresh:
        lib.courier_refresh_fail(refresh, lib_code_user(), b"no authenticator", None, None, None)
        return
    slot.note_worker()
    old = lib.courier_refresh_credential(refresh)
    old_s = old.decode("utf-8", "replace") if old else None
    fn = slot.fn.refresh

    def done(value: Any, exc: Optional[BaseException]) -> None:
        _refresh_done(refresh, value, exc)
    if inspect.iscoroutinefunction(fn):
        try:
            if not _later(slot, fn(old_s), done):  # pragma: no cover - a coroutine function's result
                done(None, TypeError("refresh returned no awaitable"))
        except BaseException as e:
            done(None, e)
        return

    def run() -> None:  # never on the worker: a refresh usually sends a request and waits
        try:
            value = fn(old_s)
        except BaseException as e:
            done(None, e)
            return
        try:
            if _later(slot, value, done):
                return
        except BaseException as e:
            done(None, e)
            return
        done(value, None)
    threading.Thread(target=run, name="courier-refresh", daemon=True).start()


def lib_code_user() -> int:
    return E_USER_CODE


c_auth_applies = AUTH_APPLIES_FN(_auth_applies)
c_auth_apply = AUTH_APPLY_FN(_auth_apply)
c_auth_refused = AUTH_REFUSED_FN(_auth_refused)
c_auth_refresh = AUTH_REFRESH_FN(_auth_refresh)


def install(c: int, engine: Any, adapters: Any, retriers: Any, authenticator: Optional[Authenticator]) -> None:
    """An engine configuration's adapters, retriers and authenticator."""
    for fn in adapters or ():
        key = cb.register(cb.Slot(fn, None, engine))
        check(lib.courier_config_add_adapter(c, c_adapter, key, cb.user_free), arg="adapters")
    for fn in retriers or ():
        key = cb.register(cb.Slot(fn, None, engine))
        check(lib.courier_config_add_retrier(c, c_retrier, key, cb.user_free), arg="retriers")
    if authenticator is not None:
        authenticator._install(c, engine)


def set_credential(engine_ptr: int, credential: Optional[str], expires: Optional[float]) -> None:
    check(lib.courier_engine_set_credential(engine_ptr, credential.encode() if credential is not None else None,
                                            _seconds_to_ms(expires)))


Adapter = Callable[[Outgoing], Any]
Retrier = Callable[[RetryQuestion], Union[None, bool, float, Any]]
