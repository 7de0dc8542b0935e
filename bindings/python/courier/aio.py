"""asyncio: :class:`AsyncEngine`, whose requests and groups are awaited.

``await engine.get(...)`` sends the request with ``courier_send`` and parks the task on a future;
the core's completion callback (on the engine's worker thread) hands the outcome to the task's
event loop through a per-loop queue that wakes the loop once per burst of completions (see
:class:`_Loop`: on the compiled path a pipe the loop reads, written without the GIL, and the
drain wakes the task itself; on the ctypes path ``loop.call_soon_threadsafe`` and asyncio
futures). No thread per request and no polling. Cancelling the task cancels the request in the
engine (``courier_cancel``); cancelling a task awaiting a group cancels the group
(``courier_group_cancel``).

>>> async with courier.AsyncEngine(base_url="http://127.0.0.1:8080", timeout=5) as engine:
...     r = await engine.get("/json")
...     results = await engine.batch([courier.Request("GET", "/a"), courier.Request("GET", "/b")])
"""
from __future__ import annotations

import asyncio
import collections
import functools
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

from . import _callbacks as cb
from . import _fast
from .engine import Engine, _SendContext
from .group import GroupMember, GroupMode, GroupResult, Member, run
from .request import Request
from .response import Response
from .stream import EventSource, StreamResponse, await_head, new_waker
from .websocket import WebSocket, aio_waker, await_open, make_options

if TYPE_CHECKING:  # pragma: no cover
    from .request import RequestOptions
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack

__all__ = ["AsyncEngine"]

_get_running_loop = asyncio.get_running_loop
_new_send = object.__new__


def _settle(fut: "asyncio.Future[Any]", value: Any, exc: Optional[BaseException]) -> None:
    if fut.done():  # the task was cancelled meanwhile
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


