"""Callbacks from C into Python.

One ctypes trampoline per callback type is made when this module loads and lives as long as the
process, so C can never call a freed CFUNCTYPE object. Each registration passes C an integer key
(the ``void *user``) into a registry of Python objects; the core's ``user_free`` hook (called
exactly once when the registration ends) removes the entry. Completions, which run exactly once
and have no ``user_free``, remove their own entry.

Exceptions: a trampoline never lets a Python exception reach ctypes. It hands the exception to the
registration's *sink* (:meth:`keep`), returns an error code to C where the callback type has one,
and the binding re-raises the kept exception after the C call returns (pygit2's way):

* a per-request callback (validator, customize, mock, progress) keeps it in the send's context;
* an engine callback that knows its request (the engine's validator, after-receive interceptors)
  keeps it under the request id until that request's completion or ``send`` picks it up;
* a callback on the sending thread (before-send interceptors, the WILL_SEND monitor event) keeps
  it in the send context of the current thread;
* anything else (log sinks, monitors, frozen-request and reachability listeners, cache policies
  and clocks run outside a send) keeps it on the engine, whose ``close()`` re-raises the first.

A raised :class:`courier.CourierError` gives C its own code (so a mock callback may raise
``courier.Timeout`` to fail its request with ``COURIER_E_TIMEOUT``); any other exception gives
``COURIER_E_INTERNAL``.
"""
from __future__ import annotations

import ctypes
import itertools
import threading
import weakref
from ctypes import CFUNCTYPE, POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p
from typing import Any, Callable, Optional

from ._lib import ERROR, EVENT, FROZEN_EVENT, lib
from .errors import CourierError

E_INTERNAL = -12

# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

_objects: dict[int, Any] = {}
_keys = itertools.count(1)


def register(obj: Any) -> int:
    """Stores ``obj`` and returns the key to hand C as ``void *user``."""
    key = next(_keys)
    _objects[key] = obj
    return key


def lookup(key: Optional[int]) -> Any:
    return _objects.get(key or 0)


def unregister(key: Optional[int]) -> Any:
    return _objects.pop(key or 0, None)


def live_count() -> int:
    """How many registrations C still holds (for tests of user_free)."""
    return len(_objects)


# ---------------------------------------------------------------------------------------------
# Thread states of the engine's worker thread
# ---------------------------------------------------------------------------------------------
# ctypes enters every callback with PyGILState_Ensure. On a thread Python did not start (the
# engine's worker) that creates a Python thread state and deletes it again when the callback
# returns: about 10 us per completion, a third of the binding's cost per request. The first
# completion on a worker therefore takes one more reference (PyGILState_Ensure without release),
# so the state lives as long as the thread; the engine deletes it after courier_engine_close has
# joined the worker. COURIER_PY_PIN_THREADS=0 turns this off.

try:
    _py_ensure = ctypes.pythonapi.PyGILState_Ensure
    _py_ensure.restype = c_int
    _py_ensure.argtypes = []
    _py_get = ctypes.pythonapi.PyThreadState_Get
    _py_get.restype = c_void_p
    _py_get.argtypes = []
    _py_clear = ctypes.pythonapi.PyThreadState_Clear
    _py_clear.restype = None
    _py_clear.argtypes = [c_void_p]
    _py_delete = ctypes.pythonapi.PyThreadState_Delete
    _py_delete.restype = None
    _py_delete.argtypes = [c_void_p]
    _py_release = ctypes.pythonapi.PyGILState_Release
    _py_release.restype = None
    _py_release.argtypes = [c_int]
    _pinning = __import__("os").environ.get("COURIER_PY_PIN_THREADS", "1") != "0"
except AttributeError:  # pragma: no cover - not CPython
    _pinning = False


def pin_thread(engine: Any) -> None:
    """Keeps this (worker) thread's Python thread state alive until ``release_threads``."""
    if not _pinning:
        return
    tid = threading.get_ident()
    pinned = engine._pinned
    if tid in pinned or tid in threading._active:  # type: ignore[attr-defined]  # a Python thread
        return
    _py_ensure()
    pinned[tid] = _py_get()


def unpin_current(engine: Any) -> None:
    """Called on a pinned worker thread that is about to end (the engine closes from one of its
    own callbacks): gives back the extra reference, so the state is deleted when this callback
    returns, as ctypes would."""
    tid = threading.get_ident()
    if engine._pinned.pop(tid, None) is not None:
        _py_release(0)  # PyGILState_LOCKED (0): keeps the GIL, drops the count


