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


# -- Engine(logger=...): the engine's lines into Python's logging -------------------------------

import logging  # noqa: E402

import courier.logs  # noqa: E402


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def py_logger():
    logger = logging.getLogger("courier.pytest")
    handler = Records()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield logger, handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        for name in courier.logs.COMPONENTS:
            logger.getChild(name).setLevel(logging.NOTSET)


def test_lines_become_records_of_the_component_loggers(base_url, tmp_path, py_logger) -> None:
    logger, handler = py_logger
    logger.getChild("cache").setLevel(logging.DEBUG)
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), logger=logger) as engine:
        assert engine.log_level == LogLevel.INFO
        assert engine.log_get_component_level("cache") == LogLevel.DEBUG
        assert engine.log_get_component_level("transport") == LogLevel.INFO
        engine.log_set_field("app", "pytest")
        r = engine.get("/cache", params={"max_age": "60", "body": "logged"}, cache="http")
        engine.log("warning", "from the app", event="custom")
    finished = [rec for rec in handler.records if getattr(rec, "event", None) == "finished"]
    assert len(finished) == 1
    rec = finished[0]
    assert rec.name == "courier.pytest.transport" and rec.levelno == logging.INFO
    assert rec.request_id == r.request_id and rec.status == 200 and rec.method == "GET"  # type: ignore[attr-defined]
    assert rec.app == "pytest" and rec.component == "transport"  # type: ignore[attr-defined]
    assert rec.getMessage().startswith("GET ") and "-> 200" in rec.getMessage()
    lookups = [rec for rec in handler.records if getattr(rec, "event", None) == "cache_lookup"]
    assert lookups and lookups[0].name == "courier.pytest.cache" and lookups[0].levelno == logging.DEBUG
    custom = [rec for rec in handler.records if getattr(rec, "event", None) == "custom"]
    assert custom[0].name == "courier.pytest" and custom[0].levelno == logging.WARNING


def test_a_websockets_handshake_is_a_finished_line(base_url, tmp_path, py_logger) -> None:
    """A WebSocket's opening handshake ends in a finished line, as a send does: the 101 at INFO, a
    refused one at ERROR (no response); the messages and the closing handshake have none."""
    logger, handler = py_logger
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), logger=logger) as engine:
        with engine.websocket("/ws/echo") as ws:
            ws.send("hi")
            assert ws.recv(timeout=10) == "hi"
        with pytest.raises(courier.WebSocketHandshakeError):
            engine.websocket("/status/403")
    finished = [rec for rec in handler.records if getattr(rec, "event", None) == "finished"]
    assert [(rec.status, rec.levelno) for rec in finished] == [(101, logging.INFO), (403, logging.ERROR)]  # type: ignore[attr-defined]
    assert all(rec.name == "courier.pytest.transport" and rec.method == "GET" for rec in finished)  # type: ignore[attr-defined]
    assert finished[0].url.endswith("/ws/echo")  # type: ignore[attr-defined]


def test_the_loggers_level_sets_the_engines(base_url, tmp_path, py_logger) -> None:
    logger, handler = py_logger
    logger.setLevel(logging.WARNING)
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), logger=logger) as engine:
        assert engine.log_level == LogLevel.WARNING  # info lines are not even made
        engine.get("/json")
        assert not handler.records
        with pytest.raises(courier.HTTPStatusError):
            engine.get("/status/404")
        assert [r.levelno for r in handler.records] == [logging.WARNING]
        logger.setLevel(5)  # below DEBUG: trace
        engine.sync_log_levels()
        assert engine.log_level == LogLevel.TRACE
        logger.setLevel(logging.CRITICAL + 1)
        engine.sync_log_levels()
        assert engine.log_level == LogLevel.OFF
    assert courier.logs.to_python(5) == courier.logs.TRACE == 5
    assert [courier.logs.from_python(v) for v in (logging.CRITICAL, logging.ERROR, logging.WARNING,
                                                  logging.INFO, logging.DEBUG, 1)] == [1, 1, 2, 3, 4, 5]


def test_the_automatic_rule(base_url, tmp_path, monkeypatch) -> None:
    handler = Records()
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # an application that configured nothing
    with courier.Engine(base_url=base_url, store=str(tmp_path / "a")) as engine:
        assert engine._log_bridge is None
    monkeypatch.setattr(root, "handlers", [handler])  # logging.basicConfig(...), say
    monkeypatch.setattr(root, "level", logging.WARNING)
    with courier.Engine(base_url=base_url, store=str(tmp_path / "b")) as engine:
        assert engine._log_bridge is not None
        assert engine.log_level == LogLevel.INFO  # automatic: never quieter than the engine was
        engine.get("/json")
        with pytest.raises(courier.HTTPStatusError):
            engine.get("/status/404")
    assert [(r.name, r.levelno) for r in handler.records] == [("courier.transport", logging.WARNING)]
    with courier.Engine(base_url=base_url, store=str(tmp_path / "c"), logger=False) as engine:
        assert engine._log_bridge is None
