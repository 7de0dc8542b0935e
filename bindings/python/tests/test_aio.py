"""asyncio: AsyncEngine's awaited requests and groups, resolved from the core's completion callback
through the event loop; cancelling the task cancels the request or the group."""
from __future__ import annotations

import asyncio
import os
import pathlib
import threading

import pytest

import courier


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
