"""Every Python block of README.md and docs/ runs as it stands against the loopback test server
(scripts/docblocks.py finds the blocks and rewrites the demo address 127.0.0.1:8080 to the server)."""
from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("docblocks", ROOT / "scripts" / "docblocks.py")
docblocks = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["docblocks"] = docblocks
_spec.loader.exec_module(docblocks)  # type: ignore[union-attr]

BLOCKS = docblocks.extract("python")


def test_the_documents_have_python_examples() -> None:
    assert any(b.path == "docs/python.md" for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_python_example_runs(block, server, tmp_path) -> None:
    src = tmp_path / "example.py"
    src.write_text(block.for_port(server.port))
    done = subprocess.run([sys.executable, str(src)], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=120)
    assert done.returncode == block.expected_exit(), done.stdout.decode("utf-8", "replace")
