"""httpx transports that send through a Courier engine (``pip install "courier[httpx]"``)::

    import httpx, courier, courier.httpx

    with courier.Engine(cache="http") as engine:
        with httpx.Client(transport=courier.httpx.Transport(engine)) as client:
            client.get("http://127.0.0.1:8080/json").json()

The engine sends (its cache, cookie jar, journal, retries, security, logs and monitors apply);
httpx keeps what it does above a transport: redirects (``follow_redirects``; the engine follows none
of these requests, so httpx sees each hop), authentication flows, event hooks, ``raise_for_status``.
A Courier failure raises httpx's exception of that kind (``ConnectError``, ``ConnectTimeout``,
``ReadTimeout``, ``RemoteProtocolError``, ``ReadError``, ``ProxyError``...), with the
:class:`courier.CourierError` as its ``__cause__``. The transport does not own the engine: closing
the client leaves it open. Cookies are the engine's jar's (persistent, shared with the engine's
other requests): a Cookie line httpx writes from ``client.cookies`` is left out, so a server never
sees two (httpx still records Set-Cookie in ``client.cookies``); put cookies of your own in with
:meth:`courier.Engine.set_cookie`. With ``Engine(cookies=False)`` httpx's Cookie line goes out. See docs/python.md, "httpx and requests".
"""
from __future__ import annotations

from typing import Any, AsyncIterator, Iterator, Union

import httpx

from ._adapters import engine_jar, failure_kind, http_version, send_options
from .aio import AsyncEngine
from .engine import Engine
from .errors import CourierError
from .response import Response
from .stream import StreamResponse

__all__ = ["Transport", "AsyncTransport", "STREAM"]

#: the request extension that asks for the body as it arrives:
#: ``client.stream("GET", url, extensions={courier.httpx.STREAM: True})``
STREAM = "courier.stream"

_KINDS: dict[str, type[httpx.TransportError]] = {
    "connect_timeout": httpx.ConnectTimeout, "read_timeout": httpx.ReadTimeout, "connect": httpx.ConnectError,
    "tls": httpx.ConnectError,
    "proxy": httpx.ProxyError, "protocol": httpx.RemoteProtocolError, "read": httpx.ReadError,
    "url": httpx.UnsupportedProtocol, "header": httpx.LocalProtocolError,
}


def _mapped(e: CourierError, request: httpx.Request) -> BaseException:
    """httpx's exception for a Courier failure (its ``__cause__``), or the failure itself."""
    cls = _KINDS.get(failure_kind(e))
    if cls is None:
        return e
    exc = cls(str(e), request=request)
    exc.__cause__ = e
    return exc


def _options(request: httpx.Request, body: bytes, defaults: dict[str, Any], jar: bool) -> dict[str, Any]:
    timeout = request.extensions.get("timeout") or {}
    return send_options(request.method, request.url.netloc.decode("ascii"), request.headers.multi_items(),
                        body, timeout.get("connect"), timeout.get("read"), defaults, jar)


def _response(status: int, head: Response, stream: Union[httpx.SyncByteStream, httpx.AsyncByteStream],
              request: httpx.Request) -> httpx.Response:
    return httpx.Response(status, headers=head.headers.lines(), stream=stream, request=request,
                          extensions={"http_version": http_version(head.metrics.http_version)})


class _SyncStream(httpx.SyncByteStream):
    def __init__(self, s: StreamResponse, request: httpx.Request) -> None:
        self._s = s
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._s.iter_bytes()
        except CourierError as e:
            raise _mapped(e, self._request)  # its __cause__ is e

    def close(self) -> None:
        self._s.close()


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, s: StreamResponse, request: httpx.Request) -> None:
        self._s = s
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._s.aiter_bytes():
                yield chunk
        except CourierError as e:
            raise _mapped(e, self._request)  # its __cause__ is e

    async def aclose(self) -> None:
        self._s.close()


class Transport(httpx.BaseTransport):
    """An ``httpx.BaseTransport`` over a :class:`courier.Engine` (or an :class:`AsyncEngine`'s
    ``sync`` engine).

    A response is read whole by the engine (so the cache and the journal apply), unless the
    request carries the extension :data:`STREAM` (``extensions={courier.httpx.STREAM: True}``) or
    the transport was made with ``stream=True``: then the body comes through
    :meth:`courier.Engine.stream` as it arrives (no cache, no freezing, as for every stream).
    ``options`` are :meth:`courier.Engine.send` keywords added to every request (``cache="http"``,
    ``retry=...``, ``freeze=...``); httpx's connect and read timeouts become the request's
    ``connect_timeout`` and ``idle_timeout``; the engine's total ``timeout`` still bounds a request
    that is not streamed."""

    def __init__(self, engine: Union[Engine, AsyncEngine], *, stream: bool = False, **options: Any) -> None:
        self.engine: Engine = engine.sync if isinstance(engine, AsyncEngine) else engine
        self.stream = stream
        self.options = options

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        kw = _options(request, request.read(), self.options, engine_jar(self.engine))
        try:
            if request.extensions.get(STREAM, self.stream):
                s = self.engine.stream(request.method, str(request.url), **{**kw, "freeze": "never"})
                return _response(s.status, s.head, _SyncStream(s, request), request)
            r = self.engine.send(request.method, str(request.url), **kw)
        except CourierError as e:
            raise _mapped(e, request)  # its __cause__ is e
        return _response(r.status, r, httpx.ByteStream(r.body), request)


class AsyncTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` over a :class:`courier.AsyncEngine` (an :class:`Engine` is
    wrapped in one): :class:`Transport`'s behaviour, awaited. The event loop is never blocked:
    sends and streams are awaited as :class:`AsyncEngine`'s are, and cancelling the task cancels
    the request in the engine."""

    def __init__(self, engine: Union[Engine, AsyncEngine], *, stream: bool = False, **options: Any) -> None:
        self.engine: AsyncEngine = engine if isinstance(engine, AsyncEngine) else AsyncEngine(engine=engine)
        self.stream = stream
        self.options = options

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        kw = _options(request, await request.aread(), self.options, engine_jar(self.engine.sync))
        try:
            if request.extensions.get(STREAM, self.stream):
                s = await self.engine.stream(request.method, str(request.url), **{**kw, "freeze": "never"})
                return _response(s.status, s.head, _AsyncStream(s, request), request)
            r = await self.engine.send(request.method, str(request.url), **kw)
        except CourierError as e:
            raise _mapped(e, request)  # its __cause__ is e
        return _response(r.status, r, httpx.ByteStream(r.body), request)
