"""Network kinds: a source the test controls (Engine.report_network), "not on cellular", limits per
kind applied to the queue at once, and the machine's links read through netlink."""
from __future__ import annotations

import sys

import pytest

import courier
from conftest import wait_until


def test_not_on_cellular(engine: courier.Engine) -> None:
    engine.report_network("online", courier.NetworkKind.CELLULAR, expensive=True)
    assert engine.network_path == (courier.NetworkKind.CELLULAR, True)
    with pytest.raises(courier.CellularNotAllowed) as info:
        engine.get("/echo", allow_cellular=False)
    assert info.value.code == -49
    assert engine.get("/echo").status == 200
    engine.report_network("unknown", "wifi")
    assert engine.get("/echo", allow_cellular=False).status == 200


def test_limits_per_kind_apply_to_the_queue(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True,
                        network_limits={"cellular": (1, 0, 0)}) as e:
        e.report_network("unknown", "cellular")
        futures = [e.send_async("GET", "/hang", coalesce=False) for _ in range(3)]
        assert wait_until(lambda: e.pending() == (2, 1))
        e.report_network("unknown", "wired")
        assert wait_until(lambda: e.pending()[1] == 3)
        e.cancel_all()
        for f in futures:
            with pytest.raises(courier.Cancelled):
                f.result(10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="links are read through netlink on Linux")
def test_loopback_link_through_netlink() -> None:
    assert courier.network_link_kind("lo") == (courier.NetworkKind.OTHER, False)
    with pytest.raises(courier.NotFound):
        courier.network_link_kind("no-such-if0")


def test_os_watch_reports_a_path(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, network_watch=True) as e:
        assert wait_until(lambda: e.reachability != courier.Reachability.UNKNOWN)
        kind, _ = e.network_path
        if e.reachability == courier.Reachability.ONLINE:
            assert kind != courier.NetworkKind.UNKNOWN
