"""The request options are typed parameters (RequestOptions, through Unpack), so editors complete
them and mypy checks them; py.typed ships with the package."""
from __future__ import annotations

import importlib.util
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

import courier
from courier.request import RequestOptions

HERE = pathlib.Path(__file__).resolve().parent / "typing"


def test_request_options_are_requests_keyword_parameters() -> None:
    params = {p.name: p.annotation for p in inspect.signature(courier.Request.__init__).parameters.values()
              if p.kind is inspect.Parameter.KEYWORD_ONLY}
    options = {k: (v.__forward_arg__ if hasattr(v, "__forward_arg__") else v)
               for k, v in RequestOptions.__annotations__.items()}
    assert options == params  # a new Request keyword goes into RequestOptions too


@pytest.mark.parametrize("fn", [courier.Engine.send, courier.Engine.get, courier.Engine.head, courier.Engine.post,
                                courier.Engine.put, courier.Engine.patch, courier.Engine.delete,
                                courier.Engine.send_async, courier.Engine.submit, courier.Engine.request,
                                courier.AsyncEngine.send, courier.AsyncEngine.get, courier.AsyncEngine.post,
                                courier.CacheManager.key, courier.CacheManager.has, courier.CacheManager.get,
                                courier.CacheManager.remove])
def test_request_methods_take_typed_options(fn) -> None:
    var = [p for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert len(var) == 1 and var[0].annotation == "Unpack[RequestOptions]"


def test_py_typed_is_shipped() -> None:
    assert (pathlib.Path(courier.__file__).parent / "py.typed").exists()


def _mypy(path: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--show-error-codes",
                           "--hide-error-context", "--no-error-summary", str(path)],
                          capture_output=True, text=True, cwd=HERE, env=dict(os.environ, MYPYPATH=""))


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_accepts_typical_usage() -> None:
    out = _mypy(HERE / "good_usage.py")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_catches_wrong_options() -> None:
    out = _mypy(HERE / "bad_usage.py")
    found = sorted((int(m.group(1)), m.group(2)) for m in
                   re.finditer(r"bad_usage\.py:(\d+): error: .*\[([\w-]+)\]$", out.stdout, re.M))
    assert found == [(7, "arg-type"), (8, "call-arg"), (9, "arg-type"), (10, "arg-type")], out.stdout
