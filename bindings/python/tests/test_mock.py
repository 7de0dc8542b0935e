"""Mock answers: used only while the engine's mock switch is on."""
from __future__ import annotations

import json
import time

import pytest

import courier


def test_switch_off_ignores_mock(engine: courier.Engine) -> None:
    r = engine.get("/json", mock=courier.Mock(status=201, body=b"mocked"))
    assert r.status == 200 and r.json()["message"] == "ok"


def test_mock_response_headers_and_runtime_switch(engine: courier.Engine, server) -> None:
    assert engine.mock_enabled is False
    engine.mock_enabled = True
    assert engine.mock_enabled is True
    before = server.count()
    m = courier.Mock(status=201, body=b'{"m":1}', content_type="application/json", headers={"X-Mock": "yes"})
    r = engine.get("/json", mock=m)
    assert r.status == 201 and r.json() == {"m": 1}
    assert r.headers["x-mock"] == "yes" and r.headers["content-type"] == "application/json"
    assert server.count() == before  # nothing reached the network
    engine.mock_enabled = False
    assert engine.get("/json", mock=m).status == 200


def test_mock_is_judged_like_a_real_answer(base_url: str) -> None:
    with courier.Engine(base_url=base_url, mock=True) as e:
        with pytest.raises(courier.HTTPStatusError) as info:
            e.get("/x", mock=courier.Mock(status=500, body="bad"))
        assert info.value.response.text == "bad"
        with pytest.raises(courier.InvalidResult):
            e.get("/x", mock=courier.Mock(json={"ok": False}), validator=lambda r: r.json()["ok"])


def test_mock_file_error_delay_callback(base_url: str, tmp_path) -> None:
    f = tmp_path / "answer.json"
    f.write_text(json.dumps({"from": "file"}))
    with courier.Engine(base_url=base_url, mock=True) as e:
        r = e.get("/x", mock=courier.Mock(file=str(f)))
        assert r.status == 200 and r.json() == {"from": "file"}
        assert r.headers["content-type"].startswith("application/json")
        assert e.get("/x", mock=courier.Mock(file=str(f), status=202)).status == 202
        with pytest.raises(courier.CannotConnect):
            e.get("/x", mock=courier.Mock(error=courier.CannotConnect))
        t0 = time.monotonic()
        assert e.get("/x", mock=courier.Mock(body="late", delay=0.2)).text == "late"
        assert time.monotonic() - t0 >= 0.18
        fut = e.send_async("GET", "/x", mock=courier.Mock(body="late", delay=5))
        assert fut.cancel()
        with pytest.raises(courier.Cancelled):
            fut.result(5)

        seen = {}

        def answer(out: courier.Outgoing) -> courier.Answer:
            seen["url"], seen["method"], seen["h"] = out.url, out.method, out.header("X-Q")
            with pytest.raises(courier.InvalidArgument):
                out.set_header("X", "read-only")
            return courier.Answer(200, json={"echo": out.url}, headers=[("X-From", "callback")])

        r = e.get("/cb", params={"a": "1"}, headers={"X-Q": "q"}, mock=courier.Mock(callback=answer))
        assert r.json() == {"echo": base_url + "/cb?a=1"}
        assert r.headers["x-from"] == "callback"
        assert seen == {"url": base_url + "/cb?a=1", "method": "GET", "h": "q"}
