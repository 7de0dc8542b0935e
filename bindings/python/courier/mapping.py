"""JSON documents, mappings and envelopes of the core (the seeds' RestKit mappings).

The core parses, maps and judges JSON; this module only builds its mapping objects and converts
documents to Python values (``courier_json_dump`` of the core's own document, read back with the
standard library, so the values are exactly the core's: integers stay integers, reals doubles).
"""
from __future__ import annotations

import ctypes
import json as _json
from ctypes import byref, c_char_p, c_size_t, c_void_p
from typing import Any, Iterable, Optional, Union

from . import _callbacks as cb
from ._enums import CEnum
from ._lib import ERROR, MAPPING_ERROR, lib
from .errors import check, coerce, make_error

__all__ = ["JsonType", "Mapping", "Envelope", "json_to_python", "tape_to_python", "python_to_json", "apply_mapping",
           "parse_json", "MAP_REQUIRED", "MAP_NUMBER_FROM_STRING", "MAP_STRING_FROM_NUMBER",
           "MAP_BOOL_FROM_NUMBER", "MAP_NULL_AS_ABSENT", "MAP_ALL_COERCIONS"]

MAP_REQUIRED = 0x1
MAP_NUMBER_FROM_STRING = 0x2
MAP_STRING_FROM_NUMBER = 0x4
MAP_BOOL_FROM_NUMBER = 0x8
MAP_NULL_AS_ABSENT = 0x10
MAP_ALL_COERCIONS = 0x1E


class JsonType(CEnum):
    """``courier_json_type``."""
    __c_enum__ = ("courier_json_type", "COURIER_JSON_")
    NONE = 0
    OBJECT = 1
    ARRAY = 2
    STRING = 3
    INTEGER = 4
    REAL = 5
    BOOL = 6
    NULL = 7
    NUMBER = 8
    ANY = 9


# Python's words for the types, besides the enum's own names ("integer", "real", "bool"...).
_TYPE_ALIASES = {"str": JsonType.STRING, "int": JsonType.INTEGER, "float": JsonType.REAL,
                 "boolean": JsonType.BOOL}
_PY_TYPES = {dict: JsonType.OBJECT, list: JsonType.ARRAY, str: JsonType.STRING, int: JsonType.INTEGER,
             float: JsonType.REAL, bool: JsonType.BOOL, type(None): JsonType.NULL}


def _json_type(t: Union[int, str, type, None]) -> int:
    if t is None:
        return int(JsonType.ANY)
    if isinstance(t, type) and t in _PY_TYPES:
        return int(_PY_TYPES[t])
    if isinstance(t, str):
        t = _TYPE_ALIASES.get(t.strip().lower(), t)
    return int(coerce(JsonType, t, "type"))  # type: ignore[arg-type]


def json_to_python(value: Optional[int]) -> Any:
    """Python values of a core JSON value (borrowed pointer). None for a NULL pointer."""
    if not value:
        return None
    out = c_void_p()
    n = c_size_t()
    err = ERROR()
    check(lib.courier_json_dump(byref(out), byref(n), value, 0, byref(err)), err)
    try:
        text = ctypes.string_at(out.value, n.value)
    finally:
        lib.courier_free(out)
    return _json.loads(text)


def tape_to_python(tape: Optional[int], index: int = 0) -> Any:
    """Python values of the value at ``index`` of a core tape (borrowed pointer), written by
    ``courier_json_tape_dump`` as ``courier_json_dump`` writes it and read back with the standard
    library: no jansson document is made. None for a NULL pointer."""
    if not tape:
        return None
    out = c_void_p()
    n = c_size_t()
    err = ERROR()
    check(lib.courier_json_tape_dump(byref(out), byref(n), tape, index, 0, byref(err)), err)
    try:
        text = ctypes.string_at(out.value, n.value)
    finally:
        lib.courier_free(out)
    return _json.loads(text)


