"""The connection pool's figures (``courier_pool_get_figures``): per engine and by host, the
connections open, idle and in use now, made and reused since the engine opened. The core counts
them (CCore/http/pool.c); this module copies its snapshot into Python values."""
from __future__ import annotations

from ctypes import byref, c_void_p
from dataclasses import dataclass, field
from typing import Optional

from ._lib import POOL_HOST, lib, sized
from .errors import check

__all__ = ["PoolHost", "PoolFigures"]


@dataclass(frozen=True)
class PoolHost:
    """``courier_pool_host``: the connections of one host ("scheme://host:port"), or of all of them
    (``host`` None). ``open`` = ``idle`` + ``in_use`` now; ``opened`` connections made and
    ``reused`` requests sent on a connection already open, since the engine opened. A connection
    counts from the moment a request is about to go on it until it is closed (by the server, the
    pool's limits, or past ``idle_connection_timeout`` when the engine next looks for one);
    WebSockets' connections are not counted."""
    host: Optional[str] = None
    open: int = 0
    idle: int = 0
    in_use: int = 0
    opened: int = 0
    reused: int = 0


@dataclass(frozen=True)
class PoolFigures:
    """A snapshot of the pool (:meth:`courier.Engine.pool_figures`): ``total`` and one
    :class:`PoolHost` per host the engine made a connection to, in the order they came.
    ``figures["http://127.0.0.1:8080"]`` is a host's (KeyError when never connected to)."""
    total: PoolHost = PoolHost()
    hosts: list[PoolHost] = field(default_factory=list)

    def __getitem__(self, host: str) -> PoolHost:
        for h in self.hosts:
            if h.host == host:
                return h
        raise KeyError(host)

    def get(self, host: str) -> Optional[PoolHost]:
        """A host's figures, or None."""
        for h in self.hosts:
            if h.host == host:
                return h
        return None


def _host(h: POOL_HOST) -> PoolHost:
    return PoolHost(h.host.decode("utf-8", "replace") if h.host else None, h.open, h.idle, h.in_use, h.opened,
                    h.reused)


def figures(handle: int) -> PoolFigures:
    """The figures of the engine at ``handle`` (a live ``courier_engine *``)."""
    out = c_void_p()
    check(lib.courier_pool_get_figures(byref(out), handle))
    try:
        total = sized(POOL_HOST)
        check(lib.courier_pool_figures_total(byref(total), out))
        hosts = []
        h = sized(POOL_HOST)
        for i in range(lib.courier_pool_figures_count(out)):
            check(lib.courier_pool_figures_at(byref(h), out, i))
            hosts.append(_host(h))
        return PoolFigures(_host(total), hosts)
    finally:
        lib.courier_pool_figures_free(out)
