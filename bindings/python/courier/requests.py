"""A requests transport adapter that sends through a Courier engine
(``pip install "courier[requests]"``)::

    import requests, courier, courier.requests

    engine = courier.Engine(cache="http")
    session = requests.Session()
    session.mount("http://", courier.requests.Adapter(engine))
    session.mount("https://", courier.requests.Adapter(engine))
    session.get("http://127.0.0.1:8080/json").json()

The engine sends (its cache, cookie jar, journal, retries, logs and monitors apply); requests keeps
what it does above an adapter: redirects (``allow_redirects``; the engine follows none of these
requests), authentication, hooks, ``raise_for_status``. ``stream=True`` reads the body through
:meth:`courier.Engine.stream` as it arrives (no cache and no freezing then, as for every stream).
A Courier failure raises requests' exception of that kind (``ConnectionError``,
``ConnectTimeout``, ``ReadTimeout``, ``SSLError``, ``ProxyError``, ``ChunkedEncodingError`` for a
body cut short...), with the :class:`courier.CourierError` as its ``__cause__``. The adapter does
not own the engine. Cookies are the engine's jar's (persistent, shared with the engine's other
requests): the session's jar is not filled from responses (``response.cookies`` is empty) and a
Cookie line requests writes is left out, so a server never sees two; put cookies of your own in
with :meth:`courier.Engine.set_cookie`. With ``Engine(cookies=False)`` the session's Cookie line
goes out as it is. See docs/python.md, "httpx and requests".
"""
from __future__ import annotations

import http.client
from typing import Any, Iterator, Optional, Union
from urllib.parse import urlsplit

import requests
import requests.adapters
import requests.exceptions as rex
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers, select_proxy

from ._adapters import engine_jar, failure_kind, send_options
from .aio import AsyncEngine
from .engine import Engine
from .errors import CourierError
from .security import Security
from .stream import StreamResponse

__all__ = ["Adapter"]

_KINDS: dict[str, type[rex.RequestException]] = {
    "connect_timeout": rex.ConnectTimeout, "read_timeout": rex.ReadTimeout, "connect": rex.ConnectionError,
    "tls": rex.SSLError, "proxy": rex.ProxyError, "protocol": rex.ConnectionError, "read": rex.ConnectionError,
    "url": rex.InvalidURL, "header": rex.InvalidHeader,
}
#: while the body is read, as requests' own iter_content raises
_BODY_KINDS: dict[str, type[rex.RequestException]] = {
    "protocol": rex.ChunkedEncodingError, "read": rex.ChunkedEncodingError, "read_timeout": rex.ConnectionError,
    "connect_timeout": rex.ConnectionError, "tls": rex.SSLError,
}


def _mapped(e: CourierError, request: Any, kinds: dict[str, type[rex.RequestException]]) -> BaseException:
    """requests' exception for a Courier failure (its ``__cause__``), or the failure itself."""
    cls = kinds.get(failure_kind(e)) or _KINDS.get(failure_kind(e))
    if cls is None:
        return e
    exc = cls(str(e), request=request)
    exc.__cause__ = e
    return exc


def _body(body: Any) -> Optional[bytes]:
    if body is None or isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return b"".join(c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in body)  # a generator


def _text(value: Union[str, bytes]) -> str:
    """A header name or value as requests holds it (bytes are latin-1, as http.client sends them)."""
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _timeouts(timeout: Any) -> tuple[Optional[float], Optional[float]]:
    if timeout is None:
        return None, None
    if isinstance(timeout, tuple):
        connect, read = timeout
        return connect, read
    if hasattr(timeout, "connect_timeout"):  # urllib3's Timeout
        return timeout.connect_timeout, timeout.read_timeout
    return float(timeout), float(timeout)


