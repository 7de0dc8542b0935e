"""The worker's pinned Python thread state (docs/python.md: the binding keeps it for the engine's
life): only the worker is pinned; its state is deleted on the worker when the engine closes; the
closing thread keeps its own GIL-state binding. Until the fix, the binding deleted the state from
the closing thread, which on CPython 3.12+ cleared *that* thread's GIL-state slot: its later ctypes
callbacks (a clock on the sending thread) ran in a fresh thread state, so their exceptions missed
their send, and with -X dev the next allocation aborted the process."""
from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import threading
import time
from typing import Callable

import pytest

import courier
from courier import _callbacks
from conftest import ArmedClock, Raised, pinned_engine

api = ctypes.pythonapi
for _name, _res, _args in (("PyGILState_GetThisThreadState", ctypes.c_void_p, []),
                           ("PyThreadState_Get", ctypes.c_void_p, []),
                           ("PyInterpreterState_Get", ctypes.c_void_p, []),
                           ("PyInterpreterState_ThreadHead", ctypes.c_void_p, [ctypes.c_void_p]),
                           ("PyThreadState_Next", ctypes.c_void_p, [ctypes.c_void_p])):
    getattr(api, _name).restype = _res
    getattr(api, _name).argtypes = _args

pinning = pytest.mark.skipif(not _callbacks._pinning, reason="COURIER_PY_PIN_THREADS=0")


def bound() -> bool:
    """This thread's GIL-state binding is its current thread state (what PyGILState_Ensure and so
    every ctypes callback on this thread find)."""
    return api.PyGILState_GetThisThreadState() == api.PyThreadState_Get()


def states() -> int:
    """The interpreter's thread states (read with the GIL, while no engine starts a callback;
    engines earlier tests dropped are collected first, so none closes meanwhile)."""
    gc.collect()
    n, ts = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while ts:
        n, ts = n + 1, api.PyThreadState_Next(ts)
    return n


def wait_for(pred: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pinning
def test_only_the_worker_is_pinned_and_its_state_goes_with_the_close(base_url: str) -> None:
    before = states()
    for _ in range(3):  # engine after engine: nothing accumulates
        e = pinned_engine(base_url)
        assert len(e._pinned) == 1 and threading.get_ident() not in e._pinned
        assert wait_for(lambda: states() == before + 1)  # the worker's, nothing else kept
        e.close()
        assert not e._pinned
        assert bound()  # the closing thread still has its own
        assert states() == before  # deleted on the worker before close() returned


@pinning
def test_an_engine_closed_from_its_own_completion_deletes_its_state(base_url: str) -> None:
    before = states()
    e = pinned_engine(base_url)
    done = threading.Event()

    def callback(resp, err) -> None:
        e.close()  # on the pinned worker: returns at once, the engine closes after this callback
        done.set()

    e.submit("GET", "/json", callback=callback)
    assert done.wait(10) and e.closed
    assert not e._pinned
    assert wait_for(lambda: states() == before)  # the worker ended without its state
    assert bound()


def test_the_closing_thread_keeps_its_binding_and_its_sends_their_exceptions(base_url: str) -> None:
    # another engine's close on this thread comes first: then a clock (which runs on the sending
    # thread and cannot fail the send) raises, and the send on this thread must raise it
    pinned_engine(base_url).close()
    assert bound()
    clock = ArmedClock()
    with courier.Engine(base_url=base_url, temporary_store=True, timeout=10,
                        cache=courier.CachePolicy.CACHE_FIRST, clock=clock) as e:
        clock.arm()
        with pytest.raises(Raised):
            e.get("/json")
        assert not clock.armed
        assert e.get("/json").status == 200


DEV_MODE_CHILD = """
import sys, courier
for _ in range(3):
    with courier.Engine(base_url=sys.argv[1], temporary_store=True, timeout=10) as e:
        for _ in range(5):
            for f in [e.send_async("GET", "/json") for _ in range(4)]:
                f.result(10)
    junk = [str(i) * 8 for i in range(20000)]  # allocations on the thread that closed it
print("ok")
"""


def test_closing_engines_under_dev_mode(base_url: str) -> None:
    # -X dev checks the GIL-state binding on every allocation: with the closing thread's binding
    # cleared (the bug, on 3.12+) the child aborts at the first close
    env = dict(os.environ, PYTHONSAFEPATH="1")
    out = subprocess.run([sys.executable, "-X", "dev", "-c", DEV_MODE_CHILD, base_url], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