def release_threads(engine: Any) -> None:
    """Deletes the pinned thread states of an engine whose threads have been joined."""
    import sys
    pinned, engine._pinned = engine._pinned, {}
    if sys.is_finalizing():  # pragma: no cover - the interpreter clears them itself
        return
    for ts in pinned.values():
        _py_clear(ts)
        _py_delete(ts)


def code_of(exc: BaseException) -> int:
    """The code a callback's exception gives C."""
    if isinstance(exc, CourierError) and exc.code < 0:
        return exc.code
    return E_INTERNAL


# The send in progress on this thread (for callbacks that run on the sending thread).
_tls = threading.local()


def current_send() -> Any:
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


class Scope:
    """A C call made outside a send (e.g. ``Response.json()``, which may run a decoder on this
    thread): keeps the first exception of any callback run on this thread during the call."""

    __slots__ = ("engine", "exc")

    def __init__(self) -> None:
        self.engine = None
        self.exc: Optional[BaseException] = None

    def keep(self, exc: BaseException, request_id: int = 0) -> None:
        if self.exc is None:
            self.exc = exc


class sending:
    """Context manager marking ``ctx`` as the send in progress on this thread."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    def __enter__(self) -> None:
        stack = getattr(_tls, "stack", None)
        if stack is None:
            stack = _tls.stack = []
        stack.append(self.ctx)

    def __exit__(self, *exc: Any) -> None:
        _tls.stack.pop()


orphans: list[BaseException] = []


def orphan(exc: BaseException) -> None:
    """An exception of a callback that belongs to no engine or send (an envelope's check, a
    decoder): kept here and printed, since no C call of the caller returns with it."""
    import sys
    import traceback
    orphans.append(exc)
    del orphans[:-16]
    print("courier: exception in a callback with no engine or send to report it to:", file=sys.stderr)
    traceback.print_exception(type(exc), exc, exc.__traceback__)


class Slot:
    """One registration: the Python function, where its exceptions go, its engine."""

    __slots__ = ("fn", "sink", "_eref", "extra")

    def __init__(self, fn: Any, sink: Any, engine: Any = None, extra: Any = None) -> None:
        self.fn = fn
        self.sink = sink
        # weak: a registration must not keep its engine alive (its user_free runs at close)
        self._eref = weakref.ref(engine) if engine is not None else None
        self.extra = extra

    @property
    def engine(self) -> Any:
        return self._eref() if self._eref is not None else None

    def keep(self, exc: BaseException, request_id: int = 0) -> None:
        sink = self.sink
        if sink is None:  # an engine-level registration: the current send, the request, or the engine
            ctx = current_send()
            if ctx is not None and (ctx.engine is None or ctx.engine is self.engine):
                ctx.keep(exc)
                return
            sink = self.engine
        if sink is not None:
            sink.keep(exc, request_id)
        else:
            orphan(exc)

    def note_worker(self) -> None:
        """Remembers the engine's worker/journal thread (close() must not run on it)."""
        eng = self.engine
        if eng is not None:
            eng._callback_threads.add(threading.get_ident())


# ---------------------------------------------------------------------------------------------
# Trampolines
# ---------------------------------------------------------------------------------------------

USER_FREE_FN = CFUNCTYPE(None, c_void_p)
VALIDATOR_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
CUSTOMIZE_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
COMPLETION_FN = CFUNCTYPE(None, c_uint64, c_int, c_void_p, c_void_p, c_void_p)
MOCK_FN = CFUNCTYPE(c_int, c_void_p, POINTER(c_void_p), c_void_p)
BEFORE_SEND_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
AFTER_RECEIVE_FN = CFUNCTYPE(c_int, c_uint64, POINTER(c_void_p), c_void_p)
PROGRESS_FN = CFUNCTYPE(None, c_uint64, c_int64, c_int64, c_int64, c_int64, c_void_p)
CLOCK_FN = CFUNCTYPE(c_int64, c_void_p)
CACHE_LOOKUP_FN = CFUNCTYPE(c_int, c_void_p, c_int64, c_void_p)
CACHE_WRITE_FN = CFUNCTYPE(c_int, c_void_p, POINTER(c_int64), c_void_p)
LOG_FN = CFUNCTYPE(None, c_int, c_void_p, c_size_t, c_void_p)
MONITOR_FN = CFUNCTYPE(None, POINTER(EVENT), c_void_p)
FROZEN_EVENT_FN = CFUNCTYPE(None, POINTER(FROZEN_EVENT), c_void_p)
REACHABILITY_FN = CFUNCTYPE(None, c_int, c_void_p)
ENVELOPE_CHECK_FN = CFUNCTYPE(c_int, c_void_p, c_int, c_int64, c_char_p, c_void_p)
TRANSPORT_START_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
TRANSPORT_CANCEL_FN = CFUNCTYPE(None, c_void_p, c_void_p)
CHALLENGE_FN = CFUNCTYPE(None, c_void_p, c_void_p)
DECODER_FN = CFUNCTYPE(c_int, c_void_p, c_size_t, c_char_p, POINTER(c_void_p), POINTER(ERROR), c_void_p)
REDIRECT_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
RESEND_POLICY_FN = CFUNCTYPE(c_int, c_void_p, c_int64, c_int, c_void_p)