class _Waker:
    """Hands completions to one event loop, a burst at a time (the ctypes path's; the compiled
    path uses ``courier._speedups.Waker``, the same in C). The engine's worker appends each
    completion to a queue and wakes the loop (``call_soon_threadsafe``: a write to the loop's
    self-pipe) only when no wake-up is pending; the loop settles every queued future in one call.
    With many requests in flight, completions come in bursts: one wake-up serves the burst
    instead of a syscall and a loop iteration each. Completion order is kept."""

    __slots__ = ("loop", "queue", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: collections.deque[tuple[Any, Any, Optional[BaseException]]] = collections.deque()
        self.scheduled = False

    def post(self, fut: "asyncio.Future[Any]", value: Any, exc: Optional[BaseException] = None) -> None:
        """A completion callback (on the engine's worker thread): resolves ``fut`` on the loop."""
        self.queue.append((fut, value, exc))
        if not self.scheduled:  # two threads may both schedule: the second drain finds nothing
            self.scheduled = True
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:  # the loop is closed: nobody awaits this any more
                pass

    def drain(self) -> None:
        """On the loop: settles what is queued (a completion queued after the flag is cleared
        schedules another drain, or is taken by this one)."""
        self.scheduled = False
        queue = self.queue
        while queue:
            _settle(*queue.popleft())


class _Loop:
    """What the engines awaited on one event loop share: how its futures are made (``loop.create_future``;
    for asyncio's own loops, whose ``create_future`` is ``Future(loop=loop)``, that call without
    the method's Python frame), the waker that hands completions to it, and what a send awaits.

    On the compiled path the waker is ``courier._speedups.Waker``: the loop reads its pipe
    (``add_reader``), a send goes through ``Waker.send``, whose completion queues a success
    without taking the GIL (one pipe write per burst), and the send awaits a
    ``courier._speedups.Pending`` (asyncio's future protocol) whose task the drain wakes itself
    instead of a ``loop.call_soon`` per request. Otherwise (the ctypes path, or a loop without
    ``add_reader``): :class:`_Waker` and asyncio futures."""

    __slots__ = ("loop", "waker", "new_future", "new_pending", "send")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        if getattr(type(loop), "create_future", None) is asyncio.BaseEventLoop.create_future:
            self.new_future: Callable[[], "asyncio.Future[Any]"] = functools.partial(asyncio.Future, loop=loop)
        else:
            self.new_future = loop.create_future
        ext = _fast.ext
        waker: Any = None
        if ext is not None:
            try:
                waker = ext.Waker(loop, Response)
                loop.add_reader(waker.fileno(), waker.drain)
            except (NotImplementedError, OSError):  # no pipe, or a loop without add_reader
                waker = None
        if waker is not None:
            self.waker = waker
            self.new_pending: Callable[[], Any] = waker.future
            self.send: Optional[Callable[..., Any]] = waker.send
        else:
            self.waker = _Waker(loop)
            self.new_pending = self.new_future
            self.send = None


_loops: dict[asyncio.AbstractEventLoop, _Loop] = {}  # every AsyncEngine's, one per loop


def _loop_for(loop: asyncio.AbstractEventLoop) -> _Loop:
    """The :class:`_Loop` of ``loop`` (the running one), shared by the engines awaited there, made
    on first use. A loop is used from its own thread only; the entries of loops closed since are
    dropped when a new loop comes (their readers went with them)."""
    lp = _loops.get(loop)
    if lp is None:
        for old in list(_loops):
            if old.is_closed():
                _loops.pop(old, None)
        lp = _loops[loop] = _Loop(loop)
    return lp


class _AsyncSend(_SendContext):
    """One awaited send: its completion (on the engine's worker) builds the response or the
    exception as every send does and hands it to the loop's waker, which settles the future."""

    __slots__ = ("waker",)

    def __init__(self, engine: Engine, future: "asyncio.Future[Any]", waker: Any) -> None:
        # AsyncEngine.send makes these with _new_send and sets the fields itself (a frame less)
        self.engine = engine
        self.exc = None
        self.future = future
        self.callback = None
        self.waker = waker

    def _complete(self, request_id: int, code: int, response: Optional[int], error: Optional[int]) -> None:
        try:
            resp, exc = self._outcome(code, response, error)
            self.waker.post(self.future, resp, exc)
        except BaseException as e:  # pragma: no cover - nothing awaits an exception raised here
            cb.orphan(e)


class AsyncEngine:
    """A :class:`courier.Engine` whose sends are awaited. It takes the same arguments as
    ``Engine`` (or wraps an existing one: ``AsyncEngine(engine=e)``) and the same request options;
    ``engine.sync`` is the underlying :class:`courier.Engine` (cache and frozen managers, logging,
    monitors). It may be awaited from several event loops, each in its own thread (a result comes
    back to the loop that awaits it); close it with ``async with`` or :meth:`aclose`."""

    def __init__(self, base_url: Optional[str] = None, *, engine: Optional[Engine] = None, **config: Any) -> None:
        self._loop: Optional[_Loop] = None  # the last loop's (read once: threads may race)
        if engine is not None:
            if base_url is not None or config:
                raise TypeError("AsyncEngine(engine=...) takes no other arguments")
            self.sync = engine
        else:
            self.sync = Engine(base_url, **config)

    async def __aenter__(self) -> "AsyncEngine":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the engine: requests still in flight end with :class:`courier.Cancelled`."""
        self.sync.close()
        lp = _loops.get(_get_running_loop())
        if lp is not None and lp.send is not None:
            # the close completed what was in flight: settled now, as the ctypes path's drain,
            # already scheduled by then, would (the pipe would be read an iteration later)
            lp.waker.flush()

    @property
    def closed(self) -> bool:
        return self.sync.closed

    @property
    def cache(self) -> Any:
        return self.sync.cache

    @property
    def frozen(self) -> Any:
        return self.sync.frozen

    @property
    def stubs(self) -> Any:
        """The engine's stubs (:class:`courier.Stubs`), as ``Engine.stubs``."""
        return self.sync.stubs

    def record_har(self, path: Any) -> None:
        """As :meth:`courier.Engine.record_har`."""
        self.sync.record_har(path)

    async def send(self, method: Union[str, Request], url: Optional[str] = None,
                   **options: Unpack[RequestOptions]) -> Response:
        """Sends a request and awaits its :class:`courier.Response`; raises as
        :meth:`courier.Engine.send` does. Cancelling the awaiting task cancels the request."""
        loop = _get_running_loop()
        lp = self._loop
        if lp is None or lp.loop is not loop:
            lp = self._loop = _loop_for(loop)
            self.sync._async_loop = loop  # session.py: where async adapters, retriers and refreshes run
        fut = lp.new_pending()
        ctx = _new_send(_AsyncSend)  # _AsyncSend(sync, fut, waker) without its __init__ frame
        ctx.engine = sync = self.sync
        ctx.exc = ctx.callback = None
        ctx.future = fut
        ctx.waker = lp.waker
        rid = sync._send(method, url, options, ctx, lp.send)
        try:
            return await fut
        except asyncio.CancelledError:
            if not sync.closed:
                sync.cancel(rid)
            raise

    def stream(self, method: Union[str, Request], url: Optional[str] = None,
               **options: Unpack[RequestOptions]) -> "_StreamOpening":
        """Sends a request as a stream (:meth:`courier.Engine.stream`), read without blocking
        the loop::

            async with engine.stream("GET", "/bytes/100000") as r:
                async for chunk in r.aiter_bytes():
                    ...

        ``await engine.stream(...)`` gives the :class:`courier.StreamResponse` too (close it).
        Cancelling the awaiting task cancels the transfer."""
        return _StreamOpening(self.sync, method, url, options)

    def events(self, url: Union[str, Request], **options: Unpack[RequestOptions]) -> EventSource:
        """An event source (:meth:`courier.Engine.events`) read with ``async for`` without
        blocking the loop; cancelling the iterating task closes it. Call from a running loop."""
        req = url if isinstance(url, Request) else Request("GET", url, **options)
        return self.sync._open_events(req, new_waker())

    def websocket(self, url: Union[str, Request], *, subprotocols: Optional[Sequence[str]] = None,
                  max_message_bytes: Optional[int] = None, ping_interval: Optional[float] = None,
                  ping_timeout: Optional[float] = None, close_timeout: Optional[float] = None,
                  handshake_timeout: Optional[float] = None, compression: bool = False,
                  max_receive_queue_bytes: Optional[int] = None, **options: Unpack[RequestOptions]) -> "_WebSocketOpening":
        """A WebSocket (:meth:`courier.Engine.websocket`), read without blocking the loop::

            async with engine.websocket("ws://127.0.0.1:8765/chat") as ws:
                await ws.asend("hello")
                async for message in ws:
                    print(message)

        ``await engine.websocket(...)`` gives the :class:`courier.WebSocket` too (close it with
        ``await ws.aclose()``). Leaving the block closes with 1000 and awaits the server's close."""
        req = url if isinstance(url, Request) else Request("GET", url, **options)
        if isinstance(url, Request) and options:
            raise TypeError("websocket(Request) takes no request options")
        opts = make_options(subprotocols, max_message_bytes, ping_interval, ping_timeout, close_timeout, handshake_timeout,
                            compression, max_receive_queue_bytes)
        return _WebSocketOpening(self.sync, req, opts)

    async def api(self, name: str, **options: Unpack[RequestOptions]) -> Response:
        """Sends API ``name`` of the engine's catalogue (:meth:`courier.Engine.api`)."""
        return await self.send(Request.api(name, **options))

    async def get(self, url: str, **options: Unpack[RequestOptions]) -> Response:
        return await self.send("GET", url, **options)

    async def head(self, url: str, **options: Unpack[RequestOptions]) -> Response:
        return await self.send("HEAD", url, **options)

    async def post(self, url: str, **options: Unpack[RequestOptions]) -> Response:
        return await self.send("POST", url, **options)

    async def put(self, url: str, **options: Unpack[RequestOptions]) -> Response:
        return await self.send("PUT", url, **options)

    async def patch(self, url: str, **options: Unpack[RequestOptions]) -> Response:
        return await self.send("PATCH", url, **options)

    async def delete(self, url: str, **options: Unpack[RequestOptions]) -> Response:
        return await self.send("DELETE", url, **options)

    async def _group(self, mode: GroupMode, members: Sequence[Member], **kw: Any) -> GroupResult:
        loop = _get_running_loop()
        lp = self._loop
        if lp is None or lp.loop is not loop:
            lp = self._loop = _loop_for(loop)
        fut: asyncio.Future[GroupResult] = lp.new_future()
        group = run(self.sync, mode, members, callback=functools.partial(lp.waker.post, fut), **kw)
        with group:
            try:
                return await fut
            except asyncio.CancelledError:
                group.cancel()
                raise

    async def batch(self, members: Sequence[Member], *, fail_fast: bool = False, max_in_flight: int = 0,
                    continue_on_failure: bool = False,
                    on_member: Optional[Callable[[GroupMember], None]] = None) -> GroupResult:
        """:meth:`courier.Engine.batch`, awaited. Cancelling the task cancels the group."""
        return await self._group(GroupMode.BATCH, members, fail_fast=fail_fast, max_in_flight=max_in_flight,
                                 continue_on_failure=continue_on_failure, on_member=on_member)

    async def chain(self, members: Sequence[Member], *, continue_on_failure: bool = False,
                    on_member: Optional[Callable[[GroupMember], None]] = None) -> GroupResult:
        """:meth:`courier.Engine.chain`, awaited (build functions run on the engine's thread, not
        the event loop: they must not await). Cancelling the task cancels the group."""
        return await self._group(GroupMode.CHAIN, members, continue_on_failure=continue_on_failure,
                                 on_member=on_member)

    def __repr__(self) -> str:
        return f"<courier.AsyncEngine {'closed' if self.closed else self.sync.store_dir}>"


class _WebSocketOpening:
    """What :meth:`AsyncEngine.websocket` returns: an async context manager, or an awaitable."""

    def __init__(self, engine: Engine, req: Request, options: Any) -> None:
        self._args = (engine, req, options)
        self._ws: Optional[WebSocket] = None

    async def _open(self) -> WebSocket:
        engine, req, options = self._args
        waker = aio_waker()
        try:
            h = engine._open_ws(req, options, waker)
        except BaseException:
            waker.close()
            raise
        return await await_open(h, waker)

    def __await__(self) -> Any:
        return self._open().__await__()

    async def __aenter__(self) -> WebSocket:
        self._ws = await self._open()
        return self._ws

    async def __aexit__(self, *exc: Any) -> None:
        if self._ws is not None:
            await self._ws.aclose()


class _StreamOpening:
    """What :meth:`AsyncEngine.stream` returns: an async context manager, or an awaitable."""

    def __init__(self, engine: Engine, method: Any, url: Any, options: Any) -> None:
        self._args = (engine, method, url, options)
        self._response: Optional[StreamResponse] = None

    async def _open(self) -> StreamResponse:
        engine, method, url, options = self._args
        waker = new_waker()
        h = engine._open_stream(method, url, options, waker)
        return await await_head(h, waker)

    def __await__(self) -> Any:
        return self._open().__await__()

    async def __aenter__(self) -> StreamResponse:
        self._response = await self._open()
        return self._response

    async def __aexit__(self, *exc: Any) -> None:
        if self._response is not None:
            self._response.close()
