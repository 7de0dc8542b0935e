"""WebSocket clients (the C core's ``courier_ws``, RFC 6455): the connection, the handshake, the
framing, pings, the closing handshake and every check of what the server sends are the core's,
driven by the engine's worker thread (or read on the reader's, below); this module converts
messages and errors. Blocking reads wait in slices (so Ctrl-C is seen; the GIL is released while the
C call waits); asyncio reads do not wait and are woken by the WebSocket's notify (or the socket).

On the compiled path (``courier._speedups``) a message's send and read are one C call each, and the
notify is a C function that writes a pipe without taking the GIL (``WsWake``): the handshake's
wait polls that pipe, an asyncio loop watches it (``add_reader``), and a blocking reader after the
handshake waits in ``courier_ws_next`` and never reads it (the notify then costs an atomic
exchange). On ws:// with no proxy the worker is off the receive path as well
(docs/design/ws-reads.md): a blocking read's wait in ``courier_ws_next`` reads the socket on the
caller's thread, and an asyncio read has the loop watch the socket and read it there
(``courier_ws_take_reads``). An asyncio WebSocket's wait and read are ``courier._speedups.WsAio``,
which ``arecv`` awaits: the loop's reader callback reads the message and runs the waiting task's
step at once (one loop turn a message, no Python frame of the binding's but ``arecv``'s). On the
ctypes path the notify is a Python callback on the engine's worker thread.
"""
from __future__ import annotations

import asyncio
import threading
import time
from ctypes import Structure, byref, c_char_p, c_int, c_int64, c_size_t, c_void_p, string_at
from ctypes import sizeof as ctypes_sizeof
from typing import Any, AsyncIterator, Iterator, Optional, Sequence, Union

from . import _callbacks as cb
from . import _fast
from . import errors as courier_errors
from ._enums import CEnum
from ._lib import ERROR, lib
from .errors import lib_code, make_error
from .stream import _SLICE_MS, E_AGAIN, _Closing, _failure, _Waker, c_notify

E_WS_CLOSED = lib_code("COURIER_E_WS_CLOSED")
# Ends that only an open WebSocket meets (a message over the maximum, a frame that breaks the
# protocol): the handshake succeeded, so the socket is returned and recv raises them.
_AFTER_OPEN = (E_WS_CLOSED, lib_code("COURIER_E_TOO_LARGE"), lib_code("COURIER_E_WS_PROTOCOL"))
E_INVALID_ARGUMENT = lib_code("COURIER_E_INVALID_ARGUMENT")


class WSState(CEnum):
    """A WebSocket's state (``courier_ws_state``, the browser's readyState);
    ``str(WSState.OPEN) == "open"``."""
    __c_enum__ = ("courier_ws_state", "COURIER_WS_")
    CONNECTING = 0
    OPEN = 1
    CLOSING = 2
    CLOSED = 3


class WSMessageType(CEnum):
    """A message's type (``courier_ws_type``): a ``str`` is sent as TEXT, bytes as BINARY."""
    __c_enum__ = ("courier_ws_type", "COURIER_WS_")
    TEXT = 1
    BINARY = 2


_TEXT, _BINARY = int(WSMessageType.TEXT), int(WSMessageType.BINARY)


class WS_OPTIONS(Structure):
    """courier_ws_options."""
    _fields_ = [("size", c_size_t), ("subprotocols", c_char_p), ("max_message_bytes", c_int64),
                ("ping_interval_ms", c_int64), ("ping_timeout_ms", c_int64), ("close_timeout_ms", c_int64),
                ("handshake_timeout_ms", c_int64), ("max_send_queue_bytes", c_int64),
                ("max_receive_queue_bytes", c_int64), ("compression", c_int)]


class WS_MESSAGE(Structure):
    """courier_ws_message."""
    _fields_ = [("size", c_size_t), ("type", c_int), ("data", c_void_p), ("len", c_size_t)]


def _ms(name: str, seconds: Optional[float]) -> int:
    if seconds is None:
        return 0
    if seconds < 0:
        raise make_error(E_INVALID_ARGUMENT, None, None, message=f"{name}: {seconds!r} is negative")
    return max(1, int(seconds * 1000)) if seconds else 0


