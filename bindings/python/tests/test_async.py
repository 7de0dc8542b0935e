"""Asynchronous sends: futures, callbacks, cancel."""
from __future__ import annotations

import concurrent.futures
import threading

import pytest

import courier
from conftest import wait_until


def test_send_async_future(engine: courier.Engine) -> None:
    futs = [engine.send_async("GET", "/echo", params={"i": i}) for i in range(20)]
    assert all(f.request_id > 0 for f in futs)
    assert len({f.request_id for f in futs}) == 20
    done, _ = concurrent.futures.wait(futs, timeout=10)
    assert len(done) == 20
    assert [f.result().json()["query"] for f in futs] == [f"i={i}" for i in range(20)]


def test_callback_runs_on_worker_thread(engine: courier.Engine) -> None:
    got = []
    ev = threading.Event()

    def cb(resp, err):
        got.append((resp.status if resp else None, err, threading.get_ident()))
        ev.set()

    f = engine.send_async("GET", "/json", callback=cb)
    assert ev.wait(10)
    assert f.result().status == 200
    status, err, tid = got[0]
    assert status == 200 and err is None and tid != threading.get_ident()


def test_callback_gets_error(engine: courier.Engine) -> None:
    got = []
    f = engine.send_async("GET", "/status/500", callback=lambda r, e: got.append((r, e)))
    with pytest.raises(courier.HTTPStatusError) as info:
        f.result(10)
    assert got[0][0] is None and got[0][1] is info.value
    assert info.value.response.status == 500


def test_cancel_future_and_by_id(engine: courier.Engine) -> None:
    f = engine.send_async("GET", "/delay/5000")
    assert wait_until(lambda: engine.pending()[1] == 1)
    assert f.cancel() is True
    # Cancelled, not the server's answer (a 200 after 5 s): told by the outcome, not the clock.
    with pytest.raises(courier.Cancelled):
        f.result(5)
    with pytest.raises(concurrent.futures.CancelledError):  # Cancelled is one
        f.result(5)
    assert f.cancel() is False  # already done
    g = engine.send_async("GET", "/hang")
    assert engine.cancel(g.request_id) is True
    with pytest.raises(courier.Cancelled):
        g.result(5)
    assert engine.cancel(g.request_id) is False  # finished ids are unknown
    assert engine.cancel(123456789) is False


def test_cancel_all_and_pending(base_url: str) -> None:
    with courier.Engine(base_url=base_url, max_connections_per_host=1) as e:
        futs = [e.send_async("GET", "/delay/3000", coalesce=False) for _ in range(3)]
        assert wait_until(lambda: e.pending() == (2, 1))
        e.cancel_all()
        for f in futs:
            with pytest.raises(courier.Cancelled):
                f.result(5)


def test_close_cancels_in_flight(base_url: str) -> None:
    e = courier.Engine(base_url=base_url)
    futs = [e.send_async("GET", "/hang") for _ in range(3)]
    e.close()
    for f in futs:
        assert f.done()
        with pytest.raises(courier.Cancelled):
            f.result(0)


def test_async_callback_exception_becomes_future_exception(engine: courier.Engine) -> None:
    def cb(resp, err):
        raise RuntimeError("in callback")

    f = engine.send_async("GET", "/json", callback=cb)
    with pytest.raises(RuntimeError, match="in callback"):
        f.result(10)


def test_sync_sends_from_many_threads(engine: courier.Engine) -> None:
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: engine.get("/echo", params={"t": i}).json()["query"], range(64)))
    assert results == [f"t={i}" for i in range(64)]


def test_gil_released_while_waiting(engine: courier.Engine) -> None:
    # A Python thread keeps counting while another waits in the engine.
    stop = threading.Event()
    ticks = [0]

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        engine.get("/delay/300")
    finally:
        stop.set()
        t.join()
    assert ticks[0] > 1000


def test_send_from_completion_callback(engine: courier.Engine) -> None:
    inner: list = []
    done = threading.Event()

    def second(resp, err):
        inner.append(resp.status)
        done.set()

    def first(resp, err):
        engine.send_async("GET", "/json", callback=second)

    engine.send_async("GET", "/json", callback=first).result(10)
    assert done.wait(10) and inner == [200]


def test_send_sync_inside_callback_is_refused(engine: courier.Engine) -> None:
    def cb(resp, err):
        engine.get("/json")  # refused by the core on the worker thread

    f = engine.send_async("GET", "/json", callback=cb)
    with pytest.raises(courier.InvalidArgument):
        f.result(10)


def test_close_inside_callback(base_url: str) -> None:
    e = courier.Engine(base_url=base_url)
    hung = e.send_async("GET", "/hang")
    f = e.send_async("GET", "/json", callback=lambda r, err: e.close())
    assert f.result(10).status == 200  # the callback's own request completed
    with pytest.raises(courier.Cancelled):
        hung.result(10)  # the rest is cancelled once the callback returned
    assert e.closed
    with pytest.raises(courier.EngineClosed):
        e.get("/json")
    e.close()


def test_engine_dropped_inside_its_callback(base_url: str) -> None:
    import gc
    done = threading.Event()
    holder = {"e": courier.Engine(base_url=base_url)}

    def cb(resp, err):
        holder.pop("e")  # the last reference goes away on the worker thread
        gc.collect()
        done.set()

    holder["e"].submit("GET", "/json", callback=cb)
    assert done.wait(10)


def test_submit(engine: courier.Engine) -> None:
    got = []
    done = threading.Event()

    def cb(resp, err):
        got.append((resp.status, err))
        done.set()

    rid = engine.submit("GET", "/json", callback=cb)
    assert rid > 0 and done.wait(10) and got == [(200, None)]
