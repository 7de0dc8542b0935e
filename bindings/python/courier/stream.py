"""Responses read as they arrive (the C core's ``courier_stream``): the head first, then the body
in chunks as the network hands them over, then the end. The C core keeps the bounded buffer and
pauses the transfer when the reader falls behind (``Engine(stream_buffer_bytes=)``, 1 MiB by
default); this module only reads: blocking, in slices so that Ctrl-C is seen (the GIL is released
while the C call waits), or, for asyncio, without waiting, woken by the stream's notify callback.
"""
from __future__ import annotations

import asyncio
from ctypes import CFUNCTYPE, Structure, byref, c_char_p, c_size_t, c_void_p, string_at
from ctypes import sizeof as ctypes_sizeof
from typing import Any, AsyncIterator, Iterator, Optional, Union

from . import _callbacks as cb
from ._enums import CEnum
from ._lib import ERROR, lib
from .errors import CourierError, lib_code, make_error
from .response import Response

E_AGAIN = lib_code("COURIER_E_AGAIN")
_SLICE_MS = 200  # a blocking wait is made of waits this long, so that signals (Ctrl-C) are seen

NOTIFY_FN = CFUNCTYPE(None, c_void_p, c_void_p)


class SSE_EVENT(Structure):
    """courier_sse_event."""
    _fields_ = [("size", c_size_t), ("type", c_char_p), ("data", c_void_p), ("data_len", c_size_t),
                ("last_event_id", c_char_p)]


def _notify(stream: Any, user: Any) -> None:
    slot = cb.lookup(user)
    if slot is not None:
        try:
            slot.fn()
        except BaseException:  # a closed loop: nobody waits any more
            pass


c_notify = NOTIFY_FN(_notify)


def _failure(code: int, err: ERROR) -> BaseException:
    """The exception of a stream's failure: what a callback raised, else the code's."""
    try:
        exc = cb.user_error(err)
        if exc is not None:
            return exc
        return make_error(code, err, None)
    finally:
        lib.courier_error_clear(byref(err))


