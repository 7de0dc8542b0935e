"""courier.httpx: httpx's own behaviour (params, headers, bodies, redirects, streaming, timeouts,
its exception classes) over Courier's transports, against the loopback test server."""
from __future__ import annotations

import asyncio

import pytest

httpx = pytest.importorskip("httpx")

import courier  # noqa: E402
import courier.httpx  # noqa: E402


@pytest.fixture
def client(engine, base_url):
    with httpx.Client(transport=courier.httpx.Transport(engine), base_url=base_url) as c:
        yield c


def header_lines(echo: dict, name: str) -> list[str]:
    return [v for n, v in echo["headers"] if n.lower() == name.lower()]


def test_params_headers_and_json(client) -> None:
    r = client.get("/echo", params={"q": "a b", "n": 2}, headers={"X-Trace": "t1"})
    assert r.status_code == 200 and r.http_version == "HTTP/1.1"
    echo = r.json()
    assert echo["query"] == "q=a+b&n=2" and header_lines(echo, "X-Trace") == ["t1"]
    assert header_lines(echo, "User-Agent") == [f"python-httpx/{httpx.__version__}"]
    assert len(header_lines(echo, "Host")) == 1


def test_post_bodies(client) -> None:
    echo = client.post("/echo", json={"name": "x"}).json()
    assert echo["body"] == '{"name":"x"}' and header_lines(echo, "Content-Type") == ["application/json"]
    echo = client.post("/echo", data={"a": "1", "b": "2"}).json()
    assert echo["body"] == "a=1&b=2"
    assert header_lines(echo, "Content-Type") == ["application/x-www-form-urlencoded"]
    echo = client.put("/echo", content=b"\x00raw", headers={"Content-Type": "application/x-raw"}).json()
    assert echo["method"] == "PUT" and echo["body_length"] == 4
    assert header_lines(echo, "Content-Type") == ["application/x-raw"]
    echo = client.post("/echo", files={"f": ("hi.txt", b"hello")}).json()
    assert "hello" in echo["body"] and header_lines(echo, "Content-Type")[0].startswith("multipart/form-data")


def test_statuses_are_httpx_to_judge(client) -> None:
    r = client.get("/status/404")
    assert r.status_code == 404
    with pytest.raises(httpx.HTTPStatusError):
        r.raise_for_status()
    assert client.get("/status/503").status_code == 503


def test_redirects_are_followed_by_httpx(client) -> None:
    r = client.get("/redirect-chain/3")
    assert r.status_code == 302 and r.is_redirect and r.headers["location"] == "/redirect-chain/2"
    r = client.get("/redirect-chain/3", follow_redirects=True)
    assert r.status_code == 200 and r.url.path == "/redirect-chain/0"
    assert [h.status_code for h in r.history] == [302, 302, 302]
    with pytest.raises(httpx.TooManyRedirects):
        client.get("/redirect-chain/30", follow_redirects=True)
    # a 303 after a POST: httpx turns it into a GET, as with its own transport
    r = client.post("/redirect", params={"to": "/echo", "status": "303"}, content=b"x", follow_redirects=True)
    assert r.json()["method"] == "GET"


def test_stream_through_the_engine_stream(client, engine) -> None:
    seen = []
    engine.add_monitor(lambda ev: seen.append(ev.kind), kinds=["finished"])
    with client.stream("GET", "/bytes/300000", params={"rate": "2000000"},
                       extensions={courier.httpx.STREAM: True}) as r:
        assert r.status_code == 200
        chunks = [len(c) for c in r.iter_raw()]
    assert sum(chunks) == 300000 and len(chunks) > 1
    with client.stream("GET", "/bytes/1000") as r:  # read whole by the engine, then streamed by httpx
        assert r.read() and len(r.content) == 1000


def test_a_transport_that_streams_everything(engine, base_url) -> None:
    with httpx.Client(transport=courier.httpx.Transport(engine, stream=True), base_url=base_url) as c:
        assert c.get("/json").json()["data"]["name"] == "courier"
        with c.stream("GET", "/close-mid-body") as r:
            with pytest.raises(httpx.RemoteProtocolError) as info:
                r.read()
    assert isinstance(info.value.__cause__, courier.PartialResponse)


def test_errors_are_httpx_exception_classes(client, closed_port) -> None:
    with pytest.raises(httpx.ConnectError) as info:
        client.get(f"http://127.0.0.1:{closed_port}/")
    assert info.value.__cause__.code == courier.CannotConnect.CODE
    assert info.value.request.url.port == closed_port
    with pytest.raises(httpx.ReadTimeout) as t:
        client.get("/delay/3000", timeout=httpx.Timeout(5, read=0.1))
    assert t.value.__cause__.code == courier.Timeout.CODE and t.value.__cause__.timeout_kind == "idle"
    with pytest.raises(httpx.RemoteProtocolError) as p:
        client.get("/close-mid-body")
    assert p.value.__cause__.code == courier.PartialResponse.CODE
    with pytest.raises(httpx.ReadError):
        client.get("/reset")
    with pytest.raises(httpx.TransportError):  # every mapped failure is one of httpx's
        client.get(f"http://127.0.0.1:{closed_port}/")


def test_the_engine_cache_answers(engine, base_url, server) -> None:
    with httpx.Client(transport=courier.httpx.Transport(engine, cache="http"), base_url=base_url) as c:
        first = c.get("/cache", params={"max_age": "60", "body": "httpx-cached"})
        before = server.count()
        again = c.get("/cache", params={"max_age": "60", "body": "httpx-cached"})
        assert server.count() == before  # the engine answered from its cache
        assert again.text == first.text == "httpx-cached"


def test_cookies_are_the_engine_jars(engine, client) -> None:
    client.get("/cookies/set", params={"session": "abc"})
    assert [c.name for c in engine.list_cookies()] == ["session"]
    echo = client.get("/echo").json()
    assert header_lines(echo, "Cookie") == ["session=abc"]  # one line: the jar's, not httpx's too


def test_async_transport(engine, base_url, closed_port) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(transport=courier.httpx.AsyncTransport(engine), base_url=base_url) as c:
            rs = await asyncio.gather(*(c.get("/echo", params={"n": n}) for n in range(5)))
            assert [r.json()["query"] for r in rs] == [f"n={n}" for n in range(5)]
            r = await c.get("/redirect-chain/2", follow_redirects=True)
            assert [h.status_code for h in r.history] == [302, 302]
            async with c.stream("GET", "/bytes/200000", extensions={courier.httpx.STREAM: True}) as s:
                assert sum([len(b) async for b in s.aiter_raw()]) == 200000
            with pytest.raises(httpx.ConnectError):
                await c.get(f"http://127.0.0.1:{closed_port}/")
            with pytest.raises(httpx.ReadTimeout):
                await c.get("/delay/3000", timeout=httpx.Timeout(5, read=0.1))

    asyncio.run(main())
