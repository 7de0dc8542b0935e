#!/usr/bin/env python3
"""requests-cache's Redis backend, timed: PUTS responses of 1 KiB saved under their own keys
(``RedisCache.save_response``), then GETS random reads (``get_response``), on the Redis at URL
(its keys removed after). Prints one JSON line: requests_cache_put_ops, requests_cache_get_ops.

    python bench_redis_cache.py redis://127.0.0.1:6379/0 [PUTS] [GETS]

Run by bindings/python/run-redis-bench.sh (a virtual environment with requests-cache and redis-py)
for ``courier bench cache --backend redis --requests-cache``.
"""
from __future__ import annotations

import http.server
import json
import random
import sys
import threading
import time

import redis
import requests
from requests_cache.backends.redis import RedisCache

BODY = bytes((ord("a") + i % 26) for i in range(1024))


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("Cache-Control", "max-age=3600")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


def main() -> int:
    url = sys.argv[1]
    puts = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    gets = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    response = requests.get(f"http://127.0.0.1:{server.server_address[1]}/item")
    server.shutdown()
    conn = redis.Redis.from_url(url)
    cache = RedisCache(namespace="courier-bench-requests-cache", connection=conn)
    keys = [f"cache-bench-key-{i:016d}" for i in range(puts)]
    t0 = time.perf_counter()
    for k in keys:
        cache.save_response(response, cache_key=k)
    put_s = time.perf_counter() - t0
    rng = random.Random(42)
    picks = [keys[rng.randrange(puts)] for _ in range(gets)]
    t0 = time.perf_counter()
    for k in picks:
        got = cache.get_response(k)
        if got is None or len(got.content) != len(BODY):
            print("requests-cache: a miss", file=sys.stderr)
            return 1
    get_s = time.perf_counter() - t0
    cache.clear()
    print(json.dumps({"requests_cache_put_ops": puts / put_s, "requests_cache_get_ops": gets / get_s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
