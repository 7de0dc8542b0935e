"""The WebSocket peer of the C tests (Tests/CCoreTests/ws_test.c): an independent implementation,
Python's `websockets`, serving an echo and handlers that misbehave, on 127.0.0.1.

Listeners, their ports printed on one line ("PORTS <websockets> <raw> <tls> <proxy>") once all listen:
- the `websockets` server, by path:
    /echo        every message back, with its type
    /fragments   "hello world" as three text fragments, then 00 01 02 as two binary ones
    /headers     the handshake's request headers, one "name: value" line each, as one text message
    /close       closes with 4000 "server says bye"
    /drop        sends "bye", then closes TCP without a close frame
    /silent      stops reading (so never answers a ping)
    /pingecho    every message back after a ping the client answered (no answer: no echo)
    /late?bad=R  after the client's first message, "before" and then route R's bad frame (below)
    /big?n=N     N bytes in one binary message
    /reject      refuses the handshake with 403
    /masked /rsv /opcode /bigping /fragping /badutf8 /badclose /badreason
                 "before", then one frame that breaks RFC 6455 (written raw to the transport)
    /report?route=R   the close code the client sent on the last connection to R, as text
    /deflated    "permessage-deflate" when that extension was agreed, else "none" (every listener
                 accepts the client's permessage-deflate offer, with websockets' own parameters)
- a raw TCP server answering the handshake by hand, by path: /badaccept, /noupgrade, /proto (a
  subprotocol nobody offered), /ext (an extension nobody offered), /firstframes (a good 101 and a
  text frame "early" in the same write), /badafterclose (a good 101; after the client's first
  bytes, a masked frame), /mute (never answers);
  and for permessage-deflate (RFC 7692), each agreeing to the offer by hand:
    /zinspect    (with client_no_context_takeover) each message the client sends answered with an
                 uncompressed text "rsv1=R len=N text=T": RSV1, the payload's length on the wire,
                 and the text inflated with a fresh context (so it shows the client kept none)
    /zserver     four compressed text messages: two with one context (the second refers back to
                 the first), one ending in a final block (BFINAL), one with a fresh context after it
    /zbad /zbadutf8   "before", then a compressed text message that does not inflate / inflates to
                 invalid UTF-8
    /zparams     agrees with a parameter nobody offered (the handshake must fail)

- given a certificate and its key (argv 1 and 2), the `websockets` server again over TLS (else the
  third port is 0);
- an HTTP proxy that answers CONNECT with a tunnel to 127.0.0.1 or localhost (only) and counts the tunnels it
  made; `GET /tunnels` to it answers that count.
"""
import asyncio
import base64
import hashlib
import os
import ssl
import struct
import sys
import zlib
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(opcode, payload, fin=True, rsv=0, mask=False):
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    m = 0x80 if mask else 0
    n = len(payload)
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + struct.pack("!H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack("!Q", n)
    if mask:
        key = os.urandom(4)
        payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
        head += key
    return head + payload


BAD = {
    "/masked": frame(1, b"hello", mask=True),
    "/rsv": frame(1, b"hello", rsv=4),
    "/opcode": frame(3, b"x"),
    "/bigping": frame(9, b"x" * 126),
    "/fragping": frame(9, b"x", fin=False),
    "/badutf8": frame(1, b"a\xffb"),
    "/badclose": frame(8, struct.pack("!H", 1005)),
    "/badreason": frame(8, struct.pack("!H", 1000) + b"\xff"),
}
CLOSE_CODES = {}  # route -> the close code the client sent (None: no close frame)
CLOSED = {}  # route -> asyncio.Event, set when the connection to it ended


def closed_event(route):
    return CLOSED.setdefault(route, asyncio.Event())


async def drain(ws):
    try:
        async for _ in ws:
            pass
    except ConnectionClosed:
        pass


async def handler(ws):
    url = urlsplit(ws.request.path)
    route, query = url.path, parse_qs(url.query)
    try:
        if route == "/echo":
            async for m in ws:
                await ws.send(m)
        elif route == "/pingecho":
            async for m in ws:
                await asyncio.wait_for(await ws.ping(), 10)
                await ws.send(m)
        elif route == "/late":
            await ws.recv()
            await ws.send("before")
            ws.transport.write(BAD[query["bad"][0]])
            await drain(ws)
        elif route == "/fragments":
            await ws.send(["hel", "lo ", "world"])
            await ws.send([b"\x00\x01", b"\x02"])
            await drain(ws)
        elif route == "/headers":
            await ws.send("".join(f"{k}: {v}\n" for k, v in ws.request.headers.raw_items()))
            await drain(ws)
        elif route == "/close":
            await ws.close(4000, "server says bye")
        elif route == "/drop":
            await ws.send("bye")
            ws.transport.close()
        elif route == "/silent":
            ws.transport.pause_reading()
            await asyncio.sleep(3600)
        elif route == "/big":
            await ws.send(b"x" * int(query["n"][0]))
            await drain(ws)
        elif route in BAD:
            closed_event(route).clear()
            await ws.send("before")
            ws.transport.write(BAD[route])
            await drain(ws)
        elif route == "/deflated":
            names = [e.name for e in ws.protocol.extensions]
            await ws.send("permessage-deflate" if "permessage-deflate" in names else "none")
            await drain(ws)
        elif route == "/report":
            r = query["route"][0]
            await asyncio.wait_for(closed_event(r).wait(), 10)
            await ws.send(str(CLOSE_CODES.get(r)))
            await drain(ws)
    finally:
        if route in BAD:
            try:
                await ws.wait_closed()
                rcvd = ws.protocol.close_rcvd
                CLOSE_CODES[route] = rcvd.code if rcvd else None
            finally:
                closed_event(route).set()


def process_request(connection, request):
    if request.path.startswith("/reject"):
        return connection.respond(HTTPStatus.FORBIDDEN, "no\n")
    return None


def select_subprotocol(connection, subprotocols):
    return "superchat" if "superchat" in subprotocols else None


async def read_frame(reader):
    """One frame from the client: (fin, rsv, opcode, unmasked payload), None at the end."""
    try:
        b0, b1 = await reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", await reader.readexactly(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", await reader.readexactly(8))[0]
        key = await reader.readexactly(4) if b1 & 0x80 else b"\0\0\0\0"
        data = await reader.readexactly(n)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return b0 >> 7, (b0 >> 4) & 7, b0 & 0xF, bytes(c ^ key[i % 4] for i, c in enumerate(data))


