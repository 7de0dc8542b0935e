"""Parameters in other charsets than UTF-8 (the bytes the server receives) and a response's text
decoded by its charset (courier_*_set_param_charset, courier_response_text)."""
from __future__ import annotations

import pathlib

import pytest

import courier


def test_engine_charset_writes_gbk_query_bytes(base_url: str, tmp_path: pathlib.Path) -> None:
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), param_charset="GBK") as e:
        doc = e.get("/echo", params={"q": "中文"}).json()
        assert doc["query"] == "q=%D6%D0%CE%C4"
        # the request's own charset replaces the engine's
        doc = e.get("/echo", params={"q": "日本"}, param_charset="Shift_JIS").json()
        assert doc["query"] == "q=%93%FA%96%7B"
        doc = e.get("/echo", params={"q": "中"}, param_charset="UTF-8").json()
        assert doc["query"] == "q=%E4%B8%AD"


def test_form_body_in_gbk(engine: courier.Engine) -> None:
    doc = engine.post("/echo", params={"city": "北京"}, param_charset="GBK").json()
    assert doc["body"] == "city=%B1%B1%BE%A9"
    assert ["Content-Type", "application/x-www-form-urlencoded; charset=GBK"] in doc["headers"]


def test_bad_charsets(engine: courier.Engine, base_url: str) -> None:
    with pytest.raises(courier.UnknownCharset) as info:
        courier.Engine(base_url=base_url, temporary_store=True, param_charset="x-klingon")
    assert info.value.code == -46
    with pytest.raises(courier.UnknownCharset):
        engine.get("/echo", params={"a": "b"}, param_charset="x-klingon")
    with pytest.raises(courier.CharsetError) as err:
        engine.get("/echo", params={"name": "中"}, param_charset="ISO-8859-1")
    assert err.value.code == -47


def test_text_is_decoded_by_the_response_charset(engine: courier.Engine) -> None:
    r = engine.get("/text", params={"type": "text/plain; charset=GBK", "hex": "d6d0cec4"})
    assert r.body == b"\xd6\xd0\xce\xc4"
    assert r.text == "中文"
    r = engine.get("/text", params={"type": "text/plain", "hex": "93fa967b"})
    assert r.decode_text("Shift_JIS") == "日本"
    with pytest.raises(courier.CharsetError):
        r.text  # not UTF-8, and no charset named
    r = engine.get("/text", params={"type": "text/plain; charset=x-klingon", "hex": "41"})
    with pytest.raises(courier.UnknownCharset):
        r.text