class _Closing:
    """``with`` and ``async with`` close it, and so does its collection."""

    def close(self) -> None:  # pragma: no cover - each class has its own
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class StreamResponse(_Closing):
    """A response read as it arrives (:meth:`courier.Engine.stream`): ``status``, ``headers``,
    ``url`` and ``metrics`` of the head are there at once; the body is read with
    :meth:`iter_bytes`, :meth:`iter_lines`, :meth:`iter_text` or :meth:`read` (once, by one reader
    at a time), or with ``aiter_bytes``/``aiter_lines``/``aread`` from an
    :class:`courier.AsyncEngine`'s stream. Use it as a context manager: leaving the block (or
    :meth:`close`) before the end cancels the transfer and closes its connection.

    Any status is the reader's: a 404 is a head and its body, not an exception. A failure while
    reading (a cut connection, a timeout, :meth:`cancel`) raises its :class:`courier.CourierError`
    after the bytes that came before it."""

    def __init__(self, handle: int, head: Response, waker: Optional["_Waker"] = None) -> None:
        self._h: Optional[int] = handle
        self.head = head
        self._waker = waker

    # -- the head -------------------------------------------------------------------------------
    @property
    def status(self) -> int:
        return self.head.status

    @property
    def headers(self) -> Any:
        return self.head.headers

    @property
    def url(self) -> str:
        return self.head.url

    @property
    def request_id(self) -> int:
        return self.head.request_id

    @property
    def response(self) -> Optional[Response]:
        """The whole response once the body was read to its end (final metrics, redirects; an
        empty body), else None."""
        if self._h is None:
            return None
        p = lib.courier_stream_response(self._h)
        return Response(lib.courier_response_retain(p)) if p else None

    @property
    def buffered(self) -> int:
        """Body bytes the engine holds for this stream, not yet read."""
        return int(lib.courier_stream_buffered(self._h)) if self._h is not None else 0

    # -- reading --------------------------------------------------------------------------------
    def _next(self, timeout_ms: int) -> Optional[bytes]:
        """The next chunk; b"" at the end; None when nothing came within timeout_ms."""
        if self._h is None:
            raise ValueError("the stream is closed")
        data = c_void_p()
        n = c_size_t()
        err = ERROR()
        code = lib.courier_stream_next(byref(data), byref(n), self._h, timeout_ms, byref(err))
        if code == 0:
            return string_at(data.value, n.value) if n.value else b""
        if code == E_AGAIN:
            return None
        raise _failure(code, err)

    def iter_bytes(self, chunk_size: Optional[int] = None) -> Iterator[bytes]:
        """The body as it arrives: the network's chunks, or pieces of ``chunk_size`` bytes (the
        last may be shorter)."""
        if chunk_size is not None and chunk_size <= 0:
            raise courier_invalid("chunk_size", chunk_size)
        pending = b""
        while True:
            chunk = self._next(_SLICE_MS)
            if chunk is None:
                continue
            if not chunk:
                break
            if chunk_size is None:
                yield chunk
                continue
            pending += chunk
            while len(pending) >= chunk_size:
                yield pending[:chunk_size]
                pending = pending[chunk_size:]
        if pending:
            yield pending

    __iter__ = iter_bytes

    def iter_text(self, encoding: str = "utf-8", errors: str = "replace") -> Iterator[str]:
        """The body decoded as it arrives (a character split between chunks is kept whole)."""
        import codecs
        decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
        for chunk in self.iter_bytes():
            text = decoder.decode(chunk)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    def _next_line(self, timeout_ms: int) -> Union[str, None, bool]:
        """The next line (``courier_stream_next_line``: the C core splits); False at the end; None
        when no whole line came within timeout_ms."""
        if self._h is None:
            raise ValueError("the stream is closed")
        line = c_char_p()
        n = c_size_t()
        err = ERROR()
        code = lib.courier_stream_next_line(byref(line), byref(n), self._h, timeout_ms, byref(err))
        if code == 0:
            if line.value is None:
                return False
            return string_at(line, n.value).decode("utf-8", "replace")
        if code == E_AGAIN:
            return None
        raise _failure(code, err)

    def iter_lines(self) -> Iterator[str]:
        """The body as UTF-8 lines: split at LF, a CR before it dropped, the last line given even
        without a line end (split only at LF and CRLF, never at U+2028 and other separators).
        A line over the engine's ``max_response_bytes`` raises :class:`courier.TooLarge`."""
        while True:
            line = self._next_line(_SLICE_MS)
            if line is None:
                continue
            if line is False:
                return
            yield line

    def read(self) -> bytes:
        """The rest of the body."""
        return b"".join(self.iter_bytes())

    # -- asyncio --------------------------------------------------------------------------------
    async def _anext(self) -> bytes:
        waker = self._waker
        if waker is None:
            raise RuntimeError("aiter_bytes/aiter_lines/aread need a stream of an AsyncEngine")
        while True:
            waker.event.clear()
            chunk = self._next(0)
            if chunk is not None:
                return chunk
            try:
                await waker.event.wait()
            except asyncio.CancelledError:
                self.cancel()
                raise

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives, without blocking the event loop."""
        while True:
            chunk = await self._anext()
            if not chunk:
                return
            yield chunk

    async def aiter_lines(self) -> AsyncIterator[str]:
        """:meth:`iter_lines`, without blocking the event loop."""
        waker = self._waker
        if waker is None:
            raise RuntimeError("aiter_bytes/aiter_lines/aread need a stream of an AsyncEngine")
        while True:
            waker.event.clear()
            line = self._next_line(0)
            if line is False:
                return
            if line is not None:
                yield line
                continue
            try:
                await waker.event.wait()
            except asyncio.CancelledError:
                self.cancel()
                raise

    async def aread(self) -> bytes:
        """The rest of the body, without blocking the event loop."""
        return b"".join([c async for c in self.aiter_bytes()])

    # -- ending ---------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Cancels the transfer (any thread): reading ends with :class:`courier.Cancelled` once the
        bytes already held are read."""
        if self._h is not None:
            lib.courier_stream_cancel(self._h)

    def close(self) -> None:
        """Releases the stream (cancelling it when unfinished). Twice is fine."""
        h, self._h = self._h, None
        if h is not None:
            lib.courier_stream_free(h)
        if self._waker is not None:
            self._waker.close()
            self._waker = None

    def __repr__(self) -> str:
        return f"<courier.StreamResponse {self.status} {self.url}>"