def deflated(data, z=None, final=False):
    """data compressed as RFC 7692 says (raw deflate, the 00 00 FF FF of a sync flush left out)."""
    z = z or zlib.compressobj(wbits=-15)
    out = z.compress(data) + z.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH)
    return out if final else out[:-4]


async def deflate_route(path, reader, writer):
    if path == "/zinspect":
        while (f := await read_frame(reader)) is not None:
            fin, rsv, op, data = f
            if op == 8:
                writer.write(frame(8, data[:2]))
                break
            text = zlib.decompressobj(wbits=-15).decompress(data + b"\0\0\xff\xff") if rsv & 4 else data
            writer.write(frame(1, f"rsv1={rsv >> 2} len={len(data)} text={text.decode()}".encode()))
            await writer.drain()
    elif path == "/zserver":
        z = zlib.compressobj(wbits=-15)
        writer.write(frame(1, deflated(b"hello hello hello hello", z), rsv=4))
        writer.write(frame(1, deflated(b"hello hello hello hello again", z), rsv=4))
        writer.write(frame(1, deflated(b"the end of a stream", final=True), rsv=4))
        writer.write(frame(1, deflated(b"a new stream"), rsv=4))
    elif path == "/zbad":
        writer.write(frame(1, b"before") + frame(1, b"\xff\xfe\xfd\xfc", rsv=4))
    elif path == "/zbadutf8":
        writer.write(frame(1, b"before") + frame(1, deflated(b"a\xffb"), rsv=4))
    await writer.drain()