def _user_free(user: Optional[int]) -> None:
    try:
        unregister(user)
    except BaseException:  # pragma: no cover - interpreter shutdown
        pass


def _borrowed_response(ptr: Optional[int]) -> Any:
    from .response import Response
    return Response._borrow(ptr) if ptr else None


def _validator(response: Optional[int], user: Optional[int]) -> int:
    slot = lookup(user)
    if slot is None:
        return 1
    slot.note_worker()
    resp = _borrowed_response(response)
    try:
        return 1 if slot.fn(resp) else 0
    except BaseException as e:
        slot.keep(e, resp.request_id if resp is not None else 0)
        return 0
    finally:
        if resp is not None:
            resp._release()


def _customize(outgoing: Optional[int], user: Optional[int]) -> int:
    from .request import Outgoing
    slot = lookup(user)
    if slot is None:
        return 0
    view = Outgoing(outgoing, writable=True)
    try:
        slot.fn(view)
        return 0
    except BaseException as e:
        slot.keep(e)
        return code_of(e)
    finally:
        view._release()


def _redirect(response: Optional[int], outgoing: Optional[int], user: Optional[int]) -> int:
    """A redirect hook: ``fn(response, next)`` returns None/True/"follow" (follow ``next`` as it
    is left), "stop" (the 3xx is the answer) or False/"refuse" (COURIER_E_REDIRECT_REFUSED); a raised
    exception refuses too and is re-raised by the send."""
    from .request import Outgoing
    slot = lookup(user)
    if slot is None:
        return 0
    slot.note_worker()
    resp = _borrowed_response(response)
    view = Outgoing(outgoing, writable=True)
    try:
        verdict = slot.fn(resp, view)
        if verdict is None or verdict is True or verdict == "follow":
            return 0
        if verdict == "stop":
            return 1
        return -1
    except BaseException as e:
        slot.keep(e, resp.request_id if resp is not None else 0)
        return -1
    finally:
        view._release()
        if resp is not None:
            resp._release()


def _completion(request_id: int, code: int, response: Optional[int], error: Optional[int],
                user: Optional[int]) -> None:
    ctx = _objects.pop(user or 0, None)
    if ctx is None:  # pragma: no cover - cannot happen: every send registers its context
        if response:
            lib.courier_response_free(response)
        return
    try:
        ctx._complete(request_id, code, response, ERROR.from_address(error) if error and code else None)
    except BaseException as e:  # pragma: no cover - _complete guards itself
        ctx.keep(e)


def _mock(outgoing: Optional[int], out: Any, user: Optional[int]) -> int:
    from .request import Outgoing
    from .response import build_response
    slot = lookup(user)
    if slot is None:
        return E_INTERNAL
    slot.note_worker()
    view = Outgoing(outgoing, writable=False)
    try:
        answer = slot.fn(view)
        out[0] = build_response(answer)
        return 0
    except BaseException as e:
        slot.keep(e)
        return code_of(e)
    finally:
        view._release()


def _before_send(outgoing: Optional[int], user: Optional[int]) -> int:
    from .request import Outgoing
    slot = lookup(user)
    if slot is None or slot.fn[0] is None:
        return 0
    view = Outgoing(outgoing, writable=True)
    try:
        slot.fn[0](view)
        return 0
    except BaseException as e:
        slot.keep(e)
        return code_of(e)
    finally:
        view._release()


