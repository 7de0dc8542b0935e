"""docs/vocabulary.md against the header, the Swift sources and this package (scripts/check_vocabulary.py):
every setting has one word, spelled in each language's case convention, and the table cannot drift."""
from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_the_vocabulary_table_matches_the_three_languages() -> None:
    spec = importlib.util.spec_from_file_location("check_vocabulary", ROOT / "scripts" / "check_vocabulary.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    rows, problems = module.check(ROOT)
    assert rows > 100
    assert problems == []
