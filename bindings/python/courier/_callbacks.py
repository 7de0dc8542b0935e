"""Callbacks from C into Python: the registry, where exceptions go, and the trampoline types.

This module is the binding's layer of calls into the library, below every type: it imports only
``_lib``, ``_enums`` and ``errors``. Each trampoline is made (once, when its module loads, living as
long as the process, so C never calls a freed CFUNCTYPE object) next to the type it builds:
validators and cache policies in ``response``, customize, mock, progress and redirect hooks and
interceptors in ``request``, envelope checks and decoders in ``mapping``, challenge handlers in
``auth``, custom transports in ``transport``, frozen-request listeners in ``frozen``, monitors and
reachability listeners in ``engine``. Here live the ones that build no type (user_free,
completions, clocks, log sinks). Each registration passes C an integer key (the ``void *user``)
into a registry of Python objects; the core's ``user_free`` hook (called exactly once when the
registration ends) removes the entry. Completions, which run exactly once and have no
``user_free``, remove their own entry.

Exceptions: a trampoline never lets a Python exception reach ctypes.

* A callback the C core runs for a send (validator, customize, interceptors, mock, redirect hook,
  progress, challenge handler, decoder, a custom transport's start) raises the exception into the
  send's own slot in C (:func:`raise_in_send`, ``courier_raise``): the send's failure carries it
  back in its ``courier_error`` (``courier_error_user_data``), and the send, its future or its
  completion re-raises that very object (:func:`user_error`). Nothing is kept in Python meanwhile.
* A callback that cannot fail its send (cache policies and clocks run on the sending thread) keeps
  it in the send context of the current thread (:func:`current_send`), which the send re-raises.
* Anything else (log sinks, monitors, frozen-request and reachability listeners) keeps it on the
  engine, whose ``close()`` re-raises the first; with no engine it is printed (:func:`orphan`).

A raised :class:`courier.CourierError` gives C its own code (so a mock callback may raise
``courier.Timeout`` to fail its request with ``COURIER_E_TIMEOUT``); any other exception gives
the callback's usual code (``COURIER_E_INTERNAL``, ``COURIER_E_INVALID_RESULT`` for a validator).
"""
from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
import traceback
import weakref
from ctypes import CFUNCTYPE, POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p
from typing import Any, Callable, Optional

from ._lib import ERROR, EVENT, FROZEN_EVENT, lib
from .errors import CourierError, lib_code

E_INTERNAL = lib_code("COURIER_E_INTERNAL")

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
# returns: about 10 us per completion, a third of the binding's cost per request. The binding
# therefore "pins" the worker's state: one more PyGILState_Ensure without release, so the state
# lives as long as the thread. Only the worker is pinned (the journal thread, which runs the
# completions of frozen sends, is not), and the pinned state is deleted *on the worker itself*:
#
# * the first completion (or listener) on any of the engine's threads posts ``_pin_work`` to the
#   worker (courier_engine_post), which takes the extra reference there;
# * ``before_close`` gives it back before courier_engine_close: directly when the engine closes
#   from the pinned worker (from one of its callbacks), else by posting ``_unpin_work``, which the
#   worker runs before it stops (a post made before the close began always runs); the ctypes
#   trampoline's own PyGILState_Release then deletes the state when that call returns, on its
#   own thread, as it does for an unpinned callback.
#
# Why not delete it from the closing thread after the join (what the binding did first): from
# CPython 3.12 on, PyThreadState_Delete of a state bound to the GIL-state API clears the GIL-state
# slot of the *calling* thread (unbind_gilstate_tstate). The closing thread then had no GIL-state
# binding: its next ctypes callback ran in a fresh thread state (other threading.local values, so
# an exception a clock raised on the sending thread missed its send), and with -X dev or
# PYTHONMALLOC=debug the next allocation aborted ("Python memory allocator called without holding
# the GIL"). A short-lived helper thread to delete it from would have its own slot cleared the
# same way before it ends; no public API binds a thread state again. COURIER_PY_PIN_THREADS=0
# turns pinning off.

try:
    _py_ensure = ctypes.pythonapi.PyGILState_Ensure
    _py_ensure.restype = c_int
    _py_ensure.argtypes = []
    _py_get = ctypes.pythonapi.PyThreadState_Get
    _py_get.restype = c_void_p
    _py_get.argtypes = []
    _py_release = ctypes.pythonapi.PyGILState_Release
    _py_release.restype = None
    _py_release.argtypes = [c_int]
    _pinning = os.environ.get("COURIER_PY_PIN_THREADS", "1") != "0"
except AttributeError:  # pragma: no cover - not CPython
    _pinning = False

WORK_FN = CFUNCTYPE(None, c_void_p)


def request_pin(engine: Any) -> None:
    """From a callback on one of the engine's threads (its first completion or listener there):
    asks the worker to pin its thread state (``_pin_work``), once per engine. The engine is open
    and cannot be freed meanwhile: its close joins the thread this runs on."""
    if not _pinning or engine._pin_requested:
        return
    ptr = engine._ptr
    if not ptr:
        return
    engine._pin_requested = True
    key = register(engine)
    if lib.courier_engine_post(ptr, _pin_work, key, None) != 0:  # closing, or out of memory
        unregister(key)


def _pin_work_py(user: Optional[int]) -> None:
    engine = unregister(user)
    # A closing engine is not pinned: its worker is about to end (and before_close has already
    # decided whether to post _unpin_work: it did, since _pin_requested was set before this ran).
    if engine is None or not engine._ptr or engine._pinned:
        return
    _py_ensure()
    engine._pinned[threading.get_ident()] = _py_get()


