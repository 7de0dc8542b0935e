"""The cache manager: ``courier_cache_*`` over an engine's store.

The core decides keys, policies, expiry and eviction; these methods only call it. Requests are
described as for :meth:`courier.Engine.send` (a :class:`courier.Request`, or method + url +
keywords), since the key depends on the whole request (parameters, body, sensitive data...).
"""
from __future__ import annotations

import ctypes
import sys
from ctypes import byref, c_char_p, c_int, c_int64, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from . import _callbacks as cb
from ._lib import CACHE_ENTRY_INFO, CACHE_POLICY_CALLBACKS, CACHE_STATS, ERROR, EngineHandle, lib, sized
from .errors import NotFound, check, make_error
from .request import Request, _b
from .response import Response, c_cache_answer, c_cache_has, c_cache_should_write

if TYPE_CHECKING:  # pragma: no cover
    from .request import RequestOptions
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack

__all__ = ["CacheManager", "CacheStats", "CacheEntry"]


@dataclass(frozen=True)
class CacheStats:
    """``courier_cache_stats``: what this engine did since it opened, and the store's totals."""
    hits: int
    misses: int
    writes: int
    evictions: int
    revalidations: int
    stale_served: int
    write_failures: int
    bytes: int
    count: int
    max_bytes: int


@dataclass(frozen=True)
class CacheEntry:
    """One entry of :meth:`CacheManager.entries` (times in seconds since the epoch)."""
    key: str
    url: str
    id: str
    status: int
    size: int
    created: float
    expires: float


