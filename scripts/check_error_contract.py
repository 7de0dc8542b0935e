#!/usr/bin/env python3
"""Checks that Tests/CCoreTests/error_contract_test.c covers every public function that writes a
`courier_error *` (include/courier.h: "Caller-allocated; the library writes every field"). The header
is read with the parts it includes (header_text.py).

    python3 scripts/check_error_contract.py [include/courier.h [Tests/CCoreTests/error_contract_test.c]]
    python3 scripts/check_error_contract.py --self-test

A function of the header (COURIER_API) with a parameter of type `courier_error *` (not `const`: the
readers courier_error_timeout_kind, _user_data and _freeze_id only read one) is covered when the
test calls it on a succeeding path through its OK(...) macro, `OK(courier_x, ...)`, or checks it
by hand with `check_cleared(&err, "courier_x", ...)` (a call made inside a callback, or
courier_error_clear). Prints the functions that are not and exits 1 when there is any.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from header_text import read_header


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def writers(header: str) -> list[str]:
    """The names of the public functions that take a non-const courier_error *, in header order."""
    out = []
    for m in re.finditer(r"COURIER_API\s+[^;(]*?\b(courier_\w+)\s*\(([^;]*?)\)\s*;", _strip(header), flags=re.S):
        for p in m.group(2).split(","):
            p = " ".join(p.split())
            if re.search(r"\bcourier_error\s*\*", p) and not re.search(r"\bconst\b", p):
                out.append(m.group(1))
                break
    return out


def covered(test: str) -> set[str]:
    src = _strip(test)
    names = set(re.findall(r"\bOK\(\s*(courier_\w+)\s*,", src))
    names |= set(re.findall(r"\bcheck_cleared\([^;]*?\"(courier_\w+)\"", src, flags=re.S))
    return names


def check(header: str, test: str) -> list[str]:
    have = covered(test)
    return [f for f in writers(header) if f not in have]


SELF_HEADER = """
/* COURIER_API int courier_in_a_comment(courier_error *err); */
COURIER_API int courier_a(int *out, courier_error *err);
COURIER_API int courier_b(const char *s,
                          courier_error *err);
COURIER_API int courier_reader(const courier_error *err);
COURIER_API void courier_c(courier_error *err);
COURIER_API int courier_no_err(int x);
"""
SELF_TEST = """
    OK(courier_a, &x);
    check_cleared(&err, "courier_c", __FILE__, __LINE__);
    /* OK(courier_b, "commented out"); */
"""


def self_test() -> int:
    failed = 0
    got = writers(SELF_HEADER)
    if got != ["courier_a", "courier_b", "courier_c"]:
        print(f"self-test: writers() read {got}")
        failed += 1
    missing = check(SELF_HEADER, SELF_TEST)
    if missing != ["courier_b"]:
        print(f"self-test: a function only in a comment of the test, or a covered one, misjudged: {missing}")
        failed += 1
    if check(SELF_HEADER, SELF_TEST + 'OK(courier_b, "x");'):
        print("self-test: a covered function reported")
        failed += 1
    print(f"error contract self-test: {3 - failed} of 3 cases pass")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--self-test"]:
        return self_test()
    root = Path(__file__).resolve().parent.parent
    header = Path(argv[1]) if len(argv) > 1 else root / "include" / "courier.h"
    test = Path(argv[2]) if len(argv) > 2 else root / "Tests" / "CCoreTests" / "error_contract_test.c"
    header_text = read_header(header)  # courier.h with the parts it includes
    missing = check(header_text, test.read_text(encoding="utf-8"))
    for f in missing:
        print(f"error contract: {f} takes a courier_error * and {test.name} does not call it on a succeeding "
              f"path (OK({f}, ...)), nor check_cleared its err")
    print(f"error contract: {len(writers(header_text))} functions write a courier_error, {len(missing)} not covered")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
