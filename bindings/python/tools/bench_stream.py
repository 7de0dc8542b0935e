"""WebSocket echo and server-sent events through this binding and through the Python clients users
would pick instead, in the same run, against loopback servers of the project's own. Not part of
the package: ``run-bench.sh stream`` runs it against the installed wheel.

    python bindings/python/tools/bench_stream.py [--messages 5000] [--connections 32] \
        [--events 100000] [--runs 5] [--ws-server echo|test] [--json]

Every client of a row meets the same server process. WebSocket rows: by default ``courier-ws-echo``
(``COURIER_WS_ECHO`` or ``--ws-echo``; Tests/TestServer/tool/ws_echo.c, Linux: one thread over
epoll, one recv and one send a message), which sends every frame back; ``--ws-server test`` uses
the test server's ``/ws/echo`` instead (a thread per connection, parked in poll() after each
message: about as much CPU a round trip as the client under test at 32 connections, so those
figures measure the server as much as the clients; docs/design/ws-echo-peer.md). Server-sent
events: ``courier-test-server`` (``COURIER_TEST_SERVER`` or ``--server``), whose ``/sse?per=N``
writes N events as fast as the client reads them.

WebSocket: round trips of a 1 KiB binary message (send, then wait for its echo), on one connection
and on ``--connections`` connections at once (asyncio tasks, one connection each); connections are
opened before the clock starts. Clients:

* ``courier_sync``: :meth:`courier.Engine.websocket`, ``send`` / ``recv`` (1 connection);
* ``courier_aio``: :meth:`courier.AsyncEngine.websocket`, ``asend`` / ``arecv``;
* ``websockets_sync``: ``websockets.sync.client.connect`` (1 connection);
* ``websockets_aio``: ``websockets.asyncio.client.connect`` (the asyncio client).

Server-sent events: ``--events`` events of one ``/sse`` response read to the last, each parsed
and delivered to Python (``id``, ``event``, two ``data`` lines). Clients: ``courier_sync``
(``engine.events``), ``courier_aio`` (``async for`` over ``AsyncEngine.events``),
``httpx_sse_sync`` (``httpx.Client`` + ``httpx_sse.connect_sse``) and ``httpx_sse_aio``
(``httpx.AsyncClient`` + ``aconnect_sse``).

Each client runs ``--runs`` times, the clients' order rotating from run to run; the medians are
reported, with the CPU time of this process per round trip / per event and (Linux, from
/proc/PID/stat: 10 ms ticks, so read it over thousands of round trips) the server process's
(``..._server_cpu_us``), and each ratio is the median of the per-run ratios. The issue's bar: Courier >= 2x
``websockets`` for WebSocket echo. Benchmarks are figures, not tests: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any, Awaitable, Callable, Optional

import courier

MESSAGE = bytes(i % 251 for i in range(1024))
ROOT = pathlib.Path(__file__).resolve().parents[3]


# ---- the server ---------------------------------------------------------------------------------

class TestServer:
    """courier-test-server (or courier-ws-echo, which starts the same way) as a child process: it
    prints its port and serves until stdin closes."""

    def __init__(self, path: str) -> None:
        self.proc = subprocess.Popen([path, "--stdin-eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"{path} did not start")
        self.port = int(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def server_path(arg: Optional[str]) -> str:
    for p in (arg, os.environ.get("COURIER_TEST_SERVER"), str(ROOT / "build" / "py" / "courier-test-server")):
        if p and os.access(p, os.X_OK):
            return p
    sys.exit("courier-test-server not found: build it (run-bench.sh does) or pass --server PATH")


def ws_echo_path(arg: Optional[str]) -> str:
    for p in (arg, os.environ.get("COURIER_WS_ECHO"), str(ROOT / "build" / "py" / "courier-ws-echo")):
        if p and os.access(p, os.X_OK):
            return p
    sys.exit("courier-ws-echo not found: build it (run-bench.sh stream does, on Linux), pass --ws-echo PATH, "
             "or measure against the test server with --ws-server test")


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def process_cpu(pid: int) -> Callable[[], float]:
    """The CPU seconds (user + system, its threads gone included) process `pid` has used so far,
    from /proc (Linux; elsewhere always 0)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def read() -> float:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick
    return read


