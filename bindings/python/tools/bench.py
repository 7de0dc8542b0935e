"""GETs of a 1 KiB body from one local server, through this binding, ``requests`` and
``urllib.request``, in the same run. Not part of the package: run-bench.sh runs it against the
installed wheel.

    python bindings/python/tools/bench.py [--requests 5000] [--concurrency 32] [--runs 3] [--json]

The server is nginx when ``/usr/sbin/nginx`` (or ``--nginx PATH``) exists — a generated
configuration in a temporary directory serving a 1024-byte file, one worker, no access log —
else Courier's loopback test server (``/bytes/1024``; ``COURIER_TEST_SERVER`` or ``--server``).

Clients, each sending every request with ``concurrency`` in flight:

* ``courier_py``: one :class:`courier.Engine` (32 connections per host), ``engine.submit`` (the
  callback form of ``send_async``, without a future) with a completion callback that sends the
  next request, keeping ``concurrency`` in flight (as the C
  loop below does); coalescing is turned off per request (``courier_request_set_coalesce(req,
  0)``), so every GET goes on the wire;
* ``courier_py_threads``: 32 threads calling the blocking ``engine.get`` (``courier_send_sync``);
* ``requests``: a thread pool of 32, one ``requests.Session`` per thread (keep-alive);
* ``urllib``: a thread pool of 32 calling ``urllib.request.urlopen`` (a connection per request,
  as urllib does);
* ``c_api`` (when a C compiler and Courier's sources are at hand): the C loop of
  ``Benchmarks/CBench/transport_bench.c`` (``cbench_courier_c``), compiled into a temporary
  shared library and driven through ctypes, for the binding's overhead against the C API.

Each client runs ``runs`` times (after an untimed warm-up); the medians are reported, with the
CPU time of this process per request (steadier than rates on a busy machine). ``--json``
prints one object: ``courier_py_rps``, ``requests_rps``, ``urllib_rps`` (and
``courier_py_threads_rps``, ``c_api_rps`` when measured, the ratios, and the server used).
Benchmarks are figures, not tests: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Callable, Optional

import courier

BODY_SIZE = 1024


# ---- servers ------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"server on port {port} did not start")


class _Server:
    url: str
    name: str

    def stop(self) -> None:
        raise NotImplementedError


class _Nginx(_Server):
    def __init__(self, nginx: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="courier-bench-nginx-")
        os.chmod(self.dir, 0o755)  # workers may run as another user
        www = os.path.join(self.dir, "www")
        os.mkdir(www)
        os.chmod(www, 0o755)
        with open(os.path.join(www, "1k"), "wb") as f:
            f.write(bytes(i % 251 for i in range(BODY_SIZE)))
        os.chmod(os.path.join(www, "1k"), 0o644)
        port = _free_port()
        d = self.dir
        conf = f"""
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    server {{
        listen 127.0.0.1:{port};
        location / {{ root {www}; default_type application/octet-stream; }}
    }}
}}
"""
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen([nginx, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e",
                                      os.path.join(d, "error.log")], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_port(port)
        except RuntimeError:
            self.stop()
            raise
        self.url = f"http://127.0.0.1:{port}/1k"
        self.name = "nginx"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class _TestServer(_Server):
    def __init__(self, path: str) -> None:
        self.proc = subprocess.Popen([path, "--stdin-eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        port = int(self.proc.stdout.readline())  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/bytes/{BODY_SIZE}"
        self.name = "courier-test-server"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(10)


def _find_test_server(explicit: Optional[str]) -> Optional[str]:
    for cand in (explicit, os.environ.get("COURIER_TEST_SERVER"),
                 str(pathlib.Path(courier.library_path).resolve().parent / "courier-test-server")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return shutil.which("courier-test-server")


def start_server(nginx: Optional[str], server: Optional[str]) -> _Server:
    nginx = nginx or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else shutil.which("nginx"))
    if nginx and nginx != "none":
        try:
            return _Nginx(nginx)
        except Exception as e:  # fall back to the test server
            print(f"bench.py: nginx did not start ({e}); using the test server", file=sys.stderr)
    path = _find_test_server(server)
    if not path:
        raise SystemExit("bench.py: no nginx and no courier-test-server (set COURIER_TEST_SERVER)")
    return _TestServer(path)


# ---- clients ------------------------------------------------------------------------------------

def _check(status: int, n: int) -> None:
    if status != 200 or n != BODY_SIZE:
        raise RuntimeError(f"bad answer: status {status}, {n} bytes")


def run_courier_async(url: str, total: int, concurrency: int) -> float:
    """send_async with a completion callback that sends the next request (``concurrency`` in
    flight), the way an event-driven program uses the engine; the caller waits for the last."""
    with courier.Engine(max_connections_per_host=concurrency, max_connections=max(64, concurrency),
                        timeout=30) as engine:
        req = courier.Request("GET", url, coalesce=False)
        done = threading.Event()
        errors: list[BaseException] = []
        state = {"sent": 0, "finished": 0}
        lock = threading.Lock()

        def send_next() -> None:
            with lock:
                if state["sent"] >= total:
                    return
                state["sent"] += 1
            engine.submit(req, callback=on_done)

        def on_done(resp: Optional[courier.Response], err: Optional[BaseException]) -> None:
            # runs on the engine's worker thread
            if err is not None:
                errors.append(err)
            else:
                assert resp is not None
                if resp.status != 200 or len(resp.body) != BODY_SIZE:
                    errors.append(RuntimeError(f"bad answer: {resp.status}"))
            send_next()
            with lock:
                state["finished"] += 1
                if state["finished"] == total:
                    done.set()

        # warm-up: open the connections
        for f in [engine.send_async(req) for _ in range(concurrency)]:
            f.result()
        t0 = time.perf_counter()
        for _ in range(min(concurrency, total)):
            send_next()
        done.wait()
        elapsed = time.perf_counter() - t0
        if errors:
            raise RuntimeError(f"courier: {len(errors)} errors, first: {errors[0]!r}")
        return total / elapsed


def _threaded(total: int, concurrency: int, setup: Callable[[], Any], one: Callable[[Any], None]) -> float:
    local = threading.local()

    def task(_: int) -> None:
        state = getattr(local, "state", None)
        if state is None:
            state = local.state = setup()
        one(state)

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(task, range(concurrency * 2)))  # warm-up: threads, sessions, connections
        t0 = time.perf_counter()
        list(pool.map(task, range(total)))
        return total / (time.perf_counter() - t0)


def run_courier_threads(url: str, total: int, concurrency: int) -> float:
    """The blocking engine.get from ``concurrency`` threads sharing one engine."""
    with courier.Engine(max_connections_per_host=concurrency, max_connections=max(64, concurrency),
                        timeout=30) as engine:
        req = courier.Request("GET", url, coalesce=False)

        def one(_: Any) -> None:
            r = engine.send(req)
            _check(r.status, len(r.body))

        return _threaded(total, concurrency, lambda: None, one)


def run_requests(url: str, total: int, concurrency: int) -> Optional[float]:
    try:
        import requests
    except ImportError:
        return None

    def setup() -> Any:
        s = requests.Session()
        a = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=1)
        s.mount("http://", a)
        return s

    def one(s: Any) -> None:
        r = s.get(url, timeout=30)
        _check(r.status_code, len(r.content))

    return _threaded(total, concurrency, setup, one)


def run_urllib(url: str, total: int, concurrency: int) -> float:
    def one(_: Any) -> None:
        with urllib.request.urlopen(url, timeout=30) as r:
            _check(r.status, len(r.read()))

    return _threaded(total, concurrency, lambda: None, one)


def run_courier_aio(url: str, total: int, concurrency: int) -> float:
    """:class:`courier.AsyncEngine`: ``concurrency`` asyncio tasks, each awaiting ``engine.get``
    in a loop (the shape of the aiohttp and httpx clients below)."""
    import asyncio

    async def main() -> float:
        async with courier.AsyncEngine(max_connections_per_host=concurrency,
                                       max_connections=max(64, concurrency), timeout=30) as engine:
            req = courier.Request("GET", url, coalesce=False)

            async def worker(n: int) -> None:
                for _ in range(n):
                    r = await engine.send(req)
                    _check(r.status, len(r.body))

            await asyncio.gather(*(worker(1) for _ in range(concurrency)))  # warm-up
            t0 = time.perf_counter()
            await asyncio.gather(*(worker(n) for n in _shares(total, concurrency)))
            return total / (time.perf_counter() - t0)

    return asyncio.run(main())


def _shares(total: int, concurrency: int) -> list[int]:
    """``total`` requests split between ``concurrency`` workers."""
    return [total // concurrency + (1 if i < total % concurrency else 0) for i in range(concurrency)]


def run_aiohttp(url: str, total: int, concurrency: int) -> Optional[float]:
    """aiohttp's ClientSession: one connector of ``concurrency`` keep-alive connections,
    ``concurrency`` tasks."""
    try:
        import aiohttp
    except ImportError:
        return None
    import asyncio

    async def main() -> float:
        conn = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
        async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as session:
            async def worker(n: int) -> None:
                for _ in range(n):
                    async with session.get(url) as r:
                        body = await r.read()
                        _check(r.status, len(body))

            await asyncio.gather(*(worker(1) for _ in range(concurrency)))  # warm-up
            t0 = time.perf_counter()
            await asyncio.gather(*(worker(n) for n in _shares(total, concurrency)))
            return total / (time.perf_counter() - t0)

    return asyncio.run(main())


def run_httpx(url: str, total: int, concurrency: int) -> Optional[float]:
    """httpx's AsyncClient: a pool of ``concurrency`` keep-alive connections, ``concurrency`` tasks."""
    try:
        import httpx
    except ImportError:
        return None
    import asyncio

    async def main() -> float:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=30) as client:
            async def worker(n: int) -> None:
                for _ in range(n):
                    r = await client.get(url)
                    _check(r.status_code, len(r.content))

            await asyncio.gather(*(worker(1) for _ in range(concurrency)))  # warm-up
            t0 = time.perf_counter()
            await asyncio.gather(*(worker(n) for n in _shares(total, concurrency)))
            return total / (time.perf_counter() - t0)

    return asyncio.run(main())


