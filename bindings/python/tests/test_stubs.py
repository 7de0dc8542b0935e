"""Engine-wide stubs (courier.stubs over the C core's stubs.c): matching, sequences over retries,
errors as exception classes, unmatched requests failing or passing through to the loopback server,
the record, a predicate that raises, HAR recorded from loopback traffic and replayed; and the
package's pytest fixture ``courier_stubs`` (entry point pytest11), used here as an app's test would."""
from __future__ import annotations

import json

import pytest

import courier


def test_the_fixture_answers_from_stubs_only(courier_stubs: courier.Engine) -> None:
    assert courier_stubs.stubs.mode == courier.StubMode.ONLY
    courier_stubs.stubs.add("GET", "http://api.test/users/1", {"id": 1, "name": "Ada"})
    r = courier_stubs.get("http://api.test/users/1")
    assert r.status == 200 and r.json() == {"id": 1, "name": "Ada"}
    assert r.headers["content-type"] == "application/json"
    with pytest.raises(courier.NoStub):
        courier_stubs.get("http://api.test/users/2")
    assert [q.url for q in courier_stubs.stubs.requests] == ["http://api.test/users/1", "http://api.test/users/2"]
    assert courier_stubs.stubs.requests[1].stub_id is None


@pytest.mark.courier_stubs(base_url="https://api.test/v1")
def test_the_fixture_takes_engine_options_from_its_marker(courier_stubs: courier.Engine) -> None:
    courier_stubs.stubs.add(courier.Stub("POST", "/v1/orders", answers=courier.StubAnswer(status=201, json={"ok": True}),
                                         headers={"X-Tenant": "a"}))
    r = courier_stubs.post("/orders", json={"qty": 2}, headers={"X-Tenant": "a"})
    assert r.status == 201 and r.json() == {"ok": True}
    seen = courier_stubs.stubs.requests[0]
    assert seen.method == "POST" and seen.url == "https://api.test/v1/orders"
    assert seen.header("x-tenant") == "a" and seen.json() == {"qty": 2}


def test_matching_rules(base_url: str, server) -> None:
    before = server.count()
    with courier.Engine(base_url=base_url, temporary_store=True, stub_mode="only") as e:
        e.stubs.add("GET", "/files/", "prefix", match="prefix")
        e.stubs.add(None, "/glob/*/x", "glob", match=courier.UrlMatch.GLOB)
        e.stubs.add("GET", "^/re/[0-9]+$", "regex", match="regex")
        e.stubs.add(courier.Stub("POST", "/login", answers=204, when=lambda q: q.text == "secret"))
        assert e.get("/files/a/b").text == "prefix"
        assert e.delete("/glob/a/b/x").text == "glob"
        assert e.get("/re/42").text == "regex"
        assert e.post("/login", body=b"secret", content_type="text/plain").status == 204
        with pytest.raises(courier.NoStub):
            e.post("/login", body=b"wrong", content_type="text/plain")
        # the stub added last wins; removing it uncovers the earlier one
        sid = e.stubs.add("GET", "/files/a", "override")
        assert e.get("/files/a").text == "override"
        assert e.stubs.remove(sid) and not e.stubs.remove(sid)
        assert e.get("/files/a").text == "prefix"
        with pytest.raises(courier.InvalidArgument):
            e.stubs.add("GET", "(", "bad", match="regex")
    assert server.count() == before  # nothing reached the network


def test_a_sequence_gives_one_answer_per_attempt(base_url: str) -> None:
    stub = courier.Stub("GET", "/flaky", answers=[503, courier.StubAnswer(error=courier.CannotConnect), "ok"])
    with courier.Engine(base_url=base_url, temporary_store=True, stub_mode="only", stubs=[stub],
                        retry=courier.Retry(3, 0.001, 0.002)) as e:
        r = e.get("/flaky")
        assert r.text == "ok" and r.attempts == 3
        assert len(e.stubs.requests) == 3
        assert e.get("/flaky").text == "ok"  # the last answer repeats


def test_answers_are_judged_and_errors_are_classes(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, stub_mode="only") as e:
        e.stubs.add("GET", "/missing", courier.StubAnswer(status=404, json={"e": 1}, headers={"X-Why": "gone"}))
        e.stubs.add("GET", "/down", courier.StubAnswer(error="COURIER_E_TIMEOUT"))
        with pytest.raises(courier.HTTPStatusError) as info:
            e.get("/missing")
        assert info.value.response.headers["x-why"] == "gone"
        with pytest.raises(courier.Timeout):
            e.get("/down")


def test_unmatched_requests_pass_through_to_the_network(base_url: str, server) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, stub_mode="pass-through") as e:
        e.stubs.add("GET", "/json", "stubbed")
        assert e.get("/json").text == "stubbed"
        before = server.count()
        assert e.get("/json?real=1").json()["message"] == "ok"
        assert server.count() == before + 1
        e.stubs.mode = "off"
        assert e.get("/json").json()["message"] == "ok"
        assert len(e.stubs.requests) == 2  # off records nothing


def test_a_predicate_that_raises_fails_its_send_with_its_exception(base_url: str) -> None:
    class Boom(Exception):
        pass

    def judge(q: courier.StubbedRequest) -> bool:
        raise Boom(q.url)

    with courier.Engine(base_url=base_url, temporary_store=True, stub_mode="only") as e:
        e.stubs.add(courier.Stub("GET", "/p", answers="x", when=judge))
        with pytest.raises(Boom):
            e.get("/p")


def test_the_asyncio_engine_answers_from_its_stubs(base_url: str) -> None:
    import asyncio

    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url, temporary_store=True, stub_mode="only") as e:
            e.stubs.add("GET", "/a", {"n": 1})
            assert (await e.get("/a")).json() == {"n": 1}
            with pytest.raises(courier.NoStub):
                await e.get("/b")
            assert [q.url for q in e.stubs.requests] == [base_url + "/a", base_url + "/b"]

    asyncio.run(main())


def test_har_recorded_from_the_network_and_replayed_without(base_url: str, server, tmp_path) -> None:
    har = tmp_path / "traffic.har"
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        e.record_har(har)
        real = e.get("/json")
        binary = e.get("/bytes/200")
        e.record_har(None)
    doc = json.loads(har.read_text())
    assert doc["log"]["version"] == "1.2" and len(doc["log"]["entries"]) == 2
    entry = doc["log"]["entries"][0]
    for key in ("startedDateTime", "time", "request", "response", "cache", "timings"):
        assert key in entry
    before = server.count()
    with courier.Engine(base_url=base_url, temporary_store=True, stub_mode="only") as e:
        assert e.stubs.replay_har(har) == 2
        assert e.get("/json").text == real.text
        assert e.get("/bytes/200").body == binary.body
        with pytest.raises(courier.NotFound):
            e.stubs.replay_har(tmp_path / "none.har")
    assert server.count() == before
