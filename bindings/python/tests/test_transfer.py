"""Multipart bodies, file bodies, downloads with resume, progress."""
from __future__ import annotations

import os
import time

import pytest

import courier


def pattern(n: int) -> bytes:
    return bytes(i % 251 for i in range(n))


def test_multipart_parts(engine: courier.Engine, tmp_path) -> None:
    up = tmp_path / "up.bin"
    up.write_bytes(b"file-bytes")
    r = engine.post("/echo", params={"field": "v"}, parts=[
        courier.Part("text", "hello", content_type="text/plain", headers={"X-Part": "1"}),
        courier.Part("data", b"\x01\x02", filename="d.bin"),
        courier.Part("upload", path=str(up), content_type="application/octet-stream"),
    ])
    doc = r.json()
    ctype = dict((n.lower(), v) for n, v in doc["headers"])["content-type"]
    assert ctype.startswith("multipart/form-data; boundary=")
    body = doc["body"]
    assert 'name="field"' in body and 'name="text"' in body and "X-Part: 1" in body
    assert 'name="data"; filename="d.bin"' in body
    assert 'name="upload"; filename="up.bin"' in body and "file-bytes" in body
    with pytest.raises(courier.NotFound):
        engine.post("/echo", parts=[courier.Part("f", path=str(tmp_path / "missing"))])


def test_body_file(engine: courier.Engine, tmp_path) -> None:
    f = tmp_path / "body.txt"
    f.write_bytes(b"x" * 10000)
    doc = engine.put("/echo", body_file=str(f), content_type="text/plain", params={"q": "1"}).json()
    assert doc["body_length"] == 10000 and doc["query"] == "q=1"


def test_download_to_file_with_progress(engine: courier.Engine, tmp_path) -> None:
    dest = tmp_path / "out.bin"
    seen = []
    r = engine.get("/bytes/300000", download=str(dest), progress=seen.append)
    assert r.file == str(dest) and r.body == b""
    assert dest.read_bytes() == pattern(300000)
    assert not os.path.exists(str(dest) + ".part")
    assert seen and seen[-1].down_now == 300000 and seen[-1].down_total == 300000
    assert all(p.request_id == r.request_id for p in seen)


def test_download_resume_after_cancel(engine: courier.Engine, tmp_path) -> None:
    dest = tmp_path / "big.bin"
    n = 400000
    fut = engine.send_async("GET", f"/bytes/{n}", params={"rate": "400000"}, download=str(dest), resume=True)
    part = str(dest) + ".part"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (not os.path.exists(part) or os.path.getsize(part) < 50000):
        time.sleep(0.02)
    assert fut.cancel()
    with pytest.raises(courier.Cancelled):
        fut.result(10)
    have = os.path.getsize(part)
    assert 0 < have < n
    first = []
    r = engine.get(f"/bytes/{n}", params={"rate": "400000"}, download=str(dest), resume=True,
                   progress=first.append)
    assert dest.read_bytes() == pattern(n)
    # the second attempt asked for the rest only (Range): fewer body bytes than the whole file
    assert r.metrics.bytes_received < n - have + 4096
    assert first[0].down_now >= have or first[-1].down_now == n
