"""The adapters' cost: the same GETs of a 1 KiB body through httpx with its own transport and with
``courier.httpx.Transport``/``AsyncTransport``, and through requests with its own adapter and with
``courier.requests.Adapter``, in one process against one local server (nginx when installed, else
the loopback test server: bench.py's ``start_server``). Not part of the package: run by
run-adapter-bench.sh against the installed wheel.

    python bindings/python/tools/bench_adapters.py [--requests 2000] [--runs 5] [--concurrency 16] [--json]

Clients (each sends ``requests`` GETs; the clients are interleaved run by run, the order reversed
every other run, and the median rate of the runs is reported):

* ``httpx_own`` / ``httpx_courier``: one ``httpx.Client``, one request after another;
* ``httpx_async_own`` / ``httpx_async_courier``: one ``httpx.AsyncClient``, ``concurrency`` tasks;
* ``requests_own`` / ``requests_courier``: one ``requests.Session``, one request after another;
* ``engine``: Courier's own API (``engine.get``), one request after another: the baseline of
  ``<base>_courier_overhead_cpu_us``, the CPU time per request the library and the adapter add.

The Courier engine has no cache and no coalescing for these requests (every GET goes on the wire,
as with the libraries' own transports). Each client's figures: ``<client>_rps`` (median rate) and
``<client>_cpu_us`` (median CPU time of the whole process per request, the engine's threads
included: steadier than rates on a busy machine). Ratios: ``<base>_courier_vs_own`` (rates) and
``<base>_courier_vs_own_cpu`` (CPU per request, own / Courier); above 1: Courier's is cheaper.
Figures, not tests: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any, Callable

import httpx
import requests

import courier
import courier.httpx
import courier.requests
from bench import start_server  # bindings/python/tools/bench.py


def sync_loop(get: Callable[[], Any], total: int) -> float:
    start = time.perf_counter()
    for _ in range(total):
        r = get()
        if r.status_code != 200 or len(r.content) != 1024:
            raise RuntimeError(f"bad answer {r.status_code}")
    return total / (time.perf_counter() - start)


def engine_loop(engine: courier.Engine, url: str, total: int, opts: dict[str, Any]) -> float:
    start = time.perf_counter()
    for _ in range(total):
        r = engine.get(url, **opts)
        if r.status != 200 or len(r.body) != 1024:
            raise RuntimeError(f"bad answer {r.status}")
    return total / (time.perf_counter() - start)


def async_loop(client: httpx.AsyncClient, url: str, total: int, concurrency: int) -> float:
    async def main() -> float:
        async def worker(n: int) -> None:
            for _ in range(n):
                r = await client.get(url)
                if r.status_code != 200 or len(r.content) != 1024:
                    raise RuntimeError(f"bad answer {r.status_code}")
        shares = [total // concurrency + (1 if i < total % concurrency else 0) for i in range(concurrency)]
        start = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in shares))
        return total / (time.perf_counter() - start)
    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--nginx", default=None)
    ap.add_argument("--server", default=None)
    args = ap.parse_args()
    server = start_server(args.nginx, args.server)
    url = server.url
    engine = courier.Engine(temporary_store=True, logger=False, max_connections_per_host=args.concurrency)
    opts = {"coalesce": False, "cache": "no_cache"}
    try:
        hx_own = httpx.Client()
        hx_cr = httpx.Client(transport=courier.httpx.Transport(engine, **opts))
        rq_own = requests.Session()
        rq_cr = requests.Session()
        rq_cr.mount("http://", courier.requests.Adapter(engine, **opts))
        limits = httpx.Limits(max_connections=args.concurrency)
        clients: dict[str, Callable[[int], float]] = {
            "engine": lambda n: engine_loop(engine, url, n, opts),
            "httpx_own": lambda n: sync_loop(lambda: hx_own.get(url), n),
            "httpx_courier": lambda n: sync_loop(lambda: hx_cr.get(url), n),
            "httpx_async_own": lambda n: async_loop(httpx.AsyncClient(limits=limits), url, n, args.concurrency),
            "httpx_async_courier": lambda n: async_loop(
                httpx.AsyncClient(transport=courier.httpx.AsyncTransport(engine, **opts)), url, n, args.concurrency),
            "requests_own": lambda n: sync_loop(lambda: rq_own.get(url), n),
            "requests_courier": lambda n: sync_loop(lambda: rq_cr.get(url), n),
        }
        for run in clients.values():  # warm-up: connections, imports
            run(min(200, args.requests))
        rates: dict[str, list[float]] = {name: [] for name in clients}
        cpu: dict[str, list[float]] = {name: [] for name in clients}
        names = list(clients)
        for i in range(args.runs):
            for name in (names if i % 2 == 0 else names[::-1]):
                c0 = time.process_time()  # every thread of the process: the engine's worker too
                rates[name].append(clients[name](args.requests))
                cpu[name].append((time.process_time() - c0) / args.requests * 1e6)
        out: dict[str, Any] = {"server": server.name, "requests": args.requests, "runs": args.runs,
                               "concurrency": args.concurrency}
        for name, values in rates.items():
            out[f"{name}_rps"] = round(statistics.median(values), 1)
            out[f"{name}_cpu_us"] = round(statistics.median(cpu[name]), 1)
        for base in ("httpx", "httpx_async", "requests"):
            out[f"{base}_courier_vs_own"] = round(out[f"{base}_courier_rps"] / out[f"{base}_own_rps"], 3)
            out[f"{base}_courier_vs_own_cpu"] = round(out[f"{base}_own_cpu_us"] / out[f"{base}_courier_cpu_us"], 3)
        for base in ("httpx", "requests"):  # what the library adds over Courier's own API
            out[f"{base}_courier_overhead_cpu_us"] = round(out[f"{base}_courier_cpu_us"] - out["engine_cpu_us"], 1)
    finally:
        engine.close()
        server.stop()
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:28} {v}")


if __name__ == "__main__":
    sys.exit(main())
