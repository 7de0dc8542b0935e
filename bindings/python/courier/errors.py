"""Exceptions mirroring ``courier_code``, generated from one table.

Every failure of the C core surfaces as a :class:`CourierError` subclass chosen by its code:

>>> try:
...     engine.get("/delay/5000", timeout=0.1)
... except courier.Timeout as e:
...     print(e.code, e.message)

``code`` is the ``courier_code`` (negative), ``http_status`` the HTTP status when a response came
back, ``message`` the core's English detail (never parse it), ``response`` the attached
:class:`courier.Response` (on ``HTTPStatusError``, ``InvalidResult``, ``MappingError``,
``APIError``...), and ``curl_code``, ``os_error``, ``store_error`` the underlying codes. A :class:`Timeout` says which
timeout fired in ``timeout_kind``: ``"connect"``, ``"idle"`` or ``"total"``.
A code this binding does not know (from a newer library) raises :class:`CourierError` itself.

Each class also derives from the built-in exception users already catch, as the standard library
and httpx do: :class:`Timeout` is a ``TimeoutError``; :class:`CannotConnect`,
:class:`CannotResolve`, :class:`NetworkError`, :class:`PartialResponse`, :class:`TLSError` and
:class:`PinningError` are ``ConnectionError`` s; :class:`InvalidArgument`, :class:`InvalidURL`,
:class:`InvalidHeader`, :class:`InvalidEncoding` and :class:`JSONError` are ``ValueError`` s;
:class:`NotFound` a ``LookupError``; :class:`EngineClosed` a ``RuntimeError``;
:class:`NoMemory` a ``MemoryError``; :class:`Cancelled` a ``concurrent.futures.CancelledError``.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

from ._enums import CEnum, TimeoutKind
from ._lib import ERROR, lib

# The response an error carries is a courier.Response; response.py stands above this module (it
# raises these errors), so the type is not imported here: the package's imports, annotations'
# included, run one way.
_Response = Any

__all__ = ["CourierError", "error_class", "raise_for_code", "strerror"]

E = TypeVar("E", bound=CEnum)


def strerror(code: int) -> str:
    """The core's static text for a code (``courier_strerror``)."""
    return lib.courier_strerror(int(code)).decode("utf-8", "replace")


class CourierError(Exception):
    """Base of every exception the binding raises for a ``courier_code``."""

    #: The code this class stands for (the base class has none).
    CODE: Optional[int] = None

    def __init__(self, message: str = "", *, code: Optional[int] = None, http_status: int = 0,
                 curl_code: int = 0, os_error: int = 0, store_error: int = 0,
                 response: "Optional[_Response]" = None, freeze_id: Optional[str] = None,
                 timeout_kind: Optional[str] = None) -> None:
        if code is None:
            code = self.CODE if self.CODE is not None else lib_code("COURIER_E_INTERNAL")
        self.code: int = code
        self.http_status: int = http_status
        self.curl_code: int = curl_code
        self.os_error: int = os_error
        self.store_error: int = store_error
        self.message: str = message or strerror(code)
        self.response: "Optional[_Response]" = response
        self.freeze_id: Optional[str] = freeze_id
        #: Which timeout fired (``"connect"``, ``"idle"``, ``"total"``) for a timeout, else None.
        self.timeout_kind: Optional[str] = timeout_kind
        super().__init__(self.message)

    @property
    def name(self) -> str:
        """The C name of the code, e.g. ``"COURIER_E_TIMEOUT"``."""
        return _NAMES.get(self.code, f"COURIER_E_{-self.code}")

    def __repr__(self) -> str:
        extra = f", http_status={self.http_status}" if self.http_status else ""
        return f"{type(self).__name__}(code={self.code} {self.name}{extra}, message={self.message!r})"

    def __reduce__(self) -> Any:  # picklable (e.g. across a process pool), without the response
        return (_rebuild, (type(self), self.message, self.code, self.http_status, self.curl_code,
                           self.os_error, self.store_error, self.freeze_id, self.timeout_kind))


