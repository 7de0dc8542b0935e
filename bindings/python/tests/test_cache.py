"""Cache policies and the cache manager (all decided by the core)."""
from __future__ import annotations

import pytest

import courier
from courier import CachePolicy, CacheReason, CacheStatus


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cengine(base_url, tmp_path, clock):
    with courier.Engine(base_url=base_url, store=str(tmp_path / "store"), clock=clock) as e:
        yield e


def test_cache_first(cengine, server, clock) -> None:
    kw = dict(params={"body": "first"}, cache=CachePolicy.CACHE_FIRST, cache_expiry=60)
    before = server.count()
    r1 = cengine.get("/cache", **kw)
    r2 = cengine.get("/cache", **kw)
    assert server.count() - before == 1
    assert not r1.from_cache and r1.cache_status == CacheStatus.NETWORK
    assert r2.from_cache and r2.cache_status == CacheStatus.HIT and r2.body == b"first"
    assert r2.cache_created == clock.now and r2.cache_expires == clock.now + 60
    assert r2.cache_key == cengine.cache.key("GET", "/cache", params={"body": "first"})
    clock.now += 61  # expired: the network answers again
    r3 = cengine.get("/cache", **kw)
    assert not r3.from_cache and server.count() - before == 2


def test_no_cache_and_write_only(cengine, server) -> None:
    before = server.count()
    cengine.get("/cache", params={"body": "w"}, cache=CachePolicy.WRITE_ONLY)
    cengine.get("/cache", params={"body": "w"}, cache=CachePolicy.WRITE_ONLY)
    assert server.count() - before == 2  # never reads
    assert cengine.cache.has("GET", "/cache", params={"body": "w"})  # but wrote
    r = cengine.get("/cache", params={"body": "w"}, cache=CachePolicy.CACHE_FIRST)
    assert r.from_cache
    r = cengine.get("/cache", params={"body": "w"})  # the engine default: no cache
    assert not r.from_cache


def test_failures_are_not_cached(cengine) -> None:
    with pytest.raises(courier.HTTPStatusError):
        cengine.get("/status/500", cache=CachePolicy.CACHE_FIRST)
    assert not cengine.cache.has("GET", "/status/500")


def test_http_policy_max_age_and_revalidation(cengine, server, clock) -> None:
    kw = dict(params={"max_age": "100", "etag": "v1"}, cache=CachePolicy.HTTP)
    a = cengine.get("/cache", **kw)
    b = cengine.get("/cache", **kw)
    assert not a.from_cache and b.from_cache and b.json() == a.json()
    clock.now += 200
    before = server.count()
    c = cengine.get("/cache", **kw)  # stale: revalidated with If-None-Match, answered 304
    assert server.count() - before == 1
    assert c.cache_status == CacheStatus.REVALIDATED and c.json() == a.json()
    assert cengine.cache.stats().revalidations == 1


def test_manager_put_get_list_remove(cengine, clock) -> None:
    cache = cengine.cache
    cache.put("my-key", 201, b"hello", {"X-A": "1"}, expiry=10)
    assert cache.has_key("my-key")
    r = cache.get_key("my-key")
    assert r.status == 201 and r.body == b"hello" and r.headers["x-a"] == "1" and r.from_cache
    cache.put("GET http://example.com/x", 200, "text", expiry=100)
    entries = {e.key: e for e in cache.entries()}
    assert set(entries) == {"my-key", "GET http://example.com/x"}
    assert entries["GET http://example.com/x"].url == "http://example.com/x"
    assert entries["my-key"].status == 201 and entries["my-key"].expires == clock.now + 10
    size, count = cache.size()
    assert count == 2 and size > 0 and len(cache) == 2
    clock.now += 11
    assert not cache.has_key("my-key")
    assert cache.get_key("my-key") is None
    assert cache.get_key("my-key", allow_stale=True).cache_status == CacheStatus.STALE
    assert cache.remove_expired() == 1
    assert cache.remove_key("GET http://example.com/x") is True
    assert cache.remove_key("GET http://example.com/x") is False
    assert cache.size() == (0, 0)


def test_keys_filters_and_sensitive_data(cengine) -> None:
    cache = cengine.cache
    k1 = cache.key("GET", "/items", params={"b": "2", "a": "1", "ts": "99"}, cache_key_filter=["ts"])
    k2 = cache.key("GET", "/items", params={"a": "1", "b": "2"})
    assert k1 == k2  # sorted, filtered: decided by the core
    k3 = cache.key("GET", "/items", params={"a": "1", "b": "2"}, cache_sensitive_data="user-7")
    assert k3 != k2 and "user-7" in k3
    assert cache.key("GET", "/x", cache_key="mine") .startswith("mine")


