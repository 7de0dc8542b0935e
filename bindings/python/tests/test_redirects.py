"""What the binding adds to redirects and timeouts: the settings (engine and request) reaching the
core, the redirect hook as a Python callable, the chain on the response, the new codes, and which
timeout fired."""
from __future__ import annotations

import socket

import pytest

import courier


def test_redirects_are_followed_and_the_chain_is_told(engine: courier.Engine, base_url: str) -> None:
    r = engine.get("/redirect-chain/2")
    assert r.status == 200 and r.url == base_url + "/redirect-chain/0"
    assert r.redirects == [(base_url + "/redirect-chain/2", 302), (base_url + "/redirect-chain/1", 302)]
    assert r.metrics.redirects == 2
    r = engine.post("/redirect?to=/echo&status=303", body=b"x", content_type="text/plain")
    assert r.method == "GET" and r.json()["method"] == "GET" and r.json()["body"] == ""


def test_follow_setting_engine_and_request(base_url: str, tmp_path) -> None:
    with courier.Engine(base_url=base_url, follow_redirects=False, max_redirects=1, store=str(tmp_path)) as e:
        r = e.get("/redirect?to=/echo&status=308")
        assert r.status == 308 and r.headers["Location"] == "/echo" and r.redirects == []
        assert e.get("/redirect?to=/echo", follow_redirects=True).status == 200
        with pytest.raises(courier.TooManyRedirects) as info:
            e.get("/redirect-chain/2", follow_redirects=True)
        assert info.value.response is not None and info.value.response.status == 302
        assert e.get("/redirect-chain/2", follow_redirects=True, max_redirects=2).status == 200


def test_redirect_hook_sees_changes_stops_and_refuses(engine: courier.Engine, base_url: str) -> None:
    seen = []

    def hook(response: courier.Response, nxt: courier.Outgoing) -> None:
        seen.append((response.status, nxt.url, nxt.method))
        nxt.url = base_url + "/echo/changed"

    r = engine.put("/redirect?to=/echo&status=307", body=b"abc", content_type="text/plain", redirect_hook=hook)
    assert seen == [(307, base_url + "/echo", "PUT")]
    assert r.json()["path"] == "/echo/changed" and r.json()["body"] == "abc"
    assert engine.get("/redirect?to=/echo", redirect_hook=lambda resp, nxt: "stop").status == 302
    with pytest.raises(courier.RedirectRefused):
        engine.get("/redirect?to=/echo", redirect_hook=lambda resp, nxt: False)

    class Boom(Exception):
        pass

    def raising(resp: courier.Response, nxt: courier.Outgoing) -> None:
        raise Boom()

    with pytest.raises(Boom):  # the hook's exception, re-raised by the send
        engine.get("/redirect?to=/echo", redirect_hook=raising)


def test_timeouts_say_which_fired(engine: courier.Engine, base_url: str) -> None:
    with pytest.raises(courier.Timeout) as info:
        engine.get("/hang", idle_timeout=0.2)
    assert info.value.timeout_kind == "idle"
    with pytest.raises(courier.Timeout) as info:
        engine.get("/delay/5000", timeout=0.3)
    assert info.value.timeout_kind == "total"
    # A listener whose accept queue is full: the connect never completes.
    with socket.socket() as lst, socket.socket() as filler:
        lst.bind(("127.0.0.1", 0))
        lst.listen(0)
        filler.connect(lst.getsockname())
        with pytest.raises(courier.Timeout) as info:
            engine.get(f"http://127.0.0.1:{lst.getsockname()[1]}/", connect_timeout=0.2)
        assert info.value.timeout_kind == "connect"
    with courier.Engine(base_url=base_url, idle_timeout=0.2) as e:
        with pytest.raises(courier.Timeout) as info:
            e.get("/slow-body/5000")
        assert info.value.timeout_kind == "idle"


def test_framing_errors_have_their_codes(engine: courier.Engine) -> None:
    with pytest.raises(courier.ProtocolError):
        engine.get("/raw/two-content-length")
    with pytest.raises(courier.PartialResponse):
        engine.get("/raw/unterminated-headers")
    with pytest.raises(courier.HeadersTooLarge):
        engine.get("/raw/big-header/200000")
