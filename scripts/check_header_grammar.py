#!/usr/bin/env python3
"""Checks that include/courier.h and its parts (include/courier/*.h) keep one grammar (docs/ABI.md,
"The header's grammar").

    python3 scripts/check_header_grammar.py [include/courier.h]
    python3 scripts/check_header_grammar.py --self-test

Reads the header's prototypes (courier.h with the parts it includes: header_text.py), callback typedefs and structs (comments removed) and refuses:
  long      `long` anywhere (durations and sizes are int64_t, counts int, indexes size_t);
  out-first an out-parameter of a function that returns a code (int) after an input: out-parameters
            come first (a non-const pointer to a number, to a size-carrying struct, or a `T **`;
            `hint` is an input that the call moves);
  out-name  such an out-parameter not named `out` or `out_*`;
  err-last  a `courier_error *` that is not the last parameter (in a callback typedef: the last
            before `void *user`);
  size      a struct that does not begin with `size_t size;` (the fixed-size structs, which keep
            reserved room instead, are listed in FIXED);
  ms        a duration that is not int64_t milliseconds: an integer parameter or field named
            `seconds`, `*_s` or `*_sec`, or a `*_ms` one of another type than int64_t;
  free      a free function for library memory other than courier_free (a `*_free` taking
            `char *`, `void *` or `uint8_t *`);
  enum      an `int` parameter named like an enum (policy, mode, kind, level, durability, type, code,
            priority, encoding, rotation, redaction, component), except in the `*_name` and
            `courier_strerror` functions, which answer unknown values too.
Prints one line per problem and exits 1 when there is any.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from header_text import read_header

# Structs of a fixed size with reserved room (docs/ABI.md): they never grow.
FIXED = {"courier_error", "courier_mapping_error", "courier_json_tape_entry"}
SCALARS = {"int", "unsigned", "int64_t", "uint64_t", "size_t", "double", "float", "long"}
ENUM_NAMES = {"policy", "mode", "kind", "level", "durability", "priority", "encoding", "rotation", "type", "code",
              "redaction", "component"}


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"^\s*#[^\n]*(\\\n[^\n]*)*", " ", text, flags=re.M)


def _param(p: str) -> tuple[str, str]:
    p = " ".join(p.split())
    m = re.fullmatch(r"(.*?[\s*])(\w+)", p)
    return (m.group(1).strip(), m.group(2)) if m else (p, "")


def check(text: str) -> list[str]:
    src = _strip(text)
    problems: list[str] = []
    enums = set(re.findall(r"typedef\s+enum\s+\w+\s*\{[^}]*\}\s*(\w+)\s*;", src))
    structs = {m.group(1): m.group(2) for m in
               re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", src, flags=re.S)}
    sized = {n for n, body in structs.items() if re.match(r"\s*size_t\s+size\s*;", body)}

    if re.search(r"\blong\b", src):
        for line in src.splitlines():
            if re.search(r"\blong\b", line):
                problems.append(f"long: {' '.join(line.split())}")

    for name, body in structs.items():
        if name not in FIXED and name not in sized:
            problems.append(f"size: struct {name} does not begin with `size_t size;`")
        for field in body.split(";"):
            t, n = _param(field)
            if n:
                problems += _duration(f"struct {name}", t, n)

    protos = [(m.group(1).strip(), m.group(2), m.group(3)) for m in
              re.finditer(r"COURIER_API\s+([^;(]*?)\b(courier_\w+)\s*\(([^;]*?)\)\s*;", src, flags=re.S)]
    callbacks = [("", m.group(1), m.group(2)) for m in
                 re.finditer(r"typedef\s+[^;()]*\(\s*\*\s*(courier_\w+)\s*\)\s*\(([^;]*?)\)\s*;", src, flags=re.S)]
    for ret, fname, args in protos + callbacks:
        params = [] if args.strip() in ("", "void") else [_param(a) for a in args.split(",")]
        where = f"{fname}({', '.join(n for _, n in params)})"
        errs = [i for i, (t, _) in enumerate(params) if re.sub(r"\bconst\b", "", t).split() == ["courier_error", "*"]
                or re.sub(r"\bconst\b|\s", "", t) == "courier_error*"]
        # a callback takes `void *user` last (STYLE.md), so its error comes just before it
        last = len(params) - (2 if ret == "" and params and params[-1][1] == "user" else 1)
        if errs and errs[-1] != last:
            problems.append(f"err-last: {where}")
        if ret == "int" and not fname.endswith("_init"):
            seen_input = False
            for t, n in params:
                if _is_out(t, n, sized):
                    if n != "out" and not n.startswith("out_"):
                        problems.append(f"out-name: {where}: out-parameter `{n}` is not named out or out_*")
                    if seen_input:
                        problems.append(f"out-first: {where}: `{n}` after an input")
                        break
                elif "courier_error" not in t:
                    seen_input = True
        if re.fullmatch(r"void courier_\w+_free", f"{ret} {fname}") and fname != "courier_free" and params:
            t = re.sub(r"\bconst\b|\s", "", params[0][0])
            if t in ("char*", "void*", "uint8_t*"):
                problems.append(f"free: {fname} frees library memory: use courier_free")
        for t, n in params:
            problems += _duration(where, t, n)
            if (t == "int" and n in ENUM_NAMES and not fname.endswith("_name")
                    and fname != "courier_strerror" and ret != ""):
                problems.append(f"enum: {where}: `int {n}` takes an enum: use its type")
    del enums
    return problems


def _is_out(t: str, n: str, sized: set[str]) -> bool:
    if n == "hint" or "courier_error" in t:
        return False
    compact = re.sub(r"\s", "", t)
    if compact.endswith("**") and not compact.startswith("const") or re.fullmatch(r"const\w+\*\*", compact):
        return not compact.endswith("*const*")
    if compact.startswith("const"):
        return False
    base = compact.rstrip("*")
    return compact.count("*") == 1 and (base in SCALARS or base in sized or base.startswith("courier_") and
                                        base.endswith("_kind") or base == "courier_log_level")


def _duration(where: str, t: str, n: str) -> list[str]:
    integer = re.sub(r"\bconst\b", "", t).strip() in SCALARS - {"double", "float"}
    if integer and (n == "seconds" or n.endswith("_s") or n.endswith("_sec")):
        return [f"ms: {where}: `{t} {n}`: durations are int64_t milliseconds (`_ms`)"]
    if n.endswith("_ms") and "*" not in t and re.sub(r"\bconst\b", "", t).strip() != "int64_t":
        return [f"ms: {where}: `{t} {n}`: milliseconds are int64_t"]
    return []


SELF_TEST = {
    "long": "COURIER_API int courier_x_set(courier_x *x, long timeout_ms);",
    "out-first": "COURIER_API int courier_x_get(const courier_x *x, int64_t *count);",
    "err-last": "COURIER_API int courier_x_do(courier_error *err, courier_x *x);",
    "out-name": "COURIER_API int courier_x_count(int64_t *count, const courier_x *x);",
    "size": "typedef struct courier_y { int a; } courier_y;",
    "ms": "COURIER_API int courier_x_set_expiry(courier_x *x, int64_t seconds);",
    "free": "COURIER_API void courier_x_key_free(char *key);",
    "enum": "COURIER_API int courier_x_set_policy(courier_x *x, int policy);",
}
GOOD = """
typedef struct courier_y { size_t size; int a; } courier_y;
typedef enum courier_p { COURIER_P_A = 0 } courier_p;
COURIER_API int courier_x_get(int64_t *out_count, courier_y *out, const courier_x *x, courier_error *err);
COURIER_API int courier_x_set_policy(courier_x *x, courier_p policy, int64_t expiry_ms);
COURIER_API const char *courier_x_kind_name(int kind);
COURIER_API void courier_free(void *ptr);
"""


def self_test() -> int:
    failed = 0
    for rule, text in SELF_TEST.items():
        got = check(text)
        if not any(p.startswith(rule + ":") for p in got):
            print(f"self-test: `{rule}` not refused in {text!r}: {got}")
            failed += 1
    if check(GOOD):
        print(f"self-test: a good header refused: {check(GOOD)}")
        failed += 1
    print(f"header grammar self-test: {len(SELF_TEST) + 1 - failed} of {len(SELF_TEST) + 1} cases pass")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--self-test"]:
        return self_test()
    path = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent / "include" / "courier.h")
    problems = check(read_header(path))
    for p in problems:
        print(f"header grammar: {p}")
    print(f"header grammar: {path.name}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
