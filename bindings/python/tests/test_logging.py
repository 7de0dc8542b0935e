"""Log sinks, event monitors and reachability listeners."""
from __future__ import annotations

import json
import threading

import pytest

import courier
from courier import EventKind, LogLevel


def test_log_callback_sink_and_fields(engine) -> None:
    lines = []
    engine.log_level = LogLevel.DEBUG
    assert engine.log_level == LogLevel.DEBUG
    engine.log_set_field("app", "pytest")
    sink = engine.add_log_sink(lambda level, line: lines.append((level, json.loads(line))), LogLevel.DEBUG)
    engine.get("/echo", params={"token": "secret", "q": "1"})
    engine.log(LogLevel.INFO, "hello from python", event="custom")
    engine.remove_log_sink(sink)
    events = [d["event"] for _, d in lines]
    assert "finished" in events and "custom" in events
    finished = next(d for _, d in lines if d["event"] == "finished")
    assert finished["status"] == 200 and finished["app"] == "pytest"
    assert "secret" not in finished["url"]  # redacted by the core
    engine.get("/json")
    assert len([1 for _, d in lines if d["event"] == "finished"]) == 1  # removed


def test_log_file(engine, tmp_path) -> None:
    path = tmp_path / "courier.log"
    engine.add_log_file(path, LogLevel.INFO)
    engine.get("/json")
    engine.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert any(r["event"] == "finished" for r in records)


def test_monitor_events(engine) -> None:
    seen = []
    lock = threading.Lock()

    def monitor(ev: courier.Event) -> None:
        with lock:
            seen.append((ev.kind, ev.request_id, ev.http_status, ev.response.status if ev.response else None))

    mid = engine.add_monitor(monitor)
    r = engine.get("/json")
    kinds = [k for k, rid, *_ in seen if rid == r.request_id]
    assert kinds[0] == EventKind.WILL_SEND and kinds[-1] == EventKind.FINISHED
    assert EventKind.DID_SEND in kinds
    finished = [s for s in seen if s[0] == EventKind.FINISHED][-1]
    assert finished[2] == 200 and finished[3] == 200
    engine.remove_monitor(mid)


def test_monitor_kind_filter_retried(engine) -> None:
    only = []
    engine.add_monitor(lambda ev: only.append(ev.kind), kinds=[EventKind.RETRIED])
    try:
        engine.get("/status/503", retry=courier.Retry(1, 0.01, 0.01))
    except courier.HTTPStatusError:
        pass
    assert only == [EventKind.RETRIED]


def test_reachability_listener(engine) -> None:
    changes = []
    got = threading.Event()

    def listener(status):
        changes.append(status)
        got.set()

    engine.add_reachability_listener(listener)
    engine.set_offline()
    assert got.wait(5)
    assert engine.reachability == courier.Reachability.OFFLINE
    assert changes[-1] == courier.Reachability.OFFLINE
    engine.set_reachability_automatic()


def test_from_cache_event(engine) -> None:
    kinds = []
    engine.add_monitor(lambda ev: kinds.append(ev.kind))
    engine.get("/cache", params={"body": "ev"}, cache=courier.CachePolicy.CACHE_FIRST)
    kinds.clear()
    assert engine.get("/cache", params={"body": "ev"}, cache=courier.CachePolicy.CACHE_FIRST).from_cache
    assert EventKind.FROM_CACHE in kinds


def test_logs_that_explain_recipe_as_written(base_url, tmp_path) -> None:
    # README's "logs that explain": a component at debug and a file sink with no level of its own
    # show the cache's lines. The file sink's default was INFO (Swift's is trace), so the recipe
    # showed nothing in Python (issue 28, trap 1). Every sink's default is trace: the engine's and
    # the components' levels decide.
    path, err_path = tmp_path / "courier.log", tmp_path / "stderr.log"
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), cache="cache_first") as e:
        e.log_set_component_level("cache", "debug")
        e.add_log_file(path)
        e.get("/cache", params={"body": "v"})
        e.get("/cache", params={"body": "v"})
    records = [json.loads(line) for line in path.read_text().splitlines()]
    lookups = [r for r in records if r["event"] == "cache_lookup"]
    assert len(lookups) == 2 and all(r["component"] == "cache" for r in lookups)
    assert any(r["event"] == "finished" for r in records)
    assert not any(r["event"] == "will_send" for r in records)  # transport stays at the engine's info


def test_every_sink_defaults_to_trace() -> None:
    import inspect
    for method in (courier.Engine.add_log_file, courier.Engine.add_log_stderr, courier.Engine.add_log_sink):
        assert inspect.signature(method).parameters["min_level"].default == LogLevel.TRACE


@pytest.mark.parametrize("policy,path", [(courier.CachePolicy.CACHE_FIRST, "/json?finished=first"),
                                         (courier.CachePolicy.HTTP, "/cache?max_age=60&body=finished-http"),
                                         (courier.CachePolicy.WRITE_ONLY, "/json?finished=write")])
def test_finished_line_of_a_cache_write(engine, base_url: str, policy, path: str) -> None:
    # issue 28 bug 3: the line read "GET ? -> 200 (0.0 ms) cache: miss" when the response was stored.
    lines = []
    engine.add_log_sink(lambda level, line: lines.append(json.loads(line)), LogLevel.INFO)
    r = engine.get(path, cache=policy)
    assert r.cache_reason == courier.CacheReason.MISS
    finished = [d for d in lines if d["event"] == "finished" and d.get("request_id") == r.request_id]
    assert len(finished) == 1
    assert finished[0]["url"] == base_url + path
    assert finished[0]["cache"] == "miss"
    assert finished[0]["duration_ms"] > 0
    reread = policy if policy == courier.CachePolicy.HTTP else courier.CachePolicy.CACHE_FIRST
    assert engine.get(path, cache=reread).from_cache  # it was written
