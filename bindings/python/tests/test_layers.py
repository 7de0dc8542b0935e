"""The package reads one way: declarations (``_decls``, ``_lib``), then the calls into the library
(``_enums``, ``errors``, ``_callbacks``), then the types, then the engine. Each module imports only
modules below it, at the top of the module, and no two modules import each other, directly or
through others, even where one side is an import under ``if TYPE_CHECKING:`` (which names types
for annotations and runs nothing, but still makes the pair a circle to read)."""
from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import courier

PACKAGE = pathlib.Path(courier.__file__).parent

#: bottom to top
LAYERS = ["_decls", "_lib", "_fast", "_enums", "errors", "_adapters", "_callbacks", "auth", "security", "netopts", "pool", "mapping", "response", "frozen", "request", "session", "stubs", "stream", "websocket",
          "transport", "cache_verify", "cache", "group", "logs", "otel", "engine", "aio", "httpx", "requests", "plot", "pytest_plugin", "__init__"]


def _imports(path: pathlib.Path, annotations: bool = False) -> list[tuple[str, int, bool]]:
    """(module of the package imported, line, inside a function) for each runtime import, and with
    ``annotations`` each import under ``if TYPE_CHECKING:`` too."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test) and not annotations:
                continue  # annotations only
            if isinstance(child, ast.ImportFrom) and child.level == 1:
                if child.module:
                    found.append((child.module.split(".")[0], child.lineno, in_function))
                else:
                    found.extend((a.name, child.lineno, in_function) for a in child.names)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def test_every_module_has_a_layer() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"_version"}
    assert modules == set(LAYERS) - set(), sorted(modules ^ set(LAYERS))


def test_no_module_imports_one_above_it_or_inside_a_function() -> None:
    problems = []
    for name in LAYERS:
        path = PACKAGE / f"{name}.py"
        for target, line, in_function in _imports(path):
            if target in ("_version", "_speedups"):  # generated; compiled (below every module)
                continue
            if in_function:
                problems.append(f"{name}.py:{line} imports .{target} inside a function")
            elif LAYERS.index(target) >= LAYERS.index(name):
                problems.append(f"{name}.py:{line} imports .{target}, which is not below it")
    assert not problems, "\n".join(problems)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (its modules, the first repeated at the end) through each module that reaches itself."""
    found: list[list[str]] = []
    seen: set[str] = set()
    for start in sorted(graph):
        if start in seen:
            continue
        paths = {start: [start]}
        queue = [start]
        while queue:  # breadth first, back to start: the shortest circle through it
            here = queue.pop(0)
            for there in sorted(graph[here]):
                if there == start:
                    cycle = paths[here] + [start]
                    found.append(cycle)
                    seen.update(cycle)
                    queue = []
                    break
                if there not in paths:
                    paths[there] = paths[here] + [there]
                    queue.append(there)
    return found


def test_cycles_are_found() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_import_cycle_annotations_included() -> None:
    """errors, response, mapping and _callbacks once closed a circle through an annotation import
    (errors named response's Response while response raised errors' classes); the managers named
    the engine that makes them. Types the lower module needs come from below (``_lib.EngineHandle``)."""
    graph: dict[str, set[str]] = {}
    for name in LAYERS:
        graph[name] = {target for target, _, _ in _imports(PACKAGE / f"{name}.py", annotations=True)
                       if target in LAYERS and target != name}
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_each_module_imports_alone_in_layer_order() -> None:
    """Each module imported first in a fresh interpreter, bottom to top: none needs one above it
    to have loaded first."""
    for name in LAYERS[:-1]:
        if name == "plot":
            continue  # matplotlib is optional
        module = f"courier.{name}"
        # The package's __init__ imports every module: stand in for it with an empty package.
        code = (f"import sys, importlib, types; pkg = types.ModuleType('courier'); pkg.__path__ = [{str(PACKAGE)!r}]; "
                f"sys.modules['courier'] = pkg; importlib.import_module({module!r}); "
                f"above = [m for m in sys.modules if m.startswith('courier.') and m.split('.')[1] in "
                f"{LAYERS[LAYERS.index(name) + 1:]!r}]; assert not above, above")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
        assert run.returncode == 0, f"{module}: {run.stderr[-2000:]}"


def test_no_bench_code_ships_in_the_package() -> None:
    names = [p.name for p in PACKAGE.rglob("*")]
    assert not [n for n in names if "bench" in n.lower()], names
    for path in PACKAGE.rglob("*.py"):
        for target, line, _ in _imports(path):
            assert "bench" not in target.lower(), f"{path.name}:{line}"
        text = path.read_text()
        assert "import bench" not in text and "tools.bench" not in text, path.name
