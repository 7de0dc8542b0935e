"""The binding and the library agree on the ABI."""
from __future__ import annotations

import ctypes
import re
import os
import pathlib
import sys

import pytest

import courier
from courier import _decls, _lib, errors

ROOT = pathlib.Path(__file__).resolve().parents[3]
HEADER = pathlib.Path(os.environ.get("COURIER_HEADER", ROOT / "include" / "courier.h"))
sys.path.insert(0, str(ROOT / "bindings" / "python" / "tools"))
try:
    import gen_decls  # the parser of _decls.py, and read_header: courier.h with its parts put in place
finally:
    sys.path.pop(0)


def test_prototype_table_matches_header() -> None:
    if not HEADER.exists():
        pytest.skip("header not available")
    parsed = gen_decls.parse(gen_decls.read_header(HEADER))
    stale = {n for n in parsed if _decls.DECLS.get(n) != parsed[n]} | (set(_decls.DECLS) - set(parsed))
    assert not stale, f"regenerate courier/_decls.py (tools/gen_decls.py): {sorted(stale)}"


def test_library_exports_every_declared_function() -> None:
    missing = [n for n in _decls.DECLS if not _lib.has(n)]
    assert not missing, f"the loaded library lacks: {missing}"


def test_error_codes_match_header() -> None:
    if not HEADER.exists():
        pytest.skip("header not available")
    import re
    text = gen_decls.read_header(HEADER)
    body = text[text.index("typedef enum courier_code"):text.index("} courier_code;")]
    codes = {m.group(1): int(m.group(2)) for m in re.finditer(r"(COURIER_E_\w+)\s*=\s*(-\d+)", body)}
    ours = {cname: code for code, cname, *_ in errors._TABLE}
    assert ours == codes
    for code in codes.values():
        assert courier.strerror(code) != courier.strerror(-9999)


def test_struct_sizes() -> None:
    # caller-allocated structs whose size is fixed by the header's layout rules
    assert ctypes.sizeof(_lib.ERROR) == 12 * 4 + 256
    assert ctypes.sizeof(_lib.CACHE_STATS) == 8 + 10 * 8
    assert ctypes.sizeof(_lib.MAPPING_ERROR) == 256 + 8 * 4


def test_version() -> None:
    assert courier.library_version_num() >> 16 == 0
    assert courier.library_version().count(".") == 2


class _TapeEntry(ctypes.Structure):
    # courier_json_tape_entry, as the header lays it out (16 bytes)
    _fields_ = [("type", ctypes.c_uint8), ("flags", ctypes.c_uint8), ("reserved", ctypes.c_uint16),
                ("length", ctypes.c_uint32), ("payload", ctypes.c_uint64)]


def test_json_tape_is_reachable_and_laid_out_as_the_header_says() -> None:
    # The Swift decoder's parser, through the same library and declarations Python uses.
    lib = _lib.lib
    assert ctypes.sizeof(_TapeEntry) == 16
    text = b'{"id": 7, "name": "caf\\u00e9", "tags": ["a", "b"]}'
    tape = ctypes.c_void_p()
    err = _lib.ERROR()
    assert lib.courier_json_tape_parse(ctypes.byref(tape), text, len(text), None, ctypes.byref(err)) == 0
    try:
        count = ctypes.c_size_t()
        base = lib.courier_json_tape_entries(tape, ctypes.byref(count))
        entries = ctypes.cast(base, ctypes.POINTER(_TapeEntry))
        assert count.value == 9  # the object, 3 keys, 7, "café", the array, "a", "b"
        root = entries[0]
        assert root.type == 1 and root.length == 3 and root.payload == count.value  # OBJECT
        assert [entries[k].type for k in range(count.value)] == [1, 3, 4, 3, 3, 3, 2, 3, 3]
        hint = ctypes.c_size_t(0)
        i = lib.courier_json_tape_get(tape, 0, b"id", 2, ctypes.byref(hint))
        assert i and ctypes.c_int64(entries[i].payload).value == 7
        i = lib.courier_json_tape_get(tape, 0, b"name", 4, ctypes.byref(hint))
        raw = ctypes.cast(lib.courier_json_tape_text(tape), ctypes.c_void_p).value
        assert ctypes.string_at(raw + entries[i].payload, entries[i].length).decode() == "café"
        out = ctypes.c_size_t()
        assert lib.courier_json_tape_path(ctypes.byref(out), tape, 0, b"tags.1") == 1
        assert ctypes.string_at(raw + entries[out.value].payload, entries[out.value].length) == b"b"
        assert lib.courier_json_tape_get(tape, 0, b"missing", 7, None) == 0
    finally:
        lib.courier_json_tape_free(tape)
    bad = b'{"a": 1,}'
    tape = ctypes.c_void_p()
    code = lib.courier_json_tape_parse(ctypes.byref(tape), bad, len(bad), None, ctypes.byref(err))
    assert code == -22  # COURIER_E_JSON, as courier_json_parse
    assert b"line" in err.message  # the message says where
    assert not tape.value


def _c_enums(text: str) -> dict[str, dict[str, int]]:
    """Every ``typedef enum NAME { ... } NAME;`` of the header: {NAME: {member: value}}."""
    out: dict[str, dict[str, int]] = {}
    for m in re.finditer(r"typedef enum (\w+) \{(.*?)\} \1;", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", m.group(2), flags=re.S)
        out[m.group(1)] = {n: int(v) for n, v in re.findall(r"(COURIER_\w+)\s*=\s*(-?\d+)", body)}
    return out


def test_every_python_enum_matches_the_header() -> None:
    """Each courier.CEnum names its C enum and member prefix (``__c_enum__``); its members are
    exactly the C members, with the C values (a constant outside the enum, such as
    CachePolicy.USER_MIN, must be a #define of that name)."""
    if not HEADER.exists():
        pytest.skip("header not available")
    text = gen_decls.read_header(HEADER)
    enums = _c_enums(text)
    defines = {n: int(v) for n, v in re.findall(r"#define (COURIER_\w+) (-?\d+)\b", text)}
    def subclasses(cls: type) -> set[type]:
        return {c for s in cls.__subclasses__() for c in {s} | subclasses(s)}
    # every CEnum of the package, exported or used internally (courier._enums.Setting)
    classes = {v for v in subclasses(courier.CEnum) if v.__module__.startswith("courier")}
    assert len(classes) >= 14
    seen = set()
    for cls in classes:
        cname, prefix = cls.__c_enum__
        c_members = enums[cname]
        seen.add(cname)
        for member in cls:
            full = prefix + member.name
            value = c_members.get(full, defines.get(full.replace("COURIER_CACHE_", "COURIER_CACHE_POLICY_")))
            assert value == int(member), f"{cls.__name__}.{member.name} = {int(member)}, C {full} = {value}"
        missing = {n for n in c_members if n[len(prefix):] not in cls.__members__}
        assert not missing, f"{cls.__name__} lacks {sorted(missing)}"
    # every enum of the header a Python user passes or reads has its class
    assert set(enums) - seen <= {"courier_code"}, sorted(set(enums) - seen - {"courier_code"})


def test_timeout_kind_is_read_from_the_enum() -> None:
    """CourierError.timeout_kind is a courier.TimeoutKind's name; errors.py keeps no table of its own."""
    from courier import errors
    assert not hasattr(errors, "TIMEOUT_KINDS")
    err = courier.Timeout(timeout_kind=str(courier.TimeoutKind.CONNECT))
    assert courier.TimeoutKind(err.timeout_kind) is courier.TimeoutKind.CONNECT
