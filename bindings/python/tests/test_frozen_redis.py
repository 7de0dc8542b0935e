"""The journal on Redis (frozen_store="redis://..."): a freeze in one process is replayed by
another; query and removal as on LMDB; Redis down is courier.RedisError from the journal's calls
and an engine opened while Redis is down freezes once it is there. The journal's logic is
the core's (CCore/journal/store_redis.c); this checks that the binding passes the setting through."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

import courier
from courier import FrozenEventKind

from conftest import ROOT, free_port, wait_until


def _engine(url: str, store: str, **kw):
    return courier.Engine(store=store, frozen_store=url, frozen_poll=0.1, **kw)


def test_frozen_in_another_process_replayed_here(redis_url, base_url, server, tmp_path) -> None:
    url = redis_url + "#py-another"
    child = textwrap.dedent(f"""
        import courier
        with courier.Engine(base_url={base_url!r}, store={str(tmp_path / "child")!r},
                            frozen_store={url!r}, frozen_paused=True) as e:
            e.set_offline()
            try:
                e.post("/echo", json={{"order": 7}}, freeze=courier.Freeze("auto", id="py-order-7"))
            except courier.Frozen as f:
                print(f.freeze_id)
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "py-order-7"
    got = threading.Event()
    kinds = []

    def listener(ev):
        kinds.append(ev.kind)
        if ev.kind == FrozenEventKind.RESENT_SUCCEEDED:
            got.set()

    with _engine(url, str(tmp_path / "here"), base_url=base_url, frozen_paused=True) as e:
        [fz] = e.frozen.list()
        assert fz.id == "py-order-7" and fz.body == b'{"order":7}' and fz.idempotency_key
        e.frozen.add_listener(listener)
        before = server.count()
        e.frozen.resume()
        e.frozen.replay()
        assert got.wait(20)
        assert e.frozen.wait_idle(20)
        assert server.count() - before == 1
        assert e.frozen.count() == 0
        code, status, _ = e.frozen.last_outcome("py-order-7")
        assert code == 0 and status == 200
    assert kinds == [FrozenEventKind.RESENT_SUCCEEDED]


def test_query_and_remove_on_redis(redis_url, tmp_path, closed_port) -> None:
    with _engine(redis_url + "#py-query", str(tmp_path / "s"), timeout=5, frozen_paused=True) as e:
        with pytest.raises(courier.Frozen) as info:
            e.post(f"http://127.0.0.1:{closed_port}/x", body=b"data", freeze="manual")
        fid = info.value.freeze_id
        assert fid and e.frozen.count() == 1
        assert e.frozen.get(fid).body == b"data"
        e.frozen.remove(fid)
        assert e.frozen.count() == 0 and e.frozen.get(fid) is None


def test_freeze_unconfirmed_by_replicas_is_not_frozen(redis_url, tmp_path, closed_port) -> None:
    # frozen_replicas=(1, 0.2): WAIT 1 200 after the freeze; this server has no replica, so the
    # send raises ReplicasUnconfirmed (not Frozen), though the request is in the journal.
    with _engine(redis_url + "#py-replicas", str(tmp_path / "s"), timeout=5, frozen_paused=True,
                 frozen_replicas=(1, 0.2)) as e:
        with pytest.raises(courier.ReplicasUnconfirmed) as info:
            e.post(f"http://127.0.0.1:{closed_port}/x", body=b"data", freeze="manual")
        assert info.value.code == -66
        assert not isinstance(info.value, courier.Frozen)
        assert e.frozen.count() == 1
    with pytest.raises(ValueError):
        courier.Engine(store=str(tmp_path / "t"), frozen_replicas=(1, 0))


def test_redis_down_is_a_redis_error(tmp_path) -> None:
    # The engine opens (issue 28, trap 7): the journal connects when Redis is there; until then its
    # calls raise RedisError.
    try:
        e = courier.Engine(store=str(tmp_path / "s"), frozen_store=f"redis://127.0.0.1:{free_port()}/0", timeout=2)
    except courier.RedisUnsupported:
        pytest.skip("this library was built without Redis (COURIER_REDIS off)")
    with e:
        with pytest.raises(courier.RedisError):
            e.frozen.count()