def parse_json(data: Union[bytes, str]) -> int:
    """Parses text with the core (its rules: no duplicate keys, depth, UTF-8). Returns a new
    ``courier_json *`` (release with ``courier_json_free``)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    out = c_void_p()
    err = ERROR()
    code = lib.courier_json_parse(byref(out), data, len(data), None, byref(err))
    if code != 0:
        raise make_error(code, err)
    return out.value or 0


def python_to_json(obj: Any) -> int:
    """A new core JSON value from Python values (release with ``courier_json_free`` unless handed
    to a function that takes it)."""
    return parse_json(_json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


class Mapping:
    """A ``courier_mapping``: which members of an object to take, under which names and types,
    and which members are objects mapped by other mappings.

    >>> user = courier.Mapping().attribute("id", type=int, required=True).attribute("name", type=str)
    >>> post = courier.Mapping().attribute("title").relationship("author", user)

    Once attached to a request, an envelope or another mapping it is sealed (no more changes).
    """

    def __init__(self, coercions: int = 0) -> None:
        out = c_void_p()
        check(lib.courier_mapping_new(byref(out)))
        self._ptr: Optional[int] = out.value
        self._children: list[Mapping] = []
        if coercions:
            self.coercions(coercions)

    def _handle(self) -> int:
        if not self._ptr:
            raise ValueError("mapping is freed")
        return self._ptr

    def coercions(self, flags: int) -> "Mapping":
        """Coercions (``MAP_*`` except REQUIRED) for every attribute of this mapping."""
        check(lib.courier_mapping_set_coercions(self._handle(), flags))
        return self

    def attribute(self, source: str, dest: Optional[str] = None, type: Union[int, str, type, None] = None,
                  *, required: bool = False, flags: int = 0, default: Any = ...) -> "Mapping":
        """Takes the value at key path ``source`` as member ``dest`` (default: the last component),
        of ``type`` (a :class:`JsonType`, a name like ``"integer"``, or ``int``/``str``/...)."""
        f = flags | (MAP_REQUIRED if required else 0)
        check(lib.courier_mapping_add_attribute(self._handle(), source.encode(),
                                                dest.encode() if dest else None, _json_type(type), f))
        if default is not ...:
            name = dest or source.rsplit(".", 1)[-1]
            doc = python_to_json(default)
            try:
                check(lib.courier_mapping_set_default(self._handle(), name.encode(), doc))
            finally:
                lib.courier_json_free(doc)
        return self

    def relationship(self, source: str, child: "Mapping", dest: Optional[str] = None, *,
                     many: bool = False, required: bool = False) -> "Mapping":
        """The value at ``source`` is an object (or, with ``many``, an array of objects) mapped by
        ``child`` (which may be this mapping itself, for trees)."""
        check(lib.courier_mapping_add_relationship(self._handle(), source.encode(),
                                                   dest.encode() if dest else None, child._handle(),
                                                   1 if many else 0, MAP_REQUIRED if required else 0))
        if child is not self:
            self._children.append(child)
        return self

    def __len__(self) -> int:
        return int(lib.courier_mapping_attribute_count(self._handle()))

    def apply(self, document: Any) -> Any:
        """Applies the mapping to Python values (converted to a core document)."""
        return apply_mapping(self, document)

    def close(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr:
            lib.courier_mapping_free(ptr)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover
            pass


def apply_mapping(mapping: Mapping, document: Any) -> Any:
    """A mapping applied to Python values on the core's tape (``courier_json_tape_parse``, then
    ``courier_mapping_apply_tape``: the rules and errors of ``courier_mapping_apply``, without a
    jansson document); raises :class:`courier.MappingError` with ``.path``, ``.expected`` and
    ``.found`` set."""
    text = _json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    tape = c_void_p()
    err = ERROR()
    check(lib.courier_json_tape_parse(byref(tape), text, len(text), None, byref(err)), err)
    out = c_void_p()
    where = MAPPING_ERROR()
    try:
        code = lib.courier_mapping_apply_tape(byref(out), byref(where), mapping._handle(), tape, 0, byref(err))
        if code != 0:
            e = make_error(code, err)
            e.path = where.path.decode("utf-8", "replace")  # type: ignore[attr-defined]
            e.expected = JsonType(where.expected)  # type: ignore[attr-defined]
            e.found = JsonType(where.found)  # type: ignore[attr-defined]
            raise e
        try:
            return tape_to_python(out.value)
        finally:
            lib.courier_json_tape_free(out)
    finally:
        lib.courier_json_tape_free(tape)


class Envelope:
    """A ``courier_envelope``: the frame every JSON response shares ({"code":..,"message":..,
    "data":..}) and which codes are success. A response whose code is not a success fails with
    :class:`courier.APIError`."""

    def __init__(self, *, code_path: Optional[str] = None, code_required: bool = False,
                 message_path: Optional[str] = None, data_path: Optional[str] = None,
                 success_codes: Iterable[int] = (), success_range: Optional[tuple[int, int]] = None,
                 mapping: Optional[Mapping] = None, check: Any = None) -> None:
        out = c_void_p()
        _check(lib.courier_envelope_new(byref(out)))
        self._ptr: Optional[int] = out.value
        self._keep: list[Any] = []
        h = self._ptr
        if code_path is not None:
            _check(lib.courier_envelope_set_code_path(h, code_path.encode(), 1 if code_required else 0))
        if message_path is not None:
            _check(lib.courier_envelope_set_message_path(h, message_path.encode()))
        if data_path is not None:
            _check(lib.courier_envelope_set_data_path(h, data_path.encode()))
        for c in success_codes:
            _check(lib.courier_envelope_add_success_code(h, int(c)))
        if success_range is not None:
            _check(lib.courier_envelope_set_success_range(h, int(success_range[0]), int(success_range[1])))
        if mapping is not None:
            _check(lib.courier_envelope_set_mapping(h, mapping._handle()))
            self._keep.append(mapping)
        if check is not None:
            # check(document, code or None, message or None) -> bool; runs on the worker thread.
            key = cb.register(cb.Slot(check, None))
            _check(lib.courier_envelope_set_check(h, c_envelope_check, key, cb.user_free))

    def _handle(self) -> int:
        if not self._ptr:
            raise ValueError("envelope is freed")
        return self._ptr

    def close(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr:
            lib.courier_envelope_free(ptr)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover
            pass


_check = check
_ = c_char_p


# ---------------------------------------------------------------------------------------------
# Trampolines that build Python values from documents (see courier._callbacks)
# ---------------------------------------------------------------------------------------------

def _envelope_check(document: Optional[int], has_code: int, code: int, message: Optional[bytes],
                    user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return 0
    try:
        doc = json_to_python(document)
        msg = message.decode("utf-8", "replace") if message is not None else None
        return 1 if slot.fn(doc, code if has_code else None, msg) else 0
    except BaseException as e:
        slot.keep(e)
        return 0


def _decoder(body: Optional[int], length: int, content_type: Optional[bytes], out: Any, err: Any,
             user: Optional[int]) -> int:
    slot = cb.lookup(user)
    if slot is None:
        return cb.E_INTERNAL
    try:
        data = ctypes.string_at(body, length) if length else b""
        ctype = content_type.decode("utf-8", "replace") if content_type is not None else None
        out[0] = python_to_json(slot.fn(data, ctype))
        return 0
    except BaseException as e:
        if err:
            msg = f"{type(e).__name__}: {e}".encode("utf-8", "replace")[:255]
            err.contents.message = msg
        return cb.raise_in_send(slot, e)


c_envelope_check = cb.ENVELOPE_CHECK_FN(_envelope_check)
c_decoder = cb.DECODER_FN(_decoder)
