"""Resend policies (decided by the core; Python gives callables) and logs that explain: per-component
levels while running, the journal's and the cache's decision lines (JSON fields), daily rotation."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import courier
from courier import FrozenEventKind, LogComponent, LogLevel


class Lines:
    def __init__(self) -> None:
        self.items: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, level: int, line: str) -> None:
        with self.lock:
            self.items.append(json.loads(line))

    def find(self, event: str, **fields: object) -> list[dict]:
        with self.lock:
            return [d for d in self.items if d.get("event") == event and all(d.get(k) == v for k, v in fields.items())]


def open_engine(base_url: str, store: str, **kw: object) -> courier.Engine:
    return courier.Engine(base_url=base_url, store=store, frozen_paused=True, frozen_poll=0.1,
                          frozen_replay=(2, 0.01, 0.02), retry=courier.Retry(max_retries=0), **kw)


def freeze(engine: courier.Engine, path: str, body: bytes, fid: str, policy: str) -> None:
    with pytest.raises(courier.Frozen):
        engine.post(path, body=body, freeze=courier.Freeze("auto", id=fid, unordered=True, resend_policy=policy))


def test_policy_that_sends_only_small_bodies(base_url, tmp_path) -> None:
    lines = Lines()
    with open_engine(base_url, str(tmp_path / "s")) as e:
        e.add_log_sink(lines, LogLevel.TRACE)
        e.log_set_component_level("journal", "debug")
        assert e.log_get_component_level(LogComponent.JOURNAL) == LogLevel.DEBUG
        e.frozen.add_resend_policy("small-bodies", can_send=lambda req, age, reach: len(req.body or b"") < 16)
        e.set_offline()
        freeze(e, "/echo", b"tiny", "small", "small-bodies")
        freeze(e, "/echo", b"x" * 100, "big", "small-bodies")
        assert e.frozen.get("big").resend_policy == "small-bodies"
        e.frozen.resume()
        e.set_online()
        assert e.frozen.wait_idle(10)
        assert [f.id for f in e.frozen.list()] == ["big"]
        assert e.frozen.last_outcome("small")[0] == 0
        held = lines.find("journal_policy", freeze_id="big")
        assert held and held[0]["decision"] == "hold" and held[0]["reason"] == "can_send_false"
        assert held[0]["policy"] == "small-bodies" and held[0]["component"] == "journal"
        assert lines.find("journal_resent", freeze_id="small", reason="succeeded")


def test_policy_that_deletes_after_two_attempts(base_url, tmp_path) -> None:
    deleted = threading.Event()
    events = []

    def listener(ev):
        events.append(ev)
        if ev.kind == FrozenEventKind.DELETED:
            deleted.set()

    with open_engine(base_url, str(tmp_path / "s")) as e:
        e.frozen.add_resend_policy("two-tries", can_delete=lambda req, age, reach: req.attempts >= 2)
        e.frozen.add_listener(listener)
        e.set_offline()
        freeze(e, "/status/503", b"x", "flaky", "two-tries")
        e.frozen.resume()
        e.set_online()
        assert deleted.wait(10)
        ev = [x for x in events if x.kind == FrozenEventKind.DELETED][0]
        assert ev.freeze_id == "flaky" and ev.reason == "can_delete" and ev.code == courier.DeletedByPolicy.CODE
        assert len([x for x in events if x.kind == FrozenEventKind.RESENT_FAILED]) == 2
        assert len(e.frozen) == 0
        assert e.frozen.last_outcome("flaky")[0] == courier.DeletedByPolicy.CODE
        assert e.frozen.remove_resend_policy("two-tries") and not e.frozen.remove_resend_policy("two-tries")


SECOND = textwrap.dedent("""
    import json, sys, threading, courier
    base_url, store = sys.argv[1], sys.argv[2]
    lines, kinds = [], []
    e = courier.Engine(base_url=base_url, store=store, frozen_paused=True, frozen_poll=0.1)
    e.add_log_sink(lambda level, line: lines.append(json.loads(line)), courier.LogLevel.TRACE)
    e.frozen.add_listener(lambda ev: kinds.append((int(ev.kind), ev.freeze_id, ev.reason)))
    e.frozen.resume()
    e.set_online()
    for _ in range(2):
        e.frozen.replay()
        assert e.frozen.wait_idle(10)
    out = {"kinds": kinds, "count": len(e.frozen), "attempts": e.frozen.get("shared").attempts,
           "lines": [l for l in lines if l.get("event") == "journal_policy"]}
    e.close()
    print(json.dumps(out))