def run_pycurl(url: str, total: int, concurrency: int) -> Optional[float]:
    """pycurl's CurlMulti (libcurl from Python through a compiled extension): ``concurrency`` easy
    handles kept in the multi handle, each re-added as soon as it completes (so its connection is
    reused), driven by ``perform`` / ``select``; the body is collected into a list of chunks."""
    try:
        import pycurl
    except ImportError:
        return None
    multi = pycurl.CurlMulti()
    handles = []
    for _ in range(concurrency):
        e = pycurl.Curl()
        e.setopt(pycurl.URL, url)
        e.setopt(pycurl.TIMEOUT, 30)
        e.setopt(pycurl.NOSIGNAL, 1)
        handles.append(e)

    def start(e: Any) -> None:
        chunks: list[bytes] = []
        e.chunks = chunks
        e.setopt(pycurl.WRITEFUNCTION, chunks.append)
        multi.add_handle(e)

    def run(n: int) -> None:
        started = 0
        finished = 0
        for e in handles[:n]:
            start(e)
            started += 1
        while finished < n:
            ret, _ = multi.perform()
            while ret == pycurl.E_CALL_MULTI_PERFORM:
                ret, _ = multi.perform()
            while True:
                _, ok, failed = multi.info_read()
                for e in ok:
                    multi.remove_handle(e)
                    _check(e.getinfo(pycurl.RESPONSE_CODE), sum(len(c) for c in e.chunks))
                    finished += 1
                    if started < n:
                        start(e)
                        started += 1
                if failed:
                    raise RuntimeError(f"pycurl: {failed[0][2]}")
                if not ok:
                    break
            if finished < n:
                multi.select(1.0)

    try:
        run(concurrency)  # warm-up: opens the connections
        t0 = time.perf_counter()
        run(total)
        return total / (time.perf_counter() - t0)
    finally:
        for e in handles:
            e.close()
        multi.close()


