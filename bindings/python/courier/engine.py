"""The engine: ``courier_engine`` behind a context manager."""
from __future__ import annotations

import atexit
import ctypes
import concurrent.futures
import json as _json
import logging
import os
import sys
import threading
import weakref
from ctypes import byref, c_char_p, c_int64, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from . import _callbacks as cb
from . import _fast
from ._enums import CEnum, Reachability, Setting
from ._lib import COOKIE, ERROR, HSTS_ENTRY, JSON_OPTIONS, TRANSPORT, lib, setting_default, sized
from .auth import Challenge, Cookie, Credentials, c_challenge, credentials_args
from .cache import CacheManager
from .errors import CourierError, EngineClosed, InvalidArgument, check, coerce, make_error
from .frozen import FrozenManager
from .group import Group, GroupMode, run
from .logs import LogBridge, bridge_for
from .otel import Tracing
from .mapping import c_decoder, python_to_json
from .request import (BodyEncoding, HeadersArg, Params, Request, Retry, _b, _opt, _pairs, c_before_send, c_redirect,
                      timeout_ms, total_timeout_ms)
from .response import CachePolicy, Response, c_after_receive, c_validator
from .stream import EventSource, StreamResponse, open_events, open_stream, wait_head
from .websocket import WebSocket, make_options, open_ws, sync_waker, wait_open
from . import netopts
from .netopts import ConnectToArg, HTTPVersion, IPVersion, ResolveArg
from .pool import PoolFigures
from .pool import figures as pool_figures_of
from .security import Security
from .stubs import Stub, StubMode, Stubs
from .session import Authenticator
from .session import install as session_install
from .session import set_credential as session_set_credential
from .transport import c_transport_cancel, c_transport_start

if TYPE_CHECKING:  # pragma: no cover
    from .group import GroupMember, GroupResult, Member
    from .request import RequestOptions
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack

__all__ = ["Engine", "default_app_id", "CourierFuture", "Interceptor", "Event", "EventKind", "LogLevel",
           "LogComponent", "LogRotation",
           "Reachability", "Redaction", "CachePolicy", "CacheDurability"]


class LogLevel(CEnum):
    """``courier_log_level``."""
    __c_enum__ = ("courier_log_level", "COURIER_LOG_")
    OFF = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    DEBUG = 4
    TRACE = 5


class LogComponent(CEnum):
    """``courier_log_component``: the part of the engine a line comes from, each with its level."""
    __c_enum__ = ("courier_log_component", "COURIER_LOG_")
    TRANSPORT = 0
    CACHE = 1
    JOURNAL = 2
    MAPPING = 3
    SCHEDULING = 4


class LogRotation(CEnum):
    """``courier_log_rotation``: when a file sink starts a new file besides size."""
    __c_enum__ = ("courier_log_rotation", "COURIER_LOG_ROTATE_")
    SIZE = 0
    DAILY = 1


class Redaction(CEnum):
    """``courier_log_redaction``."""
    __c_enum__ = ("courier_log_redaction", "COURIER_LOG_REDACT_")
    SECRETS = 0
    QUERY = 1
    NONE = 2


class EventKind(CEnum):
    """``courier_event_kind``."""
    __c_enum__ = ("courier_event_kind", "COURIER_EVENT_")
    WILL_SEND = 1
    DID_SEND = 2
    PROGRESS = 3
    FINISHED = 4
    FROM_CACHE = 5
    RETRIED = 6
    FROZEN = 7
    REDIRECTED = 8


class NetworkKind(CEnum):
    """``courier_network_kind``: the kind of the network path."""
    __c_enum__ = ("courier_network_kind", "COURIER_NETWORK_")
    UNKNOWN = 0
    WIRED = 1
    WIFI = 2
    CELLULAR = 3
    OTHER = 4


def network_link_kind(interface: str) -> tuple[NetworkKind, bool]:
    """The kind of a network interface ("lo", "eth0") and whether it is expensive, read from the
    kernel through netlink as the OS watch reads it (``courier_network_link_kind``; Linux)."""
    kind = ctypes.c_int()
    expensive = ctypes.c_int()
    err = ERROR()
    check(lib.courier_network_link_kind(byref(kind), byref(expensive), interface.encode(), byref(err)), err)
    return NetworkKind(kind.value), bool(expensive.value)


class CacheDurability(CEnum):
    """``courier_cache_durability``."""
    __c_enum__ = ("courier_cache_durability", "COURIER_CACHE_")
    DURABLE = 0
    FAST = 1
    SYNCED = 2


@dataclass
class Event:
    """A request lifecycle event (``courier_event``), for monitors. ``response`` is lent for the
    duration of the monitor call."""
    kind: EventKind
    request_id: int
    method: Optional[str]
    url: Optional[str]
    code: int
    http_status: int
    attempt: int
    delay: float
    duration: float
    bytes_received: int
    bytes_expected: int
    bytes_sent: int
    bytes_to_send: int
    response: Optional[Response]
    error: Optional[CourierError]
    #: the request's ``traceparent`` / ``tracestate`` header as it goes out (``None``: none)
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    #: FINISHED: retries of the final hop plus redirects followed (``http.request.resend_count``)
    resend_count: int = 0
    #: FINISHED with a failure: ``"503"`` when a status failed it, else the code's name
    #: (``courier_code_name``: ``"timeout"``, ``"cannot_connect"``); ``None`` on success
    error_type: Optional[str] = None

    @classmethod
    def _from_c(cls, ev: Any) -> "Event":
        resp = Response._borrow(ev.response) if ev.response else None
        err = make_error(ev.error.contents.code, ev.error.contents) if ev.error and ev.error.contents.code else None
        try:
            kind = EventKind(ev.kind)
        except ValueError:
            kind = ev.kind  # a kind newer than this binding
        return cls(kind, int(ev.request_id), ev.method.decode() if ev.method else None,
                   ev.url.decode("utf-8", "replace") if ev.url else None, ev.code, ev.http_status, ev.attempt,
                   ev.delay_ms / 1000.0, ev.duration_s, ev.bytes_received, ev.bytes_expected, ev.bytes_sent,
                   ev.bytes_to_send, resp, err,
                   ev.traceparent.decode() if ev.traceparent else None,
                   ev.tracestate.decode() if ev.tracestate else None, ev.resend_count,
                   ev.error_type.decode() if ev.error_type else None)

    def _release(self) -> None:
        if self.response is not None:
            self.response._release()


class Interceptor:
    """An engine interceptor (``courier_config_add_interceptor``). Subclass and override either
    method, or pass functions.

    * ``before_send(outgoing)`` adapts every final request, on the sending thread;
    * ``after_receive(request_id, response)`` sees each response a transport produced, on the
      worker thread, and may return a :class:`courier.Answer` to replace it, or raise (a
      :class:`courier.CourierError` fails the request with its code).
    """

    def __init__(self, before_send: Optional[Callable[..., Any]] = None,
                 after_receive: Optional[Callable[..., Any]] = None) -> None:
        if before_send is not None:
            self.before_send = before_send  # type: ignore[method-assign]
        if after_receive is not None:
            self.after_receive = after_receive  # type: ignore[method-assign]

    before_send: Optional[Callable[..., Any]] = None
    after_receive: Optional[Callable[..., Any]] = None


class CourierFuture(concurrent.futures.Future):
    """The future of :meth:`Engine.send_async`. ``result()`` returns the :class:`Response` or
    raises the request's :class:`courier.CourierError`. :meth:`cancel` cancels the request in the
    engine (``courier_cancel``): the future then ends with :class:`courier.Cancelled` (which is
    also a ``concurrent.futures.CancelledError``) unless the request completed first."""

    request_id: int = 0

    def __init__(self, engine: "Engine") -> None:
        super().__init__()
        self._engine_ref = weakref.ref(engine)

    def cancel(self) -> bool:
        eng = self._engine_ref()
        if eng is None or self.done() or not self.request_id:
            return False
        return eng.cancel(self.request_id)


class _SendContext:
    """One send: where its callbacks' exceptions are kept, and how it completes."""

    __slots__ = ("engine", "exc", "future", "callback")

    def __init__(self, engine: "Engine", future: Optional[CourierFuture] = None,
                 callback: Optional[Callable[..., Any]] = None) -> None:
        self.engine = engine
        self.exc: Optional[BaseException] = None
        self.future = future
        self.callback = callback

    def keep(self, exc: BaseException, request_id: int = 0) -> None:
        if self.exc is None:
            self.exc = exc

    def _outcome(self, code: int, response: Optional[int],
                 error: Optional[int]) -> tuple[Optional[Response], Optional[BaseException]]:
        """The completed send's response and exception (None when it succeeded), on the worker
        (from the ctypes trampoline or courier._speedups): ``error`` is the address of the
        borrowed ``courier_error`` (None on success), read before the completion returns."""
        eng = self.engine
        tid = threading.get_ident()
        if tid not in eng._callback_threads:
            eng._callback_threads.add(tid)
            cb.request_pin(eng)
        resp = Response(response) if response else None
        exc = self.exc  # what a callback raised for this send
        if code != 0:
            err = ERROR.from_address(error) if error else None
            if exc is None:
                exc = cb.user_error(err)  # released when the completion returns
            cerr = make_error(code, err, resp)
            if exc is None:
                exc = cerr
            elif exc.__context__ is None:
                exc.__context__ = cerr
        return resp, exc

    def _complete(self, request_id: int, code: int, response: Optional[int], error: Optional[int]) -> None:
        resp, exc = self._outcome(code, response, error)
        fut = self.future
        if fut is not None and not fut.request_id:
            fut.request_id = request_id
        raised = None
        if self.callback is not None:
            try:
                self.callback(resp if exc is None else None, exc)
            except BaseException as e:  # kept: result() re-raises it
                raised = e
                if exc is not None and e is not exc and e.__context__ is None:
                    e.__context__ = exc
                exc = e
        if fut is not None:
            if exc is None:
                fut.set_result(resp)
            else:
                fut.set_exception(exc)
        elif raised is not None:
            cb.orphan(raised)


