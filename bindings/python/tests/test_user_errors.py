"""An exception a callback raises travels with its send through the C core's per-send slot
(``courier_raise``): the send, its future or its completion re-raises that very object, however
many sends are in flight, and the binding keeps no table of its own."""
from __future__ import annotations

import threading

import pytest

import courier
from courier import _callbacks


class Mine(Exception):
    """A user error type the core knows nothing about."""


def test_each_callback_kind_gives_back_the_same_object(base_url: str) -> None:
    thrown: dict[str, Mine] = {}

    def raiser(name: str):
        def fn(*args):
            thrown[name] = Mine(name)
            raise thrown[name]
        return fn

    class Later(courier.Transport):
        def start(self, call):  # completed from another thread with the exception
            threading.Thread(target=lambda: call.complete(error=thrown.setdefault("later", Mine("later")))).start()

    class Now(courier.Transport):
        def start(self, call):
            thrown["start"] = Mine("start")
            raise thrown["start"]

    before = _callbacks.live_count()
    with courier.Engine(base_url=base_url, mock=True, transports={"later": Later(), "now": Now()},
                        interceptors=[courier.Interceptor(before_send=lambda o: None)]) as e:
        cases = [
            ("validator", dict(validator=raiser("validator"))),
            ("customize", dict(customize=raiser("customize"))),
            ("mock", dict(mock=courier.Mock(callback=raiser("mock")))),
            ("start", dict(transport="now")),
            ("later", dict(transport="later")),
        ]
        for name, kw in cases:
            with pytest.raises(Mine) as info:
                e.get("/json", **kw)
            assert info.value is thrown[name], name
            thrown.pop(name)
            with pytest.raises(Mine) as info:
                e.send_async("GET", "/json", **kw).result(10)
            assert info.value is thrown[name], name
            thrown.pop(name)
    with courier.Engine(base_url=base_url, interceptors=[(raiser("before"), None)]) as e:
        with pytest.raises(Mine) as info:
            e.get("/json")
        assert info.value is thrown["before"]
    with courier.Engine(base_url=base_url, interceptors=[(None, raiser("after"))]) as e:
        with pytest.raises(Mine) as info:
            e.get("/json")
        assert info.value is thrown["after"]
        assert isinstance(info.value.__context__, courier.CourierError)  # the core's failure rides along
    assert _callbacks.live_count() == before  # every raised exception was released by the core


def test_a_courier_error_raised_keeps_its_code_and_identity(engine: courier.Engine) -> None:
    mine = courier.Timeout("from the validator")

    def validator(resp):
        raise mine

    with pytest.raises(courier.Timeout) as info:
        engine.get("/json", validator=validator)
    assert info.value is mine
    assert info.value.__context__.code == mine.code  # the send failed with the raised code


def test_many_concurrent_sends_each_get_their_own_exception(base_url: str) -> None:
    by_id: dict[int, Mine] = {}
    lock = threading.Lock()

    def after(request_id, resp):
        err = Mine(request_id)
        with lock:
            by_id[request_id] = err
        raise err

    before = _callbacks.live_count()
    with courier.Engine(base_url=base_url, interceptors=[(None, after)]) as e:
        futures = [e.send_async("GET", f"/echo?n={i}") for i in range(200)]  # distinct: never coalesced
        for f in futures:
            with pytest.raises(Mine) as info:
                f.result(20)
            assert info.value is by_id[f.request_id]
        seen: list[BaseException] = []
        done = threading.Event()

        def callback(resp, err):
            seen.append(err)
            if len(seen) == 100:
                done.set()

        ids = [e.submit("GET", f"/echo?m={i}", callback=callback) for i in range(100)]
        assert done.wait(20)
        assert sorted(id(x) for x in seen) == sorted(id(by_id[i]) for i in ids)
    assert _callbacks.live_count() == before
