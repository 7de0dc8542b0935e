"""WebSockets (Engine.websocket, AsyncEngine.websocket) against Python's `websockets` as the peer
(Tests/WebSocket/peer.py, the C tests' peer): echo of text and binary, the server's close ending the
iteration, a subprotocol, a protocol error and a refused handshake raising their classes, a message
over the maximum, a close code that may not be sent, and asyncio reading. The C core holds the
behaviour (ws_test.c); these check the binding."""
from __future__ import annotations

import asyncio
import gc
import os
import pathlib
import subprocess
import sys
from typing import Iterator

import pytest

import courier

PEER = pathlib.Path(__file__).resolve().parents[3] / "Tests" / "WebSocket" / "peer.py"
PROXY_PORT: list[int] = []  # the peer's proxy, once the peer fixture started it


@pytest.fixture(scope="module")
def peer() -> Iterator[str]:
    """ws://127.0.0.1:PORT of a peer.py of this module (skipped without the websockets package)."""
    pytest.importorskip("websockets")
    proc = subprocess.Popen([sys.executable, str(PEER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline().split()
    assert line and line[0] == "PORTS", line
    PROXY_PORT[:] = [int(line[4])]  # its HTTP proxy (CONNECT to 127.0.0.1)
    yield f"ws://127.0.0.1:{line[1]}"
    proc.stdin.close()  # the peer ends at the end of its stdin
    proc.wait(10)


def test_echo_and_close(peer: str) -> None:
    with courier.Engine(temporary_store=True) as e:
        with e.websocket(peer + "/echo") as ws:
            assert ws.state == courier.WSState.OPEN
            ws.send("hello")
            ws.send(b"\x00\x01")
            assert ws.recv(timeout=10) == "hello"
            assert ws.recv(timeout=10) == b"\x00\x01"
            with pytest.raises(TimeoutError):
                ws.recv(timeout=0.05)
            assert ws.start_close(1000, "done") is True
            with pytest.raises(courier.WebSocketClosed):
                ws.recv(timeout=10)
            assert ws.close_code == 1000 and ws.close_reason == "done" and ws.close_code_sent == 1000
            with pytest.raises(courier.WebSocketClosed):
                ws.send("late")
        assert ws.state == courier.WSState.CLOSED


def test_server_close_ends_iteration(peer: str) -> None:
    with courier.Engine(temporary_store=True) as e:
        with e.websocket(peer + "/fragments", subprotocols=["chat", "superchat"]) as ws:
            assert ws.subprotocol == "superchat"
            assert list(_take(ws, 2)) == ["hello world", b"\x00\x01\x02"]
        with e.websocket(peer + "/close") as ws:
            assert list(ws) == []  # the closing handshake ends the iteration
            assert ws.close_code == 4000 and ws.close_reason == "server says bye"


def _take(ws: courier.WebSocket, n: int) -> Iterator[object]:
    for i, m in enumerate(ws):
        yield m
        if i + 1 == n:
            return


def test_failures(peer: str) -> None:
    with courier.Engine(temporary_store=True) as e:
        with e.websocket(peer + "/badutf8") as ws:
            assert ws.recv(timeout=10) == "before"
            with pytest.raises(courier.WebSocketProtocolError):
                ws.recv(timeout=10)
            assert ws.close_code_sent == 1007
        with pytest.raises(courier.WebSocketHandshakeError) as info:
            e.websocket(peer + "/reject")
        assert info.value.http_status == 403
        with e.websocket(peer + "/big", params={"n": "2000"}, max_message_bytes=1000) as ws:
            with pytest.raises(courier.TooLarge):
                ws.recv(timeout=10)
            assert ws.close_code_sent == 1009
        with e.websocket(peer + "/echo") as ws:
            with pytest.raises(courier.InvalidArgument):
                ws.start_close(1005)  # reserved: never sent
            with pytest.raises(courier.InvalidArgument):
                ws.start_close(1000, "r" * 124)  # over 123 bytes


def test_asyncio(peer: str) -> None:
    async def main() -> None:
        e = courier.AsyncEngine(temporary_store=True)
        try:
            async with e.websocket(peer + "/echo") as ws:
                await ws.asend("one")
                await ws.asend(b"two")
                got = []
                async for m in ws:
                    got.append(m)
                    if len(got) == 2:
                        break
                assert got == ["one", b"two"]
            assert ws.state == courier.WSState.CLOSED and ws.close_code is None  # released
            ws2 = await e.websocket(peer + "/close")
            assert [m async for m in ws2] == []
            assert ws2.close_code == 4000
            await ws2.aclose()
        finally:
            await e.aclose()

    asyncio.run(main())


def test_compression_and_a_bounded_receive_queue(peer: str) -> None:
    big = "compress me " * 1000
    with courier.Engine(temporary_store=True) as e:
        with e.websocket(peer + "/echo", compression=True, max_receive_queue_bytes=64 * 1024) as ws:
            assert ws.extensions.startswith("permessage-deflate")
            ws.send(big)
            ws.send(b"\x00" * 5000)
            assert ws.recv(timeout=10) == big
            assert ws.recv(timeout=10) == b"\x00" * 5000
            assert ws.unread_bytes == 0
        with e.websocket(peer + "/deflated") as ws:
            assert ws.extensions == "" and ws.recv(timeout=10) == "none"
        with pytest.raises(courier.InvalidArgument) as info:
            e.websocket(peer + "/echo", max_receive_queue_bytes=0)
        assert str(info.value).startswith("max_receive_queue_bytes")

    async def main() -> None:
        a = courier.AsyncEngine(temporary_store=True)
        try:
            async with a.websocket(peer + "/echo", compression=True) as ws:
                await ws.asend(big)
                async for m in ws:
                    assert m == big
                    break
                assert ws.extensions.startswith("permessage-deflate")
        finally:
            await a.aclose()

    asyncio.run(main())


def test_more_websockets_than_the_host_limit(base_url: str) -> None:
    """Eight WebSockets to one host (5 connections per host by default), then a request to that host
    while they are open: each keeps its connection. libcurl closes the oldest idle connection of a
    host at its limit, and a WebSocket's is idle to it: the sixth WebSocket did not open (or closed
    another's connection). The peer is the test server's /ws/echo, on the same host as the request."""
    url = base_url.replace("http://", "ws://", 1) + "/ws/echo"
    with courier.Engine(temporary_store=True) as e:
        sockets = []
        try:
            for i in range(8):
                ws = e.websocket(url, handshake_timeout=5)
                sockets.append(ws)
                ws.send(f"open {i}")
                assert ws.recv(timeout=10) == f"open {i}"
            assert e.get(base_url + "/json").status == 200
            for i, ws in enumerate(sockets):
                ws.send(f"again {i}")
                assert ws.recv(timeout=10) == f"again {i}"
        finally:
            for ws in sockets:
                ws.close()


def test_bytes_like_messages(peer: str) -> None:
    """bytearray and memoryview are sent as binary messages, empty ones too (the compiled path
    takes bytes, bytearray and other buffers apart)."""
    with courier.Engine(temporary_store=True) as e, e.websocket(peer + "/echo") as ws:
        ws.send(bytearray(b"ab"))
        ws.send(memoryview(b"xcdx")[1:3])
        ws.send("")
        ws.send(b"")
        ws.send("\u00e9t\u00e9")
        assert [ws.recv(timeout=10) for _ in range(5)] == [b"ab", b"cd", "", b"", "\u00e9t\u00e9"]


def test_asyncio_websockets_at_once(peer: str) -> None:
    """Eight WebSockets of one loop, each 40 round trips, all awaited together: every notify
    wakes its reader (on the compiled path a pipe per WebSocket that the loop watches, written once
    until the reader clears it; a lost wake-up would hang here until the bound)."""
    async def one(e: courier.AsyncEngine, i: int) -> list[bytes]:
        got = []
        async with e.websocket(peer + "/echo") as ws:
            for j in range(40):
                await ws.asend(b"%d-%d" % (i, j))
                got.append(await ws.arecv())
        return got

    async def main() -> None:
        e = courier.AsyncEngine(temporary_store=True, max_connections_per_host=8)
        try:
            results = await asyncio.wait_for(asyncio.gather(*(one(e, i) for i in range(8))), 60)
        finally:
            await e.aclose()
        assert results == [[b"%d-%d" % (i, j) for j in range(40)] for i in range(8)]

    asyncio.run(main())


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_websockets_leave_no_descriptor_open(peer: str) -> None:
    """What a WebSocket's notify holds (on the compiled path a pipe, which an event loop watches) is
    released once the WebSocket and its engine are done, while the loop still runs: blocking and
    asyncio, opened and refused."""
    def fds() -> list[str]:
        gc.collect()
        return sorted(os.listdir("/proc/self/fd"))

    def sync_round() -> None:
        with courier.Engine(temporary_store=True) as e:
            for _ in range(3):
                with e.websocket(peer + "/echo") as ws:
                    ws.send(b"x")
                    assert ws.recv(timeout=10) == b"x"
            with pytest.raises(courier.WebSocketHandshakeError):
                e.websocket(peer + "/reject")

    async def async_round() -> None:
        a = courier.AsyncEngine(temporary_store=True)
        try:
            for _ in range(3):
                async with a.websocket(peer + "/echo") as ws:
                    await ws.asend(b"y")
                    assert await ws.arecv() == b"y"
            with pytest.raises(courier.WebSocketHandshakeError):
                await a.websocket(peer + "/reject")
            with pytest.raises(courier.CourierError):  # refused by courier_ws_open itself
                await a.websocket("ftp://127.0.0.1:9/no")
        finally:
            await a.aclose()

    async def main() -> None:
        await async_round()  # what a first use opens for good (libraries' own descriptors)
        before = fds()
        await async_round()
        assert fds() == before  # the loop watches no pipe of a WebSocket that is gone

    sync_round()
    before = fds()
    sync_round()
    assert fds() == before
    asyncio.run(main())


def test_asyncio_reads_on_the_loop(peer: str) -> None:
    """On the compiled path an asyncio WebSocket on ws:// reads its socket on the loop's thread
    (courier_ws_take_reads): messages of every length form come back whole and in order, a server's
    ping read there is answered (/pingecho echoes only after the pong), a cancelled arecv loses no
    message, and the closing handshake ends as before."""
    sizes = [0, 1, 125, 126, 4096, 65535, 65536, 70000]

    async def main() -> None:
        e = courier.AsyncEngine(temporary_store=True)
        try:
            async with e.websocket(peer + "/echo") as ws:
                for i in range(40):
                    data = bytes((i + k) % 251 for k in range(sizes[i % len(sizes)]))
                    await ws.asend(data)
                    assert await asyncio.wait_for(ws.arecv(), 10) == data
                if courier._fast.ext is not None:
                    assert ws._reads.sock >= 0  # the loop watches the socket: the reads are its own
                waiting = asyncio.ensure_future(ws.arecv())
                await asyncio.sleep(0.05)  # (the task waits on the socket)
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                await ws.asend("after a cancel")
                assert await asyncio.wait_for(ws.arecv(), 10) == "after a cancel"
            async with e.websocket(peer + "/pingecho") as ws:
                for i in range(5):
                    await ws.asend(f"ping {i}")
                    assert await asyncio.wait_for(ws.arecv(), 10) == f"ping {i}"
        finally:
            await e.aclose()

    asyncio.run(main())


def test_asyncio_readers_at_once(peer: str) -> None:
    """Two tasks awaiting ``arecv`` on one WebSocket at once each get a message (neither waits for
    ever, none is lost), and a task iterating a WebSocket while another closes it (``aclose`` reads
    until the server's close) ends with the iteration, as when it reads alone. Before, on the compiled
    path, the second wait replaced the first's future, which nothing then woke."""
    async def main() -> None:
        e = courier.AsyncEngine(temporary_store=True)
        try:
            async with e.websocket(peer + "/echo") as ws:
                a, b = asyncio.ensure_future(ws.arecv()), asyncio.ensure_future(ws.arecv())
                await asyncio.sleep(0)  # (both wait)
                await ws.asend("one")
                await ws.asend("two")
                assert sorted(await asyncio.wait_for(asyncio.gather(a, b), 10)) == ["one", "two"]
            ws = await e.websocket(peer + "/echo")
            seen: list[object] = []
            first = asyncio.Event()

            async def read_all() -> None:
                async for m in ws:
                    seen.append(m)
                    first.set()

            reader = asyncio.ensure_future(read_all())
            await ws.asend("x")
            await asyncio.wait_for(first.wait(), 10)
            await asyncio.wait_for(ws.aclose(), 10)  # the reader waits in arecv meanwhile
            await asyncio.wait_for(reader, 10)
            assert seen == ["x"]
        finally:
            await e.aclose()

    asyncio.run(main())


def test_asyncio_through_a_proxy_and_the_engine_closing(peer: str) -> None:
    """Through a proxy the reads stay the engine's worker's (courier_ws_take_reads refuses them): an
    awaiting arecv is woken by the notify, and every message comes back in order; and the engine's
    close ends a task waiting in arecv (EngineClosed) instead of leaving it waiting."""
    async def main() -> None:
        e = courier.AsyncEngine(temporary_store=True, proxy=f"http://127.0.0.1:{PROXY_PORT[0]}")
        try:
            async with e.websocket(peer + "/echo") as ws:
                for i in range(30):
                    await ws.asend(f"through {i}")
                    assert await asyncio.wait_for(ws.arecv(), 10) == f"through {i}"
                if courier._fast.ext is not None:
                    assert ws._reads.sock == -1  # the loop never watched the socket
        finally:
            await e.aclose()
        e = courier.AsyncEngine(temporary_store=True)
        ws = await e.websocket(peer + "/echo")
        waiting = asyncio.ensure_future(ws.arecv())
        await asyncio.sleep(0.05)  # (the task waits)
        await e.aclose()
        with pytest.raises(courier.EngineClosed):
            await asyncio.wait_for(waiting, 10)
        await ws.aclose()

    asyncio.run(main())
