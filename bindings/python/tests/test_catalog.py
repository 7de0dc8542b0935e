"""The API catalogue (HLAPICenter), the API version segment, routes filled from dicts, response
descriptors mapping error bodies, and per-request accepted statuses: the C core's, through the
binding."""
from __future__ import annotations

import asyncio
import json

import pytest

import courier


def test_api_version_segment(base_url: str, tmp_path) -> None:
    with courier.Engine(base_url + "/echo", store=tmp_path, api_version="v5") as e:
        assert e.get("/s").json()["path"] == "/echo/v5/s"
        assert e.get("/s", api_version="v6").json()["path"] == "/echo/v6/s"
        assert e.get("/s", api_version="").json()["path"] == "/echo/s"
    with courier.Engine(base_url + "/echo", store=tmp_path, api_version="v5", api_review=True) as e:
        assert e.get("/s").json()["path"] == "/echo/v5r/s"
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(base_url, store=tmp_path, api_version="v 5")


def test_declared_api_used_by_name(engine) -> None:
    engine.add_api("home.feed", {"method": "POST", "path": "/echo/feed", "params": {"page": 1},
                                 "headers": {"X-Module": "home"}, "key_path": "body"})
    r = engine.api("home.feed", params={"user_id": "7"})
    assert r.data == "page=1&user_id=7"
    assert ["X-Module", "home"] in r.json()["headers"]
    r = engine.send(courier.Request.api("home.feed"))
    assert r.data == "page=1"
    assert engine.api_names() == ["home.feed"]
    with pytest.raises(courier.UnknownName):
        engine.api("home.nope")
    with pytest.raises(courier.CatalogError) as info:
        engine.add_api("bad", {"path": "/x", "pth": "/y"})
    assert "pth" in str(info.value)
    with pytest.raises(courier.CatalogError):
        engine.add_api("bad", {"method": "GET"})


def test_catalogue_from_json_serves_every_language(engine, tmp_path) -> None:
    doc = {"apis": {"home": {"detail": {"path": "/echo/items/:id"},
                             "stats": {"path": "/status/404", "status_codes": [[200, 299], 404]}}},
           "routes": [{"name": "user.photos", "path": "/echo/users/:id/photos"}]}
    path = tmp_path / "apis.json"
    path.write_text(json.dumps(doc))
    assert engine.load_api_file(path) == 2
    assert engine.api_names() == ["home.detail", "home.stats"]
    r = engine.api("home.detail", object={"id": 42, "lang": "fr"})
    assert (r.json()["path"], r.json()["query"]) == ("/echo/items/42", "lang=fr")
    assert engine.api("home.stats").status == 404  # accepted by the declaration
    r = engine.send(courier.Request.route("user.photos", {"id": "a b"}))
    assert r.json()["path"] == "/echo/users/a%20b/photos"
    with pytest.raises(courier.JSONError):
        engine.load_apis('{"apis": {')
    with pytest.raises(courier.CatalogError):
        engine.load_apis({"apis": {"m": {"ok": {"path": "/x"}, "bad": {"path": "/y", "methd": "GET"}}}})
    with pytest.raises(courier.UnknownName):  # all or nothing
        engine.api("m.ok")
    with pytest.raises(courier.NotFound):
        engine.load_api_file(tmp_path / "missing.json")


def test_routes_fill_patterns_from_dicts(base_url: str, tmp_path) -> None:
    with courier.Engine(base_url, store=tmp_path, body_encoding="json") as e:
        e.add_route("/echo/users/:id", object_type="user")
        e.add_route("/echo/users", object_type="user", method="POST")
        user = {"id": 7, "name": "Ann", "tags": [1, 2]}
        r = e.send(courier.Request.for_object("PUT", "user", user))
        assert r.json()["path"] == "/echo/users/7"
        assert json.loads(r.json()["body"]) == {"name": "Ann", "tags": [1, 2]}
        r = e.send(courier.Request.for_object("POST", "user", user))
        assert json.loads(r.json()["body"]) == user
        r = e.get("/echo/things/:kind", object={"kind": "x/y", "page": 2})
        assert (r.json()["path"], r.json()["query"]) == ("/echo/things/x%2Fy", "page=2")
        with pytest.raises(courier.RouteParameterError):
            e.send(courier.Request.for_object("PUT", "user", {"name": "no id"}))
        with pytest.raises(courier.UnknownName):
            e.send(courier.Request.for_object("GET", "photo", {}))


def test_error_body_mapped_into_error_model(engine) -> None:
    model = courier.Mapping().attribute("code", type=int, required=True).attribute("message", "errorMsg")
    engine.add_response_descriptor("/problem/:code", status_codes=(400, 499), key_path="error", mapping=model)
    engine.add_response_descriptor("/json", method="GET", key_path="data.items")
    with pytest.raises(courier.HTTPStatusError) as info:
        engine.get("/problem/404")
    assert info.value.http_status == 404
    assert info.value.response.data == {"code": 40401, "errorMsg": "problem 404"}
    with pytest.raises(courier.HTTPStatusError) as info:
        engine.get("/problem/500")  # outside the descriptor's statuses: the body as it is
    assert info.value.response.data == {"error": {"code": 50001, "message": "problem 500"}}
    assert engine.get("/json").data == [{"id": 1, "title": "one"}, {"id": 2, "title": "two"}]


def test_accepted_status_codes(engine) -> None:
    assert engine.get("/status/404", status_codes=[(200, 299), 404]).status == 404
    with pytest.raises(courier.HTTPStatusError) as info:
        engine.get("/status/200", status_codes=[201])
    assert info.value.response.status == 200
    with pytest.raises(courier.InvalidArgument):
        engine.get("/status/200", status_codes=[(300, 200)])


def test_catalogue_requests_in_groups_async_and_the_cache_manager(engine) -> None:
    engine.add_api("home.feed", {"path": "/echo/feed"})
    engine.add_api("home.item", {"path": "/echo/items/:id"})
    result = engine.batch([courier.Request.api("home.feed"), courier.Request.api("home.item", object={"id": 3})])
    assert [r.json()["path"] for r in result.responses] == ["/echo/feed", "/echo/items/3"]
    assert "/echo/feed" in engine.cache.key(courier.Request.api("home.feed"))

    async def main() -> str:
        async with courier.AsyncEngine(engine=engine) as aengine:
            return (await aengine.api("home.item", object={"id": 4})).json()["path"]
    assert asyncio.run(main()) == "/echo/items/4"


def test_api_path_parameter_without_object_is_refused(engine) -> None:
    # issue 28 bug 6: the literal ":id" was sent; an unfilled parameter is RouteParameterError.
    engine.add_api("shop.item", {"path": "/echo/items/:id"})
    with pytest.raises(courier.RouteParameterError) as info:
        engine.api("shop.item")
    assert info.value.code == courier.RouteParameterError.CODE
    with pytest.raises(courier.RouteParameterError):
        engine.send(courier.Request.api("shop.item"))
    assert engine.api("shop.item", object={"id": 7}).json()["path"] == "/echo/items/7"
