#!/usr/bin/env python3
"""Checks docs/vocabulary.md (the table of every C setting and its Swift and Python spelling)
against the three languages, so the names cannot drift:

- every C name in the table is declared in include/courier.h, and every configuration and request
  setter, freeze / cache / retry / priority / body policy and flag of the header has a row;
- every Swift name is declared in Sources/Courier, not deprecated, with the argument labels given
  (`Request.freeze(_:expiry:unordered:onAmbiguous:)`), on a type that exists;
- every Python name is reachable from the `courier` package: `Engine(base_url=)` is a keyword of
  the callable, `FreezePolicy.AUTO` an attribute, `FrozenManager.replay(manual=)` a keyword of the
  method.

Usage: check_vocabulary.py [--root DIR] [--doc FILE] [--no-python]
The Python checks import `courier` (PYTHONPATH=bindings/python, COURIER_LIBRARY=the built
libcourier.so). Exit status 0 when everything is found, 1 with one line per problem otherwise.
Run by ctest (test `vocabulary`, C and Swift columns: the sanitized library does not load into
Python) and by the Python suite (bindings/python/tests/test_vocabulary.py, all three columns).
"""
from __future__ import annotations

import argparse
import inspect
import pathlib
import re
import sys

# header_text.py sits beside this file (the Python suite loads this file by path: test_vocabulary.py)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from header_text import read_header  # noqa: E402

CELL_CODE = re.compile(r"`([^`]+)`")


