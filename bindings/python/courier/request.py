"""Requests: a Python description turned into a ``courier_request`` at each send.

A :class:`Request` holds plain Python values; the C request is built when it is sent (and freed
right after: ``courier_send`` copies it), so one ``Request`` may be sent many times, from any
thread, each send with its own callbacks' context.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import inspect
import json as _json
import math
import os
import threading
from ctypes import CFUNCTYPE, byref, c_char_p, c_size_t, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence, TypedDict, Union

from . import _callbacks as cb
from ._enums import CEnum, Setting
from ._lib import ERROR, lib, setting_default
from .auth import Challenge, Credentials, c_challenge, credentials_args
from .errors import CourierError, InvalidArgument, check, coerce, lib_code, make_error
from .frozen import FreezePolicy
from .mapping import python_to_json
from .response import CachePolicy, Response, borrowed_response, build_response, c_validator
from . import netopts
from .netopts import ConnectToArg, HTTPVersion, ResolveArg
from .security import Security

__all__ = ["Request", "RequestOptions", "Outgoing", "Progress", "Retry", "Mock", "Part", "Priority", "BodyEncoding",
           "Freeze", "Result"]

Params = Union[Mapping[str, Any], Sequence[tuple[str, Any]], None]
HeadersArg = Union[Mapping[str, str], Sequence[tuple[str, str]], None]


class Priority(CEnum):
    """``courier_priority``: which waiting request starts first when limits hold requests back."""
    __c_enum__ = ("courier_priority", "COURIER_PRIORITY_")
    LOW = -1
    NORMAL = 0
    HIGH = 1


class BodyEncoding(CEnum):
    """``courier_body_encoding``: how parameters that go in the body are encoded."""
    __c_enum__ = ("courier_body_encoding", "COURIER_BODY_")
    FORM = 0
    JSON = 1


class Progress(NamedTuple):
    """Bytes moved so far and expected (0 when unknown), down and up."""
    request_id: int
    down_now: int
    down_total: int
    up_now: int
    up_total: int


@dataclass(frozen=True)
class Retry:
    """A retry rule (``courier_*_set_retry``): at most ``max_retries`` further attempts, waiting
    ``base_delay * 2**(attempt-1)`` seconds capped at ``max_delay``, with jitter; the core decides
    what is retried (network failures, 408, 429, 5xx; idempotent methods unless
    ``non_idempotent``) and honours Retry-After unless ``ignore_retry_after``."""
    # The defaults are the C core's (courier_setting_default), as in every binding.
    max_retries: int = setting_default(Setting.RETRY_MAX_RETRIES)
    base_delay: float = setting_default(Setting.RETRY_BASE_DELAY_MS) / 1000.0
    max_delay: float = setting_default(Setting.RETRY_MAX_DELAY_MS) / 1000.0
    non_idempotent: bool = False
    ignore_retry_after: bool = False

    def _args(self) -> tuple[int, int, int, int]:
        flags = (0x1 if self.non_idempotent else 0) | (0x2 if self.ignore_retry_after else 0)
        return (int(self.max_retries), int(round(self.base_delay * 1000)), int(round(self.max_delay * 1000)),
                flags)


@dataclass(frozen=True)
class Mock:
    """A mock answer, used while the engine's mock switch is on (``Engine(mock=True)``).

    One of: ``status``/``body``/``content_type``/``headers`` (bytes answer), ``file`` (body read
    from a file at send time; status 200 unless given), ``error`` (a code, or a CourierError class
    such as ``courier.Timeout``: the request fails with it), ``callback`` (called on the worker
    thread with the final request, an :class:`Outgoing` view, returns a :class:`courier.Answer`).
    ``delay`` (seconds) delays the answer without blocking anything."""
    status: int = 200
    body: Union[bytes, str, None] = None
    content_type: Optional[str] = None
    headers: HeadersArg = None
    file: Optional[str] = None
    error: Any = None
    delay: Optional[float] = None
    callback: Optional[Callable[["Outgoing"], Any]] = None
    json: Any = None


@dataclass(frozen=True)
class Part:
    """A part of a multipart/form-data body: bytes (``data``) or a file streamed from disk
    (``path``), with optional filename, content type and extra header lines."""
    name: str
    data: Union[bytes, str, None] = None
    path: Optional[str] = None
    filename: Optional[str] = None
    content_type: Optional[str] = None
    headers: HeadersArg = None


@dataclass(frozen=True)
class Freeze:
    """A freeze policy with its settings (``courier_request_set_freeze``): ``policy`` a
    :class:`courier.FreezePolicy` or its name ("auto", "manual", "never"), ``expiry`` in seconds
    (None: the engine's), ``unordered``, ``on_ambiguous`` (also freeze after a timeout/reset), and
    an optional ``id``. The ``freeze=`` option takes this, a :class:`courier.FreezePolicy`, or a
    name."""
    policy: Union[FreezePolicy, str, int] = FreezePolicy.AUTO
    expiry: Optional[float] = None
    unordered: bool = False
    on_ambiguous: bool = False
    id: Optional[str] = None
    resend_policy: Optional[str] = None  # a registered policy's id or a courier.ResendPolicy id

    def _policy(self) -> int:
        return coerce(FreezePolicy, self.policy, "freeze")

    @staticmethod
    def of(value: Union["Freeze", FreezePolicy, str, int]) -> "Freeze":
        """The ``freeze=`` option as a :class:`Freeze`: itself, or the default settings with that
        policy."""
        return value if isinstance(value, Freeze) else Freeze(coerce(FreezePolicy, value, "freeze"))


@dataclass(frozen=True)
class Result:
    """A named result (``courier_request_add_result``)."""
    key_path: Optional[str] = None
    mapping: Any = None
    optional: bool = False


def total_timeout_ms(seconds: float) -> int:
    """Seconds to whole milliseconds for the total timeout (``timeout=``), rounded up so that a
    small positive time never becomes 0; 0, a negative or infinite time and NaN give 0, which the
    core refuses (:class:`courier.InvalidArgument` naming ``timeout``), as Swift's facade
    (``Configuration.milliseconds``) and C do."""
    seconds = float(seconds)
    if not (seconds > 0 and math.isfinite(seconds)):
        return 0
    return int(min(math.ceil(seconds * 1000), 2**62))


def timeout_ms(seconds: float) -> int:
    """Seconds to whole milliseconds for the connect and idle timeouts: 0 is "none", a small
    positive time never rounds to it; a negative one stays negative (the core refuses it)."""
    if seconds < 0:
        return -1
    return int(math.ceil(seconds * 1000))


def _pairs(items: Any) -> Iterable[tuple[str, Any]]:
    if not items:
        return ()
    if isinstance(items, Mapping):
        return items.items()
    return items


def _b(s: Any) -> bytes:
    if isinstance(s, bytes):
        return s
    if isinstance(s, bool):
        return b"true" if s else b"false"
    return str(s).encode("utf-8", "surrogatepass")


def _opt(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else _b(s)


class Outgoing:
    """The final request, lent to a customize callback, a before-send interceptor or a mock
    callback for the duration of the call (``courier_outgoing``). ``attempt`` is, for an adapter,
    the attempt it adapts (1 for the first, 2 for the first retry or resend...), else None."""

    __slots__ = ("_ptr", "_writable", "attempt")

    def __init__(self, ptr: Optional[int], writable: bool, attempt: Optional[int] = None) -> None:
        self._ptr = ptr
        self._writable = writable
        self.attempt = attempt

    def _release(self) -> None:
        self._ptr = None

    def _h(self) -> int:
        if not self._ptr:
            raise InvalidArgument("the outgoing request is only valid during its callback")
        return self._ptr

    @property
    def url(self) -> str:
        return (lib.courier_outgoing_url(self._h()) or b"").decode("utf-8", "replace")

    @url.setter
    def url(self, value: str) -> None:
        self._need_write()
        check(lib.courier_outgoing_set_url(self._h(), _b(value)))

    @property
    def method(self) -> str:
        return (lib.courier_outgoing_method(self._h()) or b"").decode()

    @method.setter
    def method(self, value: str) -> None:
        self._need_write()
        check(lib.courier_outgoing_set_method(self._h(), _b(value)))

    @property
    def body(self) -> Optional[bytes]:
        """The body in memory (an adapter's view only: :class:`courier.InvalidArgument` elsewhere),
        None when there is none. Setting bytes (or str, UTF-8) replaces it and drops a file body."""
        data, n = c_void_p(), c_size_t()
        check(lib.courier_outgoing_body(byref(data), byref(n), self._h()))
        return ctypes.string_at(data.value, n.value) if data.value else None

    @body.setter
    def body(self, value: Union[bytes, str]) -> None:
        self._need_write()
        raw = value.encode() if isinstance(value, str) else bytes(value)
        check(lib.courier_outgoing_set_body(self._h(), raw, len(raw)))

    @property
    def body_file(self) -> Optional[str]:
        """The path of a file body (an adapter's view only), or None; setting one replaces the body."""
        v = lib.courier_outgoing_body_file(self._h())
        return os.fsdecode(v) if v else None

    @body_file.setter
    def body_file(self, path: Union[str, os.PathLike]) -> None:
        self._need_write()
        check(lib.courier_outgoing_set_body_file(self._h(), os.fsencode(path)))

    @property
    def request_id(self) -> int:
        """The send's id (``courier_outgoing_request_id``): the id its events and response carry."""
        return int(lib.courier_outgoing_request_id(self._h()))

    def header(self, name: str) -> Optional[str]:
        v = lib.courier_outgoing_header(self._h(), _b(name))
        return v.decode("utf-8", "replace") if v is not None else None

    @property
    def headers(self) -> list[tuple[str, str]]:
        h = self._h()
        out = []
        n, v = c_char_p(), c_char_p()
        for i in range(lib.courier_outgoing_header_count(h)):
            if lib.courier_outgoing_header_at(byref(n), byref(v), h, i) == 0:
                out.append(((n.value or b"").decode(), (v.value or b"").decode("utf-8", "replace")))
        return out

    def set_header(self, name: str, value: Optional[str]) -> None:
        """Sets a header (replacing every line of that name); None removes it."""
        self._need_write()
        check(lib.courier_outgoing_set_header(self._h(), _b(name), _opt(value)))

    def _need_write(self) -> None:
        if not self._writable:
            raise InvalidArgument("this request is read-only here (a mock callback sees the final request)")


class _Held:
    """A C request kept for reuse by one thread; freed with it (or when the Request changes)."""

    __slots__ = ("ptr", "version")

    def __init__(self, ptr: int, version: int) -> None:
        self.ptr = ptr
        self.version = version

    def __del__(self) -> None:
        try:
            lib.courier_request_free(self.ptr)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class RequestOptions(TypedDict, total=False):
    """The request options, typed: what ``Engine.get/post/.../send``, ``AsyncEngine``'s methods
    and the cache manager take as keywords (``**options: Unpack[RequestOptions]``), so editors
    complete them and type checkers check them. The same names and types as
    :class:`Request`'s keyword parameters (tests/test_typing.py keeps the two equal)."""
    params: Params
    headers: HeadersArg
    body: Union[bytes, str, None]
    json: Any
    form: Any
    content_type: Optional[str]
    parts: Optional[Sequence[Part]]
    body_file: Optional[str]
    timeout: Optional[float]
    base_url: Optional[str]
    use_default_params: Optional[bool]
    body_encoding: Union[BodyEncoding, str, None]
    auth: Optional[tuple[str, str]]
    token: Optional[str]
    token_scheme: Optional[str]
    validator: Optional[Callable[[Any], bool]]
    customize: Optional[Callable[[Outgoing], None]]
    priority: Union[Priority, str, int, None]
    retry: Optional[Retry]
    coalesce: Optional[bool]
    frequent_guard: Optional[bool]
    mock: Optional[Mock]
    download: Union[str, os.PathLike, None]
    resume: bool
    progress: Optional[Callable[[Progress], None]]
    transport: Optional[str]
    cache: Union[CachePolicy, str, int, None]
    cache_expiry: Optional[float]
    cache_key: Optional[str]
    cache_sensitive_data: Optional[str]
    cache_key_filter: Iterable[str]
    freeze: Union[Freeze, FreezePolicy, str, None]
    ignore_offline: Optional[bool]
    key_path: Optional[str]
    mapping: Any
    results: Optional[Mapping[str, Union[Result, str, None]]]
    envelope: Any
    follow_redirects: Optional[bool]
    max_redirects: Optional[int]
    allow_redirect_downgrade: Optional[bool]
    redirect_hook: Optional[Callable[[Any, Outgoing], Any]]
    connect_timeout: Optional[float]
    idle_timeout: Optional[float]
    trace_context: Union[str, tuple[str, Optional[str]], None]
    credentials: Credentials
    challenge_handler: Optional[Callable[[Challenge], Any]]
    proxy: Optional[str]
    no_proxy: Optional[str]
    proxy_credentials: Credentials
    param_charset: Optional[str]
    security: Optional[Security]
    allow_cellular: Optional[bool]
    resolve: ResolveArg
    connect_to: ConnectToArg
    unix_socket: Union[str, "os.PathLike[str]", None]
    http_version: Union[HTTPVersion, str, int, None]
    decode_content: Optional[bool]
    object: Any
    status_codes: Optional[Iterable[Union[int, tuple[int, int]]]]
    api_version: Optional[str]
    adapters: Sequence[Callable[..., Any]]
    retriers: Sequence[Callable[..., Any]]
    authenticated: Optional[bool]


class Request:
    """A request description. Every argument is optional except ``method`` and ``url`` (a path
    joined to the base URL, or an absolute http/https URL). See :meth:`courier.Engine.send` for
    the meaning of each keyword."""

    def __init__(self, method: str, url: str, *, params: Params = None, headers: HeadersArg = None,
                 body: Union[bytes, str, None] = None, json: Any = None, form: Any = None,
                 content_type: Optional[str] = None, parts: Optional[Sequence[Part]] = None,
                 body_file: Optional[str] = None, timeout: Optional[float] = None,
                 base_url: Optional[str] = None, use_default_params: Optional[bool] = None,
                 body_encoding: Union[BodyEncoding, str, None] = None,
                 auth: Optional[tuple[str, str]] = None, token: Optional[str] = None,
                 token_scheme: Optional[str] = None,
                 validator: Optional[Callable[[Any], bool]] = None,
                 customize: Optional[Callable[[Outgoing], None]] = None,
                 priority: Union[Priority, str, int, None] = None, retry: Optional[Retry] = None,
                 coalesce: Optional[bool] = None, frequent_guard: Optional[bool] = None,
                 mock: Optional[Mock] = None, download: Union[str, os.PathLike, None] = None,
                 resume: bool = False, progress: Optional[Callable[[Progress], None]] = None,
                 transport: Optional[str] = None, cache: Union[CachePolicy, str, int, None] = None,
                 cache_expiry: Optional[float] = None, cache_key: Optional[str] = None,
                 cache_sensitive_data: Optional[str] = None, cache_key_filter: Iterable[str] = (),
                 freeze: Union[Freeze, FreezePolicy, str, None] = None, ignore_offline: Optional[bool] = None,
                 key_path: Optional[str] = None, mapping: Any = None,
                 results: Optional[Mapping[str, Union[Result, str, None]]] = None,
                 envelope: Any = ..., follow_redirects: Optional[bool] = None,
                 max_redirects: Optional[int] = None, allow_redirect_downgrade: Optional[bool] = None,
                 redirect_hook: Optional[Callable[[Any, Outgoing], Any]] = None,
                 connect_timeout: Optional[float] = None, idle_timeout: Optional[float] = None,
                 credentials: Credentials = None, challenge_handler: Optional[Callable[[Challenge], Any]] = None,
                 proxy: Optional[str] = None, no_proxy: Optional[str] = None,
                 proxy_credentials: Credentials = None, param_charset: Optional[str] = None,
                 security: Optional[Security] = None, allow_cellular: Optional[bool] = None,
                 object: Any = None, status_codes: Optional[Iterable[Union[int, tuple[int, int]]]] = None,
                 api_version: Optional[str] = None, resolve: ResolveArg = None,
                 connect_to: ConnectToArg = None, unix_socket: Union[str, "os.PathLike[str]", None] = None,
                 http_version: Union[HTTPVersion, str, int, None] = None,
                 decode_content: Optional[bool] = None, adapters: Sequence[Callable[..., Any]] = (),
                 retriers: Sequence[Callable[..., Any]] = (), authenticated: Optional[bool] = None,
                 trace_context: Union[str, tuple[str, Optional[str]], None] = None) -> None:
        self._origin: Optional[tuple[str, ...]] = None  # a catalogue API or a route (made by the engine)
        self.method = method
        self.url = url
        # snapshots: a Request describes one request; changing an attribute later is seen by the
        # next send, changing a dict the caller passed in is not
        self.params = tuple(_pairs(params)) if params else None
        self.headers = tuple(_pairs(headers)) if headers else None
        self.body = body
        self.json = json
        self.form = form
        self.content_type = content_type
        self.parts = parts
        self.body_file = body_file
        self.timeout = timeout
        self.base_url = base_url
        self.use_default_params = use_default_params
        self.body_encoding = body_encoding
        self.auth = auth
        self.token = token
        self.token_scheme = token_scheme
        self.validator = validator
        self.customize = customize
        self.priority = priority
        self.retry = retry
        self.coalesce = coalesce
        self.frequent_guard = frequent_guard
        self.mock = mock
        self.download = download
        self.resume = resume
        self.progress = progress
        self.transport = transport
        self.cache = cache
        self.cache_expiry = cache_expiry
        self.cache_key = cache_key
        self.cache_sensitive_data = cache_sensitive_data
        self.cache_key_filter = tuple(cache_key_filter)
        self.freeze = freeze
        self.ignore_offline = ignore_offline
        self.key_path = key_path
        self.mapping = mapping
        self.results = results
        self.envelope = envelope
        self.follow_redirects = follow_redirects
        self.max_redirects = max_redirects
        self.allow_redirect_downgrade = allow_redirect_downgrade
        self.redirect_hook = redirect_hook
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.credentials = credentials
        self.challenge_handler = challenge_handler
        self.proxy = proxy
        self.no_proxy = no_proxy
        self.proxy_credentials = proxy_credentials
        self.param_charset = param_charset
        self.security = security
        self.allow_cellular = allow_cellular
        self.resolve = resolve
        self.connect_to = connect_to
        self.unix_socket = unix_socket
        self.http_version = http_version
        self.decode_content = decode_content
        # object: a dict filling the path pattern (":id"), the rest sent as parameters or body
        self.object = object
        self.status_codes = tuple(status_codes) if status_codes is not None else None
        self.api_version = api_version
        # session.py: adapters and retriers after the engine's; authenticated=False: the engine's
        # authenticator leaves this request alone (a refresh's own request)
        self.adapters = tuple(adapters)
        self.retriers = tuple(retriers)
        self.authenticated = authenticated
        # W3C trace context: a traceparent, or (traceparent, tracestate); checked by the core
        # (courier_request_set_trace_context), sent on every attempt, hop and frozen resend
        self.trace_context = trace_context

    @classmethod
    def api(cls, name: str, **kw: Any) -> "Request":
        """A request made from the engine's declaration of API ``name`` (``courier_request_new_api``:
        the catalogue, :meth:`courier.Engine.add_api` / :meth:`courier.Engine.load_apis`), with
        ``kw`` added for this use (``params``, ``object`` for a path with parameters, ...)."""
        req = cls("", "", **kw)
        req.__dict__["_origin"] = ("api", name)
        return req

    @classmethod
    def route(cls, name: str, object: Any = None, **kw: Any) -> "Request":
        """A request from the engine's route ``name`` (``courier_request_new_route``), its path
        pattern filled from ``object`` (a dict), the rest sent as parameters or body."""
        req = cls("", "", **kw)
        req.__dict__["_origin"] = ("route", name)
        req.__dict__["_route_object"] = object
        return req

    @classmethod
    def for_object(cls, method: str, object_type: str, object: Any, **kw: Any) -> "Request":
        """A request from the engine's route for ``object_type`` and ``method``
        (``courier_request_new_object``), filled from ``object`` (a dict)."""
        req = cls(method, "", **kw)
        req.__dict__["_origin"] = ("object", method, object_type)
        req.__dict__["_route_object"] = object
        return req

    def __repr__(self) -> str:
        if self._origin:
            return f"<courier.Request {' '.join(self._origin)}>"
        return f"<courier.Request {self.method} {self.url}>"

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if not name.startswith("_"):
            object.__setattr__(self, "_version", getattr(self, "_version", 0) + 1)

    # The C request ---------------------------------------------------------------------------
    def _has_callbacks(self) -> bool:
        return (self.validator is not None or self.customize is not None or self.progress is not None
                or self.redirect_hook is not None or self.challenge_handler is not None
                or bool(self.adapters) or bool(self.retriers)
                or (self.mock is not None and self.mock.callback is not None))

    def _acquire(self, ctx: Any = None, engine: Any = None) -> tuple[int, bool]:
        """The C request for one send: ``(pointer, owned)``. A request without callbacks is built
        once per thread and reused (``courier_send`` copies it; a C request is used by one thread
        at a time); one with callbacks is built for each send, with that send's context, and the
        caller frees it (``owned``)."""
        # keyed by thread id, not threading.local: the engine's worker is a C thread whose Python
        # thread state lives only for the duration of each callback. A held request of the current
        # version was built without callbacks or an origin, and every public attribute set since
        # would have changed the version (Engine._send takes this case without calling here).
        cache = self.__dict__.get("_held")
        tid = threading.get_ident()
        held = cache.get(tid) if cache is not None else None
        if held is not None and held.version == self._version:
            return held.ptr, False
        if self._has_callbacks() or self._origin:
            return self._build(ctx, engine), True
        if cache is None:
            cache = {}
            object.__setattr__(self, "_held", cache)
        held = cache[tid] = _Held(self._build(None, None), self._version)
        return held.ptr, False

    def _build(self, ctx: Any = None, engine: Any = None) -> int:
        """A new ``courier_request *`` for one send; per-request callbacks keep their exceptions
        in ``ctx`` (a send context) and release their registration through user_free."""
        out = c_void_p()
        if self._origin:
            self._new_from_engine(out, engine)
        else:
            check(lib.courier_request_new(byref(out), _b(self.method), _b(self.url)), arg="method")  # not a token
        r = out.value
        try:
            self._configure(r, ctx, engine)
        except BaseException:
            lib.courier_request_free(r)
            raise
        return r or 0

    def _new_from_engine(self, out: c_void_p, engine: Any) -> None:
        """The C request of a catalogue API or a route: made by the engine that sends it."""
        if engine is None:
            raise InvalidArgument(f"{self!r} is made by an engine: send it on one")
        kind, *names = self._origin or ()
        err = ERROR()
        h = engine._handle()
        if kind == "api":
            code = lib.courier_request_new_api(byref(out), h, _b(names[0]), byref(err))
        else:
            obj = self.__dict__.get("_route_object")
            doc = python_to_json(obj) if obj is not None else None
            try:
                if kind == "route":
                    code = lib.courier_request_new_route(byref(out), h, _b(names[0]), doc, byref(err))
                else:
                    code = lib.courier_request_new_object(byref(out), h, _b(names[0]), _b(names[1]), doc, byref(err))
            finally:
                if doc:
                    lib.courier_json_free(doc)
        if code != 0:
            raise make_error(code, err)

    def _configure(self, r: int, ctx: Any, engine: Any) -> None:  # noqa: C901 - a flat list of setters
        L = lib
        if self.base_url is not None:
            check(L.courier_request_set_base_url(r, _b(self.base_url)), arg="base_url")
        for name, value in _pairs(self.params):
            if isinstance(value, (list, tuple)):
                for v in value:
                    bn, bv = _b(name), _b(v)
                    check(L.courier_request_add_param_n(r, bn, len(bn), bv, len(bv)), arg="params")
            elif value is not None:
                bn, bv = _b(name), _b(value)
                check(L.courier_request_add_param_n(r, bn, len(bn), bv, len(bv)), arg="params")
        if self.param_charset is not None:
            check(L.courier_request_set_param_charset(r, _b(self.param_charset)), arg="param_charset")
        if self.security is not None:
            self.security._apply(L.courier_request_set_security, r)
        if self.allow_cellular is not None:
            check(L.courier_request_set_allow_cellular(r, 1 if self.allow_cellular else 0), arg="allow_cellular")
        if (self.resolve or self.connect_to or self.unix_socket is not None or self.http_version is not None
                or self.decode_content is not None):
            netopts.apply_request(r, self.resolve, self.connect_to, self.unix_socket, self.http_version,
                                  self.decode_content)
        if self.use_default_params is not None:
            check(L.courier_request_set_use_default_params(r, 1 if self.use_default_params else 0), arg="use_default_params")
        for name, value in _pairs(self.headers):
            bn, bv = _b(name), _b(value)
            check(L.courier_request_add_header_n(r, bn, len(bn), bv, len(bv)), arg="headers")
        if self.trace_context is not None:
            parent, state = (self.trace_context, None) if isinstance(self.trace_context, str) else self.trace_context
            check(L.courier_request_set_trace_context(r, _b(parent), _b(state) if state else None), arg="trace_context")
        if self.body_encoding is not None:
            check(L.courier_request_set_body_encoding(r, coerce(BodyEncoding, self.body_encoding, "body_encoding")), arg="body_encoding")
        if self.body is not None:
            data = self.body.encode("utf-8") if isinstance(self.body, str) else bytes(self.body)
            check(L.courier_request_set_body(r, data, len(data), _opt(self.content_type)), arg="body")
        if self.json is not None:
            doc = python_to_json(self.json)
            try:
                check(L.courier_request_set_json_body(r, doc, 0), arg="json")
            finally:
                L.courier_json_free(doc)
        if self.form is not None:
            doc = python_to_json(dict(self.form))
            try:
                check(L.courier_request_set_form_body(r, doc), arg="form")
            finally:
                L.courier_json_free(doc)
        for part in self.parts or ():
            if part.path is not None:
                check(L.courier_request_add_part_file(r, _b(part.name), _b(os.fspath(part.path)),
                                                     _opt(part.filename), _opt(part.content_type)), arg="parts")
            else:
                data = part.data or b""
                if isinstance(data, str):
                    data = data.encode("utf-8")
                check(L.courier_request_add_part_data(r, _b(part.name), data, len(data), _opt(part.filename),
                                                     _opt(part.content_type)), arg="parts")
            for name, value in _pairs(part.headers):
                check(L.courier_request_add_part_header(r, _b(name), _b(value)), arg="parts")
        if self.body_file is not None:
            check(L.courier_request_set_body_file(r, _b(os.fspath(self.body_file)), _opt(self.content_type)), arg="body_file")
        if self.object is not None:  # after the raw body: with one, the members go in the query
            doc = python_to_json(self.object)
            err = ERROR()
            try:
                code = L.courier_request_set_object(r, doc, byref(err))
            finally:
                L.courier_json_free(doc)
            if code != 0:
                raise make_error(code, err, arg="object")
        for sc in self.status_codes or ():
            lo, hi = (sc, sc) if isinstance(sc, int) else sc
            check(L.courier_request_add_status_codes(r, int(lo), int(hi)), arg="status_codes")
        if self.api_version is not None:
            check(L.courier_request_set_api_version(r, _b(self.api_version)), arg="api_version")
        if self.timeout is not None:
            check(L.courier_request_set_timeout_ms(r, total_timeout_ms(self.timeout)), arg="timeout")
        if self.auth is not None:
            check(L.courier_request_set_basic_auth(r, _b(self.auth[0]), _b(self.auth[1])), arg="auth")
        if self.token is not None:
            check(L.courier_request_set_auth_token(r, _opt(self.token_scheme), _b(self.token)), arg="token")
        if self.credentials is not None or self.proxy_credentials is not None:
            if self.credentials is not None:
                check(L.courier_request_set_credentials(r, *credentials_args(self.credentials)), arg="credentials")
            if self.proxy_credentials is not None:
                check(L.courier_request_set_proxy_credentials(r, *credentials_args(self.proxy_credentials, "proxy_credentials")), arg="proxy_credentials")
        if self.proxy is not None:
            check(L.courier_request_set_proxy(r, _b(self.proxy), _opt(self.no_proxy)), arg="proxy")
        if self.priority is not None:
            check(L.courier_request_set_priority(r, coerce(Priority, self.priority, "priority")), arg="priority")
        if self.retry is not None:
            check(L.courier_request_set_retry(r, *self.retry._args()), arg="retry")
        if self.coalesce is not None:
            check(L.courier_request_set_coalesce(r, 1 if self.coalesce else 0), arg="coalesce")
        if self.frequent_guard is not None:
            check(L.courier_request_set_frequent_guard(r, 1 if self.frequent_guard else 0), arg="frequent_guard")
        if self.mock is not None:
            self._set_mock(r, ctx, engine)
        if self.download is not None:
            check(L.courier_request_set_download_file(r, _b(os.fspath(self.download)), 0x1 if self.resume else 0), arg="download")
        if self.transport is not None:
            check(L.courier_request_set_transport(r, _b(self.transport)), arg="transport")
        if self.cache is not None:
            check(L.courier_request_set_cache_policy(r, coerce(CachePolicy, self.cache, "cache", allow_int=True)), arg="cache")
        if self.cache_expiry is not None:
            check(L.courier_request_set_cache_expiry_ms(r, int(round(self.cache_expiry * 1000))), arg="cache_expiry")
        if self.cache_key is not None:
            check(L.courier_request_set_cache_key(r, _b(self.cache_key)), arg="cache_key")
        if self.cache_sensitive_data is not None:
            check(L.courier_request_set_cache_sensitive_data(r, _b(self.cache_sensitive_data)), arg="cache_sensitive_data")
        for name in self.cache_key_filter:
            check(L.courier_request_add_cache_key_filter(r, _b(name)), arg="cache_key_filter")
        if self.freeze is not None:
            fz = Freeze.of(self.freeze)
            flags = (0x1 if fz.unordered else 0) | (0x2 if fz.on_ambiguous else 0)
            expiry = int(round(fz.expiry * 1000)) if fz.expiry is not None else 0
            check(L.courier_request_set_freeze(r, fz._policy(), expiry, flags), arg="freeze")
            if fz.id is not None:
                check(L.courier_request_set_freeze_id(r, _b(fz.id)), arg="freeze")
            if fz.resend_policy is not None:
                check(L.courier_request_set_resend_policy(r, _b(fz.resend_policy), None), arg="freeze")
        if self.ignore_offline is not None:
            check(L.courier_request_set_ignore_offline(r, 1 if self.ignore_offline else 0), arg="ignore_offline")
        if self.key_path is not None:
            check(L.courier_request_set_key_path(r, _b(self.key_path)), arg="key_path")
        if self.mapping is not None:
            check(L.courier_request_set_mapping(r, self.mapping._handle()), arg="mapping")
        for name, res in (self.results or {}).items():
            if res is None or isinstance(res, str):
                res = Result(res)
            check(L.courier_request_add_result(r, _b(name), _opt(res.key_path),
                                               res.mapping._handle() if res.mapping is not None else None,
                                               0x1 if res.optional else 0), arg="results")
        if self.envelope is not ...:
            check(L.courier_request_set_envelope(r, self.envelope._handle() if self.envelope is not None else None), arg="envelope")
        if self.follow_redirects is not None:
            check(L.courier_request_set_follow_redirects(r, 1 if self.follow_redirects else 0), arg="follow_redirects")
        if self.max_redirects is not None:
            check(L.courier_request_set_max_redirects(r, int(self.max_redirects)), arg="max_redirects")
        if self.allow_redirect_downgrade is not None:
            check(L.courier_request_set_allow_redirect_downgrade(r, 1 if self.allow_redirect_downgrade else 0), arg="allow_redirect_downgrade")
        if self.connect_timeout is not None:
            check(L.courier_request_set_timeout(r, 1, timeout_ms(self.connect_timeout)), arg="connect_timeout")
        if self.idle_timeout is not None:
            check(L.courier_request_set_timeout(r, 2, timeout_ms(self.idle_timeout)), arg="idle_timeout")
        # Callbacks last: each registration is released by user_free when C is done with it.
        if self.validator is not None:
            key = cb.register(cb.Slot(self.validator, ctx, engine))
            check(L.courier_request_set_validator(r, c_validator, key, cb.user_free), arg="validator")
        if self.customize is not None:
            key = cb.register(cb.Slot(self.customize, ctx, engine))
            check(L.courier_request_set_customize(r, c_customize, key, cb.user_free), arg="customize")
        if self.progress is not None:
            key = cb.register(cb.Slot(self.progress, ctx, engine))
            check(L.courier_request_set_progress(r, c_progress, key, cb.user_free), arg="progress")
        if self.redirect_hook is not None:
            key = cb.register(cb.Slot(self.redirect_hook, ctx, engine))
            check(L.courier_request_set_redirect_hook(r, c_redirect, key, cb.user_free), arg="redirect_hook")
        if self.challenge_handler is not None:
            key = cb.register(cb.Slot(self.challenge_handler, ctx, engine))
            check(L.courier_request_set_challenge_handler(r, c_challenge, key, cb.user_free), arg="challenge_handler")
        for fn in self.adapters:  # after the engine's (include/courier/hooks.h "Sessions")
            key = cb.register(cb.Slot(fn, ctx, engine))
            check(L.courier_request_add_adapter(r, c_adapter, key, cb.user_free), arg="adapters")
        for fn in self.retriers:
            key = cb.register(cb.Slot(fn, ctx, engine))
            check(L.courier_request_add_retrier(r, c_retrier, key, cb.user_free), arg="retriers")
        if self.authenticated is not None:
            check(L.courier_request_set_authenticated(r, 1 if self.authenticated else 0), arg="authenticated")

    def _set_mock(self, r: int, ctx: Any, engine: Any) -> None:
        L = lib
        m = self.mock
        assert m is not None
        if m.callback is not None:
            key = cb.register(cb.Slot(m.callback, ctx, engine))
            check(L.courier_request_set_mock_callback(r, c_mock, key, cb.user_free), arg="mock")
        elif m.error is not None:
            code = m.error
            if isinstance(code, type):
                code = code.CODE
            elif isinstance(code, str):
                code = lib_code(code)
            check(L.courier_request_set_mock_error(r, int(code)), arg="mock")
        elif m.file is not None:
            check(L.courier_request_set_mock_file(r, _b(os.fspath(m.file))), arg="mock")
            check(L.courier_request_set_mock_status(r, int(m.status)), arg="mock")
        else:
            body = m.body
            ctype = m.content_type
            if m.json is not None:
                body = _json.dumps(m.json, separators=(",", ":"))
                ctype = ctype or "application/json"
            data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
            check(L.courier_request_set_mock_response(r, int(m.status), data if data else None, len(data),
                                                      _opt(ctype)), arg="mock")
        for name, value in _pairs(m.headers):
            check(L.courier_request_add_mock_header(r, _b(name), _b(value)), arg="mock")
        if m.delay is not None:
            check(L.courier_request_set_mock_delay_ms(r, int(round(m.delay * 1000))), arg="mock")


_ = (c_size_t, field)


# ---------------------------------------------------------------------------------------------
# Trampolines that lend an Outgoing view or a Progress (see courier._callbacks)
# ---------------------------------------------------------------------------------------------

def _customize(outgoing: Optional[int], user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    view = Outgoing(outgoing, writable=True)
    try:
        slot.fn(view)
        return 0
    except BaseException as e:
        return cb.raise_in_send(slot, e)
    finally:
        view._release()


def _before_send(outgoing: Optional[int], user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None or slot.fn[0] is None:
        return 0
    view = Outgoing(outgoing, writable=True)
    try:
        slot.fn[0](view)
        return 0
    except BaseException as e:
        return cb.raise_in_send(slot, e)
    finally:
        view._release()


def _redirect(response: Optional[int], outgoing: Optional[int], user: Optional[int]) -> int:
    """A redirect hook: ``fn(response, next)`` returns None/True/"follow" (follow ``next`` as it
    is left), "stop" (the 3xx is the answer) or False/"refuse" (COURIER_E_REDIRECT_REFUSED); a raised
    exception refuses too and is re-raised by the send."""
    slot = cb.lookup(user)
    if slot is None:
        return 0
    slot.note_worker()
    resp = borrowed_response(response)
    view = Outgoing(outgoing, writable=True)
    try:
        verdict = slot.fn(resp, view)
        if verdict is None or verdict is True or verdict == "follow":
            return 0
        if verdict == "stop":
            return 1
        return -1
    except BaseException as e:
        cb.raise_in_send(slot, e, resp.request_id if resp is not None else 0, otherwise=E_REDIRECT_REFUSED)
        return -1
    finally:
        view._release()
        if resp is not None:
            resp._release()


def _mock(outgoing: Optional[int], out: Any, user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return cb.E_INTERNAL
    slot.note_worker()
    view = Outgoing(outgoing, writable=False)
    try:
        answer = slot.fn(view)
        out[0] = build_response(answer)
        return 0
    except BaseException as e:
        return cb.raise_in_send(slot, e)
    finally:
        view._release()


def _progress(request_id: int, down_now: int, down_total: int, up_now: int, up_total: int,
              user: Optional[int]) -> None:
    slot = cb.lookup(user)
    if slot is None:
        return
    slot.note_worker()
    try:
        slot.fn(Progress(request_id, down_now, down_total, up_now, up_total))
    except BaseException as e:
        cb.raise_in_send(slot, e, request_id)
        # A progress callback cannot answer C; stop the transfer it reports on instead.
        eng = slot.engine
        if eng is not None and eng._ptr:
            lib.courier_cancel(eng._ptr, request_id)


E_REDIRECT_REFUSED = lib_code("COURIER_E_REDIRECT_REFUSED")
c_customize = cb.CUSTOMIZE_FN(_customize)
c_before_send = cb.BEFORE_SEND_FN(_before_send)
c_redirect = cb.REDIRECT_FN(_redirect)
c_mock = cb.MOCK_FN(_mock)
c_progress = cb.PROGRESS_FN(_progress)

# ---- sessions: adapters and retriers (include/courier/hooks.h "Sessions"; courier.session has the
# authenticator). An adapter is fn(outgoing) run before each attempt; a retrier fn(question) ->
# None/False (no), True/0 (now) or seconds, asked after a failure the retry rule did not retry.
# Either may return an awaitable (run on the AsyncEngine's loop, else on a thread of its own) or a
# concurrent.futures.Future: the attempt waits off the wire meanwhile.

ADAPTER_FN = CFUNCTYPE(None, c_void_p, c_void_p)
RETRIER_FN = CFUNCTYPE(None, c_void_p, c_void_p)

# ---- running a result later -------------------------------------------------------------------

def _later(slot: cb.Slot, value: Any, done: Callable[[Any, Optional[BaseException]], None]) -> bool:
    """When ``value`` is an awaitable or a Future: arranges ``done(result, exc)`` for when it ends
    (a coroutine on the async engine's loop, else on a thread of its own) and returns True."""
    if isinstance(value, concurrent.futures.Future):
        fut = value
    elif inspect.isawaitable(value):
        eng = slot.engine
        loop = getattr(eng, "_async_loop", None) if eng is not None else None

        async def wrap() -> Any:
            return await value
        if loop is not None and loop.is_running() and not loop.is_closed():
            fut = asyncio.run_coroutine_threadsafe(wrap(), loop)
        else:
            fut = concurrent.futures.Future()

            def run() -> None:
                try:
                    fut.set_result(asyncio.run(wrap()))
                except BaseException as e:
                    fut.set_exception(e)
            threading.Thread(target=run, name="courier-session", daemon=True).start()
    else:
        return False

    def finished(f: concurrent.futures.Future) -> None:
        try:
            result = f.result()
        except BaseException as e:
            done(None, e)
            return
        done(result, None)
    fut.add_done_callback(finished)
    return True


def _code_of(exc: BaseException) -> int:
    return exc.code if isinstance(exc, CourierError) and exc.code < 0 else lib_code("COURIER_E_USER")


# ---- adapters ----------------------------------------------------------------------------------

def _fail_adaptation(ptr: int, exc: BaseException) -> None:
    lib.courier_adaptation_raise(ptr, _code_of(exc), str(exc).encode("utf-8", "replace")[:190],
                                 cb.register(exc), cb.user_free)


def _adapter(adaptation: Optional[int], user: Optional[int]) -> None:
    slot = cb.lookup(user)
    if slot is None or not adaptation:
        lib.courier_adaptation_complete(adaptation, 0, None)
        return
    slot.note_worker()
    view = Outgoing(lib.courier_adaptation_outgoing(adaptation), writable=True,
                    attempt=int(lib.courier_adaptation_attempt(adaptation)))
    try:
        result = slot.fn(view)
    except BaseException as e:
        view._release()
        _fail_adaptation(adaptation, e)
        return

    def done(_: Any, exc: Optional[BaseException]) -> None:
        view._release()
        if exc is not None:
            _fail_adaptation(adaptation, exc)
        else:
            lib.courier_adaptation_complete(adaptation, 0, None)
    try:
        if _later(slot, result, done):
            return  # the view stays valid until the adaptation completes
    except BaseException as e:
        done(None, e)
        return
    done(None, None)


c_adapter = ADAPTER_FN(_adapter)


# ---- retriers ----------------------------------------------------------------------------------

class RetryQuestion:
    """A failed attempt a retrier is asked about: ``error`` (the :class:`courier.CourierError` the
    request would fail with: an :class:`courier.HTTPStatusError` for a refused status),
    ``response`` (or None), ``attempt`` (1 after the first), ``request_id``, ``method`` and ``url``."""

    __slots__ = ("error", "response", "attempt", "request_id", "method", "url")

    def __init__(self, ptr: int) -> None:
        code = int(lib.courier_retry_question_code(ptr))
        rp = lib.courier_retry_question_response(ptr)
        self.response: Optional[Response] = Response(lib.courier_response_retain(rp)) if rp else None
        status = self.response.status if self.response is not None else 0
        if code == 0:
            code = lib_code("COURIER_E_HTTP_STATUS")
        self.error: CourierError = make_error(code, None, self.response)
        if status and not getattr(self.error, "http_status", 0):
            try:
                self.error.http_status = status  # type: ignore[misc]
            except AttributeError:  # pragma: no cover
                pass
        self.attempt = int(lib.courier_retry_question_attempt(ptr))
        self.request_id = int(lib.courier_retry_question_request_id(ptr))
        self.method = (lib.courier_retry_question_method(ptr) or b"").decode()
        self.url = (lib.courier_retry_question_url(ptr) or b"").decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"<courier.RetryQuestion {self.method} {self.url} attempt {self.attempt}: {type(self.error).__name__}>"


def _delay_ms(decision: Any) -> int:
    if decision is None or decision is False:
        return -1
    if decision is True:
        return 0
    seconds = float(decision)
    return -1 if seconds < 0 else int(round(seconds * 1000))


def _retrier(question: Optional[int], user: Optional[int]) -> None:
    slot = cb.lookup(user)
    if slot is None or not question:
        lib.courier_retry_question_answer(question, -1)
        return
    slot.note_worker()

    def done(decision: Any, exc: Optional[BaseException]) -> None:
        if exc is not None:
            slot.keep(exc)  # an exception is a "no"; close() (or the engine's sink) re-raises it
            decision = None
        try:
            ms = _delay_ms(decision)
        except (TypeError, ValueError) as e:
            slot.keep(e)
            ms = -1
        lib.courier_retry_question_answer(question, ms)
    try:
        result = slot.fn(RetryQuestion(question))
        if _later(slot, result, done):
            return
    except BaseException as e:
        done(None, e)
        return
    done(result, None)


c_retrier = RETRIER_FN(_retrier)
