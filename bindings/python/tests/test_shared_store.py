"""One store, several processes and languages at once: the promise of one engine for all.

A Python engine and a C program (bindings/c/example.c, compiled here against the built library)
open the same store directory at the same time: Python writes the cache, C reads it without the
network; Python freezes a request, C lists it and replays it. Then the same with a second Python
process writing while this one reads.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import courier
from conftest import BUILD, ROOT

EXAMPLE = ROOT / "bindings" / "c" / "example.c"


def _lines(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def c_example(tmp_path_factory) -> pathlib.Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    lib = pathlib.Path(courier.library_path)
    header = pathlib.Path(os.environ.get("COURIER_HEADER", ROOT / "include" / "courier.h"))
    if not cc or not header.exists() or not EXAMPLE.exists():
        pytest.skip("no C compiler or header: the C side of the shared-store test cannot be built")
    out = tmp_path_factory.mktemp("c") / "example"
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", f"-I{header.parent}", str(EXAMPLE), str(lib),
                    f"-Wl,-rpath,{lib.parent}", "-o", str(out)], check=True)
    return out


def test_python_writes_cache_and_freezes_c_reads_and_replays(c_example, base_url, server, tmp_path) -> None:
    store = str(tmp_path / "shared")
    with courier.Engine(base_url=base_url, store=store, frozen_paused=True) as py:
        r = py.get("/cache", params={"body": "shared"}, cache=courier.CachePolicy.CACHE_FIRST, cache_expiry=300)
        assert not r.from_cache
        py.set_offline()
        with pytest.raises(courier.Frozen) as info:
            py.post("/echo", body=b"from python", freeze=courier.Freeze("manual", id="py-order-1"))
        assert info.value.freeze_id == "py-order-1"

        # the C process runs while the Python engine still has the store open
        before = server.count()
        out = subprocess.run([str(c_example), base_url, store, "--replay"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        facts = _lines(out.stdout)
        assert facts["first.from_cache"] == "1" and facts["first.body"] == "shared"  # Python's entry
        assert facts["frozen.count"] == "1"
        assert facts["frozen.0"].startswith("py-order-1 POST ")
        assert facts["replayed.left"] == "0"
        # C sent exactly: GET /json and the replayed POST (the two cache GETs hit the store)
        assert server.count() - before == 2
        # Python sees what C did to the shared journal
        assert py.frozen.count() == 0
        assert py.frozen.last_outcome("py-order-1")[:2] == (0, 200)


WRITER = textwrap.dedent("""
    import sys, courier
    base, store, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with courier.Engine(base_url=base, store=store) as e:
        for i in range(n):
            e.get("/cache", params={"body": f"item-{i}"}, cache=courier.CachePolicy.CACHE_FIRST, cache_expiry=300)
            print(i, flush=True)
""")


def test_two_python_processes_share_one_store(base_url, server, tmp_path) -> None:
    store = str(tmp_path / "shared")
    n = 50
    env = dict(os.environ)
    with courier.Engine(base_url=base_url, store=store) as reader:
        proc = subprocess.Popen([sys.executable, "-c", WRITER, base_url, store, str(n)], stdout=subprocess.PIPE,
                                text=True, env=env)
        seen_while_running = 0
        for line in proc.stdout:  # type: ignore[union-attr]
            i = int(line)
            # each entry is readable here as soon as the writer's send returned
            if reader.cache.has("GET", "/cache", params={"body": f"item-{i}"}):
                seen_while_running += 1
        assert proc.wait(60) == 0
        assert seen_while_running == n
        before = server.count()
        for i in range(n):
            r = reader.get("/cache", params={"body": f"item-{i}"}, cache=courier.CachePolicy.CACHE_FIRST)
            assert r.from_cache and r.body == f"item-{i}".encode()
        assert server.count() == before
        assert reader.cache.size()[1] == n