def _rebuild(cls: type, message: str, code: int, http_status: int, curl_code: int, os_error: int,
             store_error: int, freeze_id: Optional[str], timeout_kind: Optional[str] = None) -> CourierError:
    return cls(message, code=code, http_status=http_status, curl_code=curl_code, os_error=os_error,
               store_error=store_error, freeze_id=freeze_id, timeout_kind=timeout_kind)


# (code, C name, Python class name, extra base classes, docstring). Append-only, like the codes.
_TABLE: list[tuple[int, str, str, tuple[type, ...], str]] = [
    (-1, "COURIER_E_INVALID_ARGUMENT", "InvalidArgument", (ValueError,), "A NULL handle, an out-of-range value, a misuse."),
    (-2, "COURIER_E_INVALID_URL", "InvalidURL", (ValueError,), "A URL that does not parse, or not http/https."),
    (-3, "COURIER_E_CANNOT_RESOLVE", "CannotResolve", (ConnectionError,), "The host name did not resolve."),
    (-4, "COURIER_E_CANNOT_CONNECT", "CannotConnect", (ConnectionError,), "The TCP connection was refused or unreachable."),
    (-5, "COURIER_E_TIMEOUT", "Timeout", (TimeoutError,), "The request's timeout passed."),
    (-6, "COURIER_E_TLS", "TLSError", (ConnectionError,), "TLS handshake or certificate verification failed."),
    (-7, "COURIER_E_PINNING", "PinningError", (ConnectionError,), "The server's public key did not match the pinned key."),
    (-8, "COURIER_E_CANCELLED", "Cancelled", (concurrent.futures.CancelledError,), "Cancelled by the caller, or the engine closed."),
    (-9, "COURIER_E_HTTP_STATUS", "HTTPStatusError", (), "The server answered with a status >= 400 (response attached)."),
    (-10, "COURIER_E_INVALID_RESULT", "InvalidResult", (), "A validator rejected the response (response attached)."),
    (-11, "COURIER_E_TOO_LARGE", "TooLarge", (), "The response body exceeded the maximum size."),
    (-12, "COURIER_E_INTERNAL", "InternalError", (), "A bug or an unexpected failure of a dependency."),
    (-13, "COURIER_E_NO_MEMORY", "NoMemory", (MemoryError,), "An allocation failed."),
    (-14, "COURIER_E_INVALID_HEADER", "InvalidHeader", (ValueError,), "A header name that is not a token, or CR/LF/NUL in a header."),
    (-15, "COURIER_E_INVALID_ENCODING", "InvalidEncoding", (ValueError,), "A parameter or header that is not valid UTF-8."),
    (-16, "COURIER_E_PARTIAL_RESPONSE", "PartialResponse", (ConnectionError,), "The server closed the connection in the middle of the body."),
    (-17, "COURIER_E_NETWORK", "NetworkError", (ConnectionError,), "Another network failure: reset, send or receive error."),
    (-18, "COURIER_E_CLOSED", "EngineClosed", (RuntimeError,), "The engine is closing or closed."),
    (-19, "COURIER_E_STORE", "StoreError", (), "The store directory cannot be created or used."),
    (-20, "COURIER_E_NOT_FOUND", "NotFound", (LookupError,), "No such item (request id, entry)."),
    (-21, "COURIER_E_TOO_FREQUENT", "TooFrequent", (), "An identical request was sent within the engine's guard window."),
    (-22, "COURIER_E_JSON", "JSONError", (ValueError,), "Not acceptable JSON, or no decoder."),
    (-23, "COURIER_E_MAPPING", "MappingError", (), "A document does not fit its mapping or key path (response attached)."),
    (-24, "COURIER_E_API", "APIError", (), "The envelope's code is not a success (response attached)."),
    (-25, "COURIER_E_FROZEN", "Frozen", (), "The request was written to the journal, to be sent later (see freeze_id)."),
    (-26, "COURIER_E_OFFLINE", "Offline", (), "The network monitor says offline; nothing was sent."),
    (-27, "COURIER_E_JOURNAL_CORRUPT", "JournalCorrupt", (), "The frozen-request journal is unreadable (kept aside, never emptied)."),
    (-28, "COURIER_E_TOO_MANY_REDIRECTS", "TooManyRedirects", (), "More redirects than the maximum (the last 3xx attached)."),
    (-29, "COURIER_E_REDIRECT_REFUSED", "RedirectRefused", (), "A redirect was refused: HTTPS to HTTP, another scheme, or the hook (3xx attached)."),
    (-30, "COURIER_E_BODY_NOT_REPLAYABLE", "BodyNotReplayable", (), "A redirect must send the body again and it was streamed from a file (3xx attached)."),
    (-31, "COURIER_E_PROTOCOL", "ProtocolError", (), "The server broke HTTP: garbage status line, conflicting Content-Length, bad framing."),
    (-32, "COURIER_E_HEADERS_TOO_LARGE", "HeadersTooLarge", (), "A response header line, or the header block, is over the limit."),
    (-34, "COURIER_E_PROXY", "ProxyError", (), "The proxy failed: its name did not resolve, it refused the tunnel (http_status), or its SOCKS handshake failed."),
    (-40, "COURIER_E_CACHE_INCONSISTENT", "CacheInconsistent", (), "The cache verify found damaged entries, orphan index records, or totals that differ from a scan."),
    (-41, "COURIER_E_USER", "UserError", (), "User code (a callback) raised an error; the binding re-raises that error itself where it can."),
    (-43, "COURIER_E_RESEND_POLICY_UNKNOWN", "ResendPolicyUnknown", (LookupError,), "A freezable request names a resend policy its engine does not have."),
    (-44, "COURIER_E_DELETED_BY_POLICY", "DeletedByPolicy", (), "A frozen request's resend policy deleted it (its recorded outcome)."),
    (-46, "COURIER_E_UNKNOWN_CHARSET", "UnknownCharset", (LookupError,), "A character set the system's iconv does not know."),
    (-47, "COURIER_E_CHARSET", "CharsetError", (ValueError,), "Text that cannot be converted: a parameter character the charset cannot hold, or body bytes not valid in their charset."),
    (-48, "COURIER_E_CLIENT_CERTIFICATE", "ClientCertificateError", (ConnectionError,), "The client certificate or its key could not be loaded: not PEM/PKCS#12, a wrong password, a key of another certificate."),
    (-49, "COURIER_E_CELLULAR", "CellularNotAllowed", (), "The request is not allowed on a cellular network and the path is one."),
    (-51, "COURIER_E_UNKNOWN_NAME", "UnknownName", (LookupError,), "No API, or no route, is registered under that name (or for that object type and method)."),
    (-52, "COURIER_E_ROUTE_PARAMETER", "RouteParameterError", (ValueError,), "A path pattern's parameter is missing from the object, or not a string, number or boolean."),
    (-53, "COURIER_E_CATALOG", "CatalogError", (ValueError,), "An API declaration or catalogue document of the wrong shape (the message names the field)."),
    (-54, "COURIER_E_REDIS", "RedisError", (ConnectionError,), "A Redis store failed: unreachable, no answer within the engine's timeout, refused password or database, or an error answer."),
    (-55, "COURIER_E_REDIS_UNSUPPORTED", "RedisUnsupported", (), "A redis:// store in a library built without Redis, or rediss:// with a hiredis without TLS."),
    (-56, "COURIER_E_NUMBER_RANGE", "NumberRangeError", (ValueError,), "A JSON number read as a type that cannot hold it (beyond int64/uint64/double, or a fraction read as an integer)."),
    (-58, "COURIER_E_AGAIN", "Again", (), "Nothing to read yet from a stream (a read that does not wait; the binding waits instead)."),
    (-60, "COURIER_E_WS_HANDSHAKE", "WebSocketHandshakeError", (ConnectionError,), "A WebSocket's opening handshake failed: no 101 (http_status), a wrong Sec-WebSocket-Accept, no Upgrade/Connection, or a subprotocol or extension not offered."),
    (-61, "COURIER_E_WS_PROTOCOL", "WebSocketProtocolError", (ConnectionError,), "The WebSocket server broke RFC 6455; the connection was failed with the close code the RFC names (1002, 1007)."),
    (-62, "COURIER_E_WS_CLOSED", "WebSocketClosed", (), "The WebSocket is closed: its closing handshake ended (not a failure)."),
    (-63, "COURIER_E_HTTP_VERSION", "HTTPVersionError", (ConnectionError,), "The HTTP version required cannot be had: the server answered over another (HTTPVersion.V2_ONLY), or this libcurl has no HTTP/3."),
    (-64, "COURIER_E_NO_STUB", "NoStub", (LookupError,), "The engine answers from stubs (stub mode \"only\") and no stub matched the request; nothing was sent."),
    (-65, "COURIER_E_CREDENTIAL_REFUSED", "CredentialRefused", (), "The authenticator's credential was refused again right after a refresh (the loop guard); the refusing response (a 401) is attached."),
    (-66, "COURIER_E_REPLICAS_UNCONFIRMED", "ReplicasUnconfirmed", (), "A freeze was written to the Redis journal's master but fewer replicas than frozen_replicas asks for confirmed it in time: not acknowledged as frozen (it may still be replayed)."),
]

