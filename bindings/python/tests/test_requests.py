"""Requests and responses over the loopback server."""
from __future__ import annotations

import courier


def test_get_with_params_and_headers(engine: courier.Engine) -> None:
    r = engine.get("/echo", params={"a": "1 2", "b": ["x", "y"]}, headers={"X-Trace": "t1"})
    assert r.status == 200
    assert r.ok
    doc = r.json()
    assert doc["method"] == "GET"
    assert doc["query"] == "a=1%202&b=x&b=y"
    assert ["X-Trace", "t1"] in doc["headers"]
    assert r.method == "GET"
    assert r.url.endswith("/echo?a=1%202&b=x&b=y")
    assert r.request_id > 0


def test_headers_case_insensitive_and_ordered(engine: courier.Engine) -> None:
    r = engine.get("/headers", params=[("X-A", "1"), ("x-a", "2"), ("X-B", "3")])
    h = r.headers
    assert h["x-a"] == "1" and h["X-A"] == "1"
    assert h.get_all("X-a") == ["1", "2"]
    assert "x-b" in h and "x-c" not in h
    names = [n for n, _ in h.lines()]
    assert names[-3:] == ["X-A", "x-a", "X-B"]
    assert list(h)[-2:] == ["X-A", "X-B"]
    assert h.get("missing") is None


def test_body_text_and_json(engine: courier.Engine) -> None:
    r = engine.get("/json")
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["data"]["name"] == "courier"
    assert r.text == r.body.decode()
    assert isinstance(r.body, bytes)


def test_json_is_the_cores_document(engine: courier.Engine) -> None:
    # the core refuses duplicate keys; json.loads would silently take the last one
    with courier.Engine(mock=True) as e:
        dup = e.get("http://127.0.0.1:9/x", mock=courier.Mock(body=b'{"a":1,"a":2}', content_type="application/json"))
        try:
            dup.json()
        except courier.JSONError as exc:
            assert exc.code == courier.JSONError.CODE
        else:
            raise AssertionError("duplicate keys were accepted")
        big = e.get("http://127.0.0.1:9/x", mock=courier.Mock(json={"i": 2 ** 62, "r": 0.1, "s": "é", "n": None}))
        assert big.json() == {"i": 2 ** 62, "r": 0.1, "s": "é", "n": None}


def test_post_form_params_json_and_raw_body(engine: courier.Engine) -> None:
    r = engine.post("/echo", params={"a": "b", "c": "d e"})
    doc = r.json()
    assert doc["body"] == "a=b&c=d%20e"
    assert ["Content-Type", "application/x-www-form-urlencoded"] in doc["headers"]
    r = engine.post("/echo", json={"x": [1, 2.5, None, True]})
    doc = r.json()
    assert doc["body"] == '{"x":[1,2.5,null,true]}'
    assert ["Content-Type", "application/json"] in doc["headers"]
    r = engine.put("/echo", body=b"\x01\x02raw", content_type="application/x-raw", params={"q": "1"})
    doc = r.json()
    assert doc["method"] == "PUT" and doc["body_length"] == 5 and doc["query"] == "q=1"
    r = engine.post("/echo", params={"a": "1"}, body_encoding="json")
    assert r.json()["body"] == '{"a":"1"}'
    r = engine.post("/echo", form={"user": {"name": "x"}, "tags": ["a", "b"]})
    assert r.json()["body"] == "user%5Bname%5D=x&tags%5B%5D=a&tags%5B%5D=b"


def test_other_methods_and_head(engine: courier.Engine) -> None:
    assert engine.delete("/echo").json()["method"] == "DELETE"
    assert engine.patch("/echo", body="x").json()["method"] == "PATCH"
    h = engine.head("/json")
    assert h.status == 200 and h.body == b"" and int(h.headers["content-length"]) > 0
    assert engine.send("OPTIONS", "/echo").json()["method"] == "OPTIONS"


