"""The package as `pip install ./bindings/python` makes it: the library inside, one version, an sdist
that builds on its own. run-tests.sh runs this suite in a fresh virtual environment with the wheel
installed; these tests check that it really is the wheel that is tested."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

import courier
from conftest import ROOT

HEADER = pathlib.Path(os.environ.get("COURIER_HEADER", ROOT / "include" / "courier.h"))
PACKAGE = pathlib.Path(courier.__file__).resolve().parent


def _header_version() -> str:
    m = re.search(r'#define\s+COURIER_VERSION_STRING\s+"([^"]+)"', HEADER.read_text())
    assert m
    return m.group(1)


def test_tests_import_the_installed_package_and_its_library() -> None:
    site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
    assert PACKAGE.parent == site  # not bindings/python/courier
    assert "COURIER_LIBRARY" not in os.environ
    assert pathlib.Path(courier.library_path).resolve().parent == PACKAGE
    assert pathlib.Path(courier.library_path).name.startswith("libcourier")


def test_version_is_the_headers() -> None:
    assert courier.__version__ == _header_version()
    assert courier.__version__ == courier.library_version()  # courier_version()
    assert importlib.metadata.version("courier") == courier.__version__
    major, minor, patch = (int(x) for x in courier.__version__.split("."))
    assert courier.library_version_num() == (major << 16) | (minor << 8) | patch


def test_benchmark_is_not_shipped() -> None:
    assert importlib.util.find_spec("courier.bench") is None
    files = [f.name for f in PACKAGE.iterdir()]
    assert not [f for f in files if "bench" in f]


def test_courier_library_overrides_the_packaged_one(tmp_path: pathlib.Path) -> None:
    copy = tmp_path / "libcourier-copy.so"
    shutil.copy(courier.library_path, copy)
    env = dict(os.environ, COURIER_LIBRARY=str(copy))
    out = subprocess.run([sys.executable, "-c", "import courier; print(courier.library_path)"], env=env,
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == str(copy)
    env["COURIER_LIBRARY"] = str(tmp_path / "missing.so")
    out = subprocess.run([sys.executable, "-c", "import courier"], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode != 0 and "ImportError" in out.stderr


def test_sdist_installs_in_a_fresh_venv(tmp_path: pathlib.Path, base_url: str) -> None:
    """The sdist carries the C core (pyproject.toml's sdist.force-include): built from it alone, in
    a fresh virtual environment, without the checkout, the package loads its own library."""
    tools = os.environ.get("COURIER_PY_TOOLS")
    wheelhouse = os.environ.get("COURIER_PY_WHEELHOUSE")
    if not tools or not wheelhouse:
        pytest.skip("run through run-tests.sh (the build tools and wheelhouse it keeps)")
    dist = tmp_path / "dist"
    subprocess.run([f"{tools}/bin/python", "-c",
                    "import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))",
                    str(dist)], cwd=ROOT / "bindings" / "python", check=True, capture_output=True)
    (sdist,) = dist.glob("courier-*.tar.gz")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("COURIER_LIBRARY", "PYTHONPATH")}
    # build isolation as pip does it for users; the backend comes from the local wheelhouse
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "--no-index", "--find-links", wheelhouse, str(sdist)], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    env.pop("COURIER_PY_SPEEDUPS", None)
    code = ("import courier, sys, courier._fast as f\n"
            "with courier.Engine(base_url=sys.argv[1]) as e:\n"
            "    print(courier.__version__, courier.library_path, e.get('/json').status, f.path())\n")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code, base_url], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True)
    version, path, status, hot = out.stdout.split()
    assert version == _header_version() and status == "200"
    assert path.startswith(str(venv))
    assert hot == "compiled"  # the sdist carries src/speedups.c


def test_the_hot_path_is_the_one_asked_for() -> None:
    """The wheel carries courier._speedups (run-tests.sh builds it with Python's headers at hand)
    and uses it unless COURIER_PY_SPEEDUPS=0 asks for ctypes; run-tests.sh runs the suite both ways."""
    from courier import _fast
    assert any(f.name.startswith("_speedups.") for f in PACKAGE.iterdir())
    assert _fast.available
    want = "ctypes" if os.environ.get("COURIER_PY_SPEEDUPS") == "0" else "compiled"
    assert _fast.path() == want


def test_the_compiled_path_uses_the_library_ctypes_loaded(tmp_path: pathlib.Path, base_url: str) -> None:
    """With COURIER_LIBRARY naming another copy of the library, the compiled path calls that copy
    (it is handed the addresses of the functions ctypes loaded): one library in the process."""
    lib = pathlib.Path(courier.library_path)
    copy = tmp_path / lib.name
    shutil.copy(lib, copy)
    env = {k: v for k, v in os.environ.items() if k not in ("COURIER_PY_SPEEDUPS", "PYTHONPATH")}
    env["COURIER_LIBRARY"] = str(copy)
    code = ("import courier, courier._fast as f\n"
            "with courier.Engine(temporary_store=True) as e:\n"
            f"    r = e.get({base_url + '/bytes/10'!r})\n"
            "    fut = e.send_async('GET', " + repr(base_url + "/status/404") + ")\n"
            "    try:\n"
            "        fut.result()\n"
            "    except courier.HTTPStatusError as x:\n"
            "        st = x.response.status\n"
            "maps = [l for l in open('/proc/self/maps') if 'libcourier' in l]\n"
            "print(f.path(), r.status, len(r.body), st, len({l.split()[-1] for l in maps}), courier.library_path)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    path, status, n, st, libs, loaded = out.stdout.split()
    assert (path, status, n, st, libs, loaded) == ("compiled", "200", "10", "404", "1", str(copy))
