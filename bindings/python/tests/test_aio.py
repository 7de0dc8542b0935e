"""asyncio: AsyncEngine's awaited requests and groups, resolved from the core's completion callback
through the event loop; cancelling the task cancels the request or the group."""
from __future__ import annotations

import asyncio
import os
import pathlib
import threading

import pytest

import courier
from conftest import ArmedClock, Raised, pinned_engine


def run(coro):
    return asyncio.run(coro)


async def until(pred, timeout: float = 10.0) -> bool:
    """Awaits until ``pred()`` is true, yielding to the loop (no fixed sleeps: the machine may be busy)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_await_get_and_many_at_once(base_url: str, tmp_path: pathlib.Path) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url, store=str(tmp_path / "s"), timeout=10) as e:
            r = await e.get("/json")
            assert r.status == 200 and r.json()
            rs = await asyncio.gather(*(e.get("/echo", params={"i": i}) for i in range(50)))
            assert [x.json()["query"] for x in rs] == [f"i={i}" for i in range(50)]
            r = await e.post("/echo", json={"a": 1})
            assert r.json()["method"] == "POST"
            # 40 requests in flight at once: no thread per request (the engine's worker serves all)
            before = _os_threads()
            tasks = [asyncio.ensure_future(e.get("/delay/3000", params={"i": i})) for i in range(40)]
            assert await until(lambda: sum(e.sync.pending()) == 40)
            assert _os_threads() - before <= 1
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        assert e.closed

    run(main())


def test_completion_resolves_through_the_loop(base_url: str) -> None:
    # The future is resolved on the loop's thread (call_soon_threadsafe), never on the worker.
    async def main() -> None:
        loop_thread = threading.get_ident()
        seen = []
        async with courier.AsyncEngine(base_url=base_url) as e:
            fut = asyncio.ensure_future(e.get("/delay/50"))
            fut.add_done_callback(lambda f: seen.append(threading.get_ident()))
            await fut
        assert seen == [loop_thread]

    run(main())


def test_errors_are_raised_in_the_task(base_url: str, closed_port: int) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url) as e:
            with pytest.raises(courier.HTTPStatusError) as info:
                await e.get("/status/404")
            assert info.value.response.status == 404
            with pytest.raises(TimeoutError):
                await e.get("/delay/3000", timeout=0.2)
            with pytest.raises(ConnectionError):
                await e.get(f"http://127.0.0.1:{closed_port}/")

    run(main())


def test_cancelling_the_task_cancels_the_request(base_url: str, server) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url) as e:
            outcome: list = []
            e.sync.add_monitor(lambda ev: outcome.append(ev.code), kinds=["finished"])
            task = asyncio.ensure_future(e.get("/hang"))
            assert await until(lambda: e.sync.pending()[1] == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # the engine's request ended with COURIER_E_CANCELLED (courier_cancel), not later
            assert await until(lambda: bool(outcome))
            assert outcome == [courier.Cancelled.CODE]
            assert e.sync.pending() == (0, 0)
            assert (await e.get("/json")).status == 200  # the engine goes on

    run(main())


def test_wait_for_timeout_cancels_the_request(base_url: str) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url) as e:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(e.get("/hang"), 0.2)
            assert await until(lambda: e.sync.pending() == (0, 0))

    run(main())


def test_closing_cancels_what_is_in_flight(base_url: str) -> None:
    async def main() -> None:
        e = courier.AsyncEngine(base_url=base_url)
        task = asyncio.ensure_future(e.get("/hang"))
        assert await until(lambda: e.sync.pending()[1] == 1)
        await e.aclose()
        with pytest.raises(courier.Cancelled):
            await task

    run(main())


def test_async_batch_and_chain(base_url: str) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url) as e:
            result = await e.batch([("GET", "/json"), courier.Request("GET", "/echo", params={"b": 1})])
            assert result.ok and result[1].response.json()["query"] == "b=1"
            result = await e.chain([("GET", "/echo"),
                                    lambda prev: courier.Request("GET", "/echo", params={"p": prev.response.status})])
            assert result.ok and result[1].response.json()["query"] == "p=200"

    run(main())


def test_cancelling_a_batch_task_cancels_the_group(base_url: str) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url) as e:
            done: list = []
            task = asyncio.ensure_future(e.batch([courier.Request("GET", "/hang", params={"n": i}) for i in range(3)],
                                                 on_member=lambda m: done.append(m.error)))
            assert await until(lambda: e.sync.pending()[1] == 3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await until(lambda: len(done) == 3) and all(isinstance(x, courier.Cancelled) for x in done)

    run(main())


def test_wraps_an_engine(engine: courier.Engine) -> None:
    async def main() -> int:
        a = courier.AsyncEngine(engine=engine)
        return (await a.get("/json")).status

    assert run(main()) == 200
    assert not engine.closed
    with pytest.raises(TypeError):
        courier.AsyncEngine("http://x", engine=engine)


def test_cancelling_some_of_many_in_flight_cancels_just_those(base_url: str) -> None:
    # 32 awaited at once: half hang and are cancelled (each cancels its own request), half are
    # answered; the engine is left with nothing in flight.
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url, max_connections_per_host=32) as e:
            hanging = [asyncio.ensure_future(e.get("/hang", params={"i": i})) for i in range(16)]
            answered = [asyncio.ensure_future(e.get("/echo", params={"i": i})) for i in range(16)]
            assert await until(lambda: e.sync.pending()[1] >= 16)
            for t in hanging:
                t.cancel()
            results = await asyncio.gather(*hanging, *answered, return_exceptions=True)
            assert all(isinstance(r, asyncio.CancelledError) for r in results[:16])
            assert [r.json()["query"] for r in results[16:]] == [f"i={i}" for i in range(16)]
            assert await until(lambda: e.sync.pending() == (0, 0))
            assert (await e.get("/json")).status == 200

    run(main())


def test_failures_in_a_burst_raise_their_own_types(base_url: str, closed_port: int) -> None:
    # a burst of completions mixing answers and failures: each task gets its own outcome
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url, max_connections_per_host=32) as e:
            kinds = ["ok", "404", "refused", "timeout", "500"] * 8
            urls = {"ok": "/json", "404": "/status/404", "500": "/status/500",
                    "refused": f"http://127.0.0.1:{closed_port}/", "timeout": "/delay/3000"}
            results = await asyncio.gather(*(e.get(urls[k], timeout=0.5 if k == "timeout" else 10)
                                             for k in kinds), return_exceptions=True)
            for k, r in zip(kinds, results):
                if k == "ok":
                    assert isinstance(r, courier.Response) and r.status == 200
                elif k in ("404", "500"):
                    assert isinstance(r, courier.HTTPStatusError) and r.response.status == int(k)
                elif k == "refused":
                    assert isinstance(r, ConnectionError) and isinstance(r, courier.CourierError)
                else:
                    assert isinstance(r, TimeoutError) and isinstance(r, courier.Timeout)

    run(main())


def test_one_engine_serves_loops_in_several_threads(base_url: str) -> None:
    # three threads, each with its own event loop, share one AsyncEngine: every result comes back
    # to the loop (and thread) that awaits it
    shared = courier.AsyncEngine(base_url=base_url, max_connections_per_host=32)
    errors: list[BaseException] = []
    seen: dict[int, set[int]] = {}

    def thread_main(k: int) -> None:
        async def main() -> None:
            me = threading.get_ident()
            seen[k] = set()

            async def one(i: int) -> None:
                fut = asyncio.ensure_future(shared.get("/echo", params={"t": k, "i": i}))
                fut.add_done_callback(lambda f: seen[k].add(threading.get_ident()))
                r = await fut
                assert r.json()["query"] == f"t={k}&i={i}"
            await asyncio.gather(*(one(i) for i in range(40)))
            assert seen[k] == {me}

        try:
            asyncio.run(main())
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    try:
        threads = [threading.Thread(target=thread_main, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors
        assert sorted(seen) == [0, 1, 2]
    finally:
        shared.sync.close()


def test_an_exception_kept_for_a_successful_send_is_raised(base_url: str) -> None:
    # a clock runs on the sending thread and cannot fail the send: what it raises is kept on the
    # send and raised by the await although the request itself succeeded; first another engine
    # whose worker was pinned closes on this thread (until the fix, its thread state's deletion
    # took this thread's GIL-state binding with it on CPython 3.12+: the clock then ran in a fresh
    # thread state and its exception went to the engine; test_thread_states.py)
    pinned_engine(base_url).close()
    clock = ArmedClock()

    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url, temporary_store=True,
                                       cache=courier.CachePolicy.CACHE_FIRST, clock=clock) as e:
            clock.arm()
            with pytest.raises(Raised):
                await e.get("/json")
            assert not clock.armed
            assert (await e.get("/json")).status == 200

    run(main())


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_an_engine_used_from_loop_after_loop_keeps_no_descriptors(engine: courier.Engine) -> None:
    a = courier.AsyncEngine(engine=engine)

    async def main() -> int:
        return (await a.get("/json")).status

    assert run(main()) == 200
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        assert run(main()) == 200
    assert len(os.listdir("/proc/self/fd")) <= before + 4


@pytest.mark.skipif(courier._fast.path() != "compiled", reason="the compiled path's awaitable")
def test_the_compiled_awaitable_speaks_asyncios_future_protocol() -> None:
    # what AsyncEngine.send awaits there (courier._speedups.Pending): a future to asyncio's Task
    ext = courier._fast.ext

    async def main() -> None:
        loop = asyncio.get_running_loop()
        w = ext.Waker(loop, courier.Response)
        p = w.future()
        assert asyncio.isfuture(p) and p.get_loop() is loop and not p.done()
        with pytest.raises(asyncio.InvalidStateError):
            p.result()
        seen: list = []
        p.add_done_callback(seen.append)
        p.add_done_callback(seen.append)
        assert p.remove_done_callback(seen.append) == 2
        p.add_done_callback(seen.append)
        assert p.cancel("why") and not p.cancel() and p.cancelled() and p.done()
        assert await until(lambda: seen == [p])  # scheduled with call_soon, as a future's are
        with pytest.raises(asyncio.CancelledError):
            p.result()
        loop.add_reader(w.fileno(), w.drain)
        try:
            q = w.future()
            w.post(q, 42)  # from this thread here; the engine's worker in use
            assert await q == 42
            r = w.future()
            w.post(r, None, KeyError("k"))
            with pytest.raises(KeyError):
                await r
            t = asyncio.ensure_future(asyncio.Event().wait())  # a task parked elsewhere is not woken
            s = w.future()
            w.post(s, (1, 2))  # a tuple comes back whole
            assert await s == (1, 2) and not t.done()
            t.cancel()
        finally:
            loop.remove_reader(w.fileno())

    run(main())
