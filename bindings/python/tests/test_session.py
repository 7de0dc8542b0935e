"""Adapters, retriers and the authenticator (courier.session over include/courier/hooks.h's "Sessions"),
sync and asyncio, over the loopback server's /echo, /status and /session/* endpoints."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

import courier


def _upper(outgoing: courier.Outgoing) -> None:
    body = outgoing.body or b""
    outgoing.body = body.upper()
    outgoing.set_header("X-Body-Sum", str(sum(body.upper())))


def test_an_adapter_replaces_the_body(base_url: str) -> None:
    with courier.Engine(base_url, temporary_store=True, adapters=[_upper]) as engine:
        echo = engine.post("/echo", body=b"hello", content_type="text/plain").json()
    assert echo["body"] == "HELLO"
    assert ["X-Body-Sum", "372"] in echo["headers"]


def test_adapters_run_in_order_engine_then_request(base_url: str) -> None:
    def add(letter: str):
        def adapter(o: courier.Outgoing) -> None:
            o.set_header("X-Order", (o.header("X-Order") or "") + letter)
        return adapter
    with courier.Engine(base_url, temporary_store=True, adapters=[add("a"), add("b")]) as engine:
        echo = engine.get("/echo/order", adapters=[add("c")]).json()
    assert ["X-Order", "abc"] in echo["headers"]


def test_an_adapter_returning_a_future_completes_later(base_url: str) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(1)

    def adapter(o: courier.Outgoing) -> concurrent.futures.Future:
        def later() -> None:
            o.set_header("X-Signed-By", "pool")
        return pool.submit(later)
    with courier.Engine(base_url, temporary_store=True) as engine:
        echo = engine.get("/echo/future", adapters=[adapter]).json()
    pool.shutdown()
    assert ["X-Signed-By", "pool"] in echo["headers"]


class SigningError(Exception):
    pass


def test_a_failing_adapter_fails_the_request_with_its_exception(base_url: str, server) -> None:
    def adapter(o: courier.Outgoing) -> None:
        raise SigningError("no key")
    with courier.Engine(base_url, temporary_store=True) as engine:
        before = server.count()
        with pytest.raises(SigningError):
            engine.post("/echo/adapter-fails", body=b"x", adapters=[adapter])
        assert server.count() == before  # nothing was sent


def test_a_retrier_decides(base_url: str) -> None:
    asked = []

    def retrier(q: courier.RetryQuestion):
        asked.append((q.attempt, type(q.error), q.response.status if q.response else None))
        return 0.01 if q.attempt < 3 else None
    with courier.Engine(base_url, temporary_store=True, retriers=[retrier]) as engine:
        with pytest.raises(courier.HTTPStatusError) as info:
            engine.post("/status/503")  # a POST: the fixed rule would never retry it
    assert asked == [(1, courier.HTTPStatusError, 503), (2, courier.HTTPStatusError, 503),
                     (3, courier.HTTPStatusError, 503)]
    assert info.value.response.attempts == 3


def test_an_adapter_is_told_which_attempt_it_adapts(base_url: str) -> None:
    seen = []

    def adapter(outgoing: courier.Outgoing) -> None:
        seen.append(outgoing.attempt)
        outgoing.set_header("X-Attempt", str(outgoing.attempt))
    with courier.Engine(base_url, temporary_store=True, adapters=[adapter],
                        retriers=[lambda q: 0.001 if q.attempt < 3 else None]) as engine:
        with pytest.raises(courier.HTTPStatusError):
            engine.post("/status/503")
        assert ["X-Attempt", "1"] in engine.get("/echo/attempt").json()["headers"]
    assert seen == [1, 2, 3, 1]


def test_the_fixed_rule_goes_first(base_url: str) -> None:
    asked = []
    with courier.Engine(base_url, temporary_store=True, retry=courier.Retry(2, 0.001, 0.002),
                        retriers=[lambda q: asked.append(q.attempt)]) as engine:
        with pytest.raises(courier.HTTPStatusError):
            engine.get("/status/503")
    assert asked == [3]


class Tokens:
    """An authenticator's refresh that fetches /session/token through the same engine."""

    def __init__(self) -> None:
        self.engine: courier.Engine | None = None
        self.refreshes = 0
        self.lock = threading.Lock()

    def refresh(self, old):
        with self.lock:
            self.refreshes += 1
        assert self.engine is not None
        return self.engine.post("/session/token", authenticated=False).json()["token"]


