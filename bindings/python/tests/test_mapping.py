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


def test_results_read_on_the_tape(base_url) -> None:
    """Response.data and .result read what the core left on its tape (courier_response_result_tape,
    written by courier_json_tape_dump): the same values as the whole document's, numbers and
    strings exactly; absent results and bodies that are not JSON are None."""
    body = '{"data":{"items":[{"id":1,"title":"caf\\u00e9 \\ud83d\\ude00","price":2.5},{"id":"2","title":7}]},' \
           '"big":-9223372036854775808,"tiny":1.5e-300,"neg":-0.0,"esc":"a\\"b\\\\c\\n"}'
    item = (courier.Mapping(coercions=courier.MAP_ALL_COERCIONS)
            .attribute("id", type=int).attribute("title", "name", type=str).attribute("price", type=float))
    with courier.Engine(base_url=base_url, json_types=["text/plain"]) as e:
        whole = e.get("/cache", params={"body": body})
        assert whole.data == whole.json()
        assert whole.data["big"] == -9223372036854775808 and whole.data["tiny"] == 1.5e-300
        assert whole.data["esc"] == 'a"b\\c\n' and whole.data["data"]["items"][0]["title"] == "café 😀"
        r = e.get("/cache", params={"body": body}, key_path="data.items", mapping=item,
                  results={"first": courier.Result("data.items.0", mapping=item), "raw": "data.items.1",
                           "none": courier.Result("data.none", optional=True)})
        assert r.data == [{"id": 1, "name": "café 😀", "price": 2.5}, {"id": 2, "name": "7"}]
        assert r.result("first") == {"id": 1, "name": "café 😀", "price": 2.5}
        assert r.result("raw") == {"id": "2", "title": 7}
        assert r.result("none") is None and r.result("unknown") is None
        assert e.get("/cache", params={"body": "not json"}).data is None
    # A custom decoder's document is read on a tape too.
    with courier.Engine(base_url=base_url, decoders={"text/plain": lambda b, t: {"v": {"text": b.decode()}}}) as e:
        assert e.get("/cache", params={"body": "hi"}, key_path="v.text").data == "hi"


def test_apply_mapping_on_the_tape() -> None:
    """Mapping.apply runs on the core's tape (courier_mapping_apply_tape): the same outputs and the
    same errors, path and types, as the jansson path."""
    item = courier.Mapping().attribute("id", type=int, required=True).attribute("title", "name", type=str)
    assert item.apply([{"id": 1, "title": "a"}, {"id": 2}]) == [{"id": 1, "name": "a"}, {"id": 2}]
    with pytest.raises(courier.MappingError) as info:
        item.apply([{"id": 1}, {"id": "x"}])
    assert info.value.path == "1.id"
    assert info.value.expected == JsonType.INTEGER and info.value.found == JsonType.STRING


# Issue 28, bug 4: numbers beyond int64 and double are valid JSON (RFC 8259), a byte order mark may
# come first, and a malformed body is reported at one position whichever way it is read.
BIG = (b'{"a":1,"b":18446744073709551615,"c":-9223372036854775809,"d":1e400,'
       b'"e":[123456789012345678901234567890,-1E+400]}')


def _mocked(e: courier.Engine, body: bytes, **kw):
    return e.get("/x", mock=courier.Mock(body=body, content_type="application/json"), **kw)


def test_numbers_beyond_int64_and_double_like_json_loads(base_url) -> None:
    import json
    with courier.Engine(base_url=base_url, mock=True) as e:
        r = _mocked(e, BIG)
        doc = r.json()
        assert doc == json.loads(BIG)  # ints exactly, 1e400 as inf, as json.loads
        assert doc["b"] == 2**64 - 1 and type(doc["b"]) is int
        assert doc["c"] == -(2**63) - 1 and doc["e"][0] == 123456789012345678901234567890
        assert doc["d"] == float("inf") and doc["e"][1] == float("-inf")
        assert _mocked(e, BIG, key_path="b").data == 2**64 - 1  # the tape path
        assert _mocked(e, BIG, key_path="e").data == [123456789012345678901234567890, float("-inf")]
        only_a = courier.Mapping().attribute("a", type=int, required=True)
        assert _mocked(e, BIG, mapping=only_a).data == {"a": 1}  # other fields are never read
        kept = courier.Mapping().attribute("b", type="number").attribute("d", type=float)
        assert _mocked(e, BIG, mapping=kept).data == {"b": 2**64 - 1, "d": float("inf")}
        with pytest.raises(courier.MappingError) as info:
            _mocked(e, BIG, mapping=courier.Mapping().attribute("b", type=int))
        assert info.value.response.mapping_error[1:] == (JsonType.INTEGER, JsonType.REAL)
        as_text = courier.Mapping(coercions=courier.MAP_STRING_FROM_NUMBER).attribute("b", type=str)
        assert _mocked(e, BIG, mapping=as_text).data == {"b": "18446744073709551615"}
    # Python values with big ints go through the core and come back exact.
    assert courier.Mapping().attribute("b", type="number").apply({"b": 2**64 - 1, "x": 10**30}) == {"b": 2**64 - 1}


def test_byte_order_mark_before_the_document(base_url) -> None:
    with courier.Engine(base_url=base_url, mock=True) as e:
        body = b'\xef\xbb\xbf{"a":[1,2]}'
        assert _mocked(e, body).json() == {"a": [1, 2]}
        assert _mocked(e, body, key_path="a.1").data == 2


def test_one_error_position_on_both_paths(base_url) -> None:
    with courier.Engine(base_url=base_url, mock=True) as e:
        body = b'{"a":1,"b":tru}'
        with pytest.raises(courier.JSONError) as whole:
            _mocked(e, body).json()
        with pytest.raises(courier.JSONError) as keyed:
            _mocked(e, body, key_path="a")
        assert whole.value.code == keyed.value.code == -22
        assert whole.value.message == keyed.value.message
        assert "(byte 11)" in whole.value.message
