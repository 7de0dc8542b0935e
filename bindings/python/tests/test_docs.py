"""What docs/python.md and README.md show a Python user runs: every ```python block, each in a
fresh namespace and a temporary working directory, against the loopback test server (its address
in place of http://127.0.0.1:8080)."""
from __future__ import annotations

import contextlib
import io
import pathlib
import re

import pytest

from conftest import ROOT

PLACEHOLDER = "http://127.0.0.1:8080"


def _blocks(path: pathlib.Path) -> list[tuple[str, int, str]]:
    text = path.read_text()
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        out.append((f"{path.name}:{line}", line, m.group(1)))
    return out


DOCS = [ROOT / "docs" / "python.md", ROOT / "README.md"]
BLOCKS = [b for p in DOCS if p.exists() for b in _blocks(p)]


def test_the_docs_have_python_blocks() -> None:
    names = {b[0].split(":")[0] for b in BLOCKS}
    assert names == {"python.md", "README.md"} and len(BLOCKS) >= 8


@pytest.mark.parametrize("where,line,code", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_python_block_runs(where: str, line: int, code: str, base_url: str, tmp_path: pathlib.Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    source = code.replace(PLACEHOLDER, base_url)
    compiled = compile("\n" * (line) + source, where.split(":")[0], "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compiled, {"__name__": "__docs__"})
    assert out.getvalue()  # every block prints what it shows
