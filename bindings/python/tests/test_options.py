"""Every option takes its enum, its name as a string, and (where it has settings) its settings
object (issue #19: freeze=FreezePolicy.AUTO raised AttributeError, cache="http" ValueError)."""
from __future__ import annotations

import pathlib

import pytest

import courier
from courier import (BodyEncoding, CacheDurability, CachePolicy, CacheStatus, EventKind, FreezePolicy, LogLevel,
                     Priority, Redaction)


def _shapes(member: courier.CEnum) -> list:
    """The member, its name as users write it, upper case, with '-', and the C value."""
    name = member.name.lower()
    return [member, name, member.name, name.replace("_", "-"), int(member)]


@pytest.mark.parametrize("freeze", _shapes(FreezePolicy.AUTO) + [courier.Freeze(FreezePolicy.AUTO),
                                                                 courier.Freeze("auto")])
def test_freeze_takes_enum_name_and_settings(freeze, tmp_path: pathlib.Path, closed_port: int) -> None:
    with courier.Engine(store=str(tmp_path / "s"), timeout=5, frozen_paused=True) as e:
        with pytest.raises(courier.Frozen) as info:
            e.post(f"http://127.0.0.1:{closed_port}/orders", body=b"x", freeze=freeze)
        (item,) = e.frozen.list()
        assert item.id == info.value.freeze_id and item.policy == FreezePolicy.AUTO


@pytest.mark.parametrize("freeze", _shapes(FreezePolicy.MANUAL) + [courier.Freeze("manual", id="m-1")])
def test_freeze_manual_shapes(freeze, tmp_path: pathlib.Path, closed_port: int) -> None:
    with courier.Engine(store=str(tmp_path / "s"), timeout=5, frozen_paused=True) as e:
        with pytest.raises(courier.Frozen):
            e.post(f"http://127.0.0.1:{closed_port}/orders", body=b"x", freeze=freeze)
        assert [f.policy for f in e.frozen.list()] == [FreezePolicy.MANUAL]


@pytest.mark.parametrize("cache", _shapes(CachePolicy.HTTP))
def test_request_cache_takes_enum_and_name(cache, base_url: str, tmp_path: pathlib.Path) -> None:
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s")) as e:
        kw = dict(params={"max_age": "100", "body": "c"}, cache=cache)
        assert e.get("/cache", **kw).cache_status == CacheStatus.NETWORK
        hit = e.get("/cache", **kw)
        assert hit.cache_status == CacheStatus.HIT and str(hit.cache_status) == "hit"


@pytest.mark.parametrize("cache", _shapes(CachePolicy.CACHE_FIRST))
def test_engine_cache_and_durability_take_enum_and_name(cache, base_url: str, tmp_path: pathlib.Path) -> None:
    with courier.Engine(base_url=base_url, store=str(tmp_path / "s"), cache=cache, cache_expiry=60) as e:
        e.get("/cache", params={"body": "e"})
        assert e.get("/cache", params={"body": "e"}).from_cache


@pytest.mark.parametrize("durability", [s for m in CacheDurability for s in _shapes(m)])
def test_cache_durability_shapes(durability, tmp_path: pathlib.Path) -> None:
    with courier.Engine(store=str(tmp_path / "s"), cache_durability=durability):
        pass


@pytest.mark.parametrize("encoding", _shapes(BodyEncoding.JSON))
def test_body_encoding_shapes(encoding, base_url: str) -> None:
    with courier.Engine(base_url=base_url, body_encoding=encoding) as e:
        assert e.post("/echo", params={"a": "1"}).json()["body"] == '{"a":"1"}'
    with courier.Engine(base_url=base_url) as e:
        assert e.post("/echo", params={"a": "1"}, body_encoding=encoding).json()["body"] == '{"a":"1"}'


@pytest.mark.parametrize("priority", [s for m in Priority for s in _shapes(m)])
def test_priority_shapes(priority, engine: courier.Engine) -> None:
    assert engine.get("/json", priority=priority).status == 200


@pytest.mark.parametrize("level", _shapes(LogLevel.DEBUG))
def test_log_level_shapes(level, base_url: str) -> None:
    with courier.Engine(base_url=base_url, log_level=level) as e:
        assert e.log_level is LogLevel.DEBUG and str(e.log_level) == "debug"
        lines: list = []
        e.add_log_sink(lambda lvl, line: lines.append(lvl), min_level=level)
        e.log(level, "mine")
        e.log_level = "info"
        assert e.log_level is LogLevel.INFO
        assert lines == [LogLevel.DEBUG]


@pytest.mark.parametrize("mode", _shapes(Redaction.QUERY))
def test_redaction_shapes(mode, engine: courier.Engine) -> None:
    lines: list = []
    engine.add_log_sink(lambda lvl, line: lines.append(line), min_level="info")
    engine.log_set_redaction(mode)
    engine.get("/echo", params={"q": "visible-secret"})
    engine.close()
    assert lines and not any("visible-secret" in line for line in lines)


@pytest.mark.parametrize("kind", _shapes(EventKind.FINISHED))
def test_monitor_kinds_shapes(kind, engine: courier.Engine) -> None:
    kinds: list = []
    engine.add_monitor(lambda ev: kinds.append(ev.kind), kinds=[kind])
    engine.get("/json")
    engine.close()
    assert kinds == [EventKind.FINISHED]


def test_user_cache_policy_ids_still_pass(engine: courier.Engine) -> None:
    with pytest.raises(courier.InvalidArgument):  # no such policy registered: the core's error
        engine.get("/json", cache=CachePolicy.USER_MIN + 7)


@pytest.mark.parametrize("option,value", [("freeze", "sometimes"), ("cache", "httpx"), ("priority", "urgent"),
                                          ("body_encoding", "xml"), ("cache", 57), ("freeze", 9)])
def test_unknown_names_are_invalid_argument(option: str, value, engine: courier.Engine) -> None:
    with pytest.raises(courier.InvalidArgument) as info:
        engine.post("/echo", **{option: value})
    assert info.value.code == courier.InvalidArgument.CODE
    assert isinstance(info.value, ValueError)


def test_wrong_types_are_type_errors(engine: courier.Engine) -> None:
    with pytest.raises(TypeError):
        engine.get("/json", cache=1.5)
    with pytest.raises(TypeError):
        engine.get("/json", priority=True)


def test_enums_print_their_names() -> None:
    assert str(CacheStatus.HIT) == "hit" and f"{CacheStatus.STALE}" == "stale"
    assert CacheStatus.HIT == 1 and int(CacheStatus.HIT) == 1 and f"{CacheStatus.HIT:d}" == "1"
    assert CacheStatus("hit") is CacheStatus.HIT and CachePolicy("cache-first") is CachePolicy.CACHE_FIRST
    assert FreezePolicy("AUTO") is FreezePolicy.AUTO
    with pytest.raises(ValueError):
        CacheStatus("nope")
