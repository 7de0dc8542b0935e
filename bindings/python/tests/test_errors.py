"""Every failure surfaces as the CourierError subclass of its code."""
from __future__ import annotations

import concurrent.futures
import errno
import pickle

import pytest

import courier
from courier import errors


def test_every_code_has_a_class_and_mock_errors_raise_it(base_url: str) -> None:
    with courier.Engine(base_url=base_url, mock=True) as e:
        for code, cname, pyname, _bases, _doc in errors._TABLE:
            cls = getattr(courier, pyname)
            assert cls.CODE == code and issubclass(cls, courier.CourierError)
            assert courier.error_class(code) is cls
            if code in (courier.Frozen.CODE,):
                continue  # a freeze needs a journal entry, not a bare code (see test_frozen)
            with pytest.raises(cls) as info:
                e.get("/json", mock=courier.Mock(error=code))
            assert info.value.code == code
            assert info.value.name == cname
            assert info.value.message
    assert courier.error_class(-999) is courier.CourierError
    assert issubclass(courier.Cancelled, concurrent.futures.CancelledError)
    assert issubclass(courier.InvalidURL, ValueError)


def test_http_status_error_keeps_response(engine: courier.Engine) -> None:
    with pytest.raises(courier.HTTPStatusError) as info:
        engine.get("/status/404")
    exc = info.value
    assert exc.http_status == 404 and exc.code == -9
    assert exc.response is not None and exc.response.status == 404
    assert exc.response.json() == {"status": 404}
    with pytest.raises(courier.HTTPStatusError) as info:
        engine.post("/status/503")
    assert info.value.http_status == 503


def test_invalid_url(engine: courier.Engine) -> None:
    with pytest.raises(courier.InvalidURL):
        engine.get("ftp://example.com/")
    with pytest.raises(courier.InvalidURL):
        with courier.Engine() as e:
            e.get("/relative-without-base")
    with pytest.raises(courier.InvalidURL):
        courier.Engine(base_url="not a url")


def test_invalid_header_and_encoding(engine: courier.Engine) -> None:
    with pytest.raises(courier.InvalidHeader):
        engine.get("/echo", headers={"Bad Name": "x"})
    with pytest.raises(courier.InvalidHeader):
        engine.get("/echo", headers={"X-Ok": "a\r\nInjected: 1"})
    with pytest.raises(courier.InvalidHeader):
        engine.get("/echo", headers={"X-Nul": "a\x00b"})
    with pytest.raises(courier.InvalidEncoding):
        engine.get("/echo", params={"q": b"\xff\xfe"})
    with pytest.raises(courier.InvalidEncoding):
        engine.get("/echo", params={"q": "a\x00b"})
    with pytest.raises(courier.InvalidArgument):
        engine.get("/echo", retry=courier.Retry(max_retries=-1))
    with pytest.raises(courier.InvalidArgument):
        engine.send("NOT A TOKEN", "/echo")


def test_timeout(engine: courier.Engine) -> None:
    with pytest.raises(courier.Timeout) as info:
        engine.get("/delay/3000", timeout=0.2)
    assert info.value.curl_code != 0


def test_cannot_connect(closed_port: int) -> None:
    with courier.Engine(timeout=5) as e, pytest.raises(courier.CannotConnect):
        e.get(f"http://127.0.0.1:{closed_port}/")


def test_partial_response_and_reset(engine: courier.Engine) -> None:
    with pytest.raises(courier.PartialResponse):
        engine.get("/close-mid-body")
    with pytest.raises(courier.NetworkError):
        engine.get("/reset")


def test_too_large(base_url: str) -> None:
    with courier.Engine(base_url=base_url, max_response_bytes=100) as e:
        with pytest.raises(courier.TooLarge):
            e.get("/bytes/1000")
        assert len(e.get("/bytes/100").body) == 100


