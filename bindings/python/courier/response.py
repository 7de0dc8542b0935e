"""Responses: a Python view of ``courier_response``, owning the C handle."""
from __future__ import annotations

import ctypes
import json as _json
from ctypes import byref, c_char_p, c_int, c_int64, c_size_t, c_void_p
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from . import _callbacks as cb
from . import _fast
from ._enums import CEnum
from ._lib import ERROR, MAPPING_ERROR, METRICS, has, lib, sized
from .errors import InvalidArgument, check, lib_code, make_error
from .mapping import json_to_python, tape_to_python

__all__ = ["Response", "Headers", "Metrics", "Answer", "CacheStatus", "CacheReason", "build_response"]


class Headers(Mapping[str, str]):
    """Response header lines: a case-insensitive mapping that keeps the received order.

    ``headers["content-type"]`` is the first line of that name (as ``courier_response_header``);
    :meth:`get_all` gives every value of a name, :meth:`lines` every (name, value) line in order.
    """

    __slots__ = ("_lines", "_index")

    def __init__(self, lines: Sequence[tuple[str, str]] = ()) -> None:
        self._lines: list[tuple[str, str]] = list(lines)
        self._index: dict[str, list[int]] = {}
        for i, (name, _) in enumerate(self._lines):
            self._index.setdefault(name.lower(), []).append(i)

    def __getitem__(self, name: str) -> str:
        idx = self._index.get(name.lower())
        if not idx:
            raise KeyError(name)
        return self._lines[idx[0]][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def __iter__(self) -> Iterator[str]:
        for positions in self._index.values():
            yield self._lines[positions[0]][0]

    def __len__(self) -> int:
        return len(self._index)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in received order ([] when absent)."""
        return [self._lines[i][1] for i in self._index.get(name.lower(), ())]

    def lines(self) -> list[tuple[str, str]]:
        """Every header line, in received order, duplicates included."""
        return list(self._lines)

    def __repr__(self) -> str:
        return f"Headers({self._lines!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._lines == other._lines
        return Mapping.__eq__(self, other)


@dataclass(frozen=True)
class Metrics:
    """Timing and size of one transfer (``courier_metrics``); times in seconds from its start."""
    dns: float
    connect: float
    tls: float
    first_byte: float
    total: float
    bytes_sent: int
    bytes_received: int
    connection_reused: bool
    http_version: int
    redirects: int
    remote_ip: str = ""  # the address the connection reached ("" for a Unix socket, mock, cache hit)
    remote_port: int = 0


class CachePolicy(CEnum):
    """``courier_cache_policy``; user policies use ids >= ``USER_MIN``
    (``COURIER_CACHE_POLICY_USER_MIN``)."""
    __c_enum__ = ("courier_cache_policy", "COURIER_CACHE_")
    POLICY_DEFAULT = -1  # a request's: the engine's policy
    NO_CACHE = 0
    CACHE_FIRST = 1
    WRITE_ONLY = 2
    HTTP = 3
    HTTP_SHARED = 4
    USER_MIN = 100


class CacheStatus(CEnum):
    """Where a response's body came from (``courier_cache_status``): ``str(status)`` is
    ``"hit"``, ``"network"``..."""
    __c_enum__ = ("courier_cache_status", "COURIER_CACHE_STATUS_")
    NETWORK = 0
    HIT = 1
    REVALIDATED = 2
    STALE = 3


class CacheReason(CEnum):
    """Why the cache did what it did with a response (``courier_cache_reason``; the C values)."""
    __c_enum__ = ("courier_cache_reason", "COURIER_CACHE_REASON_")
    NONE = 0
    MISS = 1
    FRESH = 2
    STALE_WHILE_REVALIDATE = 3
    STALE_IF_ERROR = 4
    REVALIDATED = 5
    STALE_REFETCHED = 6
    VARY_MISS = 7
    ONLY_IF_CACHED = 8
    NOT_STORED_NO_STORE = 9
    NOT_STORED_STATUS = 10
    NOT_STORED_PRIVATE = 11
    NOT_STORED_AUTHORIZATION = 12
    NOT_STORED_VARY = 13
    NOT_STORED_TOO_LARGE = 14
    NOT_STORED_NO_FRESHNESS = 15
    NOT_STORED_METHOD = 16
    INVALIDATED = 17
    STALE_ACCEPTED = 18
    UPDATED_STORED = 19
    NOT_STORED_POLICY = 20

    @property
    def label(self) -> str:
        """The C library's name ("fresh", "not-stored-private", ...: ``courier_cache_reason_name``)."""
        return lib.courier_cache_reason_name(int(self)).decode()


@dataclass
class Answer:
    """A response built in Python: what a mock callback, an after-receive interceptor or a custom
    decoder-free transport returns. ``body`` may be bytes, str (UTF-8) or any JSON-serializable
    value given as ``json=``."""
    status: int = 200
    body: Union[bytes, str] = b""
    headers: Union[Mapping[str, str], Sequence[tuple[str, str]], None] = None
    content_type: Optional[str] = None
    json: Any = None


def build_response(answer: Any) -> int:
    """A new C response from an :class:`Answer` (or an int status, or a (status, body) tuple).
    Returns the pointer, which the caller hands to a function that takes it."""
    if isinstance(answer, int):
        answer = Answer(answer)
    elif isinstance(answer, tuple):
        answer = Answer(*answer)
    if not isinstance(answer, Answer):
        raise TypeError(f"expected courier.Answer, got {type(answer).__name__}")
    out = c_void_p()
    check(lib.courier_response_new(byref(out), int(answer.status)))
    try:
        body = answer.body
        ctype = answer.content_type
        if answer.json is not None:
            body = _json.dumps(answer.json, separators=(",", ":")).encode()
            ctype = ctype or "application/json"
        if isinstance(body, str):
            body = body.encode("utf-8")
        if ctype:
            check(lib.courier_response_add_header(out, b"Content-Type", ctype.encode()))
        headers = answer.headers or ()
        items = headers.items() if isinstance(headers, Mapping) else headers
        for name, value in items:
            check(lib.courier_response_add_header(out, name.encode(), str(value).encode()))
        if body:
            check(lib.courier_response_set_body(out, body, len(body)))
    except BaseException:
        lib.courier_response_free(out)
        raise
    return out.value or 0


_can_retain = has("courier_response_retain")


def _s(b: Optional[bytes]) -> Optional[str]:
    return b.decode("utf-8", "replace") if b is not None else None


class Response:
    """An HTTP response (``courier_response``). Immutable; safe to read from any thread.

    The body and headers are read from the C response on first use. The C response is released
    when this object is garbage-collected (or with :meth:`close`); a response outlives its engine.
    """

    __slots__ = ("_ptr", "_owned", "_body", "_headers", "status", "__weakref__")

    def __init__(self, ptr: int, *, _owned: bool = True) -> None:
        self._ptr: Optional[int] = ptr
        self._owned = _owned
        self._body: Optional[bytes] = None
        self._headers: Optional[Headers] = None
        ext = _fast.ext
        #: The HTTP status code (0 when none, e.g. some mocks).
        self.status: int = ext.response_status(ptr) if ext is not None else lib.courier_response_status(ptr)

    @classmethod
    def _borrow(cls, ptr: int) -> "Response":
        """A response lent to a callback. With ``courier_response_retain`` it takes its own
        reference, so it stays usable after the callback; without (an older library) it is a
        view that the end of the callback invalidates."""
        if _can_retain:
            return cls(lib.courier_response_retain(ptr), _owned=True)
        return cls(ptr, _owned=False)

    def _release(self) -> None:
        """Ends a borrowed view (after the callback that lent it returned)."""
        if not self._owned:
            self._ptr = None

    def _handle(self) -> int:
        if not self._ptr:
            raise InvalidArgument("a response lent to a callback was used after the callback returned "
                                  "(read what you need inside it), or the response was closed")
        return self._ptr

    def close(self) -> None:
        """Releases the C response now (reading fields not yet read then raises)."""
        ptr, self._ptr = self._ptr, None
        if ptr and self._owned:
            ext = _fast.ext
            if ext is not None:
                ext.response_free(ptr)
            else:
                lib.courier_response_free(ptr)

    def __del__(self) -> None:
        try:  # close(), without its call
            ptr = self._ptr
            if ptr and self._owned:
                self._ptr = None
                ext = _fast.ext
                if ext is not None:
                    ext.response_free(ptr)
                else:
                    lib.courier_response_free(ptr)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<courier.Response [{self.status}]>"

    # -- body ----------------------------------------------------------------------------------
    @property
    def body(self) -> bytes:
        """The body as bytes (empty for HEAD, 204, and downloads written to a file)."""
        if self._body is None:
            ptr = self._ptr or self._handle()  # _handle() raises for a closed response
            ext = _fast.ext
            if ext is not None:
                self._body = ext.response_body(ptr)
            else:
                n = c_size_t()
                p = lib.courier_response_body(ptr, byref(n))
                self._body = ctypes.string_at(p, n.value) if n.value else b""
        return self._body

    content = body

    @property
    def text(self) -> str:
        """The body decoded by the core from the charset its Content-Type names (GBK, Shift_JIS,
        ... through iconv; UTF-8 when none is named): ``decode_text()``. Raises
        :class:`courier.CharsetError` for bytes not valid in that charset and
        :class:`courier.UnknownCharset` for a charset iconv does not know."""
        return self.decode_text()

    def decode_text(self, default_charset: Optional[str] = None) -> str:
        """The body as text (``courier_response_text``): decoded from the charset the Content-Type
        names, else from ``default_charset`` (None: UTF-8). Errors as :attr:`text`."""
        out = c_void_p()
        n = c_size_t()
        err = ERROR()
        check(lib.courier_response_text(byref(out), byref(n), self._handle(),
                                        default_charset.encode() if default_charset is not None else None,
                                        byref(err)), err)
        try:
            return ctypes.string_at(out.value, n.value).decode("utf-8") if n.value else ""
        finally:
            lib.courier_free(out)

    def json(self) -> Any:
        """The body as Python values, from the core's parsed document (``courier_response_json``:
        parsed once by the core with its limits and rules — duplicate keys, depth, UTF-8 — and
        converted). Raises :class:`courier.JSONError` when the core cannot decode it."""
        doc = c_void_p()
        err = ERROR()
        scope = cb.Scope()  # a custom decoder may run here, on this thread
        with cb.sending(scope):
            code = lib.courier_response_parse_json(byref(doc), self._handle(), byref(err))
        if scope.exc is not None:
            if code != 0 and scope.exc.__context__ is None:
                scope.exc.__context__ = make_error(code, err)
            raise scope.exc
        if code != 0:
            raise make_error(code, err)
        return json_to_python(doc.value)

    def _result_tape(self, name: Optional[bytes]) -> Any:
        # The result as the core left it on the tape (courier_response_result_tape): key path,
        # envelope and mapping were applied there when the answer came; no jansson document is made.
        tape = c_void_p()
        index = c_size_t()
        err = ERROR()
        if lib.courier_response_result_tape(byref(tape), byref(index), self._handle(), name, byref(err)) != 0:
            return None  # absent, or a body that cannot be decoded
        return tape_to_python(tape.value, index.value)

    @property
    def data(self) -> Any:
        """The default result of the request's JSON handling (``courier_response_data``, read on the
        core's tape): the value at its key path after its mapping, else the envelope's data, else the
        whole document. None when absent."""
        return self._result_tape(None)

    def result(self, name: str) -> Any:
        """A named result (``courier_response_result``, read on the core's tape); None when absent."""
        return self._result_tape(name.encode())

    @property
    def envelope(self) -> Optional[tuple[int, Optional[str]]]:
        """The envelope's (code, message), or None when no envelope code applied."""
        code = c_int64()
        msg = c_char_p()
        if lib.courier_response_envelope(byref(code), byref(msg), self._handle()) != 0:
            return None
        return code.value, _s(msg.value)

    @property
    def mapping_error(self) -> Optional[tuple[str, int, int]]:
        """After a MappingError: (path, expected type, found type), else None."""
        where = MAPPING_ERROR()
        if lib.courier_response_mapping_error(byref(where), self._handle()) != 0:
            return None
        return where.path.decode("utf-8", "replace"), where.expected, where.found

    # -- headers and description -----------------------------------------------------------------
    @property
    def headers(self) -> Headers:
        """The header lines of the final response (case-insensitive, received order)."""
        if self._headers is None:
            h = self._handle()
            lines = []
            name = c_char_p()
            value = c_char_p()
            for i in range(lib.courier_response_header_count(h)):
                if lib.courier_response_header_at(byref(name), byref(value), h, i) == 0:
                    lines.append((_s(name.value) or "", _s(value.value) or ""))
            self._headers = Headers(lines)
        return self._headers

    @property
    def url(self) -> str:
        """The URL that answered, after redirects."""
        return _s(lib.courier_response_url(self._handle())) or ""

    @property
    def hsts_upgraded(self) -> bool:
        """True when the request's URL (or a redirect hop's) went from http:// to https:// because
        its host is a known HSTS host (:attr:`url` then says https://)."""
        return lib.courier_response_hsts_upgraded(self._handle()) != 0

    @property
    def redirects(self) -> list[tuple[str, int]]:
        """The redirects the request went through, in order: ``(url, status)`` of each URL that
        answered with a redirect (empty when none). The final URL is :attr:`url`."""
        h = self._handle()
        url = c_char_p()
        status = c_int()
        hops = []
        for i in range(lib.courier_response_redirect_count(h)):
            if lib.courier_response_redirect_at(byref(url), byref(status), h, i) == 0:
                hops.append((_s(url.value) or "", status.value))
        return hops

    @property
    def method(self) -> str:
        """The method that was sent."""
        return _s(lib.courier_response_method(self._handle())) or ""

    @property
    def request_id(self) -> int:
        """The id of the send that produced it."""
        return int(lib.courier_response_request_id(self._handle()))

    @property
    def ok(self) -> bool:
        """True for a status below 400."""
        return 0 < self.status < 400

    @property
    def metrics(self) -> Metrics:
        """Timing and sizes of the transfer."""
        m = sized(METRICS)
        check(lib.courier_response_metrics(byref(m), self._handle()))
        return Metrics(m.dns_s, m.connect_s, m.tls_s, m.first_byte_s, m.total_s, m.bytes_sent,
                       m.bytes_received, bool(m.connection_reused), m.http_version, m.redirects,
                       m.remote_ip.decode("ascii", "replace"), m.remote_port)

    @property
    def attempts(self) -> int:
        """How many attempts the response took (1 without retries)."""
        a = c_int()
        check(lib.courier_response_attempts(byref(a), None, self._handle()))
        return a.value

    @property
    def retry_wait(self) -> float:
        """Seconds the engine chose to wait between attempts (backoff and Retry-After)."""
        w = ctypes.c_int64()
        check(lib.courier_response_attempts(None, byref(w), self._handle()))
        return w.value / 1000.0

    @property
    def file(self) -> Optional[str]:
        """The file a download was written to, or None."""
        return _s(lib.courier_response_file(self._handle()))

    # -- cache ---------------------------------------------------------------------------------
    @property
    def from_cache(self) -> bool:
        """True when the body came from the cache (hit, revalidated or stale)."""
        if not has("courier_response_from_cache"):
            return False
        return bool(lib.courier_response_from_cache(self._handle()))

    @property
    def cache_status(self) -> CacheStatus:
        """Where the body came from: a :class:`CacheStatus` (``str()`` gives ``"hit"``...)."""
        value = lib.courier_response_cache_status(self._handle())
        try:
            return CacheStatus(value)
        except ValueError:  # pragma: no cover - a status newer than this binding
            return value  # type: ignore[return-value]

    @property
    def cache_reason(self) -> Union[CacheReason, int]:
        """Why the cache did what it did (a :class:`CacheReason`; a plain int for a value this
        binding does not know)."""
        value = int(lib.courier_response_cache_reason(self._handle()))
        try:
            return CacheReason(value)
        except ValueError:
            return value

    @property
    def age(self) -> int:
        """Age in seconds of a response that came from the cache, else 0."""
        return int(lib.courier_response_age_ms(self._handle())) // 1000

    @property
    def cache_created(self) -> Optional[float]:
        """When its cache entry was written (seconds since the epoch), or None."""
        v = lib.courier_response_cache_created(self._handle())
        return v / 1000.0 if v else None

    @property
    def cache_expires(self) -> Optional[float]:
        """Until when its cache entry is fresh (seconds since the epoch), or None."""
        v = lib.courier_response_cache_expires(self._handle())
        return v / 1000.0 if v else None

    @property
    def cache_key(self) -> Optional[str]:
        """The key text of the entry it came from, or None."""
        return _s(lib.courier_response_cache_key(self._handle()))


# ---------------------------------------------------------------------------------------------
# Trampolines that lend a Response (see courier._callbacks)
# ---------------------------------------------------------------------------------------------

E_INVALID_RESULT = lib_code("COURIER_E_INVALID_RESULT")


def borrowed_response(ptr: Optional[int]) -> Optional[Response]:
    """A Response lent to a callback for its duration (``_release`` it after)."""
    return Response._borrow(ptr) if ptr else None


def _validator(response: Optional[int], user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 1
    slot.note_worker()
    resp = borrowed_response(response)
    try:
        return 1 if slot.fn(resp) else 0
    except BaseException as e:
        # the send fails with the exception's code (a CourierError's), else as a "no" would
        cb.raise_in_send(slot, e, resp.request_id if resp is not None else 0, otherwise=E_INVALID_RESULT)
        return 0
    finally:
        if resp is not None:
            resp._release()


def _after_receive(request_id: int, response: Any, user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None or slot.fn[1] is None:
        return 0
    slot.note_worker()
    old = response[0]
    resp = borrowed_response(old)
    try:
        answer = slot.fn[1](request_id, resp)
        if answer is not None:
            new = build_response(answer)
            response[0] = new
            if resp is not None:
                resp._release()
                resp = None
            if old:
                lib.courier_response_free(old)
        return 0
    except BaseException as e:
        return cb.raise_in_send(slot, e, request_id)
    finally:
        if resp is not None:
            resp._release()


def _cache_lookup(which: int, cached: Optional[int], now_ms: int, user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    fn = slot.fn[which]
    resp = borrowed_response(cached)
    try:
        return 1 if fn(resp, now_ms / 1000.0) else 0
    except BaseException as e:  # on the sending thread: the send re-raises it
        slot.keep(e)
        return 0
    finally:
        if resp is not None:
            resp._release()


def _cache_has(cached: Optional[int], now_ms: int, user: Optional[int]) -> int:
    return _cache_lookup(0, cached, now_ms, user)


def _cache_answer(cached: Optional[int], now_ms: int, user: Optional[int]) -> int:
    return _cache_lookup(1, cached, now_ms, user)


def _cache_should_write(response: Optional[int], expires_ms: Any, user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    resp = borrowed_response(response)
    try:
        result = slot.fn[2](resp, expires_ms[0] / 1000.0)
        if result is True or result is False or result is None:
            return 1 if result else 0
        # a number: write, expiring at that time (seconds since the epoch)
        expires_ms[0] = int(float(result) * 1000)
        return 1
    except BaseException as e:  # a write skipped cannot fail the send: the engine's close re-raises it
        slot.keep(e, resp.request_id if resp is not None else 0)
        return 0
    finally:
        if resp is not None:
            resp._release()


c_validator = cb.VALIDATOR_FN(_validator)
c_after_receive = cb.AFTER_RECEIVE_FN(_after_receive)
c_cache_has = cb.CACHE_LOOKUP_FN(_cache_has)
c_cache_answer = cb.CACHE_LOOKUP_FN(_cache_answer)
c_cache_should_write = cb.CACHE_WRITE_FN(_cache_should_write)
