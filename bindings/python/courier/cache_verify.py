"""``courier.cache_verify.verify(engine)``: the C core's integrity check of an engine's cache store
(``courier_cache_verify``), translated. The checking is in C; this module only converts.

>>> report = verify(engine)
>>> report.consistent, report.entries, report.problems
"""
from __future__ import annotations

import ctypes
from ctypes import byref
from dataclasses import dataclass

from ._lib import ERROR, EngineHandle, lib
from .errors import make_error

__all__ = ["VerifyReport", "verify"]

COURIER_E_CACHE_INCONSISTENT = -40


class CACHE_VERIFY_REPORT(ctypes.Structure):
    """courier_cache_verify_report."""
    _fields_ = [("size", ctypes.c_size_t)] + [(n, ctypes.c_int64) for n in ("entries", "bytes", "total_entries", "total_bytes", "damaged",
                                              "orphan_index", "missing_index", "totals_mismatch", "problems",
                                              "file_bytes", "map_bytes", "used_bytes")] + \
               [("unreadable", ctypes.c_int), ("moved_aside", ctypes.c_int),
                ("tree_bytes", ctypes.c_int64), ("free_bytes", ctypes.c_int64)]


@dataclass(frozen=True)
class VerifyReport:
    """What the verify found (see ``courier_cache_verify_report`` in courier.h)."""
    entries: int
    bytes: int
    total_entries: int
    total_bytes: int
    damaged: int
    orphan_index: int
    missing_index: int
    totals_mismatch: int
    problems: int
    file_bytes: int
    map_bytes: int
    used_bytes: int
    unreadable: int
    moved_aside: int
    tree_bytes: int
    free_bytes: int

    @property
    def consistent(self) -> bool:
        return self.problems == 0


def verify(engine: EngineHandle) -> VerifyReport:
    """Checks the engine's whole cache store (every entry whole, the index, the totals); reads only.
    Returns the report, also when the store is inconsistent; raises ``StoreError`` when the store
    cannot be opened or read."""
    r = CACHE_VERIFY_REPORT()
    r.size = ctypes.sizeof(r)
    err = ERROR()
    code = lib.courier_cache_verify(byref(r), engine._handle(), byref(err))
    if code not in (0, COURIER_E_CACHE_INCONSISTENT):
        raise make_error(code, err)
    return VerifyReport(*(getattr(r, f) for f, _ in CACHE_VERIFY_REPORT._fields_[1:]))
