"""Checks courier-ws-echo (Tests/TestServer/tool/ws_echo.c), the benchmarks' WebSocket echo peer,
as an RFC 6455 peer: the handshake's accept value, data frames echoed unmasked with opcode and FIN
kept (7-, 16- and 64-bit lengths, a frame sent in pieces, frames right behind the handshake, 100
frames in one write), ping answered by pong, pong ignored, close answered with the peer's code and
the connection closed, protocol errors failed with close 1002, a request that is no handshake with
400, and a clean exit 0 when stdin closes with a connection still open.
Usage: python3 ws_echo_check.py PATH_TO_courier-ws-echo"""
import base64, hashlib, os, socket, struct, subprocess, sys
p = subprocess.Popen([sys.argv[1], "--stdin-eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
port = int(p.stdout.readline())
def conn(extra=b"", key=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)  # a wrong peer fails, not hangs
    key = key or base64.b64encode(os.urandom(16)).decode()
    s.sendall(f"GET /ws/echo HTTP/1.1\r\nHost: x\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode() + extra)
    return s, key
def readn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError(len(b))
        b += c
    return b
def head(s):
    b = b""
    while not b.endswith(b"\r\n\r\n"): b += readn(s, 1)
    return b.decode()
def frame(op, data, fin=True, mask=True):
    m = os.urandom(4)
    n = len(data)
    h = bytes([(0x80 if fin else 0) | op])
    mb = 0x80 if mask else 0
    if n < 126: h += bytes([mb | n])
    elif n < 65536: h += bytes([mb | 126]) + struct.pack(">H", n)
    else: h += bytes([mb | 127]) + struct.pack(">Q", n)
    if not mask: return h + data
    return h + m + bytes(b ^ m[i & 3] for i, b in enumerate(data))
def rframe(s):
    h = readn(s, 2); n = h[1] & 0x7F
    assert not h[1] & 0x80, "masked reply"
    if n == 126: n = struct.unpack(">H", readn(s, 2))[0]
    elif n == 127: n = struct.unpack(">Q", readn(s, 8))[0]
    return h[0] & 0x80, h[0] & 0xF, readn(s, n)
# handshake + accept value
s, key = conn()
h = head(s); assert h.startswith("HTTP/1.1 101"), h
acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
assert f"Sec-WebSocket-Accept: {acc}\r\n" in h, h
# text, binary, 1 KiB, 70000 bytes (64-bit length) sent in small pieces, ping, fragmented
big = os.urandom(70000)
for op, d in [(1, b"hello"), (2, bytes(range(256)) * 4), (2, b""), (2, os.urandom(300))]:
    s.sendall(frame(op, d)); assert rframe(s) == (0x80, op, d)
fb = frame(2, big)
for i in range(0, len(fb), 1000): s.sendall(fb[i:i+1000])
assert rframe(s) == (0x80, 2, big)
s.sendall(frame(9, b"pp")); assert rframe(s) == (0x80, 0xA, b"pp")
s.sendall(frame(0xA, b"unsolicited") + frame(1, b"a", fin=False) + frame(9, b"") + frame(0, b"b", fin=False) + frame(0, b"c"))
assert rframe(s) == (0, 1, b"a"); assert rframe(s) == (0x80, 0xA, b""); assert rframe(s) == (0, 0, b"b"); assert rframe(s) == (0x80, 0, b"c")
# many frames in one write
s.sendall(b"".join(frame(2, bytes([i]) * 1024) for i in range(100)))
for i in range(100): assert rframe(s) == (0x80, 2, bytes([i]) * 1024)
s.sendall(frame(8, struct.pack(">H", 1000) + b"bye")); assert rframe(s) == (0x80, 8, struct.pack(">H", 1000))
assert s.recv(10) == b""
# frames right behind the handshake
s, _ = conn(frame(1, b"early")); head(s); assert rframe(s) == (0x80, 1, b"early")
# unmasked -> 1002; bad rsv -> 1002; continuation without start -> 1002
for bad in [frame(2, b"x", mask=False), bytes([0xC2]) + frame(2, b"x")[1:], frame(0, b"x"), frame(9, b"x", fin=False), frame(3, b"")]:
    s, _ = conn(); head(s); s.sendall(bad)
    assert rframe(s) == (0x80, 8, struct.pack(">H", 1002)), bad; assert s.recv(10) == b""
# not a handshake -> 400
s = socket.create_connection(("127.0.0.1", port), timeout=30); s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
assert head(s).startswith("HTTP/1.1 400"); assert s.recv(10) == b""
left_open, _ = conn(); head(left_open)  # still open when the peer stops: freed, exit 0
p.stdin.close(); assert p.wait(30) == 0
left_open.close()
print("protocol ok")