""")


def test_policy_unknown_to_a_second_process(base_url, tmp_path) -> None:
    store = str(tmp_path / "shared")
    with open_engine(base_url, store) as e:
        e.frozen.add_resend_policy("app.sync", can_send=lambda req, age, reach: True)
        e.set_offline()
        freeze(e, "/echo", b"hello", "shared", "app.sync")
    env = dict(os.environ)
    run = subprocess.run([sys.executable, "-c", SECOND, base_url, store], capture_output=True, text=True, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["kinds"] == [[int(FrozenEventKind.POLICY_UNKNOWN), "shared", "not_registered"]]
    assert out["count"] == 1 and out["attempts"] == 0
    [line] = out["lines"]
    assert line["decision"] == "keep" and line["policy"] == "app.sync" and line["level"] == "warning"
    sent = threading.Event()
    with open_engine(base_url, store) as e:
        e.frozen.add_resend_policy("app.sync")
        e.frozen.add_listener(lambda ev: ev.kind == FrozenEventKind.RESENT_SUCCEEDED and sent.set())
        e.frozen.resume()
        assert sent.wait(10)
        assert len(e.frozen) == 0


def test_unknown_id_is_refused_at_send(base_url, tmp_path) -> None:
    with open_engine(base_url, str(tmp_path / "s")) as e:
        with pytest.raises(courier.ResendPolicyUnknown):
            e.post("/echo", body=b"x", freeze=courier.Freeze("auto", resend_policy="nobody"))
        with pytest.raises(courier.InvalidArgument):
            e.frozen.add_resend_policy("courier.mine")
        e.set_offline()
        freeze(e, "/echo", b"x", "boot", courier.ResendPolicy.START)
        assert e.frozen.get("boot").resend_policy == "courier.start"


def test_cache_decisions_and_component_levels(base_url, tmp_path) -> None:
    lines = Lines()
    with courier.Engine(base_url=base_url, store=str(tmp_path / "c"), cache="cache_first") as e:
        e.add_log_sink(lines, LogLevel.TRACE)
        e.log_level = "info"
        e.log_set_component_level("cache", "debug")
        e.log_set_component_level(LogComponent.TRANSPORT, "off")
        first = e.get("/json")
        second = e.get("/json")
        [miss] = lines.find("cache_lookup", request_id=first.request_id)
        assert miss["decision"] == "network" and miss["reason"] == "miss" and miss["component"] == "cache"
        [store] = lines.find("cache_store", request_id=first.request_id)
        assert store["stored"] is True
        [hit] = lines.find("cache_lookup", request_id=second.request_id)
        assert hit["decision"] == "from_cache" and hit["reason"] == "fresh"
        assert not lines.find("finished")  # the transport component is off
        e.log_set_component_level(LogComponent.TRANSPORT, "info")  # while running
        third = e.get("/json")
        assert lines.find("finished", request_id=third.request_id)


def test_log_file_rotates_by_day(base_url, tmp_path) -> None:
    now = [1_700_000_000.0]
    path = tmp_path / "app.log"
    with courier.Engine(base_url=base_url, store=str(tmp_path / "d"), clock=lambda: now[0]) as e:
        e.add_log_file(path, LogLevel.INFO, max_bytes=0, max_files=3, rotation="daily")
        e.log("info", "day one")
        now[0] += 86400
        e.log("info", "day two")
    first = [json.loads(line)["message"] for line in (tmp_path / "app.log.1").read_text().splitlines()]
    second = [json.loads(line)["message"] for line in path.read_text().splitlines()]
    assert first == ["day one"] and second == ["day two"]