def courier_invalid(name: str, value: Any) -> CourierError:
    return make_error(lib_code("COURIER_E_INVALID_ARGUMENT"), None, None,
                      message=f"{name}: {value!r} is not a positive size")


class _Waker:
    """Wakes an asyncio task when the stream becomes readable (the notify callback runs on the
    engine's worker thread: call_soon_threadsafe)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()
        self.key = cb.register(cb.Slot(self._fire, None))

    def _fire(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.event.set)

    def c_args(self) -> tuple[Any, Any, Any]:
        """notify, user and user_free for an open function (courier_ws_open)."""
        return c_notify, self.key, cb.user_free

    def close(self) -> None:
        """Nothing to release: the registration ends with the stream (its user_free)."""


def _open_with(open_fn: Any, engine_handle: int, creq: int, waker: Optional[_Waker]) -> int:
    """courier_stream_open or courier_sse_open (the same arguments): the new handle, or the failure
    raised. With a waker, its notify wakes the waker's loop."""
    h = c_void_p()
    err = ERROR()
    if waker is not None:
        code = open_fn(byref(h), engine_handle, creq, c_notify, waker.key, cb.user_free, byref(err))
    else:
        code = open_fn(byref(h), engine_handle, creq, None, None, None, byref(err))
    if code != 0:
        raise _failure(code, err)
    assert h.value is not None
    return h.value


def open_stream(engine_handle: int, creq: int, waker: Optional[_Waker]) -> int:
    """courier_stream_open: the stream's handle, or the failure raised."""
    return _open_with(lib.courier_stream_open, engine_handle, creq, waker)


def head_of(handle: int, timeout_ms: int) -> Optional[Response]:
    """The head (a new Response), None when it did not come within timeout_ms; raises the send's
    failure before a head."""
    out = c_void_p()
    err = ERROR()
    code = lib.courier_stream_head(byref(out), handle, timeout_ms, byref(err))
    if code == 0:
        return Response(lib.courier_response_retain(out.value))
    if code == E_AGAIN:
        return None
    raise _failure(code, err)


def wait_head(h: int) -> StreamResponse:
    """Waits (in slices, so that Ctrl-C is seen) for an open stream's head."""
    try:
        while True:
            head = head_of(h, _SLICE_MS)
            if head is not None:
                return StreamResponse(h, head)
    except BaseException:
        lib.courier_stream_free(h)
        raise


def new_waker() -> _Waker:
    """The notify target of a stream read from the running event loop."""
    return _Waker(asyncio.get_running_loop())


async def await_head(h: int, waker: _Waker) -> StreamResponse:
    """Awaits an open stream's head without blocking the loop."""
    try:
        while True:
            waker.event.clear()
            head = head_of(h, 0)
            if head is not None:
                return StreamResponse(h, head, waker)
            try:
                await waker.event.wait()
            except asyncio.CancelledError:
                lib.courier_stream_cancel(h)
                raise
    except BaseException:
        lib.courier_stream_free(h)
        raise


# ---------------------------------------------------------------------------------------------
# Server-sent events
# ---------------------------------------------------------------------------------------------

class SSEState(CEnum):
    """An event source's state (``courier_sse_state``, EventSource's readyState);
    ``str(SSEState.OPEN) == "open"``."""
    __c_enum__ = ("courier_sse_state", "COURIER_SSE_")
    CONNECTING = 0
    OPEN = 1
    CLOSED = 2


