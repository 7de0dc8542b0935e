"""Frozen requests: the durable offline journal, replay, events (decided by the core)."""
from __future__ import annotations

import threading

import pytest

import courier
from courier import FrozenEventKind


@pytest.fixture
def fengine(base_url, tmp_path):
    with courier.Engine(base_url=base_url, store=str(tmp_path / "store"), frozen_paused=True) as e:
        yield e


def test_freeze_while_offline_and_replay_when_online(fengine, server) -> None:
    events = []
    got = threading.Event()

    def listener(ev):
        events.append((ev.kind, ev.freeze_id, ev.response.status if ev.response else None))
        if ev.kind == FrozenEventKind.RESENT_SUCCEEDED:
            got.set()

    fengine.frozen.add_listener(listener)
    fengine.frozen.resume()
    fengine.set_offline()
    assert fengine.reachability == courier.Reachability.OFFLINE
    with pytest.raises(courier.Frozen) as info:
        fengine.post("/echo", json={"order": 1}, freeze=courier.Freeze("auto", id="order-1"))
    assert info.value.freeze_id == "order-1"
    with pytest.raises(courier.Offline):
        fengine.get("/json")  # no freeze policy: fails at once
    [fz] = fengine.frozen.list()
    assert fz.id == "order-1" and fz.method == "POST" and fz.url.endswith("/echo")
    assert fz.body == b'{"order":1}' and fz.idempotency_key
    assert ("Idempotency-Key", fz.idempotency_key) in fz.headers
    assert fz.policy == courier.FreezePolicy.AUTO and fz.attempts == 0
    assert fengine.frozen.get("order-1").id == "order-1"
    assert fengine.frozen.get("nope") is None
    before = server.count()
    fengine.set_online()
    assert got.wait(10)
    assert fengine.frozen.wait_idle(10)
    assert server.count() - before == 1
    assert fengine.frozen.count() == 0
    code, status, at = fengine.frozen.last_outcome("order-1")
    assert code == 0 and status == 200 and at > 0
    kinds = [k for k, fid, _ in events if fid == "order-1"]
    assert kinds == [FrozenEventKind.FROZEN, FrozenEventKind.RESENT_SUCCEEDED]


def test_a_paused_engine_waits_when_the_network_returns(fengine, server) -> None:
    # The network's return is automatic replay: paused, it waits for resume() (it once replayed at
    # once, even a request frozen offline right after the engine's first response; C:
    # journal_test.c paused_engine_waits_when_the_network_returns).
    fengine.get("/json")  # the monitor: online
    fengine.set_offline()
    with pytest.raises(courier.Frozen):
        fengine.post("/echo", json={"pay": 100}, freeze=courier.Freeze("auto", id="pay-1"))
    before = server.count()
    fengine.set_online()
    assert fengine.frozen.wait_idle(10)  # idle: nothing to send while paused
    assert [f.id for f in fengine.frozen.list()] == ["pay-1"] and server.count() - before == 0
    fengine.frozen.resume()
    assert fengine.frozen.wait_idle(10)
    assert fengine.frozen.count() == 0 and server.count() - before == 1


def test_freeze_on_cannot_connect_manual_resend_and_remove(tmp_path, closed_port) -> None:
    with courier.Engine(store=str(tmp_path / "s"), timeout=5, frozen_paused=True) as e:
        with pytest.raises(courier.Frozen) as info:
            e.post(f"http://127.0.0.1:{closed_port}/x", body=b"data", freeze="manual")
        fid = info.value.freeze_id
        assert fid and len(e.frozen) == 1
        assert e.frozen.remove(fid) is True
        assert e.frozen.remove(fid) is False
        with pytest.raises(courier.Frozen):
            e.post(f"http://127.0.0.1:{closed_port}/y", body=b"y", freeze="manual")
        with pytest.raises(courier.Frozen):
            e.delete(f"http://127.0.0.1:{closed_port}/z", freeze="manual")
        assert e.frozen.clear() == 2


def test_manual_replay_to_a_server_that_came_back(tmp_path) -> None:
    from conftest import Server, free_port
    port = free_port()
    with courier.Engine(store=str(tmp_path / "s"), timeout=5, frozen_paused=True) as e:
        with pytest.raises(courier.Frozen) as info:
            e.put(f"http://127.0.0.1:{port}/echo", body=b"later", freeze=courier.Freeze("manual"))
        fid = info.value.freeze_id
        srv = Server(port)
        try:
            e.frozen.resend(fid)
            assert e.frozen.wait_idle(10)
            assert e.frozen.last_outcome(fid)[:2] == (0, 200)
            assert srv.count() == 1
        finally:
            srv.stop()


def test_bodyless_post_freezes_on_cannot_connect(tmp_path, closed_port) -> None:
    with courier.Engine(store=str(tmp_path / "s"), timeout=5) as e:
        with pytest.raises(courier.Frozen):
            e.post(f"http://127.0.0.1:{closed_port}/x", freeze="manual")
        with pytest.raises(courier.Frozen):
            e.put(f"http://127.0.0.1:{closed_port}/x", freeze="manual")
        assert e.frozen.count() == 2


def test_frozen_request_outlives_the_engine_in_the_default_store(base_url, tmp_path, monkeypatch) -> None:
    # No store: the default one, $XDG_DATA_HOME/<app id>/courier, is durable (it used to be a
    # temporary directory removed at close, and the frozen request with it).
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with courier.Engine(base_url=base_url, app_id="org.example.py", frozen_paused=True) as e:
        assert e.store_dir == str(tmp_path / "data" / "org.example.py" / "courier")
        e.set_offline()
        with pytest.raises(courier.Frozen):
            e.post("/echo", params={"post": "7"}, freeze="auto")
    with courier.Engine(base_url=base_url, app_id="org.example.py", frozen_paused=True) as e:
        assert e.frozen.count() == 1
    with pytest.raises(courier.InvalidArgument):
        courier.Engine(app_id="a/b")


def test_freezing_into_a_temporary_store_logs_a_warning(base_url) -> None:
    lines = []
    with courier.Engine(base_url=base_url, temporary_store=True, frozen_paused=True) as e:
        e.add_log_sink(lambda level, line: lines.append((level, line)), min_level=courier.LogLevel.WARNING)
        e.set_offline()
        with pytest.raises(courier.Frozen):
            e.post("/echo", params={"post": "7"}, freeze="auto")
    assert [level for level, line in lines if '"event":"frozen_temporary_store"' in line] == [courier.LogLevel.WARNING]