def _unpin_work_py(user: Optional[int]) -> None:
    engine = unregister(user)
    if engine is not None:
        unpin_current(engine)


_pin_work = WORK_FN(_pin_work_py)
_unpin_work = WORK_FN(_unpin_work_py)


def unpin_current(engine: Any) -> None:
    """On the pinned worker: gives back the extra reference, so the state is deleted when the
    callback running now returns, as ctypes would (on this thread)."""
    if engine._pinned.pop(threading.get_ident(), None) is not None:
        _py_release(0)  # PyGILState_LOCKED (0): keeps the GIL, drops the count


def before_close(engine: Any, ptr: int) -> None:
    """Just before courier_engine_close (``engine._ptr`` already cleared): has the worker's pinned
    state deleted on the worker (see above)."""
    if not engine._pin_requested:
        return
    if threading.get_ident() in engine._pinned:  # closing from a callback on the worker
        unpin_current(engine)
    elif not sys.is_finalizing():  # finalizing: the worker must not enter Python; the interpreter clears it
        key = register(engine)
        if lib.courier_engine_post(ptr, _unpin_work, key, None) != 0:  # pragma: no cover - out of memory
            unregister(key)  # the state is left to the interpreter's exit (one per such close)


def code_of(exc: BaseException, otherwise: int = E_INTERNAL) -> int:
    """The code a callback's exception gives C: a CourierError's own, else ``otherwise``."""
    if isinstance(exc, CourierError) and exc.code < 0:
        return exc.code
    return otherwise


def raise_in_send(slot: "Slot", exc: BaseException, request_id: int = 0, otherwise: int = E_INTERNAL) -> int:
    """From a callback the C core runs for a send: raises ``exc`` into that send's slot
    (``courier_raise``), to come back with its failure (:func:`user_error`). Returns the code the
    callback returns to C. Outside a send (a decoder run by ``Response.json()``), the C core
    refuses it and the exception goes to the registration's sink instead."""
    code = code_of(exc, otherwise)
    if lib.courier_raise(code, None, register(exc), user_free) != code:  # not inside a send: released
        slot.keep(exc, request_id)
    return code


def user_error(err: Any) -> Optional[BaseException]:
    """The exception a callback raised for the send that failed with ``err`` (a ``courier_error``
    the library filled), or None. Borrowed: an error of ``courier_send(_sync)`` is released with
    ``courier_error_clear``, a completion's when the completion returns."""
    key = lib.courier_error_user_data(ctypes.byref(err)) if err is not None else None
    return _objects.get(key) if key else None


# The send in progress on this thread (for callbacks that run on the sending thread).
_tls = threading.local()


def current_send() -> Any:
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


def send_stack() -> list[Any]:
    """This thread's stack of sends in progress: the sending methods push their context for the
    duration of the C call and pop it after (what :class:`sending` does, without its objects)."""
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


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
        """A listener on one of the engine's threads (worker, journal): the first there asks the
        worker to pin its thread state (:func:`request_pin`)."""
        eng = self.engine
        if eng is not None:
            tid = threading.get_ident()
            if tid not in eng._callback_threads:
                eng._callback_threads.add(tid)
                request_pin(eng)


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


def deliver(user: Optional[int], make: Callable[[], Any], on_worker: bool = True) -> None:
    """The body of a listener's trampoline (monitors, frozen-event and reachability listeners):
    calls the registration's function with the value ``make()`` builds, keeps its exception on the
    registration's sink, and releases the value after (its ``_release``, when it has one)."""
    slot = lookup(user)
    if slot is None:
        return
    if on_worker:
        slot.note_worker()
    value = make()
    try:
        slot.fn(value)
    except BaseException as e:
        slot.keep(e)
    finally:
        release = getattr(value, "_release", None)
        if release is not None:
            release()


def _user_free(user: Optional[int]) -> None:
    try:
        unregister(user)
    except BaseException:  # pragma: no cover - interpreter shutdown
        pass


def _completion(request_id: int, code: int, response: Optional[int], error: Optional[int],
                user: Optional[int]) -> None:
    ctx = _objects.pop(user or 0, None)
    if ctx is None:  # pragma: no cover - cannot happen: every send registers its context
        if response:
            lib.courier_response_free(response)
        return
    try:
        ctx._complete(request_id, code, response, error if code else None)  # as courier._speedups calls it
    except BaseException as e:  # pragma: no cover - _complete guards itself
        ctx.keep(e)


def _clock(user: Optional[int]) -> int:
    slot = lookup(user)
    if slot is None:
        return 0
    try:
        return int(slot.fn() * 1000) if slot.extra == "seconds" else int(slot.fn())
    except BaseException as e:
        slot.keep(e)
        return 0


def _log(level: int, line: Optional[int], length: int, user: Optional[int]) -> None:
    slot = lookup(user)
    if slot is None:
        return
    try:
        slot.fn(level, ctypes.string_at(line, length).decode("utf-8", "replace"))
    except BaseException as e:
        slot.keep(e)


user_free = USER_FREE_FN(_user_free)
completion = COMPLETION_FN(_completion)
clock = CLOCK_FN(_clock)
log = LOG_FN(_log)


def ptr(fn: Any) -> int:
    """The address of a trampoline, for struct fields typed void *."""
    return ctypes.cast(fn, c_void_p).value or 0


Callback = Callable[..., Any]