class ServerSentEvent:
    """One server-sent event: ``type`` (its ``event`` field, or "message"), ``data`` (the
    ``data`` lines joined by LF) and ``last_event_id`` (the source's last event ID then)."""

    __slots__ = ("type", "data", "last_event_id")

    def __init__(self, type: str, data: str, last_event_id: str) -> None:
        self.type = type
        self.data = data
        self.last_event_id = last_event_id

    def __repr__(self) -> str:
        return f"ServerSentEvent(type={self.type!r}, data={self.data!r}, last_event_id={self.last_event_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServerSentEvent) and (self.type, self.data, self.last_event_id) == (
            other.type, other.data, other.last_event_id)


class EventSource(_Closing):
    """An event source (:meth:`courier.Engine.events`): iterate it for its events, as they arrive,
    reconnecting as EventSource does (the server's ``retry`` time, else 3 s, with
    ``Last-Event-ID``). The iteration raises when the source ends for good: a 204 or another status
    than 200 (:class:`courier.HTTPStatusError`), not ``text/event-stream``
    (:class:`courier.InvalidResult`), :meth:`close` (:class:`courier.Cancelled`). Use it as a
    context manager, or :meth:`close` it. ``async for`` works on a source of an
    :class:`courier.AsyncEngine`."""

    def __init__(self, handle: int, engine: Any, waker: Optional["_Waker"] = None) -> None:
        self._h: Optional[int] = handle
        self._engine = engine
        self._waker = waker

    @property
    def state(self) -> SSEState:
        """CONNECTING, OPEN or CLOSED (EventSource's readyState)."""
        if self._h is None:
            return SSEState.CLOSED
        return SSEState(int(lib.courier_sse_get_state(self._h)))

    @property
    def retry(self) -> float:
        """The reconnection time in force, in seconds."""
        return int(lib.courier_sse_retry_ms(self._h)) / 1000.0 if self._h is not None else 0.0

    def _next(self, timeout_ms: int) -> Optional[ServerSentEvent]:
        if self._h is None:
            raise ValueError("the event source is closed")
        if self._engine.closed:
            lib.courier_sse_close(self._h)  # a reconnection would need the engine
        ev = SSE_EVENT()
        ev.size = ctypes_sizeof(SSE_EVENT)
        err = ERROR()
        code = lib.courier_sse_next(byref(ev), self._h, timeout_ms, byref(err))
        if code == 0:
            return ServerSentEvent(ev.type.decode("utf-8", "replace"),
                                   string_at(ev.data, ev.data_len).decode("utf-8", "replace"),
                                   ev.last_event_id.decode("utf-8", "replace"))
        if code == E_AGAIN:
            return None
        raise _failure(code, err)

    def __iter__(self) -> Iterator[ServerSentEvent]:
        while True:
            ev = self._next(_SLICE_MS)
            if ev is not None:
                yield ev

    def __aiter__(self) -> AsyncIterator[ServerSentEvent]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[ServerSentEvent]:
        waker = self._waker
        if waker is None:
            raise RuntimeError("async for needs an event source of an AsyncEngine")
        while True:
            waker.event.clear()
            ev = self._next(0)
            if ev is not None:
                yield ev
                continue
            wait = int(lib.courier_sse_retry_in_ms(self._h)) if self._h is not None else -1
            try:
                if wait >= 0:  # waiting to reconnect: look again when it is due
                    try:
                        await asyncio.wait_for(waker.event.wait(), wait / 1000.0 + 0.001)
                    except asyncio.TimeoutError:
                        pass
                else:
                    await waker.event.wait()
            except asyncio.CancelledError:
                self.close()
                raise

    def close(self) -> None:
        """Stops the source and releases it (any reader then gets :class:`courier.Cancelled`)."""
        h, self._h = self._h, None
        if h is not None:
            lib.courier_sse_free(h)


def open_events(engine_handle: int, creq: int, engine: Any, waker: Optional[_Waker]) -> EventSource:
    """courier_sse_open: the source, or the failure raised."""
    return EventSource(_open_with(lib.courier_sse_open, engine_handle, creq, waker), engine, waker)
