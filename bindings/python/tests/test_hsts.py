"""HSTS where the binding adds something: the list methods (preload_hsts, list_hsts, clear_hsts),
Response.hsts_upgraded, the hsts and alt_svc keywords. The rules are the C core's (hsts_test.c, over
nginx with TLS); here an upgraded request to the plain loopback server fails its TLS handshake,
which shows it went out as https://."""
from __future__ import annotations

import pytest

import courier
from courier import HSTSEntry


def test_preload_list_and_clear(base_url: str, tmp_path) -> None:
    port = base_url.rsplit(":", 1)[1]
    preload = tmp_path / "hsts.txt"
    preload.write_text('# preload\nlocalhost "unlimited"\n.example.org "20991231 10:00:00"\n')
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s")) as e:
        assert e.preload_hsts(preload) == 2
        assert e.list_hsts() == [HSTSEntry("example.org", True, 4102394400), HSTSEntry("localhost", False, 0)]
        with pytest.raises(courier.TLSError):  # http://localhost went out as https:// to a plain server
            e.get(f"http://localhost:{port}/json")
        assert e.clear_hsts() == 2
        assert e.list_hsts() == []
        r = e.get(f"http://localhost:{port}/json")
        assert r.status == 200 and not r.hsts_upgraded and r.url.startswith("http://")
        with pytest.raises(courier.NotFound):
            e.preload_hsts(tmp_path / "no-such-file")


def test_list_survives_restart(base_url: str, tmp_path) -> None:
    preload = tmp_path / "hsts.txt"
    preload.write_text('localhost "unlimited"\n')
    store = str(tmp_path / "s")
    with courier.Engine(base_url=base_url, store=store) as e:
        e.preload_hsts(preload)
    with courier.Engine(base_url=base_url, store=store) as e:
        assert [h.host for h in e.list_hsts()] == ["localhost"]


def test_hsts_off_and_alt_svc(base_url: str) -> None:
    with courier.Engine(base_url=base_url, hsts=False, alt_svc=True) as e:
        with pytest.raises(courier.InvalidArgument):
            e.list_hsts()
        with pytest.raises(courier.InvalidArgument):
            e.clear_hsts()
        assert e.get("/json").status == 200
