"""Custom transports: the core hands the final request to Python and judges the answer."""
from __future__ import annotations

import threading

import pytest

import courier
from conftest import wait_until


class Loopback(courier.Transport):
    def __init__(self) -> None:
        self.calls: list[courier.Call] = []

    def start(self, call: courier.Call) -> None:
        self.calls.append(call)
        call.complete(courier.Answer(200, body=call.body or b"", headers={"X-Via": "loop"}))


class Later(courier.Transport):
    """Completes from another thread; cancel completes with Cancelled."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled: list[int] = []
        self.call: courier.Call | None = None

    def start(self, call):
        self.call = call
        self.started.set()

    def cancel(self, call):
        self.cancelled.append(call.request_id)
        threading.Thread(target=call.complete, kwargs={"error": courier.Cancelled()}).start()


def test_custom_transport_answers_and_is_judged() -> None:
    loop = Loopback()
    with courier.Engine(base_url="http://h.invalid/api", transports={"loop": loop}) as e:
        r = e.post("items", body=b"payload", headers={"X-A": "1"}, transport="loop")
        assert r.body == b"payload" and r.headers["x-via"] == "loop"
        c = loop.calls[0]
        assert c.method == "POST" and c.url == "http://h.invalid/api/items" and c.header("x-a") == "1"
        assert c.request_id == r.request_id and c.timeout > 0
        with pytest.raises(courier.InvalidResult):
            e.get("x", transport="loop", validator=lambda resp: False)
        with pytest.raises(courier.NotFound):
            e.get("x", transport="nope")


def test_transport_completes_later_and_cancel() -> None:
    later = Later()
    with courier.Engine(transports={"later": later}) as e:
        f = e.send_async("GET", "http://h.invalid/x", transport="later")
        assert later.started.wait(5)
        threading.Thread(target=later.call.complete, args=(courier.Answer(201),)).start()
        assert f.result(5).status == 201
        later.started.clear()
        g = e.send_async("GET", "http://h.invalid/y", transport="later")
        assert later.started.wait(5)
        assert g.cancel()
        with pytest.raises(courier.Cancelled):
            g.result(5)
        # the caller is told at once; the transport's cancel runs on the worker thread too
        assert wait_until(lambda: later.cancelled == [g.request_id])


def test_transport_start_exception() -> None:
    class Broken(courier.Transport):
        def start(self, call):
            raise OSError("no route")

    with courier.Engine(transports={"b": Broken()}) as e:
        with pytest.raises(OSError):
            e.get("http://h.invalid/x", transport="b")