_BY_CODE: dict[int, type[CourierError]] = {}
_NAMES: dict[int, str] = {0: "COURIER_OK"}
_CODES: dict[str, int] = {"COURIER_OK": 0}
for _code, _cname, _pyname, _bases, _doc in _TABLE:
    _cls = type(_pyname, (CourierError,) + _bases, {"CODE": _code, "__doc__": _doc, "__module__": "courier"})
    _BY_CODE[_code] = _cls
    _NAMES[_code] = _cname
    _CODES[_cname] = _code
    globals()[_pyname] = _cls
    __all__.append(_pyname)


def lib_code(name: str) -> int:
    """The value of a ``COURIER_E_*`` name."""
    return _CODES[name]


def error_class(code: int) -> type[CourierError]:
    """The exception class of a code (:class:`CourierError` for an unknown one)."""
    return _BY_CODE.get(code, CourierError)


def make_error(code: int, err: Optional[ERROR] = None, response: "Optional[_Response]" = None,
               message: Optional[str] = None, arg: Optional[str] = None) -> CourierError:
    """Builds the exception of a code from a filled ``courier_error`` (may be None). ``arg`` names
    the argument the failed call was given (``"max_redirects"``): the message starts with it, as
    the Swift facade's context does (``"max_redirects: invalid argument"``)."""
    kw: dict[str, Any] = {"code": code, "response": response}
    msg = message or ""
    if err is not None:
        kw.update(http_status=err.http_status, curl_code=err.curl_code, os_error=err.os_error,
                  store_error=err.store_error)
        if not msg:
            msg = err.message.decode("utf-8", "replace")
        if code == _CODES["COURIER_E_FROZEN"] and hasattr(lib, "courier_error_freeze_id"):
            fid = lib.courier_error_freeze_id(ctypes.byref(err))
            kw["freeze_id"] = fid.decode() if fid else None
        if code == _CODES["COURIER_E_TIMEOUT"] and hasattr(lib, "courier_error_timeout_kind"):
            kind = lib.courier_error_timeout_kind(ctypes.byref(err))
            kw["timeout_kind"] = str(TimeoutKind(kind)) if kind in TimeoutKind._value2member_map_ and kind else None
    if arg:
        msg = f"{arg}: {msg or strerror(code)}"
    if response is not None and not kw.get("http_status"):
        kw["http_status"] = response.status
    return error_class(code)(msg, **kw)


