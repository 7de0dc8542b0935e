"""Loading libcourier and declaring its functions for ctypes.

The library is found, in order, at the path in the environment variable ``COURIER_LIBRARY``, next
to this package (``libcourier.so*`` copied into it), or by ``ctypes.util.find_library("courier")``.
Every function of ``include/courier.h`` is declared from the generated table in ``_decls.py``; a
function the loaded library lacks (an older library) is left out, and the feature that needs it
raises :class:`courier.CourierError` with ``COURIER_E_INTERNAL`` when used.

ctypes releases the GIL for the duration of every foreign call (``CDLL``, not ``PyDLL``), so the
engine works while other Python threads run; callbacks from the engine's threads take the GIL.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from typing import Any, Protocol

from ._decls import DECLS

__all__ = ["lib", "library_path", "has", "setting_default", "ERROR", "METRICS", "CACHE_STATS", "CACHE_ENTRY_INFO",
           "FROZEN_INFO", "FROZEN_EVENT", "EVENT", "JSON_OPTIONS", "MAPPING_ERROR",
           "CACHE_POLICY_CALLBACKS", "TRANSPORT", "COOKIE", "POOL_HOST"]

_KINDS: dict[str, Any] = {
    "void": None,
    "int": ctypes.c_int,
    "uint": ctypes.c_uint,
    "long": ctypes.c_long,
    "double": ctypes.c_double,
    "size_t": ctypes.c_size_t,
    "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
    "str": ctypes.c_char_p,
    "ptr": ctypes.c_void_p,
    "fn": ctypes.c_void_p,
}


def _candidates() -> list[str]:
    env = os.environ.get("COURIER_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libcourier.so*")), key=len)
    found += sorted(glob.glob(os.path.join(here, "libcourier*.dylib")), key=len)
    name = ctypes.util.find_library("courier")
    if name:
        found.append(name)
    # The SONAME of the ABI this binding speaks, for systems where only it is installed.
    found.append("libcourier.so.0")
    return found


def _load() -> tuple[ctypes.CDLL, str]:
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:  # try the next one
            errors.append(f"{path}: {e}")
    raise ImportError(
        "courier: cannot load libcourier (set COURIER_LIBRARY to the path of libcourier.so): "
        + "; ".join(errors))


lib, library_path = _load()

_missing: set[str] = set()
for _name, (_ret, _args) in DECLS.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        _missing.add(_name)
        continue
    _fn.restype = _KINDS[_ret]
    _fn.argtypes = [_KINDS[a] for a in _args]


def has(name: str) -> bool:
    """True when the loaded library exports the function ``name``."""
    return name in DECLS and name not in _missing


class EngineHandle(Protocol):
    """What the modules below the engine hold of it (the cache and frozen-request managers, groups,
    verification): its handle. A :class:`courier.Engine` is one; ``engine`` stands above them, so
    they name this type, not it (the package's imports, annotations' included, run one way)."""

    def _handle(self) -> int: ...


# ---------------------------------------------------------------------------------------------
# The caller-allocated structs of the header, field for field.
# ---------------------------------------------------------------------------------------------

class ERROR(ctypes.Structure):
    """courier_error."""
    _fields_ = [("code", ctypes.c_int), ("http_status", ctypes.c_int), ("curl_code", ctypes.c_int),
                ("os_error", ctypes.c_int), ("store_error", ctypes.c_int),
                ("reserved", ctypes.c_int * 7), ("message", ctypes.c_char * 256)]


class METRICS(ctypes.Structure):
    """courier_metrics."""
    _fields_ = [("size", ctypes.c_size_t), ("dns_s", ctypes.c_double), ("connect_s", ctypes.c_double), ("tls_s", ctypes.c_double),
                ("first_byte_s", ctypes.c_double), ("total_s", ctypes.c_double),
                ("bytes_sent", ctypes.c_int64), ("bytes_received", ctypes.c_int64),
                ("connection_reused", ctypes.c_int), ("http_version", ctypes.c_int),
                ("redirects", ctypes.c_int), ("remote_ip", ctypes.c_char * 46), ("remote_port", ctypes.c_int)]


class CACHE_STATS(ctypes.Structure):
    """courier_cache_stats."""
    _fields_ = [("size", ctypes.c_size_t)] + \
              [(n, ctypes.c_int64) for n in ("hits", "misses", "writes", "evictions", "revalidations",
                                             "stale_served", "write_failures", "bytes", "count", "max_bytes")]


class CACHE_ENTRY_INFO(ctypes.Structure):
    """courier_cache_entry_info."""
    _fields_ = [("size", ctypes.c_size_t), ("key", ctypes.c_char_p), ("url", ctypes.c_char_p),
                ("id", ctypes.c_char_p), ("status", ctypes.c_int), ("bytes", ctypes.c_int64), ("created_ms", ctypes.c_int64),
                ("expires_ms", ctypes.c_int64)]


class FROZEN_INFO(ctypes.Structure):
    """courier_frozen_info."""
    _fields_ = [("size", ctypes.c_size_t), ("policy", ctypes.c_int), ("flags", ctypes.c_uint),
                ("timeout_ms", ctypes.c_int64), ("attempts", ctypes.c_int), ("last_code", ctypes.c_int),
                ("last_status", ctypes.c_int), ("claimed", ctypes.c_int), ("created_ms", ctypes.c_int64),
                ("expires_ms", ctypes.c_int64), ("next_attempt_ms", ctypes.c_int64),
                ("last_attempt_ms", ctypes.c_int64)]


class FROZEN_EVENT(ctypes.Structure):
    """courier_frozen_event."""
    _fields_ = [("size", ctypes.c_size_t), ("kind", ctypes.c_int), ("freeze_id", ctypes.c_char_p),
                ("frozen", ctypes.c_void_p), ("request_id", ctypes.c_uint64), ("code", ctypes.c_int),
                ("final", ctypes.c_int), ("attempts", ctypes.c_int), ("response", ctypes.c_void_p),
                ("error", ctypes.POINTER(ERROR)), ("reason", ctypes.c_char_p)]


class EVENT(ctypes.Structure):
    """courier_event."""
    _fields_ = [("size", ctypes.c_size_t), ("kind", ctypes.c_int), ("request_id", ctypes.c_uint64),
                ("method", ctypes.c_char_p), ("url", ctypes.c_char_p), ("code", ctypes.c_int),
                ("http_status", ctypes.c_int), ("attempt", ctypes.c_int), ("delay_ms", ctypes.c_int64),
                ("duration_s", ctypes.c_double), ("bytes_received", ctypes.c_int64),
                ("bytes_expected", ctypes.c_int64), ("bytes_sent", ctypes.c_int64),
                ("bytes_to_send", ctypes.c_int64), ("response", ctypes.c_void_p),
                ("error", ctypes.POINTER(ERROR)), ("traceparent", ctypes.c_char_p), ("tracestate", ctypes.c_char_p),
                ("resend_count", ctypes.c_int), ("error_type", ctypes.c_char_p)]


class JSON_OPTIONS(ctypes.Structure):
    """courier_json_options."""
    _fields_ = [("size", ctypes.c_size_t), ("max_depth", ctypes.c_int), ("max_bytes", ctypes.c_int64),
                ("flags", ctypes.c_uint), ("max_threads", ctypes.c_int), ("parallel_min_bytes", ctypes.c_int64)]


class MAPPING_ERROR(ctypes.Structure):
    """courier_mapping_error."""
    _fields_ = [("path", ctypes.c_char * 256), ("expected", ctypes.c_int), ("found", ctypes.c_int),
                ("reserved", ctypes.c_int * 6)]


class CACHE_POLICY_CALLBACKS(ctypes.Structure):
    """courier_cache_policy_callbacks (function pointers as void *: filled with CFUNCTYPE objects)."""
    _fields_ = [("size", ctypes.c_size_t), ("has_cache", ctypes.c_void_p),
                ("answer_from_cache", ctypes.c_void_p), ("should_write", ctypes.c_void_p)]


class COOKIE(ctypes.Structure):
    """``courier_cookie``."""
    _fields_ = [("size", ctypes.c_size_t), ("domain", ctypes.c_char_p), ("path", ctypes.c_char_p),
                ("name", ctypes.c_char_p), ("value", ctypes.c_char_p), ("expires", ctypes.c_int64),
                ("include_subdomains", ctypes.c_int), ("secure", ctypes.c_int), ("http_only", ctypes.c_int)]


class HSTS_ENTRY(ctypes.Structure):
    """``courier_hsts_entry``."""
    _fields_ = [("size", ctypes.c_size_t), ("host", ctypes.c_char_p), ("include_subdomains", ctypes.c_int),
                ("expires", ctypes.c_int64)]


class TRANSPORT(ctypes.Structure):
    """courier_transport."""
    _fields_ = [("size", ctypes.c_size_t), ("start", ctypes.c_void_p), ("cancel", ctypes.c_void_p)]


class POOL_HOST(ctypes.Structure):
    """courier_pool_host."""
    _fields_ = [("size", ctypes.c_size_t), ("host", ctypes.c_char_p), ("open", ctypes.c_int64),
                ("idle", ctypes.c_int64), ("in_use", ctypes.c_int64), ("opened", ctypes.c_int64),
                ("reused", ctypes.c_int64)]


def sized(cls):
    """A new struct of a type that begins with ``size_t size`` (docs/ABI.md, "Growth"), its size set:
    every struct the library reads or fills for the caller is passed this way."""
    s = cls()
    s.size = ctypes.sizeof(cls)
    return s


def setting_default(setting: int) -> int:
    """The C core's default of a setting (``courier_setting_default``; ``setting`` is a
    ``courier_setting``, :class:`courier._enums.Setting`): what the binding's own defaults are read
    from, never restated."""
    value = ctypes.c_int64()
    if lib.courier_setting_default(ctypes.byref(value), int(setting)) != 0:
        raise ValueError(f"courier_setting_default: unknown setting {int(setting)}")
    return int(value.value)