async def raw(reader, writer):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = await reader.read(4096)
        if not chunk:
            writer.close()
            return
        head += chunk
    lines = head.split(b"\r\n")
    path = lines[0].split(b" ")[1].decode()
    key = ""
    for line in lines[1:]:
        if line.lower().startswith(b"sec-websocket-key:"):
            key = line.split(b":", 1)[1].strip().decode()
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    base = "HTTP/1.1 101 Switching Protocols\r\n"
    up = "Upgrade: websocket\r\nConnection: Upgrade\r\n"
    answers = {
        "/badaccept": base + up + "Sec-WebSocket-Accept: " + base64.b64encode(b"x" * 20).decode() + "\r\n\r\n",
        "/noupgrade": base + "Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n",
        "/proto": base + up + "Sec-WebSocket-Accept: " + accept + "\r\nSec-WebSocket-Protocol: other\r\n\r\n",
        "/ext": base + up + "Sec-WebSocket-Accept: " + accept + "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
        "/firstframes": base + up + "Sec-WebSocket-Accept: " + accept + "\r\n\r\n",
        "/badafterclose": base + up + "Sec-WebSocket-Accept: " + accept + "\r\n\r\n",
        "/zparams": base + up + "Sec-WebSocket-Accept: " + accept +
        "\r\nSec-WebSocket-Extensions: permessage-deflate; x_window=3\r\n\r\n",
    }
    pmd = "\r\nSec-WebSocket-Extensions: permessage-deflate"
    for z in ("/zserver", "/zbad", "/zbadutf8"):
        answers[z] = base + up + "Sec-WebSocket-Accept: " + accept + pmd + "\r\n\r\n"
    answers["/zinspect"] = base + up + "Sec-WebSocket-Accept: " + accept + pmd + "; client_no_context_takeover\r\n\r\n"
    if path in answers:
        data = answers[path].encode()
        if path == "/firstframes":
            data += frame(1, b"early")
        writer.write(data)
        await writer.drain()
        if path.startswith("/z"):
            await deflate_route(path, reader, writer)
        if path == "/badafterclose":  # the client's first frames (its close), then a masked frame
            await reader.read(4096)
            writer.write(frame(1, b"x", mask=True))
            await writer.drain()
    try:
        while await reader.read(4096):
            pass
    except ConnectionError:
        pass
    writer.close()


TUNNELS = [0]


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def proxy(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    method, target = head.split(b" ")[:2]
    if method == b"GET" and target.endswith(b"/tunnels"):
        body = str(TUNNELS[0]).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        await writer.drain()
        writer.close()
        return
    host, _, port = target.decode().rpartition(":")
    if method != b"CONNECT" or host not in ("127.0.0.1", "localhost"):
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        return
    try:
        ur, uw = await asyncio.open_connection(host, int(port))
    except OSError:
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        return
    TUNNELS[0] += 1
    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await writer.drain()
    await asyncio.gather(pipe(reader, uw), pipe(ur, writer))


async def main():
    async with serve(handler, "127.0.0.1", 0, process_request=process_request,
                     select_subprotocol=select_subprotocol, max_size=None, compression="deflate",
                     ping_interval=None) as server:
        rawsrv = await asyncio.start_server(raw, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        rport = rawsrv.sockets[0].getsockname()[1]
        tport = 0
        if len(sys.argv) > 2:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(sys.argv[1], sys.argv[2])
            tls = await serve(handler, "127.0.0.1", 0, ssl=ctx, process_request=process_request,
                              select_subprotocol=select_subprotocol, max_size=None, compression="deflate",
                              ping_interval=None)
            tport = tls.sockets[0].getsockname()[1]
        proxysrv = await asyncio.start_server(proxy, "127.0.0.1", 0)
        pport = proxysrv.sockets[0].getsockname()[1]
        print(f"PORTS {port} {rport} {tport} {pport}", flush=True)
        # Ends when the test closes our stdin (or dies).
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        os._exit(0)  # at once: handlers that never end (/silent) would hold a graceful shutdown


asyncio.run(main())
