"""The cache on Redis: an engine whose cache store is a redis:// URL (``cache_store=``), against a
redis-server the test starts (scripts/redis-fixture; scripts/setup installs redis-server, and the
test fails saying so without it). Skipped only when the library was built without Redis (the
session's redis_url fixture, conftest.py, shared with test_frozen_redis.py)."""
from __future__ import annotations

import pytest

import courier
from courier import CachePolicy, CacheStatus
from conftest import free_port


def test_two_engines_share_a_redis_cache(redis_url, base_url, server, tmp_path) -> None:
    kw = dict(params={"body": "from-redis"}, cache=CachePolicy.CACHE_FIRST, cache_expiry=60)
    before = server.count()
    with courier.Engine(base_url=base_url, store=str(tmp_path / "a"), cache_store=redis_url) as a:
        r1 = a.get("/cache", **kw)
        assert r1.cache_status == CacheStatus.NETWORK
    with courier.Engine(base_url=base_url, store=str(tmp_path / "b"), cache_store=redis_url,
                        cache_max_bytes=1 << 20) as b:
        r2 = b.get("/cache", **kw)
        assert r2.from_cache and r2.cache_status == CacheStatus.HIT and r2.body == b"from-redis"
        assert server.count() - before == 1
        assert b.cache.size()[1] >= 1
        b.cache.clear()
        assert b.cache.size() == (0, 0)


def test_redis_down_is_a_clear_error(base_url, tmp_path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    try:
        e = courier.Engine(base_url=base_url, store=str(tmp_path / "s"), cache_store=url)
    except courier.RedisUnsupported:
        pytest.skip("this library was built without Redis (COURIER_REDIS off)")
    with e:
        with pytest.raises(courier.RedisError):
            e.cache.size()
        # a request still gets the network's answer
        r = e.get("/cache", params={"body": "x"}, cache=CachePolicy.CACHE_FIRST)
        assert r.cache_status == CacheStatus.NETWORK


def test_bad_store_url() -> None:
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(temporary_store=True, cache_store="redis://127.0.0.1:0/0")
