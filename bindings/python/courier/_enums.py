"""The base of every enum of the header, and how options take them.

Each enum is an ``IntEnum`` whose values are the C values (tests/test_abi.py checks every one
against include/courier.h through ``__c_enum__``: the C type and the prefix of its member names).
``str()`` and ``format()`` give the lower-case name, as Swift prints a case (``hit``, not ``1``);
``int()`` gives the C value. A name converts to its member, in any case, with ``-`` for ``_``:
``CacheStatus("hit")``, ``CachePolicy("cache-first")``.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar, Union

from .errors import InvalidArgument

__all__ = ["CEnum", "coerce"]

E = TypeVar("E", bound="CEnum")


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


def coerce(cls: type[E], value: Union[E, str, int], option: str, *, allow_int: bool = False) -> Union[E, int]:
    """``value`` (a member, its name, or its C value) as a member of ``cls``. With ``allow_int``,
    another int passes through as it is (a user cache policy id). A name or value that is not one
    of ``cls`` raises :class:`courier.InvalidArgument` (also a ``ValueError``) naming the option;
    another type raises ``TypeError``."""
    if isinstance(value, cls):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{option}: expected courier.{cls.__name__} or its name, got {type(value).__name__}")
    try:
        return cls(value)  # type: ignore[arg-type]  # a name: CEnum._missing_
    except ValueError:
        if allow_int and isinstance(value, int):
            return int(value)
        names = ", ".join(repr(m.name.lower()) for m in cls)
        raise InvalidArgument(f"{option}: {value!r} is not a courier.{cls.__name__} ({names})") from None


class TimeoutKind(CEnum):
    """Which timeout fired (``courier_timeout_kind``; the C values). ``CourierError.timeout_kind``
    is its name as a string (``str(TimeoutKind.CONNECT) == "connect"``)."""
    __c_enum__ = ("courier_timeout_kind", "COURIER_TIMEOUT_")
    NONE = 0
    CONNECT = 1
    IDLE = 2
    TOTAL = 3
