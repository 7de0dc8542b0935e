"""The binding and the library agree on the ABI."""
from __future__ import annotations

import ctypes
import os
import pathlib
import sys

import pytest

import courier
from courier import _decls, _lib, errors

ROOT = pathlib.Path(__file__).resolve().parents[3]
HEADER = pathlib.Path(os.environ.get("COURIER_HEADER", ROOT / "include" / "courier.h"))


def test_prototype_table_matches_header() -> None:
    if not HEADER.exists():
        pytest.skip("header not available")
    sys.path.insert(0, str(ROOT / "bindings" / "python" / "tools"))
    try:
        import gen_decls
    finally:
        sys.path.pop(0)
    parsed = gen_decls.parse(HEADER.read_text())
    stale = {n for n in parsed if _decls.DECLS.get(n) != parsed[n]} | (set(_decls.DECLS) - set(parsed))
    assert not stale, f"regenerate courier/_decls.py (tools/gen_decls.py): {sorted(stale)}"


def test_library_exports_every_declared_function() -> None:
    missing = [n for n in _decls.DECLS if not _lib.has(n)]
    assert not missing, f"the loaded library lacks: {missing}"


def test_error_codes_match_header() -> None:
    if not HEADER.exists():
        pytest.skip("header not available")
    import re
    text = HEADER.read_text()
    body = text[text.index("typedef enum courier_code"):text.index("} courier_code;")]
    codes = {m.group(1): int(m.group(2)) for m in re.finditer(r"(COURIER_E_\w+)\s*=\s*(-\d+)", body)}
    ours = {cname: code for code, cname, *_ in errors._TABLE}
    assert ours == codes
    for code in codes.values():
        assert courier.strerror(code) != courier.strerror(-9999)


def test_struct_sizes() -> None:
    # caller-allocated structs whose size is fixed by the header's layout rules
    assert ctypes.sizeof(_lib.ERROR) == 12 * 4 + 256
    assert ctypes.sizeof(_lib.CACHE_STATS) == 10 * 8
    assert ctypes.sizeof(_lib.MAPPING_ERROR) == 256 + 8 * 4


def test_version() -> None:
    assert courier.library_version_num() >> 16 == 0
    assert courier.library_version().count(".") == 2