class _StreamRaw:
    """``response.raw`` of a streamed response: what requests' ``iter_content`` and ``content``
    read (``stream``, ``read``), over a :class:`courier.StreamResponse`."""

    def __init__(self, s: StreamResponse, request: Any) -> None:
        self._s = s
        self._request = request
        self._chunks: Optional[Iterator[bytes]] = None
        self._pending = b""

    def _iter(self) -> Iterator[bytes]:
        try:
            yield from self._s.iter_bytes()
        except CourierError as e:
            raise _mapped(e, self._request, _BODY_KINDS)  # its __cause__ is e

    def stream(self, chunk_size: Optional[int] = None, decode_content: bool = True) -> Iterator[bytes]:
        if self._pending:
            pending, self._pending = self._pending, b""
            yield pending
        if self._chunks is None:
            self._chunks = self._iter()
        yield from self._chunks

    def read(self, amt: Optional[int] = None, decode_content: bool = True) -> bytes:
        if self._chunks is None:
            self._chunks = self._iter()
        while amt is None or len(self._pending) < amt:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            self._pending += chunk
        if amt is None:
            out, self._pending = self._pending, b""
        else:
            out, self._pending = self._pending[:amt], self._pending[amt:]
        return out

    @property
    def closed(self) -> bool:
        return self._s._h is None

    def close(self) -> None:
        self._s.close()

    release_conn = close


class Adapter(requests.adapters.BaseAdapter):
    """A ``requests.adapters.BaseAdapter`` over a :class:`courier.Engine` (or an
    :class:`AsyncEngine`'s ``sync`` engine), for ``session.mount(prefix, adapter)``.

    ``options`` are :meth:`courier.Engine.send` keywords added to every request (``cache="http"``,
    ``retry=...``, ``freeze=...``). requests' ``timeout`` (a number, or ``(connect, read)``)
    becomes the request's ``connect_timeout`` and ``idle_timeout``; the engine's total ``timeout``
    still bounds a request that is not streamed. ``verify=False`` turns off the certificate checks
    for the request, ``verify="ca.pem"`` and ``cert=`` name PEM files (a :class:`courier.Security`
    for the request; with ``verify=True`` and no ``cert`` the engine's security applies);
    ``proxies`` (the session's, its environment's) give the request's ``proxy``."""

    def __init__(self, engine: Union[Engine, AsyncEngine], **options: Any) -> None:
        super().__init__()
        self.engine: Engine = engine.sync if isinstance(engine, AsyncEngine) else engine
        self.options = options

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Union[bool, str] = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        url = request.url or ""
        connect, read = _timeouts(timeout)
        headers = [(_text(name), _text(value)) for name, value in request.headers.items()]
        kw = send_options(request.method or "GET", urlsplit(url).netloc, headers,
                          _body(request.body), connect, read, self.options, engine_jar(self.engine))
        if verify is not True or cert:
            certificate, key = (cert if isinstance(cert, tuple) else (cert, None))
            kw.setdefault("security", Security(
                allow_invalid_certificates=verify is False, validates_domain_name=verify is not False,
                ca_file=verify if isinstance(verify, str) else None, client_certificate=certificate,
                client_key=key))
        proxy = select_proxy(url, proxies) if proxies else None
        if proxy:
            kw.setdefault("proxy", proxy)
        try:
            if stream:
                s = self.engine.stream(request.method or "GET", url, **{**kw, "freeze": "never"})
                return self._response(request, s.status, s.headers.lines(), _StreamRaw(s, request), None)
            r = self.engine.send(request.method or "GET", url, **kw)
        except CourierError as e:
            raise _mapped(e, request, {})  # its __cause__ is e
        return self._response(request, r.status, r.headers.lines(), None, r.body)

    def _response(self, request: requests.PreparedRequest, status: int, lines: list[tuple[str, str]],
                  raw: Optional[_StreamRaw], body: Optional[bytes]) -> requests.Response:
        resp = requests.Response()
        resp.status_code = status
        headers: CaseInsensitiveDict[str] = CaseInsensitiveDict()
        for name, value in lines:  # repeated fields joined as urllib3 joins them
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        resp.headers = headers
        resp.encoding = get_encoding_from_headers(headers)
        resp.reason = http.client.responses.get(status, "")
        resp.url = request.url or ""
        resp.request = request
        resp.connection = self  # type: ignore[assignment]  # typeshed says HTTPAdapter; requests reads .close()
        if raw is not None:
            resp.raw = raw
        else:  # read whole by the engine: the content is there
            resp._content = body
            resp._content_consumed = True
        return resp

    def close(self) -> None:
        """Nothing to release: the engine is the caller's."""