def test_engine_opened_with_redis_down_freezes_when_it_comes(redis_url, base_url, server, tmp_path) -> None:
    """Opened while Redis is down: a send that would be frozen raises its own error (not Frozen);
    once Redis is there the same engine freezes and replays (issue 28, trap 7)."""
    fixture = str(ROOT / "scripts" / "redis-fixture")
    d = str(tmp_path / "redis")
    out = subprocess.run(["bash", fixture, "start", d], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    url = out.stdout.strip().splitlines()[-1] + "#py-late"
    subprocess.run(["bash", fixture, "stop", d], check=True, capture_output=True)
    try:
        with _engine(url, str(tmp_path / "s"), base_url=base_url, timeout=5) as e:
            with pytest.raises(courier.RedisError):
                e.frozen.count()
            e.set_offline()
            with pytest.raises(courier.Offline):  # not frozen: the send's own error
                e.post("/echo/late", body=b"n=0", freeze="auto")
            subprocess.run(["bash", fixture, "restart", d], check=True, capture_output=True)

            def answers() -> bool:
                try:
                    return e.frozen.count() == 0
                except courier.RedisError:
                    return False

            assert wait_until(answers, timeout=30)
            with pytest.raises(courier.Frozen):
                e.post("/echo/late", body=b"n=1", freeze="auto")
            before = server.count()
            e.set_online()
            assert wait_until(lambda: e.frozen.count() == 0, timeout=30)
            assert server.count() - before == 1
    finally:
        subprocess.run(["bash", fixture, "stop", d], capture_output=True)


def test_split_ordered_backlog_is_handed_off(redis_url, base_url, tmp_path) -> None:
    """One host's ordered requests split between two engines replaying one journal: when one
    engine's answer makes a record the other holds the host's head, the other sends it at once
    (the core's handoff: docs/design/redis-handoff.md), not at its next poll. Both poll every 60 s
    and the drain must end within 30 s. The first request is held 5 s by the server, so the first
    engine, which sent it, takes no more; the second block is taken by the second engine's first
    pass; Redis' pending lists (XPENDING) show the split before the head is answered."""
    url = redis_url + "#py-handoff"
    stream = "{courier:journal:py-handoff}:stream"

    def freeze(paths, store):
        with courier.Engine(base_url=base_url, store=str(tmp_path / store), frozen_store=url,
                            frozen_paused=True) as f:
            f.set_offline()
            for p in paths:
                with pytest.raises(courier.Frozen):
                    f.post(p, body=b"x", freeze=courier.Freeze("auto"))

    def pending():  # (entries pending, consumers holding some), from XPENDING's summary
        out = subprocess.run(["redis-cli", "-u", redis_url, "XPENDING", stream, "courier-replay"],
                             capture_output=True, text=True).stdout.split()
        return (int(out[0]), (len(out) - 3) // 2) if out and out[0].isdigit() else (-1, 0)

    freeze(["/delay/5000"] + [f"/echo?n={i}" for i in range(1, 10)], "f1")
    with courier.Engine(base_url=base_url, store=str(tmp_path / "a"), frozen_store=url, frozen_poll=60,
                        timeout=30) as a:
        assert wait_until(lambda: pending()[0] == 10, 10)
        freeze([f"/echo?n={i}" for i in range(10, 20)], "f2")
        with courier.Engine(base_url=base_url, store=str(tmp_path / "b"), frozen_store=url, frozen_poll=60,
                            timeout=30) as b:
            assert wait_until(lambda: pending()[0] == 20, 10)
            assert pending()[1] == 2  # the backlog is split: both engines hold some
            assert wait_until(lambda: a.frozen.count() == 0, 30)
            assert b.frozen.count() == 0
