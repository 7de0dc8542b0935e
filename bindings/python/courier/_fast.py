"""Which path the hot calls take: the compiled extension ``courier._speedups`` or ctypes.

Per request the binding makes a few calls: ``courier_send`` (or ``courier_send_sync``), the
completion back into Python (the send context's ``_complete``), the response's status and body,
``courier_response_free``, and for :class:`courier.AsyncEngine` the hand-over of the result to the
event loop (``Waker``, see ``courier.aio``); per WebSocket message ``courier_ws_send``,
``courier_ws_next`` and the notify (``WsWake``: a C function that writes a pipe without the GIL,
see ``courier.websocket``). Through
ctypes each costs microseconds (the completion most: ctypes builds its argument objects and, on
a thread Python did not start, a thread state per call). ``courier._speedups`` (src/speedups.c,
built by the wheel) makes the same calls in C; it decides nothing. It does not link libcourier:
:func:`enable` hands it the addresses of the functions of the library ctypes loaded
(``courier._lib.lib``), so both paths always use one library, also when ``COURIER_LIBRARY`` names
another build.

``ext`` is the extension in use, or None for the ctypes path: when the wheel was built without it
(no Python headers), when it cannot load, or when ``COURIER_PY_SPEEDUPS=0`` asks for ctypes (the
test command runs the suite both ways). The hot call sites read ``_fast.ext`` at each call, so
:func:`enable` switches a running process (the benchmark measures both paths side by side).
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Optional

from ._lib import ERROR, lib

__all__ = ["ext", "available", "enable", "path"]

try:
    from . import _speedups as _mod  # type: ignore[attr-defined]
except ImportError:  # built without it, or another platform's file
    _mod = None

available: bool = False
if _mod is not None and getattr(_mod, "ERROR_SIZE", None) == ctypes.sizeof(ERROR):
    try:
        _mod.init(*(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                    for name in ("courier_send", "courier_send_sync", "courier_response_status",
                                 "courier_response_body", "courier_response_free")))
        _mod.ws_init(*(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                       for name in ("courier_ws_send", "courier_ws_next", "courier_ws_read_socket",
                                    "courier_ws_take_reads", "courier_ws_return_reads")))
        available = True
    except (AttributeError, ValueError):  # pragma: no cover - a library without these functions
        available = False

ext: Optional[Any] = None


def enable(on: bool = True) -> bool:
    """Uses the compiled path (``on``, when it is available) or ctypes; returns whether the
    compiled path is now in use. For tests and the benchmark; a program never needs it."""
    global ext
    ext = _mod if (on and available) else None
    return ext is not None


def path() -> str:
    """"compiled" or "ctypes": the path the hot calls take now."""
    return "compiled" if ext is not None else "ctypes"


enable(os.environ.get("COURIER_PY_SPEEDUPS", "1") != "0")