# ---- WebSocket clients: each returns the seconds of `total` round trips over `conns` connections --

def ws_courier_sync(url: str, total: int, conns: int, warmup: int) -> float:
    assert conns == 1
    with courier.Engine(temporary_store=True) as engine, engine.websocket(url) as ws:
        for _ in range(warmup):
            ws.send(MESSAGE)
            ws.recv()
        t0 = time.perf_counter()
        for _ in range(total):
            ws.send(MESSAGE)
            if len(ws.recv()) != len(MESSAGE):
                raise RuntimeError("courier_sync: a wrong echo")
        return time.perf_counter() - t0


def ws_websockets_sync(url: str, total: int, conns: int, warmup: int) -> float:
    assert conns == 1
    from websockets.sync.client import connect
    with connect(url, compression=None, max_size=None) as ws:
        for _ in range(warmup):
            ws.send(MESSAGE)
            ws.recv()
        t0 = time.perf_counter()
        for _ in range(total):
            ws.send(MESSAGE)
            if len(ws.recv()) != len(MESSAGE):
                raise RuntimeError("websockets_sync: a wrong echo")
        return time.perf_counter() - t0


async def _timed_echo(sockets: list[Any], total: int, warmup: int,
                      send: Callable[[Any], Awaitable[None]], recv: Callable[[Any], Awaitable[Any]]) -> float:
    """The round trips, spread over the open sockets (one task each), after an untimed warm-up."""
    async def loop(ws: Any, n: int) -> None:
        for _ in range(n):
            await send(ws)
            if len(await recv(ws)) != len(MESSAGE):
                raise RuntimeError("a wrong echo")

    await asyncio.gather(*(loop(ws, warmup) for ws in sockets))
    share = [total // len(sockets) + (1 if i < total % len(sockets) else 0) for i in range(len(sockets))]
    t0 = time.perf_counter()
    await asyncio.gather(*(loop(ws, n) for ws, n in zip(sockets, share)))
    return time.perf_counter() - t0


def ws_courier_aio(url: str, total: int, conns: int, warmup: int) -> float:
    async def main() -> float:
        async with courier.AsyncEngine(temporary_store=True, max_connections_per_host=max(6, conns),
                                       max_connections=max(64, conns)) as engine:
            sockets = await asyncio.gather(*(engine.websocket(url) for _ in range(conns)))
            try:
                return await _timed_echo(list(sockets), total, warmup,
                                         lambda ws: ws.asend(MESSAGE), lambda ws: ws.arecv())
            finally:
                await asyncio.gather(*(ws.aclose() for ws in sockets))
    return asyncio.run(main())


def ws_websockets_aio(url: str, total: int, conns: int, warmup: int) -> float:
    from websockets.asyncio.client import connect

    async def main() -> float:
        sockets = await asyncio.gather(*(connect(url, compression=None, max_size=None) for _ in range(conns)))
        try:
            return await _timed_echo(list(sockets), total, warmup,
                                     lambda ws: ws.send(MESSAGE), lambda ws: ws.recv())
        finally:
            await asyncio.gather(*(ws.close() for ws in sockets))
    return asyncio.run(main())


# ---- SSE clients: each reads `total` events of one response and returns the seconds --------------

def _check_last(data: str, total: int, who: str) -> None:
    if data != f"event {total}\nline two":
        raise RuntimeError(f"{who}: the last event was {data!r}")


def sse_courier_sync(url: str, total: int) -> float:
    with courier.Engine(temporary_store=True) as engine:
        t0 = time.perf_counter()
        n, data = 0, ""
        with engine.events(url) as source:
            for event in source:
                n += 1
                data = event.data
                if n == total:
                    break
        took = time.perf_counter() - t0
    _check_last(data, total, "courier_sync")
    return took


def sse_courier_aio(url: str, total: int) -> float:
    async def main() -> float:
        async with courier.AsyncEngine(temporary_store=True) as engine:
            t0 = time.perf_counter()
            n, data = 0, ""
            with engine.events(url) as source:
                async for event in source:
                    n += 1
                    data = event.data
                    if n == total:
                        break
            took = time.perf_counter() - t0
        _check_last(data, total, "courier_aio")
        return took
    return asyncio.run(main())


def sse_httpx_sync(url: str, total: int) -> float:
    import httpx
    from httpx_sse import connect_sse
    with httpx.Client(timeout=60) as client:
        t0 = time.perf_counter()
        n, data = 0, ""
        with connect_sse(client, "GET", url) as source:
            for event in source.iter_sse():
                n += 1
                data = event.data
                if n == total:
                    break
        took = time.perf_counter() - t0
    _check_last(data, total, "httpx_sse_sync")
    return took


def sse_httpx_aio(url: str, total: int) -> float:
    import httpx
    from httpx_sse import aconnect_sse

    async def main() -> float:
        async with httpx.AsyncClient(timeout=60) as client:
            t0 = time.perf_counter()
            n, data = 0, ""
            async with aconnect_sse(client, "GET", url) as source:
                async for event in source.aiter_sse():
                    n += 1
                    data = event.data
                    if n == total:
                        break
            took = time.perf_counter() - t0
        _check_last(data, total, "httpx_sse_aio")
        return took
    return asyncio.run(main())


# ---- the run ------------------------------------------------------------------------------------

Figures = tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]