def test_engine_defaults_base_url_and_auth(base_url: str) -> None:
    with courier.Engine(base_url=base_url + "/echo/", headers={"X-App": "demo"}, params={"v": "2"},
                        user_agent="test-agent/1") as e:
        doc = e.get("sub", params={"q": "1"}).json()
        assert doc["path"] == "/echo/sub"
        assert doc["query"] == "v=2&q=1"
        assert ["X-App", "demo"] in doc["headers"]
        assert ["User-Agent", "test-agent/1"] in doc["headers"]
        doc = e.get("sub", use_default_params=False, headers={"X-App": "override"}).json()
        assert doc["query"] == "" and ["X-App", "override"] in doc["headers"]
        doc = e.get("sub", auth=("u", "p")).json()
        assert ["Authorization", "Basic dTpw"] in doc["headers"]
        doc = e.get("sub", token="abc").json()
        assert ["Authorization", "Bearer abc"] in doc["headers"]
        # an absolute URL ignores the base; a request base URL replaces the engine's
        assert e.get(base_url + "/echo/abs").json()["path"] == "/echo/abs"
        assert e.get("x", base_url=base_url + "/echo/other").json()["path"] == "/echo/other/x"


def test_redirect_metrics_and_prepared_request(engine: courier.Engine) -> None:
    r = engine.get("/redirect", params={"to": "/json"})
    assert r.url.endswith("/json")
    m = r.metrics
    assert m.redirects == 1 and m.total > 0 and m.bytes_received > 0 and m.http_version == 11
    req = courier.Request("GET", "/echo", params={"p": "1"})
    assert engine.send(req).json()["query"] == "p=1"
    assert engine.send(req).json()["query"] == "p=1"  # a Request can be sent again


def test_response_outlives_engine(base_url: str) -> None:
    with courier.Engine(base_url=base_url) as e:
        r = e.get("/json")
    assert r.json()["message"] == "ok"
    assert r.headers["content-type"]


def test_customize_changes_final_request(engine: courier.Engine) -> None:
    seen = {}

    def customize(out: courier.Outgoing) -> None:
        seen["url"] = out.url
        seen["method"] = out.method
        out.set_header("X-Custom", "1")
        out.url = out.url.replace("/echo", "/echo/changed")

    doc = engine.get("/echo", customize=customize).json()
    assert seen["method"] == "GET" and seen["url"].endswith("/echo")
    assert doc["path"] == "/echo/changed"
    assert ["X-Custom", "1"] in doc["headers"]


def test_engine_validator_and_request_validator(base_url: str) -> None:
    calls = []

    def engine_validator(resp: courier.Response) -> bool:
        calls.append(resp.status)
        return resp.json().get("message") == "ok"

    with courier.Engine(base_url=base_url, validator=engine_validator) as e:
        assert e.get("/json").status == 200
        try:
            e.get("/echo")
        except courier.InvalidResult as exc:
            assert exc.response is not None and exc.response.status == 200
        else:
            raise AssertionError("validator did not reject")
        assert e.get("/echo", validator=lambda r: True).status == 200  # replaces the engine's
    assert calls == [200, 200]


def test_version() -> None:
    # the version is set in one place, the header's COURIER_VERSION_* (docs/ABI.md)
    import os
    import re
    header = os.environ.get("COURIER_HEADER")
    if header:
        m = re.search(r'#define COURIER_VERSION_STRING "([^"]+)"', open(header, encoding="utf-8").read())
        assert m and courier.library_version() == m.group(1)
    assert courier.library_version_num() >> 16 == 0
    assert courier.strerror(courier.Timeout.CODE)


def test_relative_path_with_url_in_query(engine: courier.Engine) -> None:
    # issue 28 bug 2: "://" in the query does not make a path absolute (the scheme at the start does).
    r = engine.get("/echo?to=http://x")
    assert r.json()["path"] == "/echo" and r.json()["query"] == "to=http://x"
    r = engine.get("echo?next=https://u@h:1/p")
    assert r.json()["path"] == "/echo" and r.json()["query"] == "next=https://u@h:1/p"
