"""courier.requests: requests' own behaviour (params, headers, bodies, redirects, stream=True,
timeouts, its exception classes) over Courier's adapter, against the loopback test server."""
from __future__ import annotations

import pytest

requests = pytest.importorskip("requests")

import courier  # noqa: E402
import courier.requests  # noqa: E402


@pytest.fixture
def session(engine):
    with requests.Session() as s:
        s.mount("http://", courier.requests.Adapter(engine))
        yield s


def header_lines(echo: dict, name: str) -> list[str]:
    return [v for n, v in echo["headers"] if n.lower() == name.lower()]


def test_params_headers_and_json(session, base_url) -> None:
    r = session.get(base_url + "/echo", params={"q": "a b", "n": 2}, headers={"X-Trace": "t1"})
    assert r.status_code == 200 and r.reason == "OK" and r.ok
    echo = r.json()
    assert echo["query"] == "q=a+b&n=2" and header_lines(echo, "X-Trace") == ["t1"]
    assert header_lines(echo, "User-Agent")[0].startswith("python-requests/")
    assert r.headers["content-type"].startswith("application/json") and r.encoding == "utf-8"
    assert isinstance(r.connection, courier.requests.Adapter)


def test_post_bodies(session, base_url) -> None:
    echo = session.post(base_url + "/echo", json={"name": "x"}).json()
    assert echo["body"] == '{"name": "x"}' and header_lines(echo, "Content-Type") == ["application/json"]
    echo = session.post(base_url + "/echo", data={"a": "1", "b": "2"}).json()
    assert echo["body"] == "a=1&b=2"
    echo = session.post(base_url + "/echo", files={"f": ("hi.txt", b"hello")}).json()
    assert "hello" in echo["body"]
    echo = session.put(base_url + "/echo", data=iter([b"ab", b"cd"])).json()  # a generator body
    assert echo["method"] == "PUT" and echo["body"] == "abcd"


def test_statuses_are_requests_to_judge(session, base_url) -> None:
    r = session.get(base_url + "/status/404")
    assert r.status_code == 404 and not r.ok
    with pytest.raises(requests.HTTPError):
        r.raise_for_status()


def test_redirects_are_followed_by_requests(session, base_url) -> None:
    r = session.get(base_url + "/redirect-chain/3")
    assert r.status_code == 200 and r.url.endswith("/redirect-chain/0")
    assert [h.status_code for h in r.history] == [302, 302, 302]
    r = session.get(base_url + "/redirect-chain/3", allow_redirects=False)
    assert r.status_code == 302 and r.is_redirect
    session.max_redirects = 5
    with pytest.raises(requests.TooManyRedirects):
        session.get(base_url + "/redirect-chain/30")


def test_stream_true_reads_through_the_engine_stream(session, base_url) -> None:
    r = session.get(base_url + "/bytes/300000", params={"rate": "2000000"}, stream=True)
    assert r.status_code == 200
    sizes = [len(c) for c in r.iter_content(chunk_size=None)]
    assert sum(sizes) == 300000 and len(sizes) > 1
    r = session.get(base_url + "/json", stream=True)
    assert r.json()["data"]["name"] == "courier"
    r = session.get(base_url + "/bytes/1000", stream=True)
    assert len(r.raw.read(3)) == 3 and len(r.raw.read()) == 997 and r.raw.read() == b""
    r = session.get(base_url + "/close-mid-body", stream=True)
    with pytest.raises(requests.exceptions.ChunkedEncodingError) as info:
        r.content
    assert isinstance(info.value.__cause__, courier.PartialResponse)


def test_errors_are_requests_exception_classes(session, base_url, closed_port) -> None:
    with pytest.raises(requests.ConnectionError) as info:
        session.get(f"http://127.0.0.1:{closed_port}/")
    assert info.value.__cause__.code == courier.CannotConnect.CODE
    assert info.value.request.url == f"http://127.0.0.1:{closed_port}/"
    with pytest.raises(requests.ReadTimeout) as t:
        session.get(base_url + "/delay/3000", timeout=(5, 0.1))
    assert t.value.__cause__.timeout_kind == "idle"
    with pytest.raises(requests.Timeout):
        session.get(base_url + "/delay/3000", timeout=0.1)
    with pytest.raises(requests.ConnectionError) as p:
        session.get(base_url + "/close-mid-body")
    assert p.value.__cause__.code == courier.PartialResponse.CODE


def test_the_engine_cache_answers(engine, base_url, server) -> None:
    with requests.Session() as s:
        s.mount("http://", courier.requests.Adapter(engine, cache="http"))
        first = s.get(base_url + "/cache", params={"max_age": "60", "body": "requests-cached"})
        before = server.count()
        again = s.get(base_url + "/cache", params={"max_age": "60", "body": "requests-cached"})
        assert server.count() == before
        assert again.text == first.text == "requests-cached"


def test_an_adapter_that_freezes_still_streams(engine, base_url) -> None:
    """freeze= among the adapter's options applies to whole responses; a stream is never frozen
    (the engine refuses a stream that may be), so stream=True still works."""
    with requests.Session() as s:
        s.mount("http://", courier.requests.Adapter(engine, freeze="auto"))
        assert len(s.get(base_url + "/bytes/5000", stream=True).content) == 5000
        assert s.get(base_url + "/json").json()["data"]["name"] == "courier"


def test_cookies_are_the_engine_jars(engine, session, base_url) -> None:
    session.get(base_url + "/cookies/set", params={"session": "abc"}, allow_redirects=False)
    assert [c.name for c in engine.list_cookies()] == ["session"]
    echo = session.get(base_url + "/echo", cookies={"mine": "1"}).json()
    assert header_lines(echo, "Cookie") == ["session=abc"]
