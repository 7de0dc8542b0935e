"""What a user writes; mypy (test_typing.py) must accept it with no error."""
from __future__ import annotations

import asyncio

import courier


def sync(url: str) -> int:
    with courier.Engine(base_url=url, timeout=5, cache="http", log_level=courier.LogLevel.INFO) as engine:
        r = engine.get("/json", params={"q": "x"}, timeout=2.5, cache=courier.CachePolicy.CACHE_FIRST,
                       priority="high", retry=courier.Retry(max_retries=2), freeze=courier.FreezePolicy.AUTO)
        s: courier.CacheStatus = r.cache_status
        engine.post("/orders", json={"id": 1}, freeze=courier.Freeze("manual", id="order-1"))
        engine.put("/x", body=b"raw", content_type="application/octet-stream", coalesce=False)
        result: courier.GroupResult = engine.batch([courier.Request("GET", "/a"), ("GET", "/b")])
        return r.status + len(result) + int(s)


async def main(url: str) -> int:
    async with courier.AsyncEngine(base_url=url) as engine:
        r = await engine.get("/json", cache="cache_first", timeout=1.0)
        return r.status


try:
    asyncio.run(main("http://127.0.0.1:1"))
except courier.CannotConnect:
    pass
except TimeoutError:
    pass