def make_options(subprotocols: Optional[Sequence[str]], max_message_bytes: Optional[int],
                 ping_interval: Optional[float], ping_timeout: Optional[float], close_timeout: Optional[float],
                 handshake_timeout: Optional[float], compression: bool = False,
                 max_receive_queue_bytes: Optional[int] = None) -> WS_OPTIONS:
    o = WS_OPTIONS()
    o.size = ctypes_sizeof(WS_OPTIONS)
    lib.courier_ws_options_init(byref(o))
    if subprotocols:
        o.subprotocols = ", ".join(subprotocols).encode()
    if max_message_bytes is not None:
        if max_message_bytes <= 0:
            raise make_error(E_INVALID_ARGUMENT, None, None,
                             message=f"max_message_bytes: {max_message_bytes!r} is not a positive size")
        o.max_message_bytes = max_message_bytes
    o.ping_interval_ms = _ms("ping_interval", ping_interval)
    o.ping_timeout_ms = _ms("ping_timeout", ping_timeout)
    if close_timeout is not None:
        o.close_timeout_ms = _ms("close_timeout", close_timeout)
    o.handshake_timeout_ms = _ms("handshake_timeout", handshake_timeout)
    if max_receive_queue_bytes is not None:
        if max_receive_queue_bytes <= 0:
            raise make_error(E_INVALID_ARGUMENT, None, None,
                             message=f"max_receive_queue_bytes: {max_receive_queue_bytes!r} is not a positive size")
        o.max_receive_queue_bytes = max_receive_queue_bytes
    o.compression = 1 if compression else 0
    return o


class _SyncWaker:
    """Wakes a blocked thread when the WebSocket may have something new (its notify callback, on
    the engine's worker thread)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.key = cb.register(cb.Slot(self.event.set, None))

    def c_args(self) -> tuple[Any, Any, Any]:
        """notify, user and user_free for courier_ws_open."""
        return c_notify, self.key, cb.user_free

    def wait(self, seconds: float) -> None:
        """Waits at most ``seconds`` for a notify, then forgets it."""
        self.event.wait(seconds)
        self.event.clear()

    def close(self) -> None:
        """Nothing to release: the registration ends with the WebSocket (its user_free)."""


class _SyncFdWaker:
    """The compiled path's :class:`_SyncWaker`: the notify is ``courier._speedups``' C function,
    which writes a pipe without the GIL; the handshake's wait polls the pipe, and after it nothing
    reads the pipe (a blocking read waits in ``courier_ws_next``), so each later notify is an atomic
    exchange and no Python runs on the engine's worker."""

    def __init__(self, ext: Any) -> None:
        self.ext = ext
        self.wake = ext.WsWake()

    def c_args(self) -> tuple[Any, Any, Any]:
        return self.ext.WS_NOTIFY, self.wake.user(), self.ext.WS_USER_FREE

    def wait(self, seconds: float) -> None:
        self.wake.wait(seconds)
        self.wake.clear()

    def close(self) -> None:
        """Nothing to release: the pipe closes with its last reference (this object's and the
        WebSocket's user_free)."""


