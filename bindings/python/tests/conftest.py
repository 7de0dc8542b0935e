"""Fixtures: one loopback test server per session (courier-test-server from the CMake build)."""
from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import urllib.request
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    import courier

ROOT = pathlib.Path(__file__).resolve().parents[3]

# An engine opened without a store writes to the default store under $XDG_DATA_HOME: in the
# tests, a temporary directory of this session (its subprocesses inherit it), never the home.
_DATA_HOME = tempfile.TemporaryDirectory(prefix="courier-py-data-")
os.environ["XDG_DATA_HOME"] = _DATA_HOME.name
BUILD = pathlib.Path(os.environ.get("COURIER_BUILD_DIR", ROOT / "build" / "py"))


def server_path() -> str:
    path = os.environ.get("COURIER_TEST_SERVER") or str(BUILD / "courier-test-server")
    if not os.access(path, os.X_OK):
        pytest.exit(f"courier-test-server not found at {path} (set COURIER_TEST_SERVER)", returncode=2)
    return path


class Server:
    """A courier-test-server process: it prints its port, serves, and exits when stdin closes."""

    def __init__(self, port: int = 0) -> None:
        args = [server_path(), "--stdin-eof"]
        if port:
            args += ["--port", str(port)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("courier-test-server did not start")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"
        self._count_calls = 0

    def count(self) -> int:
        """Requests the server has parsed, not counting the /count requests of this method."""
        with urllib.request.urlopen(self.url + "/count", timeout=5) as r:
            self._count_calls += 1
            return int(json.load(r)["requests"]) - self._count_calls

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def base_url(server: Server) -> str:
    return server.url


@pytest.fixture
def engine(base_url: str, tmp_path: pathlib.Path) -> Iterator["object"]:
    import courier
    with courier.Engine(base_url=base_url, timeout=10, store=str(tmp_path / "store")) as e:
        yield e


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this session for the tests of the stores on Redis (scripts/redis-fixture:
    loopback, AOF, appendfsync always). Skips in a library built without Redis; fails, saying so,
    without redis-server (scripts/setup installs it)."""
    import courier
    try:
        courier.Engine(temporary_store=True, cache_store="redis://127.0.0.1:1/0").close()
    except courier.RedisUnsupported:
        pytest.skip("this library was built without Redis (COURIER_REDIS off)")
    d = tmp_path_factory.mktemp("redis")
    fixture = str(ROOT / "scripts" / "redis-fixture")
    out = subprocess.run(["bash", fixture, "start", str(d)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.fail(f"redis-server did not start (scripts/setup installs it): {out.stderr.strip()}")
    try:
        yield out.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", fixture, "stop", str(d)], capture_output=True)


def wait_until(pred, timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Polls ``pred`` until it is true (no fixed sleeps: the machine may be busy)."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A port nobody listens on (connect is refused)."""
    return free_port()


def pytest_report_header(config: object) -> str:
    import courier
    return f"courier {courier.__version__} over {courier.library_path} ({courier.library_version()}), python {sys.version.split()[0]}"


# ---- the pinned worker's thread state (test_thread_states.py, test_aio.py) --------------------


def pinned_engine(base_url: str) -> "courier.Engine":
    """An engine whose worker has run completions, so its state is pinned (when pinning is on)."""
    import courier  # noqa: F811 (at run time; the fixtures import it lazily)
    from courier import _callbacks

    e = courier.Engine(base_url=base_url, temporary_store=True, timeout=10)
    for _ in range(20):
        for f in [e.send_async("GET", "/json") for _ in range(4)]:
            f.result(10)
        if e._pinned or not _callbacks._pinning:
            break
    return e


class Raised(Exception):
    """What an :class:`ArmedClock` raises."""


class ArmedClock:
    """A clock (courier's ``clock=``) that raises :class:`Raised` once, on the thread that armed it,
    and otherwise tells the time."""

    def __init__(self) -> None:
        self.armed: list[int] = []

    def arm(self) -> None:
        import threading

        self.armed.append(threading.get_ident())

    def __call__(self) -> float:
        import threading
        import time

        if self.armed and threading.get_ident() == self.armed[0]:
            self.armed.clear()
            raise Raised()
        return time.time()
