#!/usr/bin/env python3
"""The code blocks of README.md, docs/*.md, docs/design/*.md and the DocC articles (Sources/Courier/Courier.docc),
compiled and run, so an example can never be wrong.

Every fenced block whose info string is `swift`, `python` or `c` is an example a user may copy; each
is compiled and run against the loopback test server:

- the examples talk to `http://127.0.0.1:8080`, the address of `courier serve --port 8080` (so a
  reader can run them as they are); here that address is rewritten to a test server on a free port;
- `swift` blocks: each becomes the main.swift of an executable in a package made under
  build/docs-snippets that depends on this checkout by path, built in Swift 6 language mode with
  every warning an error, then run;
- `c` blocks: each is compiled as C11 with -Wall -Wextra -Werror against the built library, then run;
- `python` blocks: each is run by the Python that has the binding installed
  (bindings/python/tests/test_docs_examples.py does that inside the Python suite);
- every block must exit 0; a block whose first line is `// expect-exit: N` (`# expect-exit: N`)
  must exit N instead.

A `swift` block that begins with `// swift-tools-version` is a package manifest, not a program:
it is left out here (scripts/check-swift-consumer builds README's manifest as a package that depends
on a tagged clone of this checkout). Blocks in other languages are not examples to run: `sh` blocks are the commands the test command
itself runs (or a user types: installing, serving); unlabeled blocks are diagrams or output.

Usage:
  docblocks.py list                                  # every block with its language and place
  docblocks.py c --cc CC --include DIR --lib FILE --server BIN [--flags "..."]
  docblocks.py swift --server BIN
  docblocks.py python --python PY --server BIN       # (the pytest file uses extract() directly)
DOCBLOCKS_VERBOSE=1 prints what each block printed.
Exits 0 when every block of the language builds and runs, 1 otherwise, printing a closing line
'N passed, N failed'.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterator, List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "docs/*.md", "docs/design/*.md", "bindings/python/README.md",
             "Sources/Courier/Courier.docc/*.md"]
DEMO_ADDRESS = "127.0.0.1:8080"
RUN_TIMEOUT = 120


@dataclass
class Block:
    path: str        # relative to the checkout
    line: int        # line of the opening fence (1-based)
    language: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.path}:{self.line}"

    def expected_exit(self) -> int:
        first = self.code.lstrip().splitlines()[0] if self.code.strip() else ""
        m = re.match(r"^(?://|#)\s*expect-exit:\s*(\d+)\s*$", first)
        return int(m.group(1)) if m else 0

    def for_port(self, port: int) -> str:
        return self.code.replace(DEMO_ADDRESS, f"127.0.0.1:{port}")


def documents() -> List[pathlib.Path]:
    found: List[pathlib.Path] = []
    for pattern in DOCUMENTS:
        found.extend(sorted(ROOT.glob(pattern)))
    return found


def extract(language: Optional[str] = None) -> List[Block]:
    """Every fenced block of the documents (of one language when given), in document order."""
    blocks: List[Block] = []
    fence = re.compile(r"^(\s*)(```+|~~~+)\s*([A-Za-z0-9_+-]*)")
    for doc in documents():
        lines = doc.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = fence.match(lines[i])
            if not m:
                i += 1
                continue
            marker, lang, start = m.group(2), m.group(3).lower(), i
            body: List[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append(lines[i])
                i += 1
            i += 1
            if lang == "swift" and body and body[0].lstrip().startswith("// swift-tools-version"):
                continue  # a package manifest (see the module's docstring)
            if language is None or lang == language:
                blocks.append(Block(str(doc.relative_to(ROOT)), start + 1, lang, "\n".join(body) + "\n"))
    return blocks


class Server:
    """A courier-test-server process on a free port; it exits when its stdin closes."""

    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen([binary, "--stdin-eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise SystemExit(f"docblocks: {binary} did not start")
        self.port = int(line)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_block(block: Block, argv: List[str], cwd: str, env: Optional[dict] = None) -> Optional[str]:
    """Runs one built block; returns None when it exited as expected, else what went wrong."""
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"did not finish within {RUN_TIMEOUT} s"
    if os.environ.get("DOCBLOCKS_VERBOSE"):
        print(f"--- {block.name} printed:\n" + done.stdout.decode("utf-8", "replace"))
    if done.returncode != block.expected_exit():
        return (f"exited {done.returncode}, expected {block.expected_exit()}:\n"
                + done.stdout.decode("utf-8", "replace"))
    return None


def report(results: List[tuple]) -> int:
    failed = [(b, why) for b, why in results if why]
    for b, why in results:
        print(f"{'ok  ' if not why else 'FAIL'} {b.language:6} {b.name}")
    for b, why in failed:
        print(f"\n--- {b.name} ({b.language}) {why}", file=sys.stderr)
    print(f"examples: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def check_c(args: argparse.Namespace) -> int:
    blocks = extract("c")
    results = []
    work = tempfile.mkdtemp(prefix="courier-docs-c-")
    libdir = str(pathlib.Path(args.lib).resolve().parent)
    try:
        with Server(args.server) as server:
            for n, block in enumerate(blocks):
                src = pathlib.Path(work, f"example{n}.c")
                exe = pathlib.Path(work, f"example{n}")
                src.write_text(block.for_port(server.port))
                cmd = [args.cc, "-std=c11", "-Wall", "-Wextra", "-Werror", *args.flags.split(),
                       f"-I{args.include}", str(src), args.lib, f"-Wl,-rpath,{libdir}", "-o", str(exe)]
                built = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                if built.returncode != 0:
                    results.append((block, "does not build:\n" + built.stdout.decode("utf-8", "replace")))
                    continue
                results.append((block, run_block(block, [str(exe)], work)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(results)


SNIPPET_PACKAGE = """// swift-tools-version:6.2
// Made by scripts/docblocks.py: one executable per Swift block of README.md and docs/.
import PackageDescription