class _AioFdWaker:
    """The compiled path's asyncio waker: the loop watches the :class:`_SyncFdWaker`'s kind of pipe
    (``add_reader``) and sets ``event`` (the handshake's) and wakes the task waiting in ``arecv``
    when it is written, with no Python on the engine's worker and no ``call_soon_threadsafe``.

    The reads themselves are ``courier._speedups.WsAio`` (``reads``, made by :meth:`bind`), which
    ``arecv`` awaits: the next message, or the task parks on a ``courier._speedups.Pending``. While
    a task waits on a plain connection (ws://, no proxy) the loop reads the socket itself
    (``courier_ws_take_reads``): it watches the socket, and when it is readable ``WsAio`` reads it
    (the frames parsed by the core on the loop's thread) and runs the waiting task's step there and
    then, with no thread in between and no second turn of the loop. When nobody waits, or the core
    gives the reads back (the connection is ending), the loop stops watching and the engine's
    worker reads again (pings answered, the notify as before)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ext: Any) -> None:
        self.loop = loop
        self.ext = ext
        self.event = asyncio.Event()
        self.reads: Any = None  # the WebSocket's WsAio, once bound
        self.wake = ext.WsWake()
        self._fd = self.wake.fileno()
        loop.add_reader(self._fd, self._ready)

    def bind(self, h: int) -> Any:
        """The reads of WebSocket ``h`` (``courier._speedups.WsAio``)."""
        self.reads = self.ext.WsAio(h, self.loop)
        return self.reads

    def _ready(self) -> None:
        self.wake.clear()  # the pipe read empty, then the flag cleared: the next notify writes
        self.event.set()
        reads = self.reads
        if reads is not None:
            reads.wake()  # the waiting task looks again

    def c_args(self) -> tuple[Any, Any, Any]:
        return self.ext.WS_NOTIFY, self.wake.user(), self.ext.WS_USER_FREE

    def close(self) -> None:
        """Stops watching the socket and the pipe (on the loop's thread; a closed loop has nothing
        to stop), before the WebSocket is freed (the socket's descriptor is the WebSocket's); a
        task still waiting in ``arecv`` is woken (and raises: the WebSocket is closed)."""
        reads, self.reads = self.reads, None
        if reads is not None:
            reads.release()
        fd, self._fd = self._fd, -1
        if fd >= 0 and not self.loop.is_closed():
            try:
                self.loop.remove_reader(fd)
            except Exception:  # pragma: no cover - a loop being torn down
                pass


def sync_waker() -> Any:
    """The notify target of a WebSocket read by blocking calls."""
    ext = _fast.ext
    return _SyncFdWaker(ext) if ext is not None else _SyncWaker()


def aio_waker() -> Any:
    """The notify target of a WebSocket read from the running event loop."""
    loop = asyncio.get_running_loop()
    ext = _fast.ext
    if ext is not None and hasattr(loop, "add_reader"):
        try:
            return _AioFdWaker(loop, ext)
        except NotImplementedError:  # a loop without add_reader (Windows' proactor)
            pass
    return _Waker(loop)


class WebSocket(_Closing):
    """A WebSocket (:meth:`courier.Engine.websocket`, :meth:`courier.AsyncEngine.websocket`).
    :meth:`send` a ``str`` (a text message) or ``bytes`` (binary); :meth:`recv` or iterate for the
    messages as they arrive (``str`` or ``bytes``). The iteration ends when the closing handshake
    ends (:attr:`close_code`, :attr:`close_reason` say how); :meth:`recv` raises
    :class:`courier.WebSocketClosed` then. A server that breaks the protocol raises
    :class:`courier.WebSocketProtocolError` (:attr:`close_code_sent`: 1002 or 1007), a message over
    ``max_message_bytes`` :class:`courier.TooLarge` (1009), a connection dropped without a close
    frame :class:`courier.NetworkError` (close code 1006), a keepalive pong that did not come
    :class:`courier.Timeout`. Leaving the ``with`` block closes with 1000 and waits for the server's
    close (at most ``close_timeout``)."""

    def __init__(self, handle: int, waker: Any) -> None:
        self._h: Optional[int] = handle
        self._waker = waker
        # the compiled path's asyncio reads (courier._speedups.WsAio), None elsewhere
        self._reads: Any = waker.bind(handle) if type(waker) is _AioFdWaker else None
        self._ended: Optional[int] = None
        self._pending: list[Any] = []  # messages read while waiting for the end of the handshake

    # -- what it is -------------------------------------------------------------------------------
    @property
    def state(self) -> WSState:
        if self._h is None:
            return WSState.CLOSED
        return WSState(int(lib.courier_ws_get_state(self._h)))

    @property
    def subprotocol(self) -> Optional[str]:
        """The subprotocol the server chose, or None."""
        p = lib.courier_ws_protocol(self._h) if self._h is not None else None
        return p.decode() if p else None

    @property
    def extensions(self) -> str:
        """The extension the server agreed to (``"permessage-deflate; ..."``), ``""`` for none."""
        p = lib.courier_ws_extensions(self._h) if self._h is not None else None
        return p.decode() if p else ""

    @property
    def unread_bytes(self) -> int:
        """Bytes of messages received and not yet read (bounded by ``max_receive_queue_bytes``)."""
        return int(lib.courier_ws_unread_bytes(self._h)) if self._h is not None else 0

    @property
    def close_code(self) -> Optional[int]:
        """The server's close code (1005: its close frame had none; 1006: no close frame), None
        while open."""
        c = int(lib.courier_ws_close_code(self._h)) if self._h is not None else 0
        return c or None

    @property
    def close_reason(self) -> str:
        p = lib.courier_ws_close_reason(self._h) if self._h is not None else None
        return p.decode("utf-8", "replace") if p else ""

    @property
    def close_code_sent(self) -> Optional[int]:
        """The close code sent (the caller's, an echo of the server's, or the one the client
        failed the connection with), None when none was."""
        c = int(lib.courier_ws_close_code_sent(self._h)) if self._h is not None else 0
        return c or None

    @property
    def queued_bytes(self) -> int:
        """Bytes sent and not yet written to the socket."""
        return int(lib.courier_ws_queued_bytes(self._h)) if self._h is not None else 0

    # -- sending ----------------------------------------------------------------------------------
    def send(self, message: Union[str, bytes, bytearray, memoryview]) -> None:
        """Queues a message (any thread): ``str`` as text, bytes-like as binary. Returns once it is
        queued; messages go out in order. Raises :class:`courier.Again` when the send queue is full
        (``courier_ws_queued_bytes`` over its bound), :class:`courier.WebSocketClosed` once closing."""
        if self._h is None:
            raise ValueError("the WebSocket is closed")
        ext = _fast.ext
        if ext is not None:
            if isinstance(message, str):
                failed = ext.ws_send(self._h, _TEXT, message.encode("utf-8"))
            else:
                failed = ext.ws_send(self._h, _BINARY, message)  # any bytes-like, not copied first
            if failed is not None:
                raise _failure(failed[0], ERROR.from_buffer_copy(failed[1]))
            return
        if isinstance(message, str):
            data, kind = message.encode("utf-8"), _TEXT
        else:
            data, kind = bytes(message), _BINARY
        err = ERROR()
        code = lib.courier_ws_send(self._h, kind, data, len(data), byref(err))
        if code != 0:
            raise _failure(code, err)

    async def asend(self, message: Union[str, bytes, bytearray, memoryview]) -> None:
        """:meth:`send` (it never blocks: the message is queued to the engine's worker)."""
        reads = self._reads
        if reads is None:
            return self.send(message)
        failed = reads.send(message)  # the compiled path: send's own call, without its frame
        if failed is not None:
            raise _failure(failed[0], ERROR.from_buffer_copy(failed[1]))

    # -- receiving --------------------------------------------------------------------------------
    def _take(self, got: Any) -> Any:
        """A message as ``ws_next`` gives it: str or bytes, or the end's tuple raised."""
        if type(got) is tuple:
            self._ended = got[0]
            raise _failure(got[0], ERROR.from_buffer_copy(got[1]))
        return got

    def _next(self, timeout_ms: int) -> Any:
        """The next message; None when none came within timeout_ms; raises the end."""
        if self._pending:
            return self._take(self._pending.pop(0))
        if self._h is None:
            raise ValueError("the WebSocket is closed")
        ext = _fast.ext
        if ext is not None:
            got = ext.ws_next(self._h, timeout_ms)  # str, bytes, None (no message yet) or the end
            if type(got) is tuple:
                self._ended = got[0]
                raise _failure(got[0], ERROR.from_buffer_copy(got[1]))
            return got
        m = WS_MESSAGE()
        m.size = ctypes_sizeof(WS_MESSAGE)
        err = ERROR()
        code = lib.courier_ws_next(byref(m), self._h, timeout_ms, byref(err))
        if code == 0:
            data = string_at(m.data, m.len) if m.len else b""
            return data.decode("utf-8") if m.type == _TEXT else data
        if code == E_AGAIN:
            return None
        self._ended = code
        raise _failure(code, err)

    def recv(self, timeout: Optional[float] = None) -> Union[str, bytes]:
        """The next message, waiting at most ``timeout`` seconds (None: no bound; past it
        :class:`TimeoutError`). Raises the end (see the class)."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            wait = _SLICE_MS
            if deadline is not None:
                wait = max(0, min(_SLICE_MS, int((deadline - time.monotonic()) * 1000)))
            msg = self._next(wait)
            if msg is not None:
                return msg  # type: ignore[no-any-return]
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("no WebSocket message within the timeout")

    def __iter__(self) -> Iterator[Union[str, bytes]]:
        """The messages as they arrive, until the closing handshake ends (other ends raise)."""
        while True:
            try:
                msg = self._next(_SLICE_MS)
            except BaseException:
                if self._ended == E_WS_CLOSED:
                    return
                raise
            if msg is not None:
                yield msg

    async def arecv(self) -> Union[str, bytes]:
        """:meth:`recv` without blocking the event loop (a WebSocket of an AsyncEngine)."""
        reads = self._reads
        if reads is not None and not self._pending:
            got = await reads  # the compiled path: a message, the end's (code, error), None: released
            if type(got) is not tuple:
                if got is not None:
                    return got  # type: ignore[no-any-return]
            else:
                self._ended = got[0]
                raise _failure(got[0], ERROR.from_buffer_copy(got[1]))
        waker = self._waker
        if isinstance(waker, _AioFdWaker):
            return self._next(0)  # type: ignore[no-any-return]  # read before, or a released one's error
        if not isinstance(waker, _Waker):
            raise RuntimeError("arecv and async for need a WebSocket of an AsyncEngine")
        while True:
            waker.event.clear()
            msg = self._next(0)
            if msg is not None:
                return msg  # type: ignore[no-any-return]
            await waker.event.wait()

    def __aiter__(self) -> AsyncIterator[Union[str, bytes]]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[Union[str, bytes]]:
        while True:
            try:
                msg = await self.arecv()
            except BaseException:
                if self._ended == E_WS_CLOSED:
                    return
                raise
            yield msg

    # -- closing ----------------------------------------------------------------------------------
    def start_close(self, code: int = 1000, reason: str = "") -> bool:
        """Sends a close frame (``courier_ws_close``) and returns: True when it was queued, False
        when the WebSocket was already closing or closed. The messages still arriving can be read
        until the end. Raises :class:`courier.InvalidArgument` for a code that may not be sent or a
        reason over 123 bytes."""
        if self._h is None:
            return False
        rc = lib.courier_ws_close(self._h, code, reason.encode("utf-8") if reason else None)
        if rc == E_INVALID_ARGUMENT:
            raise make_error(rc, None, None, message=f"close code {code} or its reason may not be sent")
        return rc == 0

    def close(self, code: int = 1000, reason: str = "") -> None:
        """The closing handshake: sends a close frame, reads (and drops) what still arrives until
        the server's close (at most ``close_timeout``), and releases the WebSocket. Twice is
        fine."""
        if self._h is None:
            return
        try:
            if self.state in (WSState.CONNECTING, WSState.OPEN):
                self.start_close(code, reason)
            while True:
                try:
                    self._next(_SLICE_MS)
                except Exception:
                    break
        finally:
            self._release()

    async def aclose(self, code: int = 1000, reason: str = "") -> None:
        """:meth:`close` without blocking the event loop."""
        if self._h is None:
            return
        try:
            if self.state in (WSState.CONNECTING, WSState.OPEN):
                self.start_close(code, reason)
            while True:
                try:
                    await self.arecv()
                except Exception:
                    break
        finally:
            self._release()

    def _release(self) -> None:
        h, self._h = self._h, None
        self._reads = None
        if h is not None:
            self._waker.close()  # first: the loop stops watching the socket the free closes
            lib.courier_ws_free(h)

    def __del__(self) -> None:
        try:
            self._release()  # dropped without a close: no close frame, no waiting
        except Exception:
            pass

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<courier.WebSocket {self.state}>"


def open_ws(engine_handle: int, creq: int, options: WS_OPTIONS, waker: Any) -> int:
    """courier_ws_open: the handle, or the failure raised."""
    h = c_void_p()
    err = ERROR()
    notify, user, user_free = waker.c_args()
    code = lib.courier_ws_open(byref(h), engine_handle, creq, byref(options), notify, user, user_free, byref(err))
    if code != 0:
        raise _failure(code, err)
    assert h.value is not None
    return h.value


def _raise_if_failed(ws: WebSocket) -> None:
    """After the handshake: a WebSocket that ended with no message raises its end (a refused
    handshake, a connection that failed); one that brought messages first keeps them for recv."""
    if ws.state != WSState.CLOSED:
        return
    try:
        msg = ws._next(0)  # raises the end when no message came before it
    except courier_errors.CourierError:
        if ws._ended in _AFTER_OPEN:
            return  # opened, then ended at once: recv says how (the iteration is empty, or raises)
        raise
    if msg is not None:
        ws._pending.append(msg)


def wait_open(h: int, waker: Any) -> WebSocket:
    """Waits (in slices, so that Ctrl-C is seen) until the handshake ended; raises its failure."""
    ws = WebSocket(h, waker)
    try:
        while ws.state == WSState.CONNECTING:
            waker.wait(_SLICE_MS / 1000.0)
        _raise_if_failed(ws)
        return ws
    except BaseException:
        ws._release()
        raise


async def await_open(h: int, waker: Any) -> WebSocket:
    """Awaits the handshake without blocking the loop; raises its failure."""
    ws = WebSocket(h, waker)
    try:
        while True:
            waker.event.clear()
            state = ws.state
            if state != WSState.CONNECTING:
                break
            await waker.event.wait()
        _raise_if_failed(ws)
        return ws
    except BaseException:
        ws._release()
        raise
