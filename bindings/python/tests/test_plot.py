"""courier.plot draws a chart of a recorded stress result and of benchmark figures (matplotlib, the
package's optional extra "plot", installed by run-tests.sh), and the files are real PNG and SVG."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib", reason='the optional extra: pip install "./bindings/python[plot]"')

from courier import plot  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "stress_cache.json")


def _check_png(path: str) -> None:
    with open(path, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 10_000


def _check_svg(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert "<svg" in text[:2000]
    assert text.rstrip().endswith("</svg>")
    assert len(text) > 10_000


def test_stress_json_to_png_and_svg(tmp_path) -> None:
    with open(DATA, encoding="utf-8") as f:
        result = json.load(f)
    assert plot.is_stress(result)
    png = plot.plot(DATA, str(tmp_path / "stress.png"))
    _check_png(png)
    svg = plot.plot(DATA, str(tmp_path / "stress.svg"))
    _check_svg(svg)


def test_command_line(tmp_path) -> None:
    out = tmp_path / "chart.svg"
    subprocess.run([sys.executable, "-m", "courier.plot", DATA, "-o", str(out)], check=True,
                   env=dict(os.environ), capture_output=True)
    _check_svg(str(out))


def test_bench_peers_side_by_side(tmp_path) -> None:
    figures = {"raw_get_ops": 2_000_000.0, "courier_get_ops": 1_300_000.0, "swift_get_ops": 900_000.0,
               "raw_put_ops": 180_000.0, "courier_put_ops": 120_000.0, "urlcache_put_ops": 40.0,
               "entries": 100000, "errors": 0}
    groups = plot.peer_groups(figures)
    assert [p for p, _ in groups["get_ops"]] == ["raw", "courier", "swift"]
    assert [p for p, _ in groups["put_ops"]] == ["raw", "courier", "urlcache"]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(figures))
    _check_png(plot.plot(str(path), str(tmp_path / "bench.png")))


def test_bad_output_name(tmp_path) -> None:
    with pytest.raises(SystemExit):
        plot.plot(DATA, str(tmp_path / "chart.jpg"))
