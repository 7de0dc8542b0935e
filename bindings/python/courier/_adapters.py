"""What the httpx transports (``courier.httpx``) and the requests adapter (``courier.requests``)
share: a client library's request turned into ``Engine.send`` keywords, and a Courier failure
sorted into the kinds those libraries raise. Nothing here decides how a request goes: the engine
does (cache, cookies, journal, retries); the client library keeps redirects (the engine's are
turned off for its requests, so each hop is the client's, as with its own transport)."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from .errors import CourierError

#: request header lines the engine writes itself (from the URL and the body)
_DROPPED = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})

#: every status is the client library's to judge (its raise_for_status), never an exception here
ALL_STATUSES = ((100, 599),)


def engine_jar(engine: Any) -> bool:
    """Whether the engine keeps cookies (``Engine(cookies=True)``, the default)."""
    return bool(getattr(engine, "_cookies", True))


def send_options(method: str, url_host: str, headers: Iterable[tuple[str, str]], body: Optional[bytes],
                 connect: Optional[float], read: Optional[float], defaults: dict[str, Any],
                 jar: bool) -> dict[str, Any]:
    """``Engine.send`` keywords for a client library's request: its header lines (less those the
    engine writes; a Host line naming another host than the URL's is kept; with the engine's
    cookie jar on (``jar``) the Cookie line, as the jar writes its own and a server must never see
    two), its body with its
    Content-Type, its connect and read timeouts (read: the engine's idle timeout), no redirects,
    every status a success; then ``defaults`` (the adapter's own options, e.g. ``cache=``)."""
    lines = []
    content_type = None
    for name, value in headers:
        low = name.lower()
        if low == "content-type":
            content_type = value
            continue
        if low == "cookie" and jar:
            continue
        if low in _DROPPED and not (low == "host" and value.lower() != url_host.lower()):
            continue
        lines.append((name, value))
    kw: dict[str, Any] = {"headers": lines, "follow_redirects": False, "status_codes": ALL_STATUSES}
    if body or (content_type is not None and method not in ("GET", "HEAD")):
        kw["body"] = body or b""
        kw["content_type"] = content_type
    elif content_type is not None:
        lines.append(("Content-Type", content_type))
    if connect is not None:
        kw["connect_timeout"] = connect
    if read is not None:
        kw["idle_timeout"] = read
    kw.update(defaults)
    return kw


def failure_kind(e: CourierError) -> str:
    """The kind of a Courier failure, as the client libraries sort theirs: ``connect_timeout``,
    ``read_timeout`` (an idle or total timeout), ``tls`` (the handshake, the certificate, a pin),
    ``connect`` (nothing was sent: refused, not resolved, offline, frozen for later), ``proxy``, ``protocol`` (the server broke HTTP, or
    cut the body short), ``read`` (the connection dropped), ``url``, ``header``, or ``other`` (the
    Courier exception is raised as it is)."""
    names = {c.__name__ for c in type(e).__mro__}
    if "Timeout" in names:
        return "connect_timeout" if e.timeout_kind == "connect" else "read_timeout"
    if "ProxyError" in names:
        return "proxy"
    if names & {"TLSError", "PinningError", "ClientCertificateError"}:
        return "tls"
    if names & {"CannotConnect", "CannotResolve", "Offline", "Frozen", "CellularNotAllowed"}:
        return "connect"
    if names & {"PartialResponse", "ProtocolError", "HeadersTooLarge"}:
        return "protocol"
    if names & {"NetworkError", "TooLarge"}:
        return "read"
    if "InvalidURL" in names:
        return "url"
    if "InvalidHeader" in names:
        return "header"
    return "other"


def http_version(n: int) -> bytes:
    """``Metrics.http_version`` (10, 11, 20, 30) as httpx writes it."""
    return {10: b"HTTP/1.0", 20: b"HTTP/2", 30: b"HTTP/3"}.get(n, b"HTTP/1.1")