def test_too_frequent(base_url: str) -> None:
    with courier.Engine(base_url=base_url, frequent_guard=30) as e:
        e.get("/echo", params={"g": "1"})
        with pytest.raises(courier.TooFrequent):
            e.get("/echo", params={"g": "1"})
        e.get("/echo", params={"g": "1"}, frequent_guard=False)  # exempt
        e.get("/echo", params={"g": "2"})  # not identical


def test_engine_closed(base_url: str) -> None:
    e = courier.Engine(base_url=base_url)
    e.close()
    assert e.closed
    with pytest.raises(courier.EngineClosed):
        e.get("/json")
    e.close()  # twice is fine


def test_not_found_mock_file(base_url: str, tmp_path) -> None:
    with courier.Engine(base_url=base_url, mock=True) as e:
        with pytest.raises(courier.NotFound):
            e.get("/json", mock=courier.Mock(file=str(tmp_path / "missing.json")))


def test_store_error(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(courier.StoreError) as info:
        courier.Engine(store=str(blocker / "store"))
    assert info.value.os_error != 0


def test_store_must_exist_refuses_a_missing_store_and_creates_none(tmp_path) -> None:
    missing = tmp_path / "typo" / "store"
    with pytest.raises(courier.StoreError) as info:
        courier.Engine(store=missing, store_must_exist=True)
    assert str(missing) in info.value.message and info.value.os_error == errno.ENOENT
    assert not (tmp_path / "typo").exists()
    with courier.Engine(store=missing):  # an engine that may create it
        pass
    with courier.Engine(store=missing, store_must_exist=True) as e:
        assert e.store_dir == str(missing)


def test_errors_pickle() -> None:
    e = courier.Timeout("slow", http_status=0, curl_code=28)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is courier.Timeout and back.code == -5 and back.curl_code == 28 and back.message == "slow"


@pytest.mark.parametrize("cls,builtin", [
    (courier.Timeout, TimeoutError), (courier.CannotConnect, ConnectionError),
    (courier.CannotResolve, ConnectionError), (courier.NetworkError, ConnectionError),
    (courier.PartialResponse, ConnectionError), (courier.TLSError, ConnectionError),
    (courier.PinningError, ConnectionError), (courier.InvalidURL, ValueError),
    (courier.InvalidArgument, ValueError), (courier.InvalidHeader, ValueError), (courier.JSONError, ValueError),
    (courier.NotFound, LookupError), (courier.EngineClosed, RuntimeError), (courier.NoMemory, MemoryError),
    (courier.Cancelled, concurrent.futures.CancelledError)])
def test_exceptions_are_the_builtins_users_catch(cls, builtin) -> None:
    assert issubclass(cls, builtin) and issubclass(cls, courier.CourierError)
    e = cls("detail", curl_code=7)
    assert e.code == cls.CODE and e.curl_code == 7 and str(e) == "detail"
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is cls and again.code == cls.CODE


def test_a_timeout_is_caught_as_timeout_error(engine: courier.Engine) -> None:
    with pytest.raises(TimeoutError) as info:
        engine.get("/delay/3000", timeout=0.2)
    assert info.value.code == courier.Timeout.CODE


def test_a_refused_connection_is_caught_as_connection_error(closed_port: int) -> None:
    with courier.Engine() as e:
        with pytest.raises(ConnectionError) as info:
            e.get(f"http://127.0.0.1:{closed_port}/")
    assert info.value.code == courier.CannotConnect.CODE


def test_an_invalid_url_is_caught_as_value_error(engine: courier.Engine) -> None:
    with pytest.raises(ValueError) as info:
        engine.get("ftp://example.invalid/")
    assert info.value.code == courier.InvalidURL.CODE


def test_python_md_lists_every_error_class() -> None:
    # docs/python.md's "Errors" list is where a user looks for what to catch (issue 28, trap 8:
    # CellularNotAllowed and nine others were missing).
    import pathlib
    doc = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "python.md").read_text()
    section = doc[doc.index("\n## Errors"):]
    section = section[:section.index("```")]
    missing = [pyname for _code, _cname, pyname, _bases, _doc in errors._TABLE if f"`{pyname}`" not in section]
    assert missing == []
