"""The public C API as one text: include/courier.h with the parts it includes put in place.

include/courier.h includes its parts (include/courier/*.h, "courier/base.h" and so on), and each part
includes the parts it needs. read_header(path) returns the text of `path` with every `#include "..."`
of a file beside it replaced by that file's text, each file once, in include order: for
include/courier.h, every declaration of the API in the order a compiler reads them. Used by the
checks that read the header (check_header_grammar.py, check_error_contract.py, check_vocabulary.py);
bindings/python/tools/gen_decls.py keeps its own copy (the binding's tools stand alone).
"""
from __future__ import annotations

import re
from pathlib import Path

_INCLUDE = re.compile(r'[ \t]*#[ \t]*include[ \t]+"([^"]+)"[^\n]*\n?')


def read_header(path: str | Path, _seen: set[Path] | None = None) -> str:
    path = Path(path).resolve()
    seen = set() if _seen is None else _seen
    if path in seen:
        return ""
    seen.add(path)
    text = path.read_text(encoding="utf-8")

    def expand(m: re.Match[str]) -> str:
        target = path.parent / m.group(1)
        return read_header(target, seen) if target.is_file() else m.group(0)

    return _INCLUDE.sub(expand, text)