# ---- the C API's own loop (optional) ------------------------------------------------------------

class _CResult(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_double), ("completed", ctypes.c_long), ("errors", ctypes.c_long),
                ("body_bytes", ctypes.c_int64), ("first_error", ctypes.c_char * 256),
                ("cpu_seconds", ctypes.c_double), ("connections", ctypes.c_long), ("http_version", ctypes.c_int)]


def _source_dir() -> Optional[pathlib.Path]:
    cands = [os.environ.get("COURIER_SOURCE_DIR"), os.getcwd(),
             str(pathlib.Path(courier.library_path).resolve().parent.parent.parent)]
    for c in cands:
        if c and (pathlib.Path(c) / "Benchmarks" / "CBench" / "transport_bench.c").exists():
            return pathlib.Path(c)
    return None


def build_c_loop() -> tuple[Optional[Any], str]:
    """Compiles Benchmarks/CBench/transport_bench.c + process.c into a temporary shared library
    linked with the loaded libcourier. Returns (function, why-not)."""
    src = _source_dir()
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if src is None or cc is None:
        return None, "no C compiler or Courier sources (set COURIER_SOURCE_DIR)"
    out_dir = tempfile.mkdtemp(prefix="courier-bench-c-")
    out = os.path.join(out_dir, "libcbench.so")
    lib = pathlib.Path(courier.library_path).resolve()
    cflags = subprocess.run(["pkg-config", "--cflags", "--libs", "libcurl"], capture_output=True, text=True)
    curl = cflags.stdout.split() if cflags.returncode == 0 else ["-lcurl"]
    cmd = [cc, "-std=c11", "-O2", "-D_GNU_SOURCE", "-shared", "-fPIC", f"-I{src / 'include'}",
           f"-I{src / 'Benchmarks' / 'CBench' / 'include'}",
           str(src / "Benchmarks" / "CBench" / "transport_bench.c"), str(src / "Benchmarks" / "CBench" / "process.c"),
           str(lib), f"-Wl,-rpath,{lib.parent}", *curl, "-lpthread", "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(out_dir, ignore_errors=True)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "?"
        return None, f"the C loop did not build: {last}"
    so = ctypes.CDLL(out)
    fn = so.cbench_courier_c
    # cbench_result and cbench_courier_c as Benchmarks/CBench/include/cbench.h declares them
    fn.argtypes = [ctypes.c_char_p, ctypes.c_long, ctypes.c_int, ctypes.c_long, ctypes.c_void_p,
                   ctypes.POINTER(_CResult)]
    fn.restype = ctypes.c_int

    def run(url: str, total: int, concurrency: int) -> float:
        res = _CResult()
        rc = fn(url.encode(), total, concurrency, concurrency * 2, None, ctypes.byref(res))
        if rc != 0 or res.errors:
            raise RuntimeError(f"C loop: rc {rc}, {res.errors} errors: {res.first_error.decode()}")
        return res.completed / res.seconds

    run._dir = out_dir  # type: ignore[attr-defined]
    return run, ""


def _on_ctypes(fn: Callable[[str, int, int], float]) -> Callable[[str, int, int], Optional[float]]:
    """``fn`` with the binding's hot calls on ctypes (``courier._fast.enable(False)``), in this
    same process: the compiled path and the ctypes path side by side."""
    def run(url: str, total: int, concurrency: int) -> Optional[float]:
        from courier import _fast
        was = _fast.ext is not None
        _fast.enable(False)
        try:
            return fn(url, total, concurrency)
        finally:
            _fast.enable(was)
    return run


PY_CLIENTS: dict[str, Callable[[str, int, int], Optional[float]]] = {
    "courier_py": run_courier_async, "courier_aio": run_courier_aio, "courier_py_threads": run_courier_threads,
    "courier_py_ctypes": _on_ctypes(run_courier_async), "courier_aio_ctypes": _on_ctypes(run_courier_aio),
    "requests": run_requests, "urllib": run_urllib, "aiohttp": run_aiohttp, "httpx": run_httpx,
    "pycurl": run_pycurl,
}
ALL_CLIENTS = ["courier_py", "courier_py_ctypes", "courier_aio", "courier_aio_ctypes", "courier_py_threads", "pycurl", "aiohttp", "httpx", "requests",
               "urllib", "c_api"]
PEER_PACKAGES = {"aiohttp": "aiohttp", "httpx": "httpx", "pycurl": "pycurl", "requests": "requests"}


# ---- main ---------------------------------------------------------------------------------------

def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--nginx", help="path to nginx ('none': use the test server)")
    ap.add_argument("--server", help="path to courier-test-server")
    ap.add_argument("--no-c", action="store_true", help="skip the C API's loop")
    ap.add_argument("--clients", default=",".join(ALL_CLIENTS))
    args = ap.parse_args(argv)
    wanted = set(args.clients.split(","))
    if args.no_c:
        wanted.discard("c_api")

    srv = start_server(args.nginx, args.server)
    notes: dict[str, str] = {}
    try:
        clients: dict[str, Callable[[str, int, int], Optional[float]]] = {}
        for name in ALL_CLIENTS:
            if name in wanted and name in PY_CLIENTS:
                clients[name] = PY_CLIENTS[name]
        if "c_api" in wanted:
            fn, why = build_c_loop()
            if fn is not None:
                clients["c_api"] = fn
            else:
                notes["c_api"] = why
        samples: dict[str, list[float]] = {k: [] for k in clients}
        cpu: dict[str, list[float]] = {k: [] for k in clients}
        for run_no in range(args.runs):
            # interleaved, so drift of the machine affects every client alike, in the reverse order
            # every other run (paired runs: no client always runs after the same one)
            order = list(clients.items())
            if run_no % 2:
                order.reverse()
            for name, fn in order:
                if name in notes:
                    continue
                c0 = time.process_time()
                rps = fn(srv.url, args.requests, args.concurrency)
                if rps is None:
                    notes[name] = f"not installed (pip install {PEER_PACKAGES.get(name, name)}): skipped"
                    print(f"bench.py: {name} is {notes[name]}", file=sys.stderr)
                    continue
                samples[name].append(rps)
                # CPU of this process per request (warm-up included): steadier than wall time on
                # a busy machine; every client runs in this process, the server in another
                cpu[name].append((time.process_time() - c0) / args.requests * 1e6)
                if not args.json:
                    print(f"  {name:20s} {rps:10.0f} req/s", file=sys.stderr)
    finally:
        srv.stop()
        for fn in list(locals().get("clients", {}).values()):
            d = getattr(fn, "_dir", None)
            if d:
                shutil.rmtree(d, ignore_errors=True)

    result: dict[str, Any] = {}
    for name, vals in samples.items():
        if vals:
            result[f"{name}_rps"] = round(statistics.median(vals), 1)
            result[f"{name}_runs"] = [round(v, 1) for v in vals]
            result[f"{name}_cpu_us_per_request"] = round(statistics.median(cpu[name]), 1)
    for key in ("courier_py_rps", "requests_rps", "urllib_rps", "aiohttp_rps", "httpx_rps", "pycurl_rps"):
        result.setdefault(key, None)
    # the targets: courier_py (callbacks) >= 0.8x pycurl's CurlMulti, the asyncio client
    # >= 3x aiohttp; every ratio is of medians of the same interleaved runs
    # (on a busy machine the median of the per-run ratios, each of two clients measured next to
    # each other, is steadier than the ratio of the medians: both are given)
    for mine in ("courier_py", "courier_aio", "courier_py_ctypes", "courier_aio_ctypes"):
        for peer in ("pycurl", "aiohttp", "httpx", "courier_py", "courier_aio"):
            if peer.startswith("courier") and mine != peer + "_ctypes":
                continue  # the ctypes path against the compiled one only
            if result.get(f"{mine}_rps") and result.get(f"{peer}_rps"):
                result[f"{mine}_vs_{peer}"] = round(result[f"{mine}_rps"] / result[f"{peer}_rps"], 2)
                a, b = samples[mine], samples[peer]
                if len(a) == len(b):
                    result[f"{mine}_vs_{peer}_paired"] = round(statistics.median(x / y for x, y in zip(a, b)), 2)
                result[f"{mine}_vs_{peer}_cpu"] = round(result[f"{peer}_cpu_us_per_request"]
                                                       / result[f"{mine}_cpu_us_per_request"], 2)
    py = result.get("courier_py_rps")
    if py and result.get("requests_rps"):
        result["courier_py_vs_requests"] = round(py / result["requests_rps"], 2)
    if py and result.get("urllib_rps"):
        result["courier_py_vs_urllib"] = round(py / result["urllib_rps"], 2)
    if py and result.get("c_api_rps"):
        result["courier_py_vs_c_api"] = round(py / result["c_api_rps"], 2)
        result["courier_py_vs_c_api_cpu"] = round(result["c_api_cpu_us_per_request"]
                                                  / result["courier_py_cpu_us_per_request"], 2)
    from courier import _fast
    result.update(binding_path=_fast.path(), compiled_available=_fast.available)
    result.update(server=srv.name, requests=args.requests, concurrency=args.concurrency, runs=args.runs,
                  body_bytes=BODY_SIZE, python=sys.version.split()[0], library=courier.library_version())
    if notes:
        result["notes"] = notes
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
