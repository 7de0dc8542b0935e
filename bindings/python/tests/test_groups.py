"""Groups (courier_group_*): batches and chains over the loopback server, sync."""
from __future__ import annotations

import threading

import pytest

import courier
from courier import GroupMode, Request
from conftest import wait_until


def test_batch_every_member_has_its_result(engine: courier.Engine) -> None:
    result = engine.batch([Request("GET", "/echo", params={"i": i}) for i in range(5)] + [("GET", "/status/404")])
    assert len(result) == 6 and result.error is not None and result.failed_index == 5
    assert [m.response.json()["query"] for m in result.members[:5]] == [f"i={i}" for i in range(5)]
    assert all(m.ok and m.request_id > 0 for m in result.members[:5])
    bad = result[5]
    assert isinstance(bad.error, courier.HTTPStatusError) and bad.response.status == 404
    assert result.error is bad.error
    with pytest.raises(courier.HTTPStatusError):
        result.raise_for_error()
    with pytest.raises(courier.HTTPStatusError):
        bad.result()


def test_batch_continue_on_failure_and_ok(engine: courier.Engine) -> None:
    result = engine.batch([("GET", "/json"), ("GET", "/status/500")], continue_on_failure=True)
    assert result.ok and result.error is None and result.failed_index is None
    assert result[1].error.code == courier.HTTPStatusError.CODE


def test_batch_max_in_flight_and_on_member(engine: courier.Engine) -> None:
    seen: list = []
    lock = threading.Lock()

    def on_member(m: courier.GroupMember) -> None:
        with lock:
            seen.append((m.index, engine.pending()[1]))

    result = engine.batch([("GET", "/delay/50")] * 4, max_in_flight=1, on_member=on_member)
    assert result.ok and sorted(i for i, _ in seen) == [0, 1, 2, 3]
    assert max(active for _, active in seen) <= 1


def test_batch_fail_fast_cancels_the_rest(engine: courier.Engine) -> None:
    result = engine.batch([Request("GET", "/hang", params={"n": 1}), ("GET", "/status/500"),
                           Request("GET", "/hang", params={"n": 2})], fail_fast=True)
    assert result.failed_index == 1 and isinstance(result.error, courier.HTTPStatusError)
    assert isinstance(result[0].error, courier.Cancelled) and isinstance(result[2].error, courier.Cancelled)


def test_chain_builds_from_the_previous_member(engine: courier.Engine) -> None:
    def second(prev: courier.GroupMember) -> Request:
        return Request("GET", "/echo", params={"from": prev.response.json()["query"]})

    def skipped(prev: courier.GroupMember) -> None:
        return None

    result = engine.chain([Request("GET", "/echo", params={"n": "1"}), second, skipped, ("GET", "/json")])
    assert result.ok
    assert result[1].response.json()["query"] == "from=n%3D1"
    assert result[2].response is None and result[2].error is None and result[2].request_id == 0
    assert result[3].response.status == 200


def test_chain_stops_at_a_failure_and_build_exceptions_are_kept(engine: courier.Engine) -> None:
    result = engine.chain([("GET", "/status/503"), ("GET", "/json")])
    assert result.failed_index == 0 and isinstance(result[1].error, courier.Cancelled)  # never sent
    assert result[1].request_id == 0

    def boom(prev):
        raise KeyError("in build")

    result = engine.chain([("GET", "/json"), boom, ("GET", "/json")])
    assert result.failed_index == 1 and isinstance(result.error, KeyError)


def test_group_cancel_and_wait(engine: courier.Engine) -> None:
    with engine.group("batch") as g:
        g.add("GET", "/hang", params={"n": 1})
        g.add(Request("GET", "/hang", params={"n": 2}))  # (identical GETs would share one transfer)
        assert len(g) == 2 and g.mode is GroupMode.BATCH
        g.start()
        assert wait_until(lambda: engine.pending()[1] == 2)
        assert g.cancel() is True
        result = g.wait(10)
        assert isinstance(result.error, courier.Cancelled)
        assert all(isinstance(m.error, courier.Cancelled) for m in result)
        assert g.cancel() is False  # completed


def test_batch_timeout_cancels_the_group(engine: courier.Engine) -> None:
    with pytest.raises(courier.Timeout):
        engine.batch([("GET", "/hang")], timeout=0.2)
    assert wait_until(lambda: engine.pending() == (0, 0))


def test_empty_group_and_closed_engine(base_url: str) -> None:
    e = courier.Engine(base_url=base_url)
    assert e.batch([]).members == []
    g = e.group("chain")
    g.add("GET", "/hang")
    g.start()
    e.close()  # completes the running group
    assert isinstance(g.wait(10).error, courier.Cancelled)
    g.close()