_live_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # no engine thread may call into Python once the interpreter finalizes
    for eng in list(_live_engines):
        try:
            eng._close(raise_kept=False)
        except Exception:  # pragma: no cover
            pass


def _wait_group(group: "Group", timeout: Optional[float]) -> "GroupResult":
    with group:
        try:
            return group.wait(timeout)
        except TimeoutError:
            group.cancel()
            raise


def default_app_id() -> Optional[str]:
    """The app id an engine opened without ``store`` or ``app_id`` names its default store with:
    the program's own name, as the C core takes a compiled program's. For Python the process is
    the interpreter (the core would name every script's store ``python3``), so it is the main
    script's: ``python3 notes.py`` and ``python3 /x/notes.pyw`` give ``notes``, ``python3 -m
    tools.sync`` gives ``tools.sync`` (``python3 -m tools``: ``tools``), a directory or zip app
    (``python3 notes.pyz``) gives ``notes``, a console script installed by pip its command's name.
    None when no script runs: the interactive prompt, ``python3 -c``, a program read from stdin, a
    notebook, an application embedding Python; its engines then keep a temporary store."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if isinstance(name, str) and name and name != "__main__":  # python -m pkg.mod
        return name[:-len(".__main__")] if name.endswith(".__main__") else name
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not path or path.startswith("<"):  # -c, stdin ("<stdin>"), the REPL
        return None
    stem, ext = os.path.splitext(os.path.basename(path))
    if stem == "__main__":  # python3 app.pyz, python3 appdir/
        stem, ext = os.path.splitext(os.path.basename(os.path.dirname(os.path.abspath(path))))
    if ext.lower() not in ("", ".py", ".pyw", ".pyc", ".pyz"):
        stem += ext
    # what courier_config_set_app_id refuses ('/' cannot be in a file name)
    if stem in ("", ".", "..") or len(os.fsencode(stem)) > 255:
        return None
    return stem


def _ms(seconds: Optional[float]) -> int:
    return max(0, int(round(float(seconds or 0) * 1000)))


class Engine:
    """A Courier engine (``courier_engine``): one worker thread, its connections, its store.

    The engine's threads are named for ``top -H``, ``ps -L``, perf and gdb: ``courier-worker`` (the
    transport, where callbacks run), ``courier-journal`` (frozen requests) and, when they run,
    ``courier-net``, ``courier-probe`` and ``courier-json``.

    >>> with courier.Engine(base_url="http://127.0.0.1:8080", timeout=5) as engine:
    ...     r = engine.get("/json", params={"q": "x"})
    ...     print(r.status, r.json())

    Thread-safe: share one engine between threads. Close it with :meth:`close` or a ``with``
    block (``__del__`` closes a forgotten engine as a safety net). Every keyword maps to a
    ``courier_config_set_*`` of the same meaning; times are seconds (floats).

    Args:
        base_url: joined to relative request paths.
        store: the store directory (cache, cookies, journal); default the durable default store
            named by ``app_id`` ($XDG_DATA_HOME/<app id>/courier, else
            ~/.local/share/<app id>/courier; Application Support on Darwin), or with
            ``temporary_store=True`` a private temporary one removed at close.
        app_id: names the default store ("com.example.notes"). Default: the main script's name
            (:func:`courier.default_app_id`: ``notes`` for ``python3 notes.py``, ``tools.sync``
            for ``python3 -m tools.sync``), so two scripts never share cookies, cache or frozen
            requests by accident; without a script (the interactive prompt, ``python3 -c``, stdin,
            a notebook) the engine keeps a temporary store, as with ``temporary_store=True``.
            Engines of one app id share the store, across processes and languages.
        temporary_store: True for a temporary store (tests, demos, one-shot scripts): frozen
            requests then do not outlive the engine, and freezing logs a warning.
        stream_buffer_bytes: the most unread body a stream (:meth:`stream`) holds before its
            transfer pauses (>= 16 KiB; default 1 MiB).
        store_must_exist: True opens only a store that exists: when the store directory (``store``,
            or the default store of ``app_id``) is missing, opening raises ``StoreError`` ("no
            store at ...") and creates nothing (for scripts that inspect or clean a store).
        timeout: default timeout of a request, whole transfer (seconds > 0, rounded up to whole
            milliseconds; 0 or less is refused with :class:`courier.InvalidArgument`, as in C and
            Swift). A refused keyword is named at the start of the error's message.
        headers, params: added to every request.
        user_agent, max_connections_per_host, max_connections, body_encoding ("form"/"json"),
        max_response_bytes, ca_file, pinned_public_key, insecure: transport settings.
        validator: ``fn(response) -> bool`` for requests without their own.
        retry: a :class:`courier.Retry` for every request.
        frequent_guard: a window in seconds refusing identical requests (:class:`courier.TooFrequent`).
        mock: the mock switch (requests with a ``mock=`` answer are then not sent).
        stubs, stub_mode: :class:`courier.Stub` objects the engine starts with, and whether it
            answers from stubs (``"off"``, the default; ``"only"``: an unmatched request raises
            :class:`courier.NoStub`; ``"pass-through"``: it goes to the network); ``engine.stubs``
            changes both at run time (:mod:`courier.stubs`).
        interceptors: :class:`Interceptor` objects, in order.
        cache: default cache policy (:class:`CachePolicy`); cache_store (a directory, LMDB, or a
        ``redis://[[user]:password@]host[:port][/db]`` URL: a Redis cache shared by every engine that
        names it; :class:`courier.RedisError` from the manager when Redis is down; opened with the
        engine, as is the cache of a default ``cache`` policy: :class:`courier.StoreError` when it
        cannot be opened, :class:`courier.InvalidArgument` for a mistyped URL such as
        ``"redis//host"``), cache_expiry (s),
        cache_max_bytes, cache_durability, clock (``fn() -> seconds since the epoch``, for tests of expiry),
        cache_status_header (responses carry a ``Cache-Status`` field, RFC 9211).
        envelope: a :class:`courier.Envelope`; json_types: MIME types decoded as JSON;
        decoders: ``{mime: fn(body, content_type) -> python value}``.
        frozen_replay: (concurrency, backoff base s, backoff max s); frozen_expiry, frozen_lease,
        frozen_poll (s); frozen_paused; frozen_replicas: (replicas, timeout s): a freeze on a Redis
        journal is acknowledged only once that many replicas have it (``WAIT``), else the send
        raises :class:`courier.ReplicasUnconfirmed`; frozen_store: where the journal lives, apart from the
        cache: a directory (LMDB; default the engine's store) or ``"redis://host:port/db"`` (Redis
        Streams, shared by every engine naming it; ``#name`` at the end keeps journals apart; Redis
        down does not fail the open: the ``frozen`` calls raise :class:`courier.RedisError` and a
        send that would be frozen raises its own error until Redis answers).
        reachability: dict(from_errors=bool, probe=str, interval=s).
        transports: ``{name: courier.Transport}`` custom transports (requests choose one with
        ``transport=name``).
        log_level: the engine's :class:`LogLevel` (set after ``logger``'s levels: it wins).
        logger: the engine's lines into Python's ``logging`` (:mod:`courier.logs`): ``True`` to the
            logger ``courier`` and its children per component (``courier.cache``...), a name or a
            ``logging.Logger`` to that one, ``False`` never; ``None`` (the default) to ``courier``
            when the application has configured logging (the root logger has a handler, or
            ``courier`` has a handler or a level). A logger given sets the engine's levels from
            its effective levels; the automatic mode only raises them where a logger wants more
            (:meth:`sync_log_levels` reads them again).
        tracing: OpenTelemetry client spans per request, with ``traceparent`` injected
            (:mod:`courier.otel`; needs the ``courier[otel]`` extra): ``True`` with the global
            tracer provider, or a ``TracerProvider``.
        follow_redirects (default True), max_redirects (default 20), allow_redirect_downgrade
        (HTTPS to HTTP; default False), redirect_hook (``fn(response, next) -> None/"follow",
        "stop" or False/"refuse"``, may change ``next``, a :class:`courier.Outgoing`): redirects,
        followed hop by hop by the engine. Not following returns the 3xx as the response.
        connect_timeout, idle_timeout (s; 0 none, the default): with ``timeout`` (the total),
        the three timeouts; :class:`courier.Timeout` says which fired in ``timeout_kind``.
        cookies: the cookie jar (on by default; kept in the store, shared with other engines and
        processes on it); False turns it off.
        credentials: ``(user, password[, schemes])`` for every request without its own (schemes:
        :class:`courier.AuthScheme`, default ``ANY``); sent to the request's own origin only.
        challenge_handler: ``fn(Challenge) -> credentials | None | Future`` asked once per request for a 401
        from its origin or a 407 from its proxy (see :class:`courier.Challenge`).
        proxy: "http://", "https://", "socks5://" or "socks5h://host:port", "" for none (direct);
        unset: the environment's. no_proxy: hosts, addresses and CIDR ranges that go direct.
        proxy_credentials: ``(user, password[, schemes])`` for the proxy.
        param_charset: the charset query and form parameters are written in ("GBK", "Shift_JIS",
            "ISO-8859-1", ... any iconv name; default UTF-8): :class:`courier.UnknownCharset` for a
            name iconv does not know, :class:`courier.CharsetError` at send for a character it
            cannot hold. ``Response.text`` decodes by the response's own charset.
        security: a :class:`courier.Security` policy (pinning, the two verification switches, a CA
            file, a client certificate) for every request; replaces ca_file, pinned_public_key
            and insecure.
        network_watch: watch the operating system's network path (netlink on Linux): online or
            offline, its :class:`NetworkKind` and whether it is expensive (``Engine.network_path``).
        network_limits: ``{kind: (max_per_host, max_total, replay_concurrency)}`` holding while the
            path is of that kind (0 keeps the engine's own), applied at once when the kind changes.
        api_version: a path segment ("v5") put between the base URL and every relative path
        (HLNetworking's apiVersion), followed by "r" with ``api_review=True`` (the review build's).
        resolve: ``{"host:port": "addr,addr" or [addr, ...]}`` (or ``(host, port, addresses)``
            tuples): names answered with these addresses instead of the DNS (curl's --resolve).
        connect_to: ``{"host:port": "to_host:to_port"}`` (or 4-tuples): connections for host:port
            go there instead. With both, the URL's host stays the Host field and TLS's name.
        doh_url: resolve names over DNS-over-HTTPS at this https:// URL.
        dns_cache_lifetime: seconds a resolved name is kept (default 60; 0 not kept; -1 for ever).
        ip_version: :class:`IPVersion` (ANY, V4, V6). happy_eyeballs_delay: seconds the first
            address family leads by (0: libcurl's 0.2).
        unix_socket: every connection over this Unix-domain socket ("@name": a Linux abstract
            one); the URL still names the host. ``Response.metrics.remote_ip`` / ``remote_port``
            say where a connection went.
        http_version: :class:`HTTPVersion` (DEFAULT, V1_1, V2, V2_ONLY, V3, V3_ONLY) of every request.
        decode_content: False: bodies arrive as the server coded them (gzip, br, ...), with their
            Content-Encoding, and never through the cache (default True: decoded).
        max_idle_connections: connections the pool keeps open between requests (default
            max_connections); idle_connection_timeout: seconds after which an idle connection is
            closed rather than reused (default libcurl's 118).
        hsts: HTTP Strict Transport Security (on by default): a host that sent
            Strict-Transport-Security over https is reached over https:// even when a request (or a
            redirect) says http://, until its max-age passes; the list is kept in the store, shared by
            the engines and processes on it (:meth:`list_hsts`, :meth:`clear_hsts`,
            :meth:`preload_hsts`; ``Response.hsts_upgraded``). False: nothing learnt or upgraded.
        alt_svc: Alt-Svc (off by default): libcurl remembers what https responses advertise, in the
            file "alt-svc.txt" of the store directory, and later connections go to the alternative.
        adapters: ``fn(outgoing)`` functions run in order before each attempt of every request; they
            may change its URL, method, headers and body (``outgoing.body``, ``outgoing.body_file``),
            and may be coroutine functions (awaited on the :class:`courier.AsyncEngine`'s loop) or
            return a Future; the attempt waits off the wire meanwhile. An exception fails the request
            with it (see :mod:`courier.session`).
        retriers: ``fn(courier.RetryQuestion) -> None/False | True | seconds`` asked in order after a
            failure the ``retry`` rule did not retry (the rule first, then the retriers); never after
            a cancel. Coroutine functions and Futures too.
        authenticator: a :class:`courier.Authenticator`: the credential applied to each request of its
            origin, refreshed once however many requests get a 401 (:meth:`set_credential` replaces it).
    """

    def __init__(self, base_url: Optional[str] = None, *, store: Union[str, os.PathLike, None] = None,
                 app_id: Optional[str] = None, temporary_store: bool = False,
                 store_must_exist: bool = False, stream_buffer_bytes: Optional[int] = None,
                 timeout: Optional[float] = None, headers: HeadersArg = None, params: Params = None,
                 user_agent: Optional[str] = None, max_connections_per_host: Optional[int] = None,
                 max_connections: Optional[int] = None, body_encoding: Union[BodyEncoding, str, None] = None,
                 max_response_bytes: Optional[int] = None, ca_file: Optional[str] = None,
                 pinned_public_key: Optional[str] = None, insecure: bool = False,
                 validator: Optional[Callable[[Response], bool]] = None, retry: Optional[Retry] = None,
                 frequent_guard: Optional[float] = None, mock: Optional[bool] = None,
                 stubs: Sequence[Stub] = (), stub_mode: Union[StubMode, str, None] = None,
                 interceptors: Sequence[Interceptor] = (), cache: Union[CachePolicy, str, int, None] = None,
                 cache_store: Optional[str] = None,
                 cache_expiry: Optional[float] = None, cache_max_bytes: Optional[int] = None,
                 cache_durability: Union[CacheDurability, str, int, None] = None,
                 clock: Optional[Callable[[], float]] = None,
                 cache_status_header: bool = False,
                 envelope: Any = None, json_types: Iterable[str] = (),
                 decoders: Optional[Mapping[str, Callable[[bytes, Optional[str]], Any]]] = None,
                 json_max_depth: Optional[int] = None,
                 frozen_replay: Optional[tuple[int, float, float]] = None,
                 frozen_expiry: Optional[float] = None, frozen_lease: Optional[float] = None,
                 frozen_poll: Optional[float] = None, frozen_paused: Optional[bool] = None,
                 frozen_replicas: Optional[tuple[int, float]] = None,
                 frozen_store: Optional[str] = None,
                 reachability: Optional[Mapping[str, Any]] = None,
                 transports: Optional[Mapping[str, Any]] = None,
                 log_level: Union[LogLevel, str, int, None] = None,
                 logger: Union[bool, str, logging.Logger, None] = None, tracing: Any = False, follow_redirects: Optional[bool] = None,
                 max_redirects: Optional[int] = None, allow_redirect_downgrade: Optional[bool] = None,
                 redirect_hook: Optional[Callable[..., Any]] = None,
                 connect_timeout: Optional[float] = None, idle_timeout: Optional[float] = None,
                 cookies: bool = True, credentials: Credentials = None,
                 challenge_handler: Optional[Callable[[Challenge], Any]] = None, proxy: Optional[str] = None,
                 no_proxy: Optional[str] = None, proxy_credentials: Credentials = None,
                 param_charset: Optional[str] = None, security: Optional[Security] = None,
                 network_watch: bool = False,
                 network_limits: Optional[Mapping[Union[NetworkKind, str, int], tuple[int, int, int]]] = None,
                 api_version: Optional[str] = None, api_review: bool = False,
                 resolve: ResolveArg = None, connect_to: ConnectToArg = None, doh_url: Optional[str] = None,
                 dns_cache_lifetime: Optional[float] = None, ip_version: Union[IPVersion, str, int, None] = None,
                 happy_eyeballs_delay: Optional[float] = None,
                 unix_socket: Union[str, os.PathLike, None] = None,
                 http_version: Union[HTTPVersion, str, int, None] = None,
                 decode_content: Optional[bool] = None, max_idle_connections: Optional[int] = None,
                 idle_connection_timeout: Optional[float] = None, hsts: bool = True, alt_svc: bool = False,
                 adapters: Sequence[Callable[..., Any]] = (), retriers: Sequence[Callable[..., Any]] = (),
                 authenticator: Optional[Authenticator] = None) -> None:
        self._ptr: Optional[int] = None
        self._background: list[BaseException] = []
        self._callback_threads: set[int] = set()
        self._pinned: dict[int, int] = {}  # the worker's thread id -> its pinned Python thread state
        self._pin_requested = False  # _callbacks.request_pin: posted to the worker, once
        self._keep: list[Any] = []  # Python objects C borrows (mappings, envelopes)
        self._async_loop: Any = None  # session.py: the AsyncEngine loop that last sent
        self._lock = threading.Lock()
        cfg = c_void_p()
        check(lib.courier_config_new(byref(cfg)))
        c = cfg.value
        try:
            if base_url is not None:
                check(lib.courier_config_set_base_url(c, _b(base_url)), arg="base_url")
            for name, value in _pairs(headers):
                check(lib.courier_config_add_header(c, _b(name), _b(value)), arg="headers")
            for name, value in _pairs(params):
                check(lib.courier_config_add_param(c, _b(name), _b(value)), arg="params")
            if timeout is not None:
                check(lib.courier_config_set_timeout_ms(c, total_timeout_ms(timeout)), arg="timeout")
            if user_agent is not None:
                check(lib.courier_config_set_user_agent(c, _b(user_agent)), arg="user_agent")
            if max_connections_per_host is not None:
                check(lib.courier_config_set_max_connections_per_host(c, int(max_connections_per_host)), arg="max_connections_per_host")
            if max_connections is not None:
                check(lib.courier_config_set_max_connections(c, int(max_connections)), arg="max_connections")
            if body_encoding is not None:
                check(lib.courier_config_set_body_encoding(c, coerce(BodyEncoding, body_encoding, "body_encoding")), arg="body_encoding")
            if max_response_bytes is not None:
                check(lib.courier_config_set_max_response_bytes(c, int(max_response_bytes)), arg="max_response_bytes")
            if ca_file is not None:
                check(lib.courier_config_set_ca_file(c, _b(os.fspath(ca_file))), arg="ca_file")
            if pinned_public_key is not None:
                check(lib.courier_config_set_pinned_public_key(c, _b(pinned_public_key)), arg="pinned_public_key")
            if insecure:
                check(lib.courier_config_set_insecure(c, 1), arg="insecure")
            if param_charset is not None:
                check(lib.courier_config_set_param_charset(c, _b(param_charset)), arg="param_charset")
            if network_watch:
                check(lib.courier_config_set_network_watch(c, 1), arg="network_watch")
            for kind, (per_host, total, replay) in (network_limits or {}).items():
                check(lib.courier_config_set_network_limits(c, coerce(NetworkKind, kind, "network_limits"),
                                                            int(per_host), int(total), int(replay)), arg="network_limits")
            if security is not None:  # after ca_file, pinned_public_key, insecure: replaces them
                security._apply(lib.courier_config_set_security, c)
            if store is not None:
                check(lib.courier_config_set_store_dir(c, _b(os.fspath(store))), arg="store")
            if app_id is None and store is None and not temporary_store:
                app_id = default_app_id()  # the main script's name, not the interpreter's
                temporary_store = app_id is None  # no script: nothing outlives the engine
            if app_id is not None:
                check(lib.courier_config_set_app_id(c, os.fsencode(app_id) if isinstance(app_id, str) else app_id),
                      arg="app_id")
            if temporary_store:
                check(lib.courier_config_set_temporary_store(c, 1), arg="temporary_store")
            if store_must_exist:
                check(lib.courier_config_set_store_must_exist(c, 1), arg="store_must_exist")
            if stream_buffer_bytes is not None:
                check(lib.courier_config_set_stream_buffer_bytes(c, int(stream_buffer_bytes)), arg="stream_buffer_bytes")
            if validator is not None:
                key = cb.register(cb.Slot(validator, None, self))
                check(lib.courier_config_set_validator(c, c_validator, key, cb.user_free), arg="validator")
            if retry is not None:
                check(lib.courier_config_set_retry(c, *retry._args()), arg="retry")
            if frequent_guard is not None:
                check(lib.courier_config_set_frequent_guard_ms(c, _ms(frequent_guard)), arg="frequent_guard")
            if mock is not None:
                check(lib.courier_config_set_mock_enabled(c, 1 if mock else 0), arg="mock")
            for stub in stubs:
                cs = stub._make(self)
                try:
                    check(lib.courier_config_add_stub(c, cs), arg="stubs")
                finally:
                    lib.courier_stub_free(cs)
            if stub_mode is not None:
                check(lib.courier_config_set_stub_mode(c, int(coerce(StubMode, stub_mode, "stub_mode"))), arg="stub_mode")
            tracer = Tracing(None if tracing is True else tracing) if tracing else None
            for icpt in [*interceptors, *([tracer] if tracer is not None else [])]:  # tracing last
                if isinstance(icpt, tuple):
                    icpt = Interceptor(*icpt)
                fns = (getattr(icpt, "before_send", None), getattr(icpt, "after_receive", None))
                key = cb.register(cb.Slot(fns, None, self))
                check(lib.courier_config_add_interceptor(c, c_before_send if fns[0] else None,
                                                         c_after_receive if fns[1] else None, key,
                                                         cb.user_free), arg="interceptors")
            if cache is not None:
                check(lib.courier_config_set_cache_policy(c, coerce(CachePolicy, cache, "cache", allow_int=True)), arg="cache")
            if cache_store is not None:
                check(lib.courier_config_set_cache_store(c, _b(os.fspath(cache_store))), arg="cache_store")
            if cache_expiry is not None:
                check(lib.courier_config_set_cache_expiry_ms(c, int(round(cache_expiry * 1000))), arg="cache_expiry")
            if cache_max_bytes is not None:
                check(lib.courier_config_set_cache_max_bytes(c, int(cache_max_bytes)), arg="cache_max_bytes")
            if cache_durability is not None:
                check(lib.courier_config_set_cache_durability(
                    c, coerce(CacheDurability, cache_durability, "cache_durability")), arg="cache_durability")
            if cache_status_header:
                check(lib.courier_config_set_cache_status_header(c, 1), arg="cache_status_header")
            if clock is not None:
                key = cb.register(cb.Slot(clock, None, self, "seconds"))
                check(lib.courier_config_set_clock(c, cb.clock, key, cb.user_free), arg="clock")
            if envelope is not None:
                check(lib.courier_config_set_envelope(c, envelope._handle()), arg="envelope")
                self._keep.append(envelope)
            for mime in json_types:
                check(lib.courier_config_add_json_type(c, _b(mime)), arg="json_types")
            for mime, fn in (decoders or {}).items():
                key = cb.register(cb.Slot(fn, None, self))
                check(lib.courier_config_set_decoder(c, _b(mime), c_decoder, key, cb.user_free), arg="decoders")
            if json_max_depth is not None:
                opts = sized(JSON_OPTIONS)
                check(lib.courier_json_options_init(byref(opts)), arg="json_max_depth")
                opts.max_depth = int(json_max_depth)
                check(lib.courier_config_set_json_options(c, byref(opts)), arg="json_max_depth")
            if frozen_replay is not None:
                conc, base, mx = frozen_replay
                check(lib.courier_config_set_frozen_replay(c, int(conc), _ms(base), _ms(mx)), arg="frozen_replay")
            if frozen_expiry is not None:
                check(lib.courier_config_set_frozen_expiry_ms(c, _ms(frozen_expiry)), arg="frozen_expiry")
            if frozen_lease is not None:
                check(lib.courier_config_set_frozen_lease_ms(c, _ms(frozen_lease)), arg="frozen_lease")
            if frozen_poll is not None:
                check(lib.courier_config_set_frozen_poll_ms(c, _ms(frozen_poll)), arg="frozen_poll")
            if frozen_paused is not None:
                check(lib.courier_config_set_frozen_paused(c, 1 if frozen_paused else 0), arg="frozen_paused")
            if frozen_replicas is not None:
                n, timeout = frozen_replicas
                check(lib.courier_config_set_frozen_replicas(c, int(n), _ms(timeout)), arg="frozen_replicas")
            if frozen_store is not None:
                check(lib.courier_config_set_frozen_store(c, _b(frozen_store)), arg="frozen_store")
            if reachability is not None:
                r = dict(reachability)
                check(lib.courier_config_set_reachability(c, 1 if r.get("from_errors") else 0,
                                                          _opt(r.get("probe")), _ms(r.get("interval"))), arg="reachability")
            for name, transport in (transports or {}).items():
                tr = TRANSPORT(ctypes.sizeof(TRANSPORT), cb.ptr(c_transport_start), cb.ptr(c_transport_cancel))
                key = cb.register(cb.Slot(transport, None, self, {}))
                check(lib.courier_config_register_transport(c, _b(name), byref(tr), key, cb.user_free), arg="transports")
            if follow_redirects is not None:
                check(lib.courier_config_set_follow_redirects(c, 1 if follow_redirects else 0), arg="follow_redirects")
            if max_redirects is not None:
                check(lib.courier_config_set_max_redirects(c, int(max_redirects)), arg="max_redirects")
            if allow_redirect_downgrade is not None:
                check(lib.courier_config_set_allow_redirect_downgrade(c, 1 if allow_redirect_downgrade else 0), arg="allow_redirect_downgrade")
            if redirect_hook is not None:
                key = cb.register(cb.Slot(redirect_hook, None, self))
                check(lib.courier_config_set_redirect_hook(c, c_redirect, key, cb.user_free), arg="redirect_hook")
            if connect_timeout is not None:
                check(lib.courier_config_set_timeout(c, 1, timeout_ms(connect_timeout)), arg="connect_timeout")
            if idle_timeout is not None:
                check(lib.courier_config_set_timeout(c, 2, timeout_ms(idle_timeout)), arg="idle_timeout")
            self._cookies = bool(cookies)  # the httpx and requests adapters leave cookies to this jar
            if not cookies:
                check(lib.courier_config_set_cookies(c, 0), arg="cookies")
            if credentials is not None:
                check(lib.courier_config_set_credentials(c, *credentials_args(credentials)), arg="credentials")
            if proxy_credentials is not None:
                check(lib.courier_config_set_proxy_credentials(c, *credentials_args(proxy_credentials, "proxy_credentials")), arg="proxy_credentials")
            if proxy is not None:
                check(lib.courier_config_set_proxy(c, _b(proxy), _opt(no_proxy)), arg="proxy")
            if challenge_handler is not None:
                key = cb.register(cb.Slot(challenge_handler, None, self))
                check(lib.courier_config_set_challenge_handler(c, c_challenge, key, cb.user_free), arg="challenge_handler")
            if adapters or retriers or authenticator is not None:
                session_install(c, self, adapters, retriers, authenticator)
            if api_version is not None or api_review:
                check(lib.courier_config_set_api_version(c, _opt(api_version), 1 if api_review else 0), arg="api_version")
            netopts.apply_engine(c, resolve, connect_to, doh_url, dns_cache_lifetime, ip_version,
                                 happy_eyeballs_delay, unix_socket, http_version, decode_content,
                                 max_idle_connections, idle_connection_timeout)
            netopts.apply_hsts(c, hsts, alt_svc)
            out = c_void_p()
            err = ERROR()
            check(lib.courier_engine_open(byref(out), c, byref(err)), err)
            self._ptr = out.value
        finally:
            lib.courier_config_free(c)
        _live_engines.add(self)
        self._log_bridge: Optional[LogBridge] = bridge_for(logger)
        if self._log_bridge is not None:
            self._log_bridge.attach(self)
        if tracer is not None:
            tracer.attach(self)
        if log_level is not None:
            self.log_level = log_level  # type: ignore[assignment]

    # -- lifecycle ---------------------------------------------------------------------------------
    def _handle(self) -> int:
        p = self._ptr
        if not p:
            raise EngineClosed("the engine is closed")
        return p

    def keep(self, exc: BaseException, request_id: int = 0) -> None:
        """Where callbacks of this engine that cannot fail a send keep exceptions (see
        ``courier._callbacks``): ``close()`` re-raises the first. (A callback run for a send raises
        into the send's own slot in C instead: ``courier_raise``.)"""
        with self._lock:
            self._background.append(exc)

    def set_credential(self, credential: Optional[str], expires: Optional[float] = None) -> None:
        """Replaces the authenticator's credential (after a login; None after a logout) for the
        attempts that start afterwards; ``expires`` in seconds since the epoch
        (``courier_engine_set_credential``). :class:`courier.InvalidArgument` without an authenticator."""
        session_set_credential(self._handle(), credential, expires)

    def close(self) -> None:
        """Closes the engine: every request still queued or in flight completes with
        :class:`courier.Cancelled` before this returns. Then re-raises the first exception kept
        from a callback that belonged to no send (a monitor, a log sink, a listener), if any.
        Called from one of the engine's own callbacks, it returns at once and the engine cancels
        what is left after that callback returns."""
        self._close(raise_kept=True)

    def _close(self, raise_kept: bool) -> None:
        with self._lock:
            ptr = self._ptr
            self._ptr = None
        if ptr:
            cb.before_close(self, ptr)  # the worker's pinned thread state is deleted on the worker
            lib.courier_engine_close(ptr)  # joins the worker (from another thread), runs what was posted
            _live_engines.discard(self)
        if raise_kept and self._background:
            exc = self._background[0]
            self._background.clear()
            raise exc

    @property
    def closed(self) -> bool:
        return not self._ptr

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._close(raise_kept=exc is None)

    def __del__(self) -> None:
        try:
            if self._ptr:
                self._close(raise_kept=False)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"<courier.Engine {'closed' if self.closed else self.store_dir}>"

    @property
    def store_dir(self) -> str:
        """The engine's store directory."""
        return (lib.courier_engine_store_dir(self._handle()) or b"").decode()

    def pending(self) -> tuple[int, int]:
        """(queued, active): requests waiting to start and on the wire."""
        q, a = c_int64(), c_int64()
        check(lib.courier_engine_pending(byref(q), byref(a), self._handle()))
        return q.value, a.value

    def pool_figures(self) -> PoolFigures:
        """The connection pool now (``courier_pool_get_figures``): open, idle and in use, made and
        reused, by host and in all (:class:`courier.PoolFigures`). Raises :class:`courier.EngineClosed`
        once closed."""
        return pool_figures_of(self._handle())

    # -- cookies -----------------------------------------------------------------------------------
    def list_cookies(self) -> list[Cookie]:
        """The jar as the store has it now (``courier_cookies_list``), expired cookies left out."""
        out = c_void_p()
        err = ERROR()
        check(lib.courier_cookies_list(byref(out), self._handle(), byref(err)), err)
        try:
            items = []
            for i in range(lib.courier_cookie_list_count(out)):
                c = sized(COOKIE)
                check(lib.courier_cookie_list_at(byref(c), out, i))
                items.append(Cookie._from_c(c))
            return items
        finally:
            lib.courier_cookie_list_free(out)

    def set_cookie(self, cookie: Cookie) -> None:
        """Adds or replaces a cookie (same domain, path, name) and stores it; an expiry in the past
        removes it."""
        err = ERROR()
        c = cookie._c()
        check(lib.courier_cookies_set(self._handle(), byref(c), byref(err)), err)

    def remove_cookie(self, domain: str, name: str, path: str = "/") -> None:
        """Removes one cookie; :class:`courier.NotFound` when there is none."""
        err = ERROR()
        check(lib.courier_cookies_remove(self._handle(), _b(domain), _b(path), _b(name), byref(err)), err)

    def clear_cookies(self) -> int:
        """Empties the jar (and the store's); returns how many cookies went."""
        n = ctypes.c_int64()
        err = ERROR()
        check(lib.courier_cookies_clear(byref(n), self._handle(), byref(err)), err)
        return n.value

    # -- HSTS --------------------------------------------------------------------------------------
    def list_hsts(self) -> list[netopts.HSTSEntry]:
        """The known HSTS hosts as the store has them now (``courier_hsts_list``), expired ones left
        out, sorted by host. :class:`courier.InvalidArgument` when HSTS is off."""
        out = c_void_p()
        err = ERROR()
        check(lib.courier_hsts_list(byref(out), self._handle(), byref(err)), err)
        try:
            items = []
            for i in range(lib.courier_hsts_entries_count(out)):
                h = sized(HSTS_ENTRY)
                check(lib.courier_hsts_entries_at(byref(h), out, i))
                items.append(netopts.HSTSEntry((h.host or b"").decode("utf-8", "replace"),
                                               bool(h.include_subdomains), int(h.expires)))
            return items
        finally:
            lib.courier_hsts_entries_free(out)

    def clear_hsts(self) -> int:
        """Empties the HSTS list (in the store: for every engine and process on it); returns how
        many hosts went."""
        n = ctypes.c_int64()
        err = ERROR()
        check(lib.courier_hsts_clear(byref(n), self._handle(), byref(err)), err)
        return n.value

    def preload_hsts(self, path: Union[str, "os.PathLike[str]"]) -> int:
        """Adds the hosts of a file in curl's HSTS format (``[.]host "YYYYMMDD HH:MM:SS"`` or
        ``"unlimited"``; a leading "." means includeSubDomains); returns how many were added or
        changed. :class:`courier.NotFound` when there is no such file."""
        n = ctypes.c_int64()
        err = ERROR()
        check(lib.courier_hsts_preload(byref(n), self._handle(), os.fsencode(path), byref(err)), err)
        return n.value

    @property
    def mock_enabled(self) -> bool:
        """Whether the engine's mock switch is on (read from the core)."""
        return lib.courier_engine_mock_enabled(self._handle()) != 0

    @mock_enabled.setter
    def mock_enabled(self, on: bool) -> None:
        check(lib.courier_engine_set_mock_enabled(self._handle(), 1 if on else 0))

    @property
    def stubs(self) -> Stubs:
        """The engine's stubs (:class:`courier.Stubs`): add and remove them, the mode, the record of
        the requests they saw, HAR replay."""
        return Stubs(self)

    def record_har(self, path: Union[str, os.PathLike, None]) -> None:
        """Records every exchange from now on into a HAR 1.2 file (created or replaced now, complete
        after each entry; browsers' developer tools and Charles open it), after each attempt that
        received a response (network or stub; not a cache hit). ``None`` stops recording. Raises
        :class:`courier.InvalidArgument` when the file cannot be written."""
        err = ERROR()
        check(lib.courier_engine_record_har(self._handle(), _b(os.fspath(path)) if path is not None else None,
                                            byref(err)), err)

    # -- sending -----------------------------------------------------------------------------------
    def request(self, method: str, url: str, **kw: Unpack[RequestOptions]) -> Request:
        """A :class:`courier.Request` (not sent), e.g. for the cache manager or to send again."""
        return Request(method, url, **kw)

    def send(self, method: Union[str, Request], url: Optional[str] = None, **kw: Unpack[RequestOptions]) -> Response:
        """Sends a request and waits for its answer (``courier_send_sync``; the GIL is released
        while the engine works).

        ``method`` is an HTTP method (then ``url`` and keywords describe the request, as for
        :class:`courier.Request`) or a prepared :class:`courier.Request`.

        Keywords: ``params`` (query for GET/HEAD/DELETE, body otherwise), ``headers``, ``body``
        (bytes/str) with ``content_type``, ``json`` (a JSON body), ``form`` (a form body from a
        dict), ``parts`` (multipart, :class:`courier.Part`), ``body_file``, ``timeout`` (s),
        ``auth`` (user, password), ``token``, ``validator(response) -> bool``,
        ``customize(outgoing)``, ``priority``, ``retry`` (:class:`courier.Retry`), ``coalesce``,
        ``frequent_guard``, ``mock`` (:class:`courier.Mock`), ``download`` (a path) with
        ``resume``, ``progress(Progress)``, ``cache`` (a :class:`CachePolicy`), ``cache_expiry``,
        ``cache_key``, ``cache_sensitive_data``, ``cache_key_filter``, ``freeze``,
        ``ignore_offline``, ``key_path``, ``mapping``, ``results``, ``envelope``, ``transport``,
        ``follow_redirects``, ``max_redirects``, ``allow_redirect_downgrade``,
        ``redirect_hook(response, next)``, ``connect_timeout`` and ``idle_timeout`` (s),
        ``credentials`` and ``challenge_handler`` (as the engine's, for this request), ``proxy`` with
        ``no_proxy``, ``proxy_credentials``, ``param_charset`` (the parameters' charset, as the
        engine's), ``security`` (a :class:`courier.Security` replacing the engine's for this request),
        ``allow_cellular`` (False: :class:`courier.CellularNotAllowed` while the path is cellular),
        ``adapters`` and ``retriers`` (run after the engine's), ``authenticated`` (False: the engine's
        authenticator leaves this request alone: a refresh's own request to its origin).

        Returns the :class:`Response` (status < 400). Raises the :class:`courier.CourierError`
        subclass of the failure (:class:`courier.HTTPStatusError` with ``.response`` for >= 400),
        or the exception a callback of this send raised.
        """
        req = method if isinstance(method, Request) else Request(method, url or "", **kw)
        if isinstance(method, Request) and (url is not None or kw):
            raise TypeError("send(Request) takes no other arguments")
        h = self._handle()
        ctx = _SendContext(self)
        creq, owned = req._acquire(ctx, self)
        ext = _fast.ext
        err: Optional[ERROR]
        sends = cb.send_stack()  # the send in progress on this thread, for its callbacks
        sends.append(ctx)
        try:
            if ext is not None:  # the compiled path
                code, out, sent_err = ext.send_sync(h, creq)
                err = ERROR.from_buffer_copy(sent_err) if sent_err is not None else None
            else:
                cout = c_void_p()
                err = ERROR()
                code = lib.courier_send_sync(byref(cout), h, creq, byref(err))
                out = cout.value
        finally:
            sends.pop()
            if owned:
                lib.courier_request_free(creq)
        resp = Response(out) if out else None
        try:
            exc = ctx.exc or cb.user_error(err)  # what a callback raised for this send
            if exc is not None:
                if code != 0 and exc.__context__ is None:
                    exc.__context__ = make_error(code, err, resp)
                raise exc
            if code != 0:
                raise make_error(code, err, resp)
        finally:
            if err is not None:
                lib.courier_error_clear(byref(err))  # releases what err held
        assert resp is not None
        return resp

    # -- streamed responses -----------------------------------------------------------------------
    def _open_stream(self, method: Union[str, Request], url: Optional[str], kw: Any, waker: Any) -> int:
        req = method if isinstance(method, Request) else Request(method, url or "", **kw)
        if isinstance(method, Request) and (url is not None or kw):
            raise TypeError("stream(Request) takes no other arguments")
        h = self._handle()
        ctx = _SendContext(self)
        creq, owned = req._acquire(ctx, self)
        sends = cb.send_stack()
        sends.append(ctx)
        try:
            return open_stream(h, creq, waker)
        finally:
            sends.pop()
            if owned:
                lib.courier_request_free(creq)

    def stream(self, method: Union[str, Request], url: Optional[str] = None,
               **kw: Unpack[RequestOptions]) -> StreamResponse:
        """Sends a request and returns as soon as its head arrives, with the body to read as it
        arrives (``courier_stream_open``)::

            with engine.stream("GET", "/bytes/100000") as r:
                print(r.status)
                for chunk in r.iter_bytes():
                    ...

        Takes what :meth:`send` takes. What the engine does for a request applies until the body
        starts (interceptors, credentials, cookies, redirects, retries before the first byte of the
        body); the cache is not used; a request with ``freeze=`` or ``download=`` is refused
        (:class:`courier.InvalidArgument`). The engine keeps at most ``stream_buffer_bytes`` of
        unread body and pauses the transfer until the reader catches up. Any status is the
        reader's (no :class:`courier.HTTPStatusError`). The engine's default ``timeout`` does not
        bound a stream; a request's own does. Raises the failure when the request fails before its
        head (or what a callback of the request raised).
        """
        return wait_head(self._open_stream(method, url, kw, None))

    def events(self, url: Union[str, Request], **kw: Unpack[RequestOptions]) -> EventSource:
        """An event source (``text/event-stream``, ``courier_sse_open``): iterate it for its
        events as they arrive (:class:`courier.ServerSentEvent`: ``type``, ``data``,
        ``last_event_id``)::

            with engine.events("/sse") as source:
                for event in source:
                    print(event.type, event.data)

        A GET of ``url`` (with what :meth:`send` takes; no body, no ``freeze=``), parsed by the
        WHATWG HTML rules and reconnected as EventSource does: after a drop or a clean end, the
        server's ``retry`` time (else 3 s), then again with ``Last-Event-ID``. The iteration ends
        by raising: a 204 or another status than 200 (:class:`courier.HTTPStatusError`), a type
        other than ``text/event-stream`` (:class:`courier.InvalidResult`), ``close()``
        (:class:`courier.Cancelled`).
        """
        req = url if isinstance(url, Request) else Request("GET", url, **kw)
        if isinstance(url, Request) and kw:
            raise TypeError("events(Request) takes no other arguments")
        return self._open_events(req, None)

    def websocket(self, url: Union[str, Request], *, subprotocols: Optional[Sequence[str]] = None,
                  max_message_bytes: Optional[int] = None, ping_interval: Optional[float] = None,
                  ping_timeout: Optional[float] = None, close_timeout: Optional[float] = None,
                  handshake_timeout: Optional[float] = None, compression: bool = False,
                  max_receive_queue_bytes: Optional[int] = None, **kw: Unpack[RequestOptions]) -> WebSocket:
        """Opens a WebSocket (``courier_ws_open``; ``ws://``, ``wss://``, or a path joined with the
        base URL) and returns once its handshake ended::

            with engine.websocket("ws://127.0.0.1:8765/chat", subprotocols=["chat"]) as ws:
                ws.send("hello")
                for message in ws:          # str (text) or bytes (binary)
                    print(message)

        Takes the request options of :meth:`send` for the handshake (headers, credentials,
        security...; no body, no ``freeze=``). ``max_message_bytes`` (default 1 MiB) bounds a
        received message; ``ping_interval`` (seconds, default none) sends keepalive pings, a pong
        not back within ``ping_timeout`` (default: the interval) failing the connection;
        ``close_timeout`` (default 10) bounds the wait for the server's close;
        ``handshake_timeout`` the connection and handshake (default: the request's timeout, else 30).
        ``compression=True`` offers permessage-deflate (RFC 7692; :attr:`WebSocket.extensions` says
        what the server agreed); ``max_receive_queue_bytes`` (default 16 MiB) bounds what waits
        unread: past it the socket is left unread until the reader catches up.
        Raises :class:`courier.WebSocketHandshakeError` (no 101: ``http_status``; a wrong accept,
        a subprotocol not offered) or the connection's failure.
        """
        req = url if isinstance(url, Request) else Request("GET", url, **kw)
        if isinstance(url, Request) and kw:
            raise TypeError("websocket(Request) takes no request options")
        options = make_options(subprotocols, max_message_bytes, ping_interval, ping_timeout, close_timeout,
                               handshake_timeout, compression, max_receive_queue_bytes)
        waker = sync_waker()
        return wait_open(self._open_ws(req, options, waker), waker)

    def _open_ws(self, req: Request, options: Any, waker: Any) -> int:
        h = self._handle()
        creq, owned = req._acquire(_SendContext(self), self)
        try:
            return open_ws(h, creq, options, waker)
        finally:
            if owned:
                lib.courier_request_free(creq)

    def _open_events(self, req: Request, waker: Any) -> EventSource:
        h = self._handle()
        creq, owned = req._acquire(_SendContext(self), self)
        try:
            return open_events(h, creq, self, waker)
        finally:
            if owned:
                lib.courier_request_free(creq)

    # -- the API catalogue, routes, response descriptors -------------------------------------------
    def add_api(self, name: str, declaration: Mapping[str, Any]) -> None:
        """Declares API ``name`` ("home.feed"; dots separate modules) on this engine
        (``courier_engine_add_api``): ``declaration`` is a dict in the header's words
        (``{"method": "GET", "path": "/feed/:kind", "params": {...}, "cache_policy": "cache_first",
        "key_path": "data", ...}``, docs/design/catalog.md lists them). Use it with :meth:`api` or
        :meth:`courier.Request.api`. Raises :class:`courier.CatalogError` for a bad shape."""
        doc = python_to_json(dict(declaration))
        err = ERROR()
        try:
            code = lib.courier_engine_add_api(self._handle(), _b(name), doc, byref(err))
        finally:
            lib.courier_json_free(doc)
        check(code, err)

    def load_apis(self, catalogue: Union[str, bytes, Mapping[str, Any]]) -> int:
        """Loads a catalogue (``{"apis": {"home": {"feed": {...}}}, "routes": [...]}``) from JSON
        text or a dict, all or nothing (``courier_engine_load_apis``). Returns the number of APIs
        declared. Raises :class:`courier.JSONError` (not JSON) or :class:`courier.CatalogError`."""
        if isinstance(catalogue, Mapping):
            catalogue = _json.dumps(catalogue)
        data = catalogue.encode("utf-8") if isinstance(catalogue, str) else bytes(catalogue)
        n = c_size_t()
        err = ERROR()
        check(lib.courier_engine_load_apis(byref(n), self._handle(), data, len(data), byref(err)), err)
        return n.value

    def load_api_file(self, path: Union[str, os.PathLike]) -> int:
        """:meth:`load_apis` from a file (``courier_engine_load_api_file``)."""
        n = c_size_t()
        err = ERROR()
        check(lib.courier_engine_load_api_file(byref(n), self._handle(), _b(os.fspath(path)), byref(err)), err)
        return n.value

    def api_names(self) -> list[str]:
        """The declared API names, sorted."""
        out = c_void_p()
        check(lib.courier_engine_api_names(byref(out), None, self._handle()))
        try:
            return list(_json.loads(ctypes.string_at(out.value).decode("utf-8")))
        finally:
            lib.courier_free(out)

    def api(self, name: str, **kw: Unpack[RequestOptions]) -> Response:
        """Sends API ``name`` from the catalogue with this use's options added
        (``engine.api("home.feed", params={"page": "2"})``; ``object=`` fills a path's
        parameters; without it, a path with parameters raises :class:`courier.RouteParameterError`).
        Raises :class:`courier.UnknownName` for an undeclared name."""
        return self.send(Request.api(name, **kw))

    def add_route(self, path_pattern: str, *, name: Optional[str] = None, object_type: Optional[str] = None,
                  method: Optional[str] = None) -> None:
        """A route (``courier_engine_add_route``): ``path_pattern`` ("/users/:id/photos") under a
        ``name``, or for ``object_type`` and ``method`` (None: any). Use it with
        :meth:`courier.Request.route` / :meth:`courier.Request.for_object`."""
        err = ERROR()
        check(lib.courier_engine_add_route(self._handle(), _opt(name), _opt(object_type), _opt(method),
                                           _b(path_pattern), byref(err)), err)

    def add_response_descriptor(self, path_pattern: Optional[str] = None, *, method: Optional[str] = None,
                                status_codes: Optional[tuple[int, int]] = None, key_path: Optional[str] = None,
                                mapping: Any = None) -> None:
        """A response descriptor (``courier_engine_add_response_descriptor``): for requests of
        ``method`` (None: any) whose path matches ``path_pattern`` (None: any), a response whose
        status is within ``status_codes`` (lo, hi; None: the C core's default, 200..299) gets
        ``key_path`` and ``mapping``: a success
        as its data (when the request has no key path or mapping of its own), an error body as the
        error model (``error.response.data()`` of the :class:`courier.HTTPStatusError`)."""
        if mapping is not None:
            self._keep.append(mapping)
        err = ERROR()
        lo, hi = status_codes if status_codes is not None else (0, 0)  # 0, 0: the core's default
        check(lib.courier_engine_add_response_descriptor(
            self._handle(), _opt(method), _opt(path_pattern), int(lo), int(hi), _opt(key_path),
            mapping._handle() if mapping is not None else None, byref(err)), err)

    def get(self, url: str, **kw: Unpack[RequestOptions]) -> Response:
        """``send("GET", url, ...)``."""
        return self.send("GET", url, **kw)

    def head(self, url: str, **kw: Unpack[RequestOptions]) -> Response:
        return self.send("HEAD", url, **kw)

    def post(self, url: str, **kw: Unpack[RequestOptions]) -> Response:
        return self.send("POST", url, **kw)

    def put(self, url: str, **kw: Unpack[RequestOptions]) -> Response:
        return self.send("PUT", url, **kw)

    def patch(self, url: str, **kw: Unpack[RequestOptions]) -> Response:
        return self.send("PATCH", url, **kw)

    def delete(self, url: str, **kw: Unpack[RequestOptions]) -> Response:
        return self.send("DELETE", url, **kw)

    def send_async(self, method: Union[str, Request], url: Optional[str] = None, *,
                   callback: Optional[Callable[[Optional[Response], Optional[BaseException]], None]] = None,
                   **kw: Unpack[RequestOptions]) -> CourierFuture:
        """Sends a request without waiting (``courier_send``). Returns a :class:`CourierFuture`
        whose ``request_id`` names the request (for :meth:`cancel`).

        ``callback(response, error)`` (optional) runs once on the engine's worker thread when the
        request completes, with exactly one of the two set; it must not block for long or close
        the engine. An exception it raises becomes the future's exception."""
        fut = CourierFuture(self)
        rid = self._send(method, url, kw, _SendContext(self, fut, callback))
        if not fut.request_id:
            fut.request_id = rid
        return fut

    def submit(self, method: Union[str, Request], url: Optional[str] = None, *,
               callback: Callable[[Optional[Response], Optional[BaseException]], None], **kw: Unpack[RequestOptions]) -> int:
        """Sends a request without waiting and without a future: ``callback(response, error)``
        runs once on the engine's worker thread (as for :meth:`send_async`; an exception it
        raises is printed, since nothing waits for it). Returns the request id (for
        :meth:`cancel`). The lightest way to keep many requests in flight."""
        return self._send(method, url, kw, _SendContext(self, None, callback))

    def _send(self, method: Union[str, Request], url: Optional[str], kw: Mapping[str, Any], ctx: "_SendContext",
              via: Optional[Callable[[int, int, Any], Any]] = None) -> int:
        """Sends with ``courier_send``; ``ctx._complete`` runs the completion. ``via``: on the
        compiled path, the send to use instead of ``_speedups.send`` (an asyncio loop's
        ``Waker.send``, whose completion hands a success to the loop without the GIL)."""
        req = method if isinstance(method, Request) else Request(method, url or "", **kw)
        h = self._ptr
        if not h:
            self._handle()  # raises EngineClosed
        # Request._acquire's first case without its call (the hot path of every submit): this
        # thread's C request of a request without callbacks, unchanged since it was built
        held = req.__dict__.get("_held")
        held = held.get(threading.get_ident()) if held is not None else None
        if held is not None and held.version == req._version:
            creq, owned = held.ptr, False
        else:
            creq, owned = req._acquire(ctx, self)
        ext = _fast.ext
        sends = getattr(cb._tls, "stack", None)  # the send in progress on this thread, for its callbacks
        if sends is None:
            sends = cb.send_stack()
        if ext is not None:  # the compiled path: C holds ctx itself until the completion
            sends.append(ctx)
            try:
                sent = (via or ext.send)(h, creq, ctx)
            finally:
                sends.pop()
                if owned:
                    lib.courier_request_free(creq)
            if sent.__class__ is int:
                return sent
            err = ERROR.from_buffer_copy(sent)  # owns what the failure holds (cleared below)
            code = err.code
        else:
            key = cb.register(ctx)
            rid = c_uint64()
            err = ERROR()
            sends.append(ctx)
            try:
                code = lib.courier_send(byref(rid), h, creq, cb.completion, key, byref(err))
            finally:
                sends.pop()
                if owned:
                    lib.courier_request_free(creq)
            if code != 0:
                cb.unregister(key)
        if code != 0:
            try:
                exc = ctx.exc or cb.user_error(err)  # what a customize hook or interceptor raised
                if exc is not None:
                    raise exc
                raise make_error(code, err)
            finally:
                lib.courier_error_clear(byref(err))  # releases what err held
        return rid.value

    def cancel(self, request_id: int) -> bool:
        """Cancels a request by id: it completes with :class:`courier.Cancelled` (unless it
        completes otherwise first). False when the id is unknown or already completed."""
        return lib.courier_cancel(self._handle(), c_uint64(request_id)) == 0

    def cancel_all(self) -> None:
        """Cancels every request the engine holds."""
        check(lib.courier_cancel_all(self._handle()))

    # -- groups ------------------------------------------------------------------------------------
    def group(self, mode: Union["GroupMode", str, int] = "batch", *, fail_fast: bool = False,
              max_in_flight: int = 0, on_member: Optional[Callable[["GroupMember"], None]] = None) -> "Group":
        """A new, empty :class:`courier.Group` on this engine (``courier_group_new``)."""
        return Group(self, mode, fail_fast=fail_fast, max_in_flight=max_in_flight, on_member=on_member)

    def batch(self, members: Sequence["Member"], *, fail_fast: bool = False, max_in_flight: int = 0,
              continue_on_failure: bool = False, timeout: Optional[float] = None,
              on_member: Optional[Callable[["GroupMember"], None]] = None) -> "GroupResult":
        """Sends ``members`` (:class:`courier.Request` s, ``(method, url)`` pairs) concurrently, at
        most ``max_in_flight`` at once (0: no limit of the group's own), and waits until all are
        done (``timeout``: at most that long, then the group is cancelled and ``TimeoutError``
        raised). With ``fail_fast`` the first failure cancels the rest. Returns the
        :class:`courier.GroupResult`; member failures do not raise (``result.raise_for_error()``)."""
        return _wait_group(run(self, GroupMode.BATCH, members, fail_fast=fail_fast, max_in_flight=max_in_flight,
                               continue_on_failure=continue_on_failure, on_member=on_member), timeout)

    def chain(self, members: Sequence["Member"], *, continue_on_failure: bool = False,
              timeout: Optional[float] = None,
              on_member: Optional[Callable[["GroupMember"], None]] = None) -> "GroupResult":
        """Sends ``members`` one after another; a member may be a function
        ``build(previous: GroupMember | None) -> Request | None`` called when its turn comes (the
        previous member's result is lent for the call; None skips the member). A failure stops
        the chain unless ``continue_on_failure``. Waits and returns the
        :class:`courier.GroupResult` (see :meth:`batch`)."""
        return _wait_group(run(self, GroupMode.CHAIN, members, continue_on_failure=continue_on_failure,
                               on_member=on_member), timeout)

    # -- features ----------------------------------------------------------------------------------
    @property
    def cache(self) -> "Any":
        """The cache manager (:class:`courier.CacheManager`)."""
        return CacheManager(self)

    @property
    def frozen(self) -> "Any":
        """The frozen-request manager (:class:`courier.FrozenManager`)."""
        return FrozenManager(self)

    # logging and monitors
    @property
    def log_level(self) -> LogLevel:
        return LogLevel(lib.courier_log_get_level(self._handle()))

    @log_level.setter
    def log_level(self, level: Union[LogLevel, str, int]) -> None:
        check(lib.courier_log_set_level(self._handle(), coerce(LogLevel, level, "log_level")), arg="log_level")

    def log_set_field(self, name: str, value: Optional[str]) -> None:
        """A field added to every log line (None removes it)."""
        check(lib.courier_log_set_field(self._handle(), _b(name), _opt(value)), arg="name")

    def log_set_redaction(self, mode: Union[Redaction, str, int], params: Iterable[str] = ()) -> None:
        """How URLs are written in log lines (a :class:`Redaction` or its name), and more secret
        query parameter names."""
        check(lib.courier_log_set_redaction(self._handle(), coerce(Redaction, mode, "mode")), arg="mode")
        for p in params:
            check(lib.courier_log_redact_param(self._handle(), _b(p)), arg="params")

    def add_log_sink(self, fn: Callable[[int, str], None],
                     min_level: Union[LogLevel, str, int] = LogLevel.TRACE) -> int:
        """Adds a callback sink ``fn(level, line)`` (a JSON object per line); returns its id."""
        key = cb.register(cb.Slot(fn, None, self))
        sink = c_uint64()
        check(lib.courier_log_add_callback(byref(sink), self._handle(), coerce(LogLevel, min_level, "min_level"), cb.log, key, cb.user_free))
        return sink.value

    def add_log_file(self, path: Union[str, os.PathLike], min_level: Union[LogLevel, str, int] = LogLevel.TRACE,
                     max_bytes: int = setting_default(Setting.LOG_FILE_MAX_BYTES),
                     max_files: int = setting_default(Setting.LOG_FILE_MAX_FILES),
                     rotation: Union[LogRotation, str, int] = LogRotation.SIZE) -> int:
        """Appends log lines to a file (rotated past ``max_bytes``, 0: never; at most ``max_files``
        files kept; the defaults are the C core's; with ``rotation="daily"`` also when the UTC day
        changes on the engine's clock); returns the sink id. ``min_level`` (default ``trace``, as
        every sink's here and in Swift) only narrows what the engine's and its components' levels
        let through: a component set to debug shows its debug lines in the file."""
        sink = c_uint64()
        err = ERROR()
        check(lib.courier_log_add_rotating_file(byref(sink), self._handle(), coerce(LogLevel, min_level, "min_level"),
                                                _b(os.fspath(path)), int(max_bytes), int(max_files),
                                                coerce(LogRotation, rotation, "rotation"), byref(err)), err)
        return sink.value

    def log_set_component_level(self, component: Union[LogComponent, str, int], level: Union[LogLevel, str, int]) -> None:
        """One component's level, changeable while the engine runs (``log_level`` sets them all)."""
        err = ERROR()
        check(lib.courier_log_set_component_level(self._handle(), coerce(LogComponent, component, "component"),
                                                  coerce(LogLevel, level, "level"), byref(err)), err)

    def log_get_component_level(self, component: Union[LogComponent, str, int]) -> LogLevel:
        """One component's level."""
        out = ctypes.c_int()
        err = ERROR()
        check(lib.courier_log_get_component_level(byref(out), self._handle(), coerce(LogComponent, component, "component"),
                                                  byref(err)), err)
        return LogLevel(out.value)

    def add_log_stderr(self, min_level: Union[LogLevel, str, int] = LogLevel.TRACE) -> int:
        """Writes log lines to standard error; returns the sink id. ``min_level`` as
        :meth:`add_log_file`'s."""
        sink = c_uint64()
        check(lib.courier_log_add_stderr(byref(sink), self._handle(), coerce(LogLevel, min_level, "min_level")))
        return sink.value

    def remove_log_sink(self, sink: int) -> None:
        check(lib.courier_log_remove_sink(self._handle(), c_uint64(sink)), arg="sink")

    def sync_log_levels(self) -> None:
        """Sets the engine's and its components' levels again from the ``logging`` loggers the
        engine writes to (``Engine(logger=...)``), after their levels changed. Nothing without one."""
        if self._log_bridge is not None:
            self._log_bridge.sync(self)

    def log(self, level: Union[LogLevel, str, int], message: str, event: Optional[str] = None) -> None:
        """Writes a line of your own to the engine's sinks."""
        check(lib.courier_log_write(self._handle(), coerce(LogLevel, level, "level"), _opt(event), _b(message)), arg="level")

    def add_monitor(self, fn: Callable[[Event], None], kinds: Iterable[Union[EventKind, str, int]] = ()) -> int:
        """Adds an event monitor ``fn(event)`` for the given :class:`EventKind` s (all when
        empty). Runs on the worker thread, or the sending thread inside the send (WILL_SEND of a
        request frozen at once while offline; FINISHED of a send refused after the interceptors
        ran). Returns its id."""
        mask = 0
        for k in kinds:
            mask |= 1 << coerce(EventKind, k, "kinds")
        key = cb.register(cb.Slot(fn, None, self))
        mid = c_uint64()
        check(lib.courier_monitor_add(byref(mid), self._handle(), mask, c_monitor, key, cb.user_free))
        return mid.value

    def remove_monitor(self, monitor_id: int) -> None:
        check(lib.courier_monitor_remove(self._handle(), c_uint64(monitor_id)), arg="monitor_id")

    # reachability
    @property
    def reachability(self) -> Reachability:
        """The engine's view of the network."""
        return Reachability(lib.courier_reachability_status(self._handle()))

    def set_online(self) -> None:
        """The app's word: online (starts a replay of due frozen requests; while replay is paused, at
        ``frozen.resume()``)."""
        check(lib.courier_reachability_set_online(self._handle()))

    def set_offline(self) -> None:
        """The app's word: offline."""
        check(lib.courier_reachability_set_offline(self._handle()))

    @property
    def network_path(self) -> tuple[NetworkKind, bool]:
        """The path's :class:`NetworkKind` and whether it is expensive (``courier_reachability_path``)."""
        kind = ctypes.c_int()
        expensive = ctypes.c_int()
        check(lib.courier_reachability_path(byref(kind), byref(expensive), self._handle()))
        return NetworkKind(kind.value), bool(expensive.value)

    def report_network(self, status: Union[Reachability, str, int], kind: Union[NetworkKind, str, int],
                       expensive: bool = False) -> None:
        """A source's report, as the OS watch makes them (``courier_reachability_report``): status
        (UNKNOWN leaves online/offline as it is), kind, expensive. A change of kind applies its
        limits at once."""
        check(lib.courier_reachability_report(self._handle(), coerce(Reachability, status, "status"),
                                              coerce(NetworkKind, kind, "kind"), 1 if expensive else 0))

    def set_reachability_automatic(self) -> None:
        check(lib.courier_reachability_set_automatic(self._handle()))

    def add_reachability_listener(self, fn: Callable[[Reachability], None]) -> int:
        """``fn(status)`` on every change, on the engine's journal thread. Returns a token."""
        key = cb.register(cb.Slot(fn, None, self))
        tok = c_uint64()
        check(lib.courier_reachability_add_listener(byref(tok), self._handle(), c_reachability, key,
                                                    cb.user_free))
        return tok.value

    def remove_reachability_listener(self, token: int) -> None:
        check(lib.courier_reachability_remove_listener(self._handle(), c_uint64(token)), arg="token")


# ---------------------------------------------------------------------------------------------
# Trampolines that build an Event or a Reachability (see courier._callbacks)
# ---------------------------------------------------------------------------------------------

def _monitor(event: Any, user: Optional[int]) -> None:
    cb.deliver(user, lambda: Event._from_c(event.contents), on_worker=False)


def _reachability(status: int, user: Optional[int]) -> None:
    cb.deliver(user, lambda: Reachability(status))


c_monitor = cb.MONITOR_FN(_monitor)
c_reachability = cb.REACHABILITY_FN(_reachability)
