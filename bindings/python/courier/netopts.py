"""Names, addresses and sockets (include/courier.h, "Names, addresses and sockets"): resolve and
connect_to overrides per engine and per request, DNS-over-HTTPS, the DNS cache's lifetime, the IP
version, the happy-eyeballs delay and Unix-domain sockets; and HSTS and Alt-Svc ("HSTS and
Alt-Svc"). The core applies them (CCore/http/netopts.c, CCore/http/hsts.c); this module only
converts the Python spellings."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Union

from ._enums import CEnum
from ._lib import lib
from .errors import check, coerce, lib_code, make_error

__all__ = ["IPVersion", "HTTPVersion", "HSTSEntry", "http3_available"]

E_INVALID_ARGUMENT = lib_code("COURIER_E_INVALID_ARGUMENT")


class IPVersion(CEnum):
    """``courier_ip_version``: which addresses names resolve to and connections use."""
    __c_enum__ = ("courier_ip_version", "COURIER_IP_")
    ANY = 0
    V4 = 4
    V6 = 6


class HTTPVersion(CEnum):
    """``courier_http_version``: which HTTP versions requests may use (``Metrics.http_version`` says
    which one a response used). V2_ONLY requires HTTP/2 (prior knowledge, h2c, over http://):
    a server that cannot raises :class:`courier.HTTPVersionError`; V3 and V3_ONLY need a libcurl
    with HTTP/3 (:func:`http3_available`)."""
    __c_enum__ = ("courier_http_version", "COURIER_HTTP_")
    DEFAULT = 0
    V1_1 = 1
    V2 = 2
    V2_ONLY = 3
    V3 = 4
    V3_ONLY = 5


def http3_available() -> bool:
    """Whether the libcurl underneath speaks HTTP/3 (``courier_http3_available``)."""
    return bool(lib.courier_http3_available())


# {"host:port": "addr,addr" or [addr, ...]}, or (host, port, addresses) tuples
ResolveArg = Union[Mapping[str, Union[str, Iterable[str]]], Iterable[tuple], None]
# {"host:port": "to_host:to_port"}, or (host, port, to_host, to_port) tuples
ConnectToArg = Union[Mapping[str, str], Iterable[tuple], None]


def _host_port(text: str, arg: str) -> tuple[str, int]:
    host, sep, port = str(text).rpartition(":")
    if not sep or not port.isdigit():
        raise make_error(E_INVALID_ARGUMENT, None, None, message=f"{arg}: {text!r} is not host:port")
    return host, int(port)


def _resolve_entries(value: ResolveArg) -> list[tuple[str, int, str]]:
    if not value:
        return []
    if isinstance(value, Mapping):
        out = []
        for key, addresses in value.items():
            host, port = _host_port(key, "resolve")
            out.append((host, port, addresses if isinstance(addresses, str) else ",".join(addresses)))
        return out
    return [(h, int(p), a if isinstance(a, str) else ",".join(a)) for h, p, a in value]


def _connect_entries(value: ConnectToArg) -> list[tuple[str, int, str, int]]:
    if not value:
        return []
    if isinstance(value, Mapping):
        out = []
        for key, target in value.items():
            host, port = _host_port(key, "connect_to")
            to_host, to_port = _host_port(target, "connect_to")
            out.append((host, port, to_host, to_port))
        return out
    return [(h, int(p), th, int(tp)) for h, p, th, tp in value]


def _b(s: str) -> bytes:
    return s.encode("utf-8")


def _socket(path: Union[str, "os.PathLike[str]"]) -> bytes:
    return os.fsencode(path)


def apply_engine(c: Any, resolve: ResolveArg, connect_to: ConnectToArg, doh_url: Optional[str],
                 dns_cache_lifetime: Optional[float], ip_version: Union[IPVersion, str, int, None],
                 happy_eyeballs_delay: Optional[float], unix_socket: Union[str, "os.PathLike[str]", None],
                 http_version: Union[HTTPVersion, str, int, None] = None,
                 decode_content: Optional[bool] = None, max_idle_connections: Optional[int] = None,
                 idle_connection_timeout: Optional[float] = None) -> None:
    """The engine's settings on a courier_config."""
    for host, port, addresses in _resolve_entries(resolve):
        check(lib.courier_config_add_resolve(c, _b(host), port, _b(addresses)), arg="resolve")
    for host, port, to_host, to_port in _connect_entries(connect_to):
        check(lib.courier_config_add_connect_to(c, _b(host), port, _b(to_host), to_port), arg="connect_to")
    if doh_url is not None:
        check(lib.courier_config_set_doh_url(c, _b(doh_url)), arg="doh_url")
    if dns_cache_lifetime is not None:
        s = float(dns_cache_lifetime)
        ms = -1 if s == -1 else -2 if s < 0 else (2 ** 62 if math.isinf(s) else int(math.ceil(s * 1000)))
        check(lib.courier_config_set_dns_cache_lifetime_ms(c, ms), arg="dns_cache_lifetime")
    if ip_version is not None:
        check(lib.courier_config_set_ip_version(c, coerce(IPVersion, ip_version, "ip_version")),
              arg="ip_version")
    if happy_eyeballs_delay is not None:
        s = float(happy_eyeballs_delay)
        check(lib.courier_config_set_happy_eyeballs_delay_ms(c, -1 if s < 0 else int(math.ceil(s * 1000))),
              arg="happy_eyeballs_delay")
    if unix_socket is not None:
        check(lib.courier_config_set_unix_socket(c, _socket(unix_socket)), arg="unix_socket")
    if http_version is not None:
        check(lib.courier_config_set_http_version(c, coerce(HTTPVersion, http_version, "http_version")),
              arg="http_version")
    if decode_content is not None:
        check(lib.courier_config_set_decode_content(c, 1 if decode_content else 0), arg="decode_content")
    if max_idle_connections is not None:
        check(lib.courier_config_set_max_idle_connections(c, int(max_idle_connections)), arg="max_idle_connections")
    if idle_connection_timeout is not None:
        s = float(idle_connection_timeout)
        check(lib.courier_config_set_idle_connection_timeout_ms(c, -1 if s < 0 else int(math.ceil(s * 1000))),
              arg="idle_connection_timeout")


@dataclass(frozen=True)
class HSTSEntry:
    """One known HSTS host (``courier_hsts_entry``): the host (lowercase), whether its subdomains
    are HSTS hosts too, and when it stops being one (seconds since the epoch; 0: never)."""
    host: str
    include_subdomains: bool
    expires: int


def apply_hsts(c: Any, hsts: bool, alt_svc: bool) -> None:
    """HSTS (on unless False) and Alt-Svc (off unless True) on a courier_config."""
    if not hsts:
        check(lib.courier_config_set_hsts(c, 0), arg="hsts")
    if alt_svc:
        check(lib.courier_config_set_alt_svc(c, 1), arg="alt_svc")


def apply_request(r: Any, resolve: ResolveArg, connect_to: ConnectToArg,
                  unix_socket: Union[str, "os.PathLike[str]", None],
                  http_version: Union[HTTPVersion, str, int, None] = None,
                  decode_content: Optional[bool] = None) -> None:
    """A request's own settings on a courier_request."""
    for host, port, addresses in _resolve_entries(resolve):
        check(lib.courier_request_add_resolve(r, _b(host), port, _b(addresses)), arg="resolve")
    for host, port, to_host, to_port in _connect_entries(connect_to):
        check(lib.courier_request_add_connect_to(r, _b(host), port, _b(to_host), to_port), arg="connect_to")
    if unix_socket is not None:
        check(lib.courier_request_set_unix_socket(r, _socket(unix_socket)), arg="unix_socket")
    if http_version is not None:
        check(lib.courier_request_set_http_version(r, coerce(HTTPVersion, http_version, "http_version")),
              arg="http_version")
    if decode_content is not None:
        check(lib.courier_request_set_decode_content(r, 1 if decode_content else 0), arg="decode_content")
