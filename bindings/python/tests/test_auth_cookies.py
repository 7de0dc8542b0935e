"""Cookies, challenges and proxies where the binding adds something: the Cookie values and jar
methods, the challenge callable (answers, declines, a Future answered later, an exception kept and
re-raised, never asked for another origin), credentials and proxy keywords, ProxyError."""
from __future__ import annotations

import concurrent.futures
import json
import threading
import time

import pytest

import courier
from courier import AuthScheme, Challenge, Cookie


def cookie_header(engine: courier.Engine, url: str = "/cookies") -> str:
    return json.loads(engine.get(url).body)["cookie"]


def test_cookie_jar_from_the_server_and_the_api(engine: courier.Engine, base_url: str) -> None:
    assert "a=1" in cookie_header(engine, "/cookies/set?a=1")  # through the redirect
    assert [(c.name, c.value, c.domain, c.path) for c in engine.list_cookies()] == [("a", "1", "127.0.0.1", "/")]
    later = int(time.time()) + 3600
    engine.set_cookie(Cookie("token", "t", "127.0.0.1", expires=later, http_only=True))
    assert "token=t" in cookie_header(engine)
    got = {c.name: c for c in engine.list_cookies()}
    assert got["token"].expires == later and got["token"].http_only and not got["token"].secure
    engine.remove_cookie("127.0.0.1", "a")
    with pytest.raises(courier.NotFound):
        engine.remove_cookie("127.0.0.1", "a")
    with pytest.raises(courier.InvalidHeader):
        engine.set_cookie(Cookie("bad;name", "v", "127.0.0.1"))
    assert engine.clear_cookies() == 1
    assert cookie_header(engine) == ""


def test_jar_shared_by_engines_on_one_store(base_url: str, tmp_path) -> None:
    store = str(tmp_path / "s")
    with courier.Engine(base_url=base_url, store=store) as a, courier.Engine(base_url=base_url, store=store) as b:
        a.get("/cookies/set?shared=yes")
        assert "shared=yes" in cookie_header(b)
    with courier.Engine(base_url=base_url, store=store) as c:  # a restart
        assert [x.name for x in c.list_cookies()] == ["shared"]


def test_jar_off(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, cookies=False) as e:
        assert cookie_header(e, "/cookies/set?a=1") == ""
        with pytest.raises(courier.InvalidArgument):
            e.list_cookies()


def test_credentials_keyword(engine: courier.Engine, base_url: str) -> None:
    r = engine.get("/digest-auth/u/p", credentials=("u", "p", AuthScheme.DIGEST))
    assert r.json()["scheme"] == "Digest"
    with courier.Engine(base_url=base_url, temporary_store=True, credentials=("u", "p", AuthScheme.ANY_SAFE)) as e:
        assert e.get("/any-auth/u/p").json()["scheme"] == "Digest"
        with pytest.raises(courier.HTTPStatusError) as ei:
            e.get("/digest-auth/u/wrong")
        assert ei.value.http_status == 401
    assert AuthScheme.available() & (AuthScheme.BASIC | AuthScheme.DIGEST) == AuthScheme.BASIC | AuthScheme.DIGEST
    assert AuthScheme.ANY == 15 and AuthScheme.ANY_SAFE == 14 and AuthScheme("digest") is AuthScheme.DIGEST


def test_challenge_callable(base_url: str) -> None:
    seen: list[Challenge] = []

    def handler(ch: Challenge):
        seen.append(ch)
        return ("u", "p")

    with courier.Engine(base_url=base_url, temporary_store=True, challenge_handler=handler) as e:
        assert e.get("/digest-auth/u/p").json()["scheme"] == "Digest"
        assert len(seen) == 1 and seen[0].status == 401 and "Digest" in seen[0].header
        assert seen[0].url == base_url + "/digest-auth/u/p"
        # Never for another origin (localhost is not 127.0.0.1): the 401 as it came.
        port = base_url.rsplit(":", 1)[1]
        with pytest.raises(courier.HTTPStatusError):
            e.get(f"/redirect?to=http%3A%2F%2Flocalhost%3A{port}%2Fbasic-auth%2Fu%2Fp")
        assert len(seen) == 1


def test_challenge_declined_later_and_raising(engine: courier.Engine) -> None:
    with pytest.raises(courier.HTTPStatusError):
        engine.get("/basic-auth/u/p", challenge_handler=lambda ch: None)

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        # Answered later from another thread: the request waits off the wire.
        r = engine.get("/basic-auth/u/p", challenge_handler=lambda ch: pool.submit(lambda: ("u", "p", AuthScheme.BASIC)))
        assert r.json()["scheme"] == "Basic"
    finally:
        pool.shutdown()

    calls = []

    def boom(ch: Challenge):
        calls.append(ch)
        raise KeyError("no credentials here")

    with pytest.raises(KeyError):
        engine.get("/basic-auth/u/p", challenge_handler=boom)
    assert len(calls) == 1


def test_engine_challenge_exception_reaches_send(base_url: str) -> None:
    def boom(ch: Challenge):
        raise RuntimeError("handler failed")

    with courier.Engine(base_url=base_url, temporary_store=True, challenge_handler=boom) as e:
        with pytest.raises(RuntimeError):
            e.get("/basic-auth/u/p")


def test_proxy_keywords(base_url: str, closed_port: int) -> None:
    proxy = base_url  # the test server is also a forward proxy
    with courier.Engine(base_url=base_url, temporary_store=True, proxy=proxy) as e:
        assert json.loads(e.get("http://site.test/echo").body)["proxy_target"] == "http://site.test/echo"
        with pytest.raises(courier.HTTPStatusError) as ei:
            e.get("http://proxy-auth.test/echo")
        assert ei.value.http_status == 407
        e.get("http://proxy-auth.test/echo", proxy_credentials=("proxyuser", "proxypass", AuthScheme.BASIC))
        with pytest.raises(courier.ProxyError):
            e.get("https://site.test/")  # the tunnel is refused
    socks = base_url.replace("http://", "socks5h://")
    with courier.Engine(base_url=base_url, temporary_store=True, proxy=f"http://127.0.0.1:{closed_port}") as e:
        body = json.loads(e.get("http://site.test/echo", proxy=socks).body)
        assert body["socks"] == "site.test:80"
        assert "proxy_target" not in json.loads(e.get("/echo", proxy="").body)
    with pytest.raises(courier.InvalidURL):
        courier.Engine(temporary_store=True, proxy="ftp://127.0.0.1:1")