def test_twenty_concurrent_401s_one_refresh(base_url: str) -> None:
    tokens = Tokens()
    auth = courier.Authenticator(base_url, tokens.refresh, credential="stale")
    with courier.Engine(base_url, temporary_store=True, authenticator=auth,
                        max_connections_per_host=32, max_connections=32) as engine:
        tokens.engine = engine
        futures = [engine.send_async("GET", "/session/protected", coalesce=False) for _ in range(20)]
        results = [f.result(10) for f in futures]
    assert [r.status for r in results] == [200] * 20
    assert tokens.refreshes == 1


class RefreshDenied(Exception):
    pass


def test_a_failing_refresh_fails_every_waiter(base_url: str) -> None:
    def refresh(old):
        raise RefreshDenied("the refresh token expired")
    auth = courier.Authenticator(base_url, refresh, credential="stale")
    with courier.Engine(base_url, temporary_store=True, authenticator=auth) as engine:
        futures = [engine.send_async("GET", "/session/protected", coalesce=False) for _ in range(5)]
        for f in futures:
            with pytest.raises(RefreshDenied):
                f.result(10)


def test_the_loop_guard(base_url: str) -> None:
    auth = courier.Authenticator(base_url, lambda old: "bogus", credential="stale")
    with courier.Engine(base_url, temporary_store=True, authenticator=auth) as engine:
        with pytest.raises(courier.CredentialRefused) as info:
            engine.get("/session/protected")
    assert info.value.http_status == 401


def test_the_credential_never_goes_to_another_origin(base_url: str, server) -> None:
    auth = courier.Authenticator(base_url, lambda old: "unused", credential="secret-token")
    with courier.Engine(base_url, temporary_store=True, authenticator=auth) as engine:
        other = engine.get(f"http://localhost:{server.port}/echo").json()
        mine = engine.get("/echo").json()
    assert "secret-token" not in str(other["headers"])
    assert ["Authorization", "Bearer secret-token"] in mine["headers"]


def test_set_credential(base_url: str) -> None:
    tokens = Tokens()
    auth = courier.Authenticator(base_url, tokens.refresh)
    with courier.Engine(base_url, temporary_store=True, authenticator=auth) as engine:
        tokens.engine = engine
        token = engine.post("/session/token", authenticated=False).json()["token"]
        engine.set_credential(token)
        assert engine.get("/session/protected").json()["token"] == token
    assert tokens.refreshes == 0
    with courier.Engine(base_url, temporary_store=True) as plain:
        with pytest.raises(courier.InvalidArgument):
            plain.set_credential("x")


# ---- asyncio --------------------------------------------------------------------------------------

def test_async_adapter_and_retrier(base_url: str) -> None:
    async def adapter(o: courier.Outgoing) -> None:
        await asyncio.sleep(0)  # a task's await: the worker is not held meanwhile
        o.set_header("X-Async", "yes")

    async def retrier(q: courier.RetryQuestion):
        await asyncio.sleep(0)
        return True if q.attempt < 2 else None

    async def main() -> None:
        async with courier.AsyncEngine(base_url, temporary_store=True, adapters=[adapter],
                                       retriers=[retrier]) as engine:
            echo = (await engine.get("/echo/async")).json()
            assert ["X-Async", "yes"] in echo["headers"]
            with pytest.raises(courier.HTTPStatusError) as info:
                await engine.get("/status/500")
            assert info.value.response.attempts == 2
    asyncio.run(main())


def test_async_refresh_twenty_concurrent_401s(base_url: str) -> None:
    refreshes = []

    async def main() -> None:
        async def refresh(old):
            refreshes.append(old)
            r = await engine.post("/session/token", authenticated=False)
            return r.json()["token"]
        engine = courier.AsyncEngine(base_url, temporary_store=True, max_connections_per_host=32,
                                     authenticator=courier.Authenticator(base_url, refresh, credential="stale"))
        async with engine:
            rs = await asyncio.gather(*(engine.get("/session/protected", coalesce=False) for _ in range(20)))
        assert [r.status for r in rs] == [200] * 20
    asyncio.run(main())
    assert refreshes == ["stale"]