def _s(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


class CacheManager:
    """``engine.cache``: look up, write, list and purge cache entries. Thread-safe; shared by
    every engine and process that opens the same store."""

    def __init__(self, engine: EngineHandle) -> None:
        self._engine = engine

    def _call(self, fn: Callable[..., int], *args: Any, outs: tuple[Any, ...] = ()) -> None:
        # the header's order: out-parameters, the engine, inputs, the error last
        err = ERROR()
        code = fn(*outs, self._engine._handle(), *args, byref(err))
        if code != 0:
            raise make_error(code, err)

    def _with_request(self, request: Union[Request, str], url: Optional[str], kw: Mapping[str, Any],
                      use: Callable[[int], Any]) -> Any:
        req = request if isinstance(request, Request) else Request(request, url or "", **kw)
        creq, owned = req._acquire(None, self._engine)
        try:
            return use(creq)
        finally:
            if owned:
                lib.courier_request_free(creq)

    # -- by request ----------------------------------------------------------------------------
    def key(self, request: Union[Request, str], url: Optional[str] = None, **kw: Unpack[RequestOptions]) -> str:
        """The key text of a request (``courier_cache_key``)."""
        def use(creq: int) -> str:
            out = c_void_p()
            check(lib.courier_cache_key(byref(out), self._engine._handle(), creq))
            try:
                return ctypes.string_at(out.value).decode("utf-8", "replace")
            finally:
                lib.courier_free(out)
        return self._with_request(request, url, kw, use)

    def has(self, request: Union[Request, str], url: Optional[str] = None, **kw: Unpack[RequestOptions]) -> bool:
        """True when the request has a fresh entry (or as its user policy says)."""
        def use(creq: int) -> bool:
            out = c_int()
            self._call(lib.courier_cache_has, creq, outs=(byref(out),))
            return bool(out.value)
        return self._with_request(request, url, kw, use)

    def get(self, request: Union[Request, str], url: Optional[str] = None, *, allow_stale: bool = False,
            **kw: Unpack[RequestOptions]) -> Optional[Response]:
        """The cached response of a request (marked from-cache), or None."""
        def use(creq: int) -> Optional[Response]:
            out = c_void_p()
            err = ERROR()
            code = lib.courier_cache_get(byref(out), self._engine._handle(), creq, 1 if allow_stale else 0,
                                         byref(err))
            if code == NotFound.CODE:
                return None
            if code != 0:
                raise make_error(code, err)
            return Response(out.value or 0)
        return self._with_request(request, url, kw, use)

    def remove(self, request: Union[Request, str], url: Optional[str] = None, **kw: Unpack[RequestOptions]) -> bool:
        """Removes a request's entry; False when it had none."""
        def use(creq: int) -> bool:
            err = ERROR()
            code = lib.courier_cache_remove(self._engine._handle(), creq, byref(err))
            if code == NotFound.CODE:
                return False
            if code != 0:
                raise make_error(code, err)
            return True
        return self._with_request(request, url, kw, use)

    # -- by key text ---------------------------------------------------------------------------
    def has_key(self, key: str) -> bool:
        out = c_int()
        self._call(lib.courier_cache_has_key, _b(key), outs=(byref(out),))
        return bool(out.value)

    def get_key(self, key: str, *, allow_stale: bool = False) -> Optional[Response]:
        out = c_void_p()
        err = ERROR()
        code = lib.courier_cache_get_key(byref(out), self._engine._handle(), _b(key), 1 if allow_stale else 0,
                                         byref(err))
        if code == NotFound.CODE:
            return None
        if code != 0:
            raise make_error(code, err)
        return Response(out.value or 0)

    def remove_key(self, key: str) -> bool:
        err = ERROR()
        code = lib.courier_cache_remove_key(self._engine._handle(), _b(key), byref(err))
        if code == NotFound.CODE:
            return False
        if code != 0:
            raise make_error(code, err)
        return True

    def put(self, key: str, status: int = 200, body: Union[bytes, str] = b"",
            headers: Union[Mapping[str, str], Sequence[tuple[str, str]], None] = None,
            expiry: Optional[float] = None) -> None:
        """Writes an entry under a key text (committed before return). ``expiry`` in seconds
        (None: the engine's default)."""
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        items = list(headers.items() if isinstance(headers, Mapping) else (headers or ()))
        names = (c_char_p * max(1, len(items)))(*[_b(n) for n, _ in items])
        values = (c_char_p * max(1, len(items)))(*[_b(v) for _, v in items])
        self._call(lib.courier_cache_put_key, _b(key), int(status), names, values, len(items), data, len(data),
                   int(round(expiry * 1000)) if expiry else 0)

    # -- the whole store -----------------------------------------------------------------------
    def clear(self) -> int:
        """Removes every entry; returns how many."""
        n = c_int64()
        self._call(lib.courier_cache_remove_all, outs=(byref(n),))
        return n.value

    def remove_since(self, since: float) -> int:
        """Removes the entries written at or after ``since`` (seconds since the epoch, engine clock)."""
        n = c_int64()
        self._call(lib.courier_cache_remove_since, int(since * 1000), outs=(byref(n),))
        return n.value

    def remove_expired(self) -> int:
        """Removes the entries past their use; returns how many."""
        n = c_int64()
        self._call(lib.courier_cache_remove_expired, outs=(byref(n),))
        return n.value

    def size(self) -> tuple[int, int]:
        """(bytes, entries) of the whole store, across engines and processes."""
        b, n = c_int64(), c_int64()
        self._call(lib.courier_cache_size, outs=(byref(b), byref(n)))
        return b.value, n.value

    def stats(self) -> CacheStats:
        s = sized(CACHE_STATS)
        self._call(lib.courier_cache_get_stats, outs=(byref(s),))
        return CacheStats(*(getattr(s, f) for f, _ in CACHE_STATS._fields_[1:]))

    def entries(self) -> list[CacheEntry]:
        """A snapshot of every entry (one read transaction)."""
        lst = c_void_p()
        self._call(lib.courier_cache_list_entries, outs=(byref(lst),))
        try:
            out = []
            info = sized(CACHE_ENTRY_INFO)
            for i in range(lib.courier_cache_list_count(lst)):
                check(lib.courier_cache_list_at(byref(info), lst, i))
                out.append(CacheEntry(_s(info.key), _s(info.url), _s(info.id), info.status, info.bytes,
                                      info.created_ms / 1000.0, info.expires_ms / 1000.0))
            return out
        finally:
            lib.courier_cache_list_free(lst)

    def __len__(self) -> int:
        return self.size()[1]

    def register_policy(self, policy_id: int, *,
                        has_cache: Optional[Callable[[Optional[Response], float], bool]] = None,
                        answer_from_cache: Optional[Callable[[Optional[Response], float], bool]] = None,
                        should_write: Optional[Callable[[Response, float], Any]] = None) -> None:
        """Registers a user-defined policy (id >= 100). Each callback may be None (the core's
        default applies): ``has_cache(cached_or_None, now)``, ``answer_from_cache(cached, now)``,
        ``should_write(response, expires) -> bool or a new expiry (seconds since the epoch)``."""
        fns = (has_cache, answer_from_cache, should_write)
        cbs = sized(CACHE_POLICY_CALLBACKS)
        cbs.has_cache = cb.ptr(c_cache_has) if has_cache else None
        cbs.answer_from_cache = cb.ptr(c_cache_answer) if answer_from_cache else None
        cbs.should_write = cb.ptr(c_cache_should_write) if should_write else None
        key = cb.register(cb.Slot(fns, None, self._engine))
        check(lib.courier_engine_register_cache_policy(self._engine._handle(), int(policy_id), byref(cbs), key,
                                                       cb.user_free), arg="policy_id")

    def unregister_policy(self, policy_id: int) -> None:
        check(lib.courier_engine_register_cache_policy(self._engine._handle(), int(policy_id), None, None, None),
              arg="policy_id")


_ = Iterable
