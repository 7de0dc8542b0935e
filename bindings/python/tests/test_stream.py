"""Streamed responses (Engine.stream, AsyncEngine.stream) over the loopback test server: the head
before the body, bytes/lines/text as they arrive, a slow reader held to the engine's buffer, a cut
body, cancel, closing half read, statuses handed to the reader, refusals, and asyncio reading that
does not block the loop. The C core holds the behaviour (stream_test.c); these check the binding."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import courier


def pattern_ok(data: bytes, start: int = 0) -> bool:
    return all(b == (start + i) % 251 for i, b in enumerate(data))


def test_head_then_body(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        with e.stream("GET", "/bytes/300000", params={"chunked": "1", "rate": "1000000"}) as r:  # paced
            assert r.status == 200
            assert r.headers["content-type"] == "application/octet-stream"
            assert r.response is None
            body = b"".join(r.iter_bytes())
            assert len(body) == 300000 and pattern_ok(body)
            whole = r.response
            assert whole is not None and whole.status == 200 and whole.metrics.bytes_received >= 300000


def test_chunk_size_lines_and_text(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        with e.stream("GET", "/bytes/1000") as r:
            sizes = [len(c) for c in r.iter_bytes(chunk_size=300)]
            assert sizes == [300, 300, 300, 100]
        text = "one\r\ntwo\nthr\u00e9e\u2028x"
        hexed = text.encode().hex()
        with e.stream("GET", "/text", params={"type": "text/plain", "hex": hexed}) as r:
            assert list(r.iter_lines()) == ["one", "two", "thr\u00e9e\u2028x"]  # not split at U+2028
        with e.stream("GET", "/text", params={"type": "text/plain", "hex": hexed}) as r:
            assert "".join(r.iter_text()) == text
        with e.stream("GET", "/bytes/10") as r:
            with pytest.raises(courier.InvalidArgument):
                next(r.iter_bytes(chunk_size=0))


def test_slow_reader_is_held_to_the_buffer(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, stream_buffer_bytes=64 * 1024) as e:
        with e.stream("GET", "/bytes/16777216") as r:
            total = 0
            most = 0
            for chunk in r.iter_bytes():
                total += len(chunk)
                most = max(most, r.buffered)
                if total % (1 << 20) < len(chunk):
                    time.sleep(0.002)
            assert total == 16777216
            assert 0 < most <= 64 * 1024 + 256 * 1024


def test_cut_body_and_cancel(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        with e.stream("GET", "/close-mid-body") as r:
            got = bytearray()
            with pytest.raises(courier.PartialResponse):
                for chunk in r.iter_bytes():
                    got += chunk
            assert len(got) == 100
        with e.stream("GET", "/bytes/100000000", params={"rate": "1000000"}) as r:
            threading.Timer(0.15, r.cancel).start()
            with pytest.raises(courier.Cancelled):
                r.read()


def test_closed_half_read_and_the_engine_goes_on(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        with e.stream("GET", "/bytes/50000000") as r:
            assert next(r.iter_bytes())
        assert e.get("/json").status == 200


def test_statuses_refusals_and_failures(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        with e.stream("GET", "/status/404") as r:
            assert r.status == 404 and r.read() == b'{"status":404}'
        with pytest.raises(courier.InvalidArgument):
            e.stream("POST", "/echo", freeze=courier.Freeze("auto"))
        with pytest.raises(courier.CannotConnect):
            e.stream("GET", "http://127.0.0.1:9/")
        with pytest.raises(courier.InvalidArgument):
            courier.Engine(base_url=base_url, temporary_store=True, stream_buffer_bytes=100)


def test_async_stream(base_url: str) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url, temporary_store=True) as e:
            ticks = 0

            async def ticker() -> None:  # the loop is never blocked while the stream waits
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            t = asyncio.ensure_future(ticker())
            async with e.stream("GET", "/bytes/300000", params={"rate": "1000000", "chunked": "1"}) as r:
                assert r.status == 200
                body = b"".join([c async for c in r.aiter_bytes()])
                assert len(body) == 300000 and pattern_ok(body)
            t.cancel()
            assert ticks >= 5
            r2 = await e.stream("GET", "/text", params={"type": "text/plain", "hex": b"a\nb".hex()})
            try:
                assert [line async for line in r2.aiter_lines()] == ["a", "b"]
            finally:
                r2.close()
            # cancelling the task that reads cancels the transfer
            async def read_slow() -> bytes:
                async with e.stream("GET", "/bytes/100000000", params={"rate": "1000000"}) as r3:
                    return await r3.aread()
            task = asyncio.ensure_future(read_slow())
            await asyncio.sleep(0.15)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await e.get("/json")).status == 200

    asyncio.run(main())


def test_server_sent_events(base_url: str) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True) as e:
        seen = []
        with e.events("/sse", params={"per": "2", "total": "5", "retry": "20"}) as source:
            with pytest.raises(courier.HTTPStatusError) as info:
                for ev in source:
                    seen.append(ev)
            assert info.value.http_status == 204
            assert source.state == courier.SSEState.CLOSED and source.retry == 0.02
        assert [ev.last_event_id for ev in seen] == ["1", "2", "3", "4", "5"]
        assert seen[0] == courier.ServerSentEvent("tick", "event 1\nline two", "1")
        with e.events("/json") as source:
            with pytest.raises(courier.InvalidResult):
                next(iter(source))
        with pytest.raises(courier.InvalidArgument):
            e.events("/sse", freeze=courier.Freeze("auto"))


def test_async_server_sent_events(base_url: str) -> None:
    async def main() -> None:
        async with courier.AsyncEngine(base_url=base_url, temporary_store=True) as e:
            seen = []
            source = e.events("/sse", params={"per": "1", "total": "3", "retry": "20"})
            with pytest.raises(courier.HTTPStatusError):
                async for ev in source:
                    seen.append(ev.data)
            source.close()
            assert seen == ["event 1\nline two", "event 2\nline two", "event 3\nline two"]
            # cancelling the task that iterates closes the source
            source = e.events("/sse", params={"per": "1", "retry": "60000"})

            async def read() -> None:
                async for _ in source:
                    pass
            task = asyncio.ensure_future(read())
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert source.state == courier.SSEState.CLOSED

    asyncio.run(main())