def _after_receive(request_id: int, response: Any, user: Optional[int]) -> int:
    from .response import build_response
    slot = lookup(user)
    if slot is None or slot.fn[1] is None:
        return 0
    slot.note_worker()
    old = response[0]
    resp = _borrowed_response(old)
    try:
        answer = slot.fn[1](request_id, resp)
        if answer is not None:
            new = build_response(answer)
            response[0] = new
            if resp is not None:
                resp._release()
                resp = None
            if old:
                lib.courier_response_free(old)
        return 0
    except BaseException as e:
        slot.keep(e, request_id)
        return code_of(e)
    finally:
        if resp is not None:
            resp._release()


def _progress(request_id: int, down_now: int, down_total: int, up_now: int, up_total: int,
              user: Optional[int]) -> None:
    from .request import Progress
    slot = lookup(user)
    if slot is None:
        return
    slot.note_worker()
    try:
        slot.fn(Progress(request_id, down_now, down_total, up_now, up_total))
    except BaseException as e:
        slot.keep(e, request_id)
        # A progress callback cannot answer C; stop the transfer it reports on instead.
        eng = slot.engine
        if eng is not None and eng._ptr:
            lib.courier_cancel(eng._ptr, request_id)


def _clock(user: Optional[int]) -> int:
    slot = lookup(user)
    if slot is None:
        return 0
    try:
        return int(slot.fn() * 1000) if slot.extra == "seconds" else int(slot.fn())
    except BaseException as e:
        slot.keep(e)
        return 0


def _cache_has(cached: Optional[int], now_ms: int, user: Optional[int]) -> int:
    return _cache_lookup(0, cached, now_ms, user)


def _cache_answer(cached: Optional[int], now_ms: int, user: Optional[int]) -> int:
    return _cache_lookup(1, cached, now_ms, user)


def _cache_lookup(which: int, cached: Optional[int], now_ms: int, user: Optional[int]) -> int:
    slot = lookup(user)
    if slot is None:
        return 0
    fn = slot.fn[which]
    resp = _borrowed_response(cached)
    try:
        return 1 if fn(resp, now_ms / 1000.0) else 0
    except BaseException as e:
        slot.keep(e)
        return 0
    finally:
        if resp is not None:
            resp._release()


def _cache_should_write(response: Optional[int], expires_ms: Any, user: Optional[int]) -> int:
    slot = lookup(user)
    if slot is None:
        return 0
    resp = _borrowed_response(response)
    try:
        result = slot.fn[2](resp, expires_ms[0] / 1000.0)
        if result is True or result is False or result is None:
            return 1 if result else 0
        # a number: write, expiring at that time (seconds since the epoch)
        expires_ms[0] = int(float(result) * 1000)
        return 1
    except BaseException as e:
        slot.keep(e, resp.request_id if resp is not None else 0)
        return 0
    finally:
        if resp is not None:
            resp._release()


def _log(level: int, line: Optional[int], length: int, user: Optional[int]) -> None:
    slot = lookup(user)
    if slot is None:
        return
    try:
        slot.fn(level, ctypes.string_at(line, length).decode("utf-8", "replace"))
    except BaseException as e:
        slot.keep(e)


def _monitor(event: Any, user: Optional[int]) -> None:
    from .engine import Event
    slot = lookup(user)
    if slot is None:
        return
    ev = Event._from_c(event.contents)
    try:
        slot.fn(ev)
    except BaseException as e:
        slot.keep(e)
    finally:
        ev._release()


def _resend_policy(ask: str, frozen: Optional[int], age_ms: int, reach: int, user: Optional[int]) -> int:
    """A resend policy's question (``extra`` holds can_send and can_delete): ``fn(request, age,
    reachability)`` returns a truth value; a raised exception answers no and is kept for the engine."""
    from .frozen import FrozenRequest
    from .engine import Reachability
    slot = lookup(user)
    fn = slot.extra[ask] if slot is not None else None
    if fn is None or not frozen:
        return 1 if ask == "can_send" else 0
    slot.note_worker()
    try:
        return 1 if fn(FrozenRequest._from_c(frozen), age_ms / 1000.0, Reachability(reach)) else 0
    except BaseException as e:
        slot.keep(e)
        return 0