let package = Package(
    name: "DocsSnippets",
    platforms: [.macOS(.v13)],
    dependencies: [
        // The traits of CourierTracing and CourierMetrics, and of the adapter products (README,
        // "Swift's ecosystem"; OpenAPI turns on HTTPTypes).
        .package(name: "Courier", path: "{root}", traits: ["Tracing", "Metrics", "OpenAPI"]),
        // For blocks that import the tracing and metrics test kits or the adapters' packages.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.8.0"),
    ],
    targets: [
{targets}
    ],
    swiftLanguageModes: [.v6]
)
"""

SNIPPET_TARGET = """        .executableTarget(
            name: "{name}",
            dependencies: [{products}],
            path: "Sources/{name}",
            swiftSettings: [.treatAllWarnings(as: .error)]
        ),"""


# A module a block imports -> the product and package that give it (Courier's is always there),
# linked only into the blocks that import it, so the others build as a dependent of Courier alone does.
SNIPPET_PRODUCTS = {
    "CourierTracing": ("CourierTracing", "Courier"),
    "CourierMetrics": ("CourierMetrics", "Courier"),
    "Tracing": ("Tracing", "swift-distributed-tracing"),
    "InMemoryTracing": ("InMemoryTracing", "swift-distributed-tracing"),
    "CoreMetrics": ("CoreMetrics", "swift-metrics"),
    "Metrics": ("Metrics", "swift-metrics"),
    "MetricsTestKit": ("MetricsTestKit", "swift-metrics"),
    "CourierHTTPTypes": ("CourierHTTPTypes", "Courier"),
    "CourierOpenAPI": ("CourierOpenAPI", "Courier"),
    "HTTPTypes": ("HTTPTypes", "swift-http-types"),
    "OpenAPIRuntime": ("OpenAPIRuntime", "swift-openapi-runtime"),
}


def snippet_products(code: str) -> str:
    """The target's dependencies: Courier, and the products of the modules the block imports."""
    wanted = [("Courier", "Courier")]
    for module in re.findall(r"^import\s+(\w+)", code, re.MULTILINE):
        if module in SNIPPET_PRODUCTS and SNIPPET_PRODUCTS[module] not in wanted:
            wanted.append(SNIPPET_PRODUCTS[module])
    return ", ".join(f'.product(name: "{p}", package: "{k}")' for p, k in wanted)


def check_swift(args: argparse.Namespace) -> int:
    blocks = extract("swift")
    package = ROOT / "build" / "docs-snippets"
    sources = package / "Sources"
    if sources.exists():
        shutil.rmtree(sources)
    package.mkdir(parents=True, exist_ok=True)
    names = [f"Snippet{n + 1}" for n in range(len(blocks))]
    (package / "Package.swift").write_text(SNIPPET_PACKAGE.format(
        root=str(ROOT), targets="\n".join(SNIPPET_TARGET.format(name=n, products=snippet_products(b.code))
                                          for n, b in zip(names, blocks))))
    results = []
    with Server(args.server) as server:
        # The port differs per run, so the snippets are written (and rebuilt) per run; the Courier
        # dependency stays built in the snippet package's own .build.
        for name, block in zip(names, blocks):
            (sources / name).mkdir(parents=True)
            (sources / name / "main.swift").write_text(f"// {block.name}\n" + block.for_port(server.port))
        built_ok = []
        for name, block in zip(names, blocks):
            built = subprocess.run(["swift", "build", "--package-path", str(package), "--product", name],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if built.returncode != 0:
                log = built.stdout.decode("utf-8", "replace").splitlines()
                mine = [ln for ln in log if "error:" in ln or "warning:" in ln]
                results.append((block, "does not build:\n" + "\n".join(mine or log[-30:])))
            else:
                built_ok.append((name, block))
        bindir = subprocess.run(["swift", "build", "--package-path", str(package), "--show-bin-path"],
                                stdout=subprocess.PIPE, text=True).stdout.strip()
        with tempfile.TemporaryDirectory(prefix="courier-docs-swift-") as work:
            for name, block in built_ok:
                results.append((block, run_block(block, [os.path.join(bindir, name)], work)))
    return report(results)


def check_python(args: argparse.Namespace) -> int:
    results = []
    with Server(args.server) as server, tempfile.TemporaryDirectory(prefix="courier-docs-py-") as work:
        for block in extract("python"):
            src = pathlib.Path(work, "example.py")
            src.write_text(block.for_port(server.port))
            results.append((block, run_block(block, [args.python, str(src)], work)))
    return report(results)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("list")
    c = sub.add_parser("c")
    c.add_argument("--cc", default=os.environ.get("CC", "cc"))
    c.add_argument("--include", required=True)
    c.add_argument("--lib", required=True)
    c.add_argument("--server", required=True)
    c.add_argument("--flags", default="")
    s = sub.add_parser("swift")
    s.add_argument("--server", required=True)
    p = sub.add_parser("python")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--server", required=True)
    args = parser.parse_args(argv)
    if args.mode == "list":
        for b in extract():
            print(f"{b.language or '-':8} {b.name}")
        return 0
    # An example that opens an engine with the default store writes under $XDG_DATA_HOME (the
    # durable store where apps keep data): a temporary directory of this run, never the home.
    with tempfile.TemporaryDirectory(prefix="courier-docs-data-") as data:
        os.environ["XDG_DATA_HOME"] = data
        return {"c": check_c, "swift": check_swift, "python": check_python}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
