"""courier.cache_verify.verify over a real store: consistent after puts and a removal (the report
agrees with size()), and a byte flipped in data.mdb is one damaged entry, reported, not raised."""
from __future__ import annotations

import ctypes

import courier
from courier import cache_verify


def test_report_layout_matches_the_header() -> None:
    # 12 int64, 2 int, 2 int64 (the struct only grows at its end)
    assert ctypes.sizeof(cache_verify.CACHE_VERIFY_REPORT) == 8 + 12 * 8 + 2 * 4 + 2 * 8


def test_verify_consistent_then_damaged(tmp_path) -> None:
    store = tmp_path / "store"
    with courier.Engine(store=str(store)) as e:
        for i in range(40):
            e.cache.put(f"GET http://verify.test/{i}", body=f"MARK{i}-".encode() + b"a" * 300)
        e.cache.remove_key("GET http://verify.test/3")
        report = cache_verify.verify(e)
        assert report.consistent
        assert report.entries == 39
        assert (report.bytes, report.entries) == e.cache.size()
        assert report.file_bytes > 0 and report.tree_bytes > 0
    data = store / "cache" / "data.mdb"
    raw = bytearray(data.read_bytes())
    # every copy of the page (LMDB leaves old copies in free pages): the live one among them
    at = raw.find(b"MARK7-")
    while at >= 0:
        raw[at + 20] ^= 0x20
        at = raw.find(b"MARK7-", at + 1)
    data.write_bytes(bytes(raw))
    with courier.Engine(store=str(store)) as e:
        report = cache_verify.verify(e)
        assert not report.consistent
        assert report.damaged == 1
        assert report.problems == 1