def table_rows(doc: str) -> list[list[str]]:
    rows = []
    for line in doc.splitlines():
        if not line.startswith("| ") or line.startswith("|---") or line.startswith("| C |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3:
            rows.append(cells)
    return rows


# ---- C ------------------------------------------------------------------------------------------

def header_names(header: str) -> set[str]:
    return set(re.findall(r"\b(?:courier|COURIER)_\w+\b", header))


def required_c(header: str) -> set[str]:
    """The settings every row set must cover."""
    need = set(re.findall(r"COURIER_API int (courier_(?:config_(?:set|add|register)|request_(?:set|add))_\w+)\(",
                          header))
    for enum in ("courier_body_encoding", "courier_priority", "courier_cache_policy", "courier_cache_durability",
                 "courier_freeze_policy"):
        m = re.search(r"typedef enum %s \{(.*?)\} %s;" % (enum, enum), header, re.S)
        if not m:
            raise SystemExit(f"vocabulary: enum {enum} not found in the header")
        need |= set(re.findall(r"\b(COURIER_[A-Z0-9_]+)\s*=", m.group(1)))
    need |= set(re.findall(r"#define (COURIER_(?:FREEZE|RETRY|REPLAY|DOWNLOAD|RESULT)_[A-Z_]+) ", header))
    return need


# ---- Swift --------------------------------------------------------------------------------------

def swift_sources(root: pathlib.Path) -> list[tuple[str, list[str]]]:
    return [(str(p), p.read_text().splitlines()) for p in sorted((root / "Sources" / "Courier").rglob("*.swift"))]


def deprecated_above(lines: list[str], i: int) -> bool:
    j = i - 1
    while j >= 0 and lines[j].strip().startswith("@"):
        if "deprecated" in lines[j]:
            return True
        j -= 1
    return False


def param_labels(text: str) -> list[str] | None:
    """The argument labels of the parameter list that starts at text[0] == '('."""
    depth, end = 0, None
    for k, ch in enumerate(text):
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
            if depth == 0:
                end = k
                break
    if end is None:
        return None
    inner, parts, depth, cur = text[1:end], [], 0, ""
    for ch in inner:
        if ch in "([<{":
            depth += 1
        elif ch in ")]>}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    labels = []
    for p in parts:
        head = p.split(":")[0].split()
        if not head:
            return None
        labels.append(head[0])
    return labels


def swift_check(sources: list[tuple[str, list[str]]], name: str) -> str | None:
    whole = "\n".join("\n".join(lines) for _, lines in sources)
    m = re.fullmatch(r"(\w+)\.(\w+)(?:\(([\w:]*)\))?", name)
    if not m:
        return f"Swift `{name}`: not Type.member or Type.member(labels:)"
    type_name, member, labels = m.group(1), m.group(2), m.group(3)
    if not re.search(r"\b(?:struct|enum|class|protocol|extension|actor)\s+%s\b" % re.escape(type_name), whole):
        return f"Swift `{name}`: no type {type_name}"
    if labels is None:
        decl = re.compile(r"^\s*(?:public\s+)?(?:static\s+)?(?:var|let|case)\s+`?%s`?\b" % re.escape(member))
        for _, lines in sources:
            for i, line in enumerate(lines):
                if decl.search(line) and not deprecated_above(lines, i):
                    return None
        return f"Swift `{name}`: no (non-deprecated) property or case {member}"
    want = [x for x in labels.split(":") if x != ""] if labels else []
    decl = re.compile(r"\b(?:func\s+%s\s*(?:<[^>]*>)?|(?<!\.)%s)\s*(?=\()" % (re.escape(member), "init" if member == "init" else "\0"))
    for _, lines in sources:
        text = "\n".join(lines)
        for mt in decl.finditer(text):
            got = param_labels(text[mt.end():])
            i = text.count("\n", 0, mt.start())
            if got == want and not deprecated_above(lines, i):
                return None
    return f"Swift `{name}`: no (non-deprecated) func {member}({labels}) with those labels"


# ---- Python -------------------------------------------------------------------------------------

def python_check(courier, name: str) -> str | None:
    m = re.fullmatch(r"(\w+)(?:\.(\w+))?(?:\((\w+)=\))?", name)
    if not m:
        return f"Python `{name}`: not Name, Name.attr, Name(kw=) or Name.method(kw=)"
    obj_name, attr, kw = m.groups()
    obj = getattr(courier, obj_name, None)
    if obj is None:
        return f"Python `{name}`: courier.{obj_name} does not exist"
    if attr:
        fields = getattr(obj, "__dataclass_fields__", {})
        if not hasattr(obj, attr) and attr not in fields:
            return f"Python `{name}`: courier.{obj_name} has no {attr}"
        obj = getattr(obj, attr, None)
    if kw:
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            return f"Python `{name}`: no signature to look {kw} up in"
        if kw not in params:
            return f"Python `{name}`: no keyword {kw}"
    return None


# ---- main ---------------------------------------------------------------------------------------

def check(root: pathlib.Path, doc: pathlib.Path | None = None, python: bool = True) -> tuple[int, list[str]]:
    """Returns the number of rows and the problems found."""
    header = read_header(root / "include" / "courier.h")  # with the parts it includes
    rows = table_rows((doc or root / "docs" / "vocabulary.md").read_text())
    sources = swift_sources(root)
    courier = None
    if python:
        import courier  # noqa: F811 (PYTHONPATH=bindings/python, COURIER_LIBRARY set by the caller)

    problems, c_seen = [], set()
    known_c = header_names(header)
    for cells in rows:
        c_names = CELL_CODE.findall(cells[0])
        if not c_names:
            problems.append(f"row without a C name: {cells}")
        for c in c_names:
            c_seen.add(c)
            if c not in known_c:
                problems.append(f"C `{c}`: not in include/courier.h or its parts")
        for s in CELL_CODE.findall(cells[1]):
            p = swift_check(sources, s)
            if p:
                problems.append(p)
        if courier is not None:
            for py in CELL_CODE.findall(cells[2]):
                p = python_check(courier, py)
                if p:
                    problems.append(p)
    for missing in sorted(required_c(header) - c_seen):
        problems.append(f"C `{missing}`: a setting of the header with no row in docs/vocabulary.md")
    return len(rows), problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]))
    ap.add_argument("--doc", help="the table (default: ROOT/docs/vocabulary.md)")
    ap.add_argument("--no-python", action="store_true", help="skip the Python column")
    args = ap.parse_args()
    n, problems = check(pathlib.Path(args.root), pathlib.Path(args.doc) if args.doc else None, not args.no_python)
    for p in problems:
        print("vocabulary:", p)
    print(f"vocabulary: {n} rows, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