def test_remove_request_remove_since_and_clear(cengine, clock) -> None:
    cengine.get("/cache", params={"body": "a"}, cache=CachePolicy.CACHE_FIRST)
    clock.now += 10
    t = clock.now
    cengine.get("/cache", params={"body": "b"}, cache=CachePolicy.CACHE_FIRST)
    assert cengine.cache.remove_since(t) == 1
    assert cengine.cache.remove("GET", "/cache", params={"body": "a"}) is True
    assert cengine.cache.remove("GET", "/cache", params={"body": "a"}) is False
    cengine.cache.put("k", 200, b"")
    assert cengine.cache.clear() == 1


def test_user_policy(cengine, server) -> None:
    seen = []

    def has_cache(cached, now):
        seen.append(("has", cached.status if cached else None))
        return cached is not None

    def should_write(resp, expires):
        seen.append(("write", resp.status))
        return expires + 1000

    cengine.cache.register_policy(100, has_cache=has_cache, should_write=should_write)
    before = server.count()
    cengine.get("/cache", params={"body": "u"}, cache=100)
    r = cengine.get("/cache", params={"body": "u"}, cache=100)
    assert r.from_cache and server.count() - before == 1
    assert ("write", 200) in seen and ("has", 200) in seen
    with pytest.raises(courier.InvalidArgument):
        cengine.get("/cache", cache=101)  # not registered


def test_user_policy_exception_is_reraised(cengine) -> None:
    def has_cache(cached, now):
        raise KeyError("policy")

    cengine.cache.register_policy(100, has_cache=has_cache)
    with pytest.raises(KeyError):
        cengine.get("/cache", params={"body": "p"}, cache=100)


def test_stats(cengine) -> None:
    cengine.get("/cache", params={"body": "s"}, cache=CachePolicy.CACHE_FIRST)
    cengine.get("/cache", params={"body": "s"}, cache=CachePolicy.CACHE_FIRST)
    s = cengine.cache.stats()
    assert s.hits == 1 and s.misses == 1 and s.writes == 1 and s.count == 1 and s.max_bytes > 0


def test_http_cache_reasons_status_field_and_shared_mode(base_url, tmp_path, clock, server) -> None:
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), clock=clock, cache_status_header=True) as e:
        kw = dict(params={"Cache-Control": "private, max-age=60"})
        a = e.get("/origin/py-private", cache=CachePolicy.HTTP, **kw)
        before = server.count()
        b = e.get("/origin/py-private", cache=CachePolicy.HTTP, **kw)
        assert server.count() == before
        assert a.cache_reason == CacheReason.MISS and b.cache_reason == CacheReason.FRESH
        assert b.cache_reason.label == "fresh" and CacheReason.NOT_STORED_NO_STORE.label == "not-stored-no-store"
        assert b.headers["Cache-Status"] == "Courier; hit; detail=fresh"
        # the shared cache does not store "private"
        for _ in range(2):
            c = e.get("/origin/py-private-shared", cache=CachePolicy.HTTP_SHARED, **kw)
            assert c.cache_reason == CacheReason.NOT_STORED_PRIVATE


def test_http_cached_404_is_the_network_404(base_url, tmp_path, clock) -> None:
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), clock=clock) as e:
        kw = dict(params={"_status": "404", "Cache-Control": "max-age=60"}, cache=CachePolicy.HTTP)
        with pytest.raises(courier.HTTPStatusError) as first:
            e.get("/origin/py-404", **kw)
        with pytest.raises(courier.HTTPStatusError) as second:
            e.get("/origin/py-404", **kw)
        assert first.value.http_status == second.value.http_status == 404
        r = second.value.response
        assert r is not None and r.status == 404 and r.from_cache and r.cache_reason == CacheReason.FRESH
        assert first.value.response.cache_reason == CacheReason.MISS


def test_cache_store_that_cannot_open_fails_the_engine_open(base_url, tmp_path, capfd) -> None:
    # issue 28 bug 9: caching was silently off (reason "none"), said only on the library's stderr.
    (tmp_path / "a-file").write_text("")
    with pytest.raises(courier.StoreError) as info:
        courier.Engine(base_url, store=tmp_path / "store", cache_store=str(tmp_path / "a-file" / "cache"))
    assert info.value.code == courier.StoreError.CODE
    (tmp_path / "store2").mkdir()
    (tmp_path / "store2" / "cache").write_text("")  # the default cache directory is a file
    with pytest.raises(courier.StoreError):
        courier.Engine(base_url, store=tmp_path / "store2", cache=CachePolicy.CACHE_FIRST)
    # A mistyped Redis URL is not taken for the relative directory "redis/host".
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(base_url, store=tmp_path / "store", cache_store="redis//localhost:6379")
    assert capfd.readouterr().err == ""  # the library wrote nothing of its own
