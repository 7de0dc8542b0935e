"""Courier for Python: a thin binding over libcourier's C API (ctypes, no compiler step).

>>> import courier
>>> with courier.Engine(base_url="http://127.0.0.1:8080", timeout=5) as engine:
...     r = engine.get("/json")
...     r.status, r.headers["content-type"], r.json()

Everything — URL joining, retry, caching, freezing, mapping, mocking — is decided by the C core;
this package converts types and errors and owns handles. See docs/python.md.
"""
from __future__ import annotations

from ._enums import CEnum, TimeoutKind
from .aio import AsyncEngine
from ._lib import has as _has
from ._lib import lib as _clib
from ._lib import library_path
from .auth import AuthScheme, Challenge, Cookie
from .cache import CacheEntry, CacheManager, CacheStats
from .engine import (CacheDurability, CachePolicy, CourierFuture, Engine, Event, EventKind, Interceptor,
                     LogComponent, LogLevel, LogRotation, NetworkKind, Reachability, Redaction,
                     default_app_id, network_link_kind)
from .errors import *  # noqa: F401,F403 - the exception classes, generated from the code table
from .errors import CourierError, error_class, strerror
from .frozen import FreezePolicy, FrozenEvent, FrozenEventKind, FrozenManager, FrozenRequest, ResendPolicy
from .group import Group, GroupFlag, GroupMember, GroupMode, GroupResult
from .netopts import HSTSEntry, HTTPVersion, IPVersion, http3_available
from .mapping import (MAP_ALL_COERCIONS, MAP_BOOL_FROM_NUMBER, MAP_NULL_AS_ABSENT, MAP_NUMBER_FROM_STRING,
                      MAP_REQUIRED, MAP_STRING_FROM_NUMBER, Envelope, JsonType, Mapping)
from .request import BodyEncoding, Freeze, Mock, Outgoing, Part, Priority, Progress, Request, Result, Retry
from .response import Answer, CacheReason, CacheStatus, Headers, Metrics, Response
from .pool import PoolFigures, PoolHost
from .security import PinningMode, Security
from .session import Authenticator, RetryQuestion
from .stream import EventSource, ServerSentEvent, SSEState, StreamResponse
from .stubs import Stub, StubAnswer, StubbedRequest, StubMode, Stubs, UrlMatch
from .websocket import WebSocket, WSMessageType, WSState
from .transport import Call, Transport

try:  # written by the wheel build from COURIER_VERSION_STRING (include/courier.h)
    from ._version import __version__
except ImportError:  # pragma: no cover - the source tree, not an installed package
    __version__ = _clib.courier_version().decode()


def library_version() -> str:
    """The loaded C library's version (``courier_version()``)."""
    return _clib.courier_version().decode()


def library_version_num() -> int:
    """``courier_version_num()``: 0xMMmmpp."""
    return int(_clib.courier_version_num())


if library_version_num() >> 16 != 0:  # pragma: no cover - the ABI this binding speaks
    raise ImportError(f"courier: {library_path} is version {library_version()}, this binding speaks ABI 0")
if library_version() != __version__:  # pragma: no cover - COURIER_LIBRARY names another build
    import warnings
    warnings.warn(f"courier {__version__} loaded {library_path}, which is version {library_version()}",
                  RuntimeWarning, stacklevel=2)