def measure(clients: dict[str, Callable[[], float]], count: int, runs: int,
            log: Callable[[str], None], server_cpu: Callable[[], float]) -> Figures:
    """Runs every client `runs` times, the order rotating; rates (count / s), and CPU us per item
    of this process and of the server (warm-up and connecting included: a few percent)."""
    rates: dict[str, list[float]] = {k: [] for k in clients}
    cpus: dict[str, list[float]] = {k: [] for k in clients}
    server: dict[str, list[float]] = {k: [] for k in clients}
    names = list(clients)
    for run in range(runs):
        for i in range(len(names)):
            name = names[(i + run) % len(names)]
            c0, s0 = cpu(), server_cpu()
            seconds = clients[name]()
            used, served = cpu() - c0, server_cpu() - s0
            rates[name].append(count / seconds)
            cpus[name].append(used / count * 1e6)
            server[name].append(served / count * 1e6)
            log(f"run {run + 1}/{runs} {name}: {count / seconds:,.0f}/s")
    return rates, cpus, server


def summarize(prefix: str, figures: Figures, pairs: list[tuple[str, str]], result: dict[str, Any]) -> None:
    rates, cpus, server = figures
    for name, values in rates.items():
        result[f"{prefix}_{name}"] = round(statistics.median(values), 1)
        result[f"{prefix}_{name}_runs"] = [round(v, 1) for v in values]
        result[f"{prefix}_{name}_cpu_us"] = round(statistics.median(cpus[name]), 2)
        result[f"{prefix}_{name}_server_cpu_us"] = round(statistics.median(server[name]), 2)
    for mine, peer in pairs:
        a, b = rates[mine], rates[peer]
        result[f"{prefix}_{mine}_vs_{peer}"] = round(statistics.median(x / y for x, y in zip(a, b)), 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=5000, help="WebSocket round trips per client and run")
    ap.add_argument("--connections", type=int, default=32, help="connections of the parallel WebSocket case")
    ap.add_argument("--events", type=int, default=100_000, help="server-sent events per client and run")
    ap.add_argument("--runs", type=int, default=5, help="runs; medians are reported")
    ap.add_argument("--warmup", type=int, default=200, help="untimed round trips per connection")
    ap.add_argument("--only", choices=("ws", "sse"), help="one half only")
    ap.add_argument("--server", help="courier-test-server to start (else $COURIER_TEST_SERVER, build/py)")
    ap.add_argument("--ws-server", choices=("echo", "test"), default="echo",
                    help="the WebSocket rows' server: courier-ws-echo (default) or the test server's /ws/echo")
    ap.add_argument("--ws-echo", help="courier-ws-echo to start (else $COURIER_WS_ECHO, build/py)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    result: dict[str, Any] = {}
    m, k = args.messages, args.connections
    if args.only != "sse":
        ws_echo = args.ws_server == "echo"
        srv = TestServer(ws_echo_path(args.ws_echo) if ws_echo else server_path(args.server))
        result["ws_server"] = ("courier-ws-echo (C, one thread, epoll)" if ws_echo
                               else "courier-test-server /ws/echo (C, a thread per connection)")
        try:
            ws_url = f"ws://127.0.0.1:{srv.port}/ws/echo"
            server_cpu = process_cpu(srv.proc.pid)
            one = {
                "courier_sync": lambda: ws_courier_sync(ws_url, m, 1, args.warmup),
                "courier_aio": lambda: ws_courier_aio(ws_url, m, 1, args.warmup),
                "websockets_sync": lambda: ws_websockets_sync(ws_url, m, 1, args.warmup),
                "websockets_aio": lambda: ws_websockets_aio(ws_url, m, 1, args.warmup),
            }
            summarize("ws1", measure(one, m, args.runs, log, server_cpu),
                      [("courier_sync", "websockets_sync"), ("courier_aio", "websockets_aio")], result)
            many = {
                "courier_aio": lambda: ws_courier_aio(ws_url, m, k, args.warmup // 4),
                "websockets_aio": lambda: ws_websockets_aio(ws_url, m, k, args.warmup // 4),
            }
            summarize(f"ws{k}", measure(many, m, args.runs, log, server_cpu),
                      [("courier_aio", "websockets_aio")], result)
        finally:
            srv.stop()
    if args.only != "ws":
        srv = TestServer(server_path(args.server))
        try:
            sse_url = f"http://127.0.0.1:{srv.port}/sse?per={args.events}&total={args.events}"
            sse = {
                "courier_sync": lambda: sse_courier_sync(sse_url, args.events),
                "courier_aio": lambda: sse_courier_aio(sse_url, args.events),
                "httpx_sse_sync": lambda: sse_httpx_sync(sse_url, args.events),
                "httpx_sse_aio": lambda: sse_httpx_aio(sse_url, args.events),
            }
            summarize("sse", measure(sse, args.events, args.runs, log, process_cpu(srv.proc.pid)),
                      [("courier_sync", "httpx_sse_sync"), ("courier_aio", "httpx_sse_aio")], result)
        finally:
            srv.stop()

    import websockets
    result.update(messages=args.messages, message_bytes=len(MESSAGE), connections=args.connections,
                  events=args.events, runs=args.runs, python=sys.version.split()[0],
                  library=courier.library_version(), websockets=websockets.__version__,
                  sse_server="courier-test-server /sse (C, a thread per connection)")
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'':28}{'per second':>14}{'CPU us each':>14}{'server us':>11}   median of {args.runs} runs")
    for key, value in result.items():
        if key.endswith(("_runs", "_cpu_us")) or "_vs_" in key or key.endswith("_server") \
                or not key.startswith(("ws", "sse")):
            continue
        print(f"{key:28}{value:>14,.0f}{result[key + '_cpu_us']:>14.1f}{result[key + '_server_cpu_us']:>11.1f}")
    for key, value in result.items():
        if "_vs_" in key:
            print(f"{key:50} {value:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
