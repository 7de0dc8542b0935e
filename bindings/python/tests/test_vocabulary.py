"""docs/vocabulary.md against the header, the Swift sources and this package (scripts/check_vocabulary.py):
every setting has one word, spelled in each language's case convention, and the table cannot drift."""
from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _checker():
    spec = importlib.util.spec_from_file_location("check_vocabulary", ROOT / "scripts" / "check_vocabulary.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_vocabulary_table_matches_the_three_languages() -> None:
    rows, problems = _checker().check(ROOT)
    assert rows > 100
    assert problems == []


def test_the_check_finds_drift(tmp_path: pathlib.Path) -> None:
    text = (ROOT / "docs" / "vocabulary.md").read_text()
    drifted = (text.replace("`FreezePolicy.auto`", "`FreezePolicy.whenOffline`")  # deprecated in Swift
                   .replace("`Request.freeze(_:expiry:unordered:onAmbiguous:)` | `Request(freeze=)`",
                            "`Request.freeze(_:expiry:ordered:)` | `Request(freeze=)`")  # no such labels
                   .replace("`Engine(app_id=)`", "`Engine(appid=)`")  # no such keyword
                   .replace("`courier_config_set_insecure`", "`courier_config_set_insecur`"))  # not in the header
    doc = tmp_path / "vocabulary.md"
    doc.write_text(drifted)
    _, problems = _checker().check(ROOT, doc)
    joined = "\n".join(problems)
    for word in ("FreezePolicy.whenOffline", "freeze(_:expiry:ordered:)", "Engine(appid=)", "courier_config_set_insecur`",
                 "courier_config_set_insecure`: a setting of the header with no row"):
        assert word in joined
