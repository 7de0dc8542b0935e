"""The base of every enum of the header, and how options take them.

Each enum is an ``IntEnum`` whose values are the C values (tests/test_abi.py checks every one
against include/courier.h through ``__c_enum__``: the C type and the prefix of its member names).
``str()`` and ``format()`` give the lower-case name, as Swift prints a case (``hit``, not ``1``);
``int()`` gives the C value. A name converts to its member, in any case, with ``-`` for ``_``:
``CacheStatus("hit")``, ``CachePolicy("cache-first")``. :func:`courier.errors.coerce` turns an
option's value into a member.

This module is the binding's lowest layer after the declarations (``_decls``, ``_lib``): it
imports nothing of the package.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = ["CEnum", "TimeoutKind", "Setting", "Reachability"]


class CEnum(IntEnum):
    """An enum of include/courier.h (see the module's text)."""

    def __str__(self) -> str:
        return self.name.lower()

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else int.__format__(int(self), spec)

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            return cls.__members__.get(value.strip().upper().replace("-", "_"))
        return None


class TimeoutKind(CEnum):
    """Which timeout fired (``courier_timeout_kind``; the C values). ``CourierError.timeout_kind``
    is its name as a string (``str(TimeoutKind.CONNECT) == "connect"``)."""
    __c_enum__ = ("courier_timeout_kind", "COURIER_TIMEOUT_")
    NONE = 0
    CONNECT = 1
    IDLE = 2
    TOTAL = 3


class Setting(CEnum):
    """The settings whose default the C core tells (``courier_setting``, read with
    :func:`courier._lib.setting_default`); the binding's defaults are read from it, never restated."""
    __c_enum__ = ("courier_setting", "COURIER_SETTING_")
    TIMEOUT_MS = 1
    MAX_CONNECTIONS_PER_HOST = 2
    MAX_CONNECTIONS = 3
    MAX_RESPONSE_BYTES = 4
    RETRY_MAX_RETRIES = 5
    RETRY_BASE_DELAY_MS = 6
    RETRY_MAX_DELAY_MS = 7
    FROZEN_REPLAY_CONCURRENCY = 8
    FROZEN_BACKOFF_BASE_MS = 9
    FROZEN_BACKOFF_MAX_MS = 10
    JSON_MAX_DEPTH = 11
    MONITOR_INTERVAL_MS = 12
    LOG_FILE_MAX_BYTES = 13
    LOG_FILE_MAX_FILES = 14
    STREAM_BUFFER_BYTES = 15


class Reachability(CEnum):
    """``courier_reachability`` (the engine's monitor says it; resend policies are asked with it)."""
    __c_enum__ = ("courier_reachability", "COURIER_REACHABILITY_")
    UNKNOWN = 0
    OFFLINE = 1
    ONLINE = 2
