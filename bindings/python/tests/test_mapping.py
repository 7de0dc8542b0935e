"""JSON key paths, mappings, results and envelopes of the core."""
from __future__ import annotations

import pytest

import courier
from courier import JsonType


def test_key_path_and_data(engine) -> None:
    r = engine.get("/json", key_path="data.items")
    assert r.data == [{"id": 1, "title": "one"}, {"id": 2, "title": "two"}]
    with pytest.raises(courier.MappingError) as info:
        engine.get("/json", key_path="data.missing")
    assert info.value.response is not None


def test_mapping_and_named_results(engine) -> None:
    item = courier.Mapping().attribute("id", "identifier", int, required=True).attribute("title", type="string")
    r = engine.get("/json", key_path="data.items", mapping=item,
                   results={"name": "data.name", "tags": courier.Result("data.tags"),
                            "nothing": courier.Result("data.none", optional=True)})
    assert r.data == [{"identifier": 1, "title": "one"}, {"identifier": 2, "title": "two"}]
    assert r.result("name") == "courier"
    assert r.result("tags") == ["a", "b"]
    assert r.result("nothing") is None


def test_mapping_error_path(engine) -> None:
    wrong = courier.Mapping().attribute("title", type=int)
    with pytest.raises(courier.MappingError) as info:
        engine.get("/json", key_path="data.items", mapping=wrong)
    path, expected, found = info.value.response.mapping_error
    assert path == "0.title" or path.endswith("title")
    assert expected == JsonType.INTEGER and found == JsonType.STRING


def test_mapping_apply_relationships_defaults_and_coercions() -> None:
    user = courier.Mapping().attribute("id", type=int).attribute("role", default="member")
    post = (courier.Mapping(coercions=courier.MAP_NUMBER_FROM_STRING)
            .attribute("votes", type=int).relationship("author", user).relationship("replies", user, many=True))
    out = post.apply({"votes": "42", "author": {"id": 7, "x": 1}, "replies": [{"id": 1, "role": "admin"}]})
    assert out == {"votes": 42, "author": {"id": 7, "role": "member"}, "replies": [{"id": 1, "role": "admin"}]}
    with pytest.raises(courier.MappingError) as info:
        courier.Mapping().attribute("id", type=int, required=True).apply({"x": 1})
    assert info.value.path == "id" and info.value.found == JsonType.NONE


def test_envelope(base_url) -> None:
    env = courier.Envelope(code_path="code", message_path="message", data_path="data", success_codes=[200])
    with courier.Engine(base_url=base_url, envelope=env) as e:
        r = e.get("/json")
        assert r.envelope == (200, "ok")
        assert r.data["name"] == "courier"
    strict = courier.Envelope(code_path="code", message_path="message", success_codes=[0])
    with courier.Engine(base_url=base_url, envelope=strict) as e:
        with pytest.raises(courier.APIError) as info:
            e.get("/json")
        assert info.value.response.envelope == (200, "ok")
        assert e.get("/json", envelope=None).status == 200  # this request uses none


def test_envelope_check_callback(base_url) -> None:
    seen = []

    def check(document, code, message):
        seen.append((code, message, document["data"]["id"]))
        return code == 200

    env = courier.Envelope(code_path="code", message_path="message", check=check)
    with courier.Engine(base_url=base_url, envelope=env) as e:
        assert e.get("/json").status == 200
    assert seen == [(200, "ok", 1)]


def test_custom_decoder_and_json_types(base_url, engine) -> None:
    def decode(body, content_type):
        return {"text": body.decode(), "type": content_type}

    with courier.Engine(base_url=base_url, decoders={"text/plain": decode}) as e:
        r = e.get("/cache", params={"body": "hi"})
        assert r.json() == {"text": "hi", "type": "text/plain"}
    with courier.Engine(base_url=base_url, json_types=["text/plain"]) as e:
        with pytest.raises(courier.JSONError):
            e.get("/cache", params={"body": "not json"}).json()
        assert e.get("/cache", params={"body": "[1,2]"}).json() == [1, 2]


def test_decoder_exception_reraised_by_json(base_url) -> None:
    def decode(body, content_type):
        raise LookupError("decoder")

    with courier.Engine(base_url=base_url, decoders={"text/plain": decode}) as e:
        r = e.get("/cache", params={"body": "hi"})
        with pytest.raises(LookupError) as info:
            r.json()
        assert isinstance(info.value.__context__, courier.CourierError)