def coerce(cls: type[E], value: Union[E, str, int], option: str, *, allow_int: bool = False) -> Union[E, int]:
    """``value`` (a member, its name, or its C value) as a member of ``cls``. With ``allow_int``,
    another int passes through as it is (a user cache policy id). A name or value that is not one
    of ``cls`` raises :class:`courier.InvalidArgument` (also a ``ValueError``) naming the option;
    another type raises ``TypeError``. An enum whose header defines sets of its members (the
    header's ``COURIER_AUTH_ANY``) lists them in ``_c_sets`` (``{"ANY": 15}``): their names give
    the set's int."""
    if isinstance(value, cls):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{option}: expected courier.{cls.__name__} or its name, got {type(value).__name__}")
    sets: dict[str, int] = getattr(cls, "_c_sets", {})
    try:
        return cls(value)  # type: ignore[arg-type]  # a name: CEnum._missing_
    except ValueError:
        if isinstance(value, str) and value.strip().upper().replace("-", "_") in sets:
            return int(sets[value.strip().upper().replace("-", "_")])
        if allow_int and isinstance(value, int):
            return int(value)
        names = ", ".join(repr(n.lower()) for n in [m.name for m in cls] + list(sets))
        raise InvalidArgument(f"{option}: {value!r} is not a courier.{cls.__name__} ({names})") from None


