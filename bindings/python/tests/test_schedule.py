"""Scheduling, decided by the core: retry, priority, coalescing, limits."""
from __future__ import annotations

import threading
import time

import pytest

import courier
from conftest import wait_until


def test_retry_counted_by_server(engine: courier.Engine, server) -> None:
    before = server.count()
    with pytest.raises(courier.HTTPStatusError) as info:
        engine.get("/status/503", retry=courier.Retry(max_retries=2, base_delay=0.01, max_delay=0.05))
    assert server.count() - before == 3
    resp = info.value.response
    assert resp.attempts == 3 and resp.retry_wait > 0


def test_retry_not_for_post_unless_asked(engine: courier.Engine, server) -> None:
    rule = courier.Retry(max_retries=2, base_delay=0.01, max_delay=0.02)
    before = server.count()
    with pytest.raises(courier.HTTPStatusError):
        engine.post("/status/500", retry=rule)
    assert server.count() - before == 1
    before = server.count()
    with pytest.raises(courier.HTTPStatusError):
        engine.post("/status/500", retry=courier.Retry(2, 0.01, 0.02, non_idempotent=True))
    assert server.count() - before == 3


def test_no_retry_on_404_and_engine_rule(base_url: str, server) -> None:
    with courier.Engine(base_url=base_url, retry=courier.Retry(2, 0.01, 0.02)) as e:
        before = server.count()
        with pytest.raises(courier.HTTPStatusError):
            e.get("/status/404")
        assert server.count() - before == 1
        before = server.count()
        with pytest.raises(courier.HTTPStatusError):
            e.get("/status/429")
        assert server.count() - before == 3


def test_retry_on_connection_refused(closed_port: int) -> None:
    with courier.Engine(timeout=5) as e:
        with pytest.raises(courier.CannotConnect):
            e.get(f"http://127.0.0.1:{closed_port}/", retry=courier.Retry(2, 0.01, 0.02))


def test_priorities(base_url: str) -> None:
    order = []
    lock = threading.Lock()
    with courier.Engine(base_url=base_url, max_connections_per_host=1, max_connections=1) as e:
        blocker = e.send_async("GET", "/delay/1000")
        assert wait_until(lambda: e.pending() == (0, 1))

        def cb(name):
            def done(resp, err):
                with lock:
                    order.append(name)
            return done

        futs = [e.send_async("GET", "/echo", params={"p": name}, priority=prio, callback=cb(name))
                for name, prio in [("low", courier.Priority.LOW), ("normal", None), ("high", "high")]]
        blocker.result(10)
        for f in futs:
            f.result(10)
    assert order == ["high", "normal", "low"]


def test_coalescing_identical_gets(engine: courier.Engine, server) -> None:
    before = server.count()
    futs = [engine.send_async("GET", "/delay/200", params={"c": "1"}) for _ in range(5)]
    assert all(f.result(10).status == 200 for f in futs)
    assert server.count() - before == 1
    before = server.count()
    futs = [engine.send_async("GET", "/delay/200", params={"c": "2"}, coalesce=False) for _ in range(5)]
    assert all(f.result(10).status == 200 for f in futs)
    assert server.count() - before == 5


def test_connection_limits(base_url: str) -> None:
    with courier.Engine(base_url=base_url, max_connections_per_host=2) as e:
        futs = [e.send_async("GET", "/delay/500", coalesce=False) for _ in range(4)]
        assert wait_until(lambda: e.pending() == (2, 2))
        for f in futs:
            f.result(10)