def _frozen_event(event: Any, user: Optional[int]) -> None:
    from .frozen import FrozenEvent
    slot = lookup(user)
    if slot is None:
        return
    slot.note_worker()
    ev = FrozenEvent._from_c(event.contents)
    try:
        slot.fn(ev)
    except BaseException as e:
        slot.keep(e)
    finally:
        ev._release()


def _reachability(status: int, user: Optional[int]) -> None:
    from .engine import Reachability
    slot = lookup(user)
    if slot is None:
        return
    slot.note_worker()
    try:
        slot.fn(Reachability(status))
    except BaseException as e:
        slot.keep(e)


def _envelope_check(document: Optional[int], has_code: int, code: int, message: Optional[bytes],
                    user: Optional[int]) -> int:
    from .mapping import json_to_python
    slot = lookup(user)
    if slot is None:
        return 0
    try:
        doc = json_to_python(document)
        msg = message.decode("utf-8", "replace") if message is not None else None
        return 1 if slot.fn(doc, code if has_code else None, msg) else 0
    except BaseException as e:
        slot.keep(e)
        return 0


def _decoder(body: Optional[int], length: int, content_type: Optional[bytes], out: Any, err: Any,
             user: Optional[int]) -> int:
    from .mapping import python_to_json
    slot = lookup(user)
    if slot is None:
        return E_INTERNAL
    try:
        data = ctypes.string_at(body, length) if length else b""
        ctype = content_type.decode("utf-8", "replace") if content_type is not None else None
        out[0] = python_to_json(slot.fn(data, ctype))
        return 0
    except BaseException as e:
        slot.keep(e)
        if err:
            msg = f"{type(e).__name__}: {e}".encode("utf-8", "replace")[:255]
            err.contents.message = msg
        return code_of(e)


def _transport_start(call: Optional[int], user: Optional[int]) -> int:
    from .transport import Call
    slot = lookup(user)
    if slot is None or not call:
        return E_INTERNAL
    slot.note_worker()
    c = Call(call)
    c._owner = slot.extra  # the same Call for cancel, until it completes
    slot.extra[call] = c
    try:
        slot.fn.start(c)
        return 0
    except BaseException as e:
        slot.extra.pop(call, None)
        slot.keep(e, c.request_id)
        return code_of(e)


def _transport_cancel(call: Optional[int], user: Optional[int]) -> None:
    slot = lookup(user)
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


def _challenge(challenge: Optional[int], user: Optional[int]) -> None:
    from .auth import Challenge
    slot = lookup(user)
    ch = Challenge(challenge or 0)
    if slot is None:
        ch.decline()
        return
    slot.note_worker()
    try:
        ch._answer_with(slot.fn(ch))
    except BaseException as e:  # declined; the send re-raises it
        slot.keep(e, ch.request_id)
        ch.decline()


user_free = USER_FREE_FN(_user_free)
validator = VALIDATOR_FN(_validator)
customize = CUSTOMIZE_FN(_customize)
completion = COMPLETION_FN(_completion)
mock = MOCK_FN(_mock)
before_send = BEFORE_SEND_FN(_before_send)
after_receive = AFTER_RECEIVE_FN(_after_receive)
progress = PROGRESS_FN(_progress)
clock = CLOCK_FN(_clock)
cache_has = CACHE_LOOKUP_FN(_cache_has)
cache_answer = CACHE_LOOKUP_FN(_cache_answer)
cache_should_write = CACHE_WRITE_FN(_cache_should_write)
log = LOG_FN(_log)
monitor = MONITOR_FN(_monitor)
frozen_event = FROZEN_EVENT_FN(_frozen_event)
reachability = REACHABILITY_FN(_reachability)
envelope_check = ENVELOPE_CHECK_FN(_envelope_check)
decoder = DECODER_FN(_decoder)
transport_start = TRANSPORT_START_FN(_transport_start)
transport_cancel = TRANSPORT_CANCEL_FN(_transport_cancel)
redirect = REDIRECT_FN(_redirect)
resend_can_send = RESEND_POLICY_FN(lambda f, a, r, u: _resend_policy("can_send", f, a, r, u))
resend_can_delete = RESEND_POLICY_FN(lambda f, a, r, u: _resend_policy("can_delete", f, a, r, u))
challenge = CHALLENGE_FN(_challenge)


def ptr(fn: Any) -> int:
    """The address of a trampoline, for struct fields typed void *."""
    return ctypes.cast(fn, c_void_p).value or 0


Callback = Callable[..., Any]