def raise_for_code(code: int, err: Optional[ERROR] = None, response: "Optional[_Response]" = None) -> None:
    """Raises the exception of ``code`` unless it is ``COURIER_OK``."""
    if code != 0:
        raise make_error(code, err, response)


def check(code: int, err: Optional[ERROR] = None, arg: Optional[str] = None) -> int:
    """Returns ``code`` when it is not negative, else raises its exception; ``arg`` names the
    argument the call was given, in the message (see :func:`make_error`)."""
    if code < 0:
        raise make_error(code, err, arg=arg)
    return code


# Names the type checker sees (they are created above from the table).
if TYPE_CHECKING:  # pragma: no cover
    __all__ += ["InvalidArgument", "InvalidURL", "CannotResolve", "CannotConnect", "Timeout",
                "TLSError", "PinningError", "Cancelled", "HTTPStatusError", "InvalidResult",
                "TooLarge", "InternalError", "NoMemory", "InvalidHeader", "InvalidEncoding",
                "PartialResponse", "NetworkError", "EngineClosed", "StoreError", "NotFound",
                "TooFrequent", "JSONError", "MappingError", "APIError", "Frozen", "Offline",
                "JournalCorrupt", "UserError", "UnknownName", "RouteParameterError", "CatalogError"]
    class UnknownName(CourierError, LookupError): ...
    class RouteParameterError(CourierError, ValueError): ...
    class CatalogError(CourierError, ValueError): ...
    class InvalidArgument(CourierError, ValueError): ...
    class InvalidURL(CourierError, ValueError): ...
    class CannotResolve(CourierError, ConnectionError): ...
    class CannotConnect(CourierError, ConnectionError): ...
    class Timeout(CourierError, TimeoutError): ...
    class TLSError(CourierError, ConnectionError): ...
    class PinningError(CourierError, ConnectionError): ...
    class Cancelled(CourierError, concurrent.futures.CancelledError): ...
    class HTTPStatusError(CourierError): ...
    class InvalidResult(CourierError): ...
    class TooLarge(CourierError): ...
    class InternalError(CourierError): ...
    class NoMemory(CourierError, MemoryError): ...
    class InvalidHeader(CourierError, ValueError): ...
    class InvalidEncoding(CourierError, ValueError): ...
    class PartialResponse(CourierError, ConnectionError): ...
    class NetworkError(CourierError, ConnectionError): ...
    class EngineClosed(CourierError, RuntimeError): ...
    class StoreError(CourierError): ...
    class NotFound(CourierError, LookupError): ...
    class TooFrequent(CourierError): ...
    class JSONError(CourierError, ValueError): ...
    class MappingError(CourierError): ...
    class APIError(CourierError): ...
    class Frozen(CourierError): ...
    class Offline(CourierError): ...
    class JournalCorrupt(CourierError): ...
    class TooManyRedirects(CourierError): ...
    class RedirectRefused(CourierError): ...
    class BodyNotReplayable(CourierError): ...
    class ProtocolError(CourierError): ...
    class HeadersTooLarge(CourierError): ...
    class ProxyError(CourierError): ...
    class CacheInconsistent(CourierError): ...
    class UserError(CourierError): ...
    class UnknownCharset(CourierError, LookupError): ...
    class CharsetError(CourierError, ValueError): ...
    class ClientCertificateError(CourierError, ConnectionError): ...
    class CellularNotAllowed(CourierError): ...
    class CredentialRefused(CourierError): ...
    class ReplicasUnconfirmed(CourierError): ...
