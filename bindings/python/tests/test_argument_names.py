"""Refused arguments (issue 28, bugs 5, 7 and 8): every refused argument names itself (as Swift's
facade does: "max_redirects: invalid argument"), a total timeout of 0 or less is refused as C and
Swift refuse it (it became 1 ms), and every enum-taking option takes its enum and its name
(credentials' schemes failed with a bare ValueError from int()). The code is asserted, and the
argument's name in the message: the message is the only place that says which argument it was."""
from __future__ import annotations

import pytest

import courier
from courier import AuthScheme


def _refused(info: pytest.ExceptionInfo, name: str) -> None:
    assert type(info.value) is courier.InvalidArgument
    assert info.value.code == courier.InvalidArgument.CODE
    assert str(info.value).startswith(f"{name}:"), str(info.value)
    assert info.value.message.startswith(f"{name}:")


# -- bug 5: timeout 0 or negative ----------------------------------------------------------------

@pytest.mark.parametrize("timeout", [0, 0.0, -1, -0.5, float("nan"), float("inf")])
def test_engine_refuses_a_timeout_that_is_not_positive(timeout: float) -> None:
    with pytest.raises(courier.InvalidArgument) as info:
        courier.Engine(temporary_store=True, timeout=timeout)
    _refused(info, "timeout")


@pytest.mark.parametrize("timeout", [0, -1, -0.001])
def test_request_refuses_a_timeout_that_is_not_positive(timeout: float, engine: courier.Engine, server) -> None:
    before = server.count()
    with pytest.raises(courier.InvalidArgument) as info:
        engine.get("/json", timeout=timeout)
    _refused(info, "timeout")
    assert server.count() == before  # refused before anything was sent


def test_a_small_positive_timeout_is_not_rounded_to_zero(base_url: str, engine: courier.Engine) -> None:
    with courier.Engine(base_url=base_url, temporary_store=True, timeout=0.0001):
        pass
    with pytest.raises(courier.Timeout):
        engine.get("/delay/2000", timeout=0.0004)


# -- bug 8: the refused argument names itself ----------------------------------------------------

@pytest.mark.parametrize("keyword,value", [("retry", courier.Retry(-5)), ("max_redirects", -1),
                                           ("network_limits", {"cellular": (-1, 2, 3)}),
                                           ("network_limits", {"wifi": (1, -2, 3)}),
                                           ("max_connections", -3), ("frozen_replay", (-1, 1.0, 2.0)),
                                           ("connect_timeout", -1)])
def test_engine_names_the_refused_argument(keyword: str, value) -> None:
    with pytest.raises(courier.InvalidArgument) as info:
        courier.Engine(temporary_store=True, **{keyword: value})
    _refused(info, keyword)


@pytest.mark.parametrize("keyword,value", [("retry", courier.Retry(-5)), ("max_redirects", -1),
                                           ("status_codes", [(500, 400)])])
def test_request_names_the_refused_argument(keyword: str, value, engine: courier.Engine, server) -> None:
    before = server.count()
    with pytest.raises(courier.InvalidArgument) as info:
        engine.get("/json", **{keyword: value})
    _refused(info, keyword)
    assert server.count() == before


@pytest.mark.parametrize("method", ["GE T", "", "GET\r\n"])
def test_a_method_that_is_not_a_token_names_method(method: str, engine: courier.Engine, server) -> None:
    before = server.count()
    with pytest.raises(courier.InvalidArgument) as info:
        engine.send(method, "/json")
    _refused(info, "method")
    with pytest.raises(courier.InvalidArgument) as info:
        engine.send(courier.Request(method, "/json"))
    _refused(info, "method")
    assert server.count() == before


# -- bug 7: every enum-taking option takes its enum and its name ---------------------------------

@pytest.mark.parametrize("schemes", ["digest", "Digest", "DIGEST", AuthScheme.DIGEST, int(AuthScheme.DIGEST),
                                     "any_safe", "any-safe", AuthScheme.ANY_SAFE, "any", ["digest", "ntlm"],
                                     ("basic", AuthScheme.DIGEST)])
def test_credentials_take_scheme_names(schemes, engine: courier.Engine, base_url: str) -> None:
    r = engine.get("/digest-auth/u/p", credentials=("u", "p", schemes))
    assert r.json()["scheme"] == "Digest"
    with courier.Engine(base_url=base_url, temporary_store=True, credentials=("u", "p", schemes)) as e:
        assert e.get("/digest-auth/u/p").json()["scheme"] == "Digest"


@pytest.mark.parametrize("keyword", ["credentials", "proxy_credentials"])
def test_an_unknown_scheme_name_is_invalid_argument_listing_the_names(keyword: str, engine: courier.Engine) -> None:
    with pytest.raises(courier.InvalidArgument) as info:
        engine.get("/json", **{keyword: ("u", "p", "digets")})
    _refused(info, keyword)
    for name in ("basic", "digest", "negotiate", "ntlm", "any_safe", "any"):
        assert repr(name) in str(info.value)
    with pytest.raises(courier.InvalidArgument) as info:
        courier.Engine(temporary_store=True, **{keyword: ("u", "p", "digets")})
    _refused(info, keyword)


def test_a_mapping_type_takes_its_enum_and_its_name() -> None:
    m = courier.Mapping()
    m.attribute("a", type="integer").attribute("b", type="INT").attribute("c", type=courier.JsonType.STRING)
    m.attribute("d", type=float).attribute("e", type=int(courier.JsonType.BOOL))
    with pytest.raises(courier.InvalidArgument) as info:
        m.attribute("f", type="integr")
    _refused(info, "type")


def test_engine_methods_name_the_refused_argument(engine: courier.Engine) -> None:
    with pytest.raises(courier.NotFound) as nf:
        engine.remove_log_sink(12345)
    assert nf.value.code == courier.NotFound.CODE and str(nf.value).startswith("sink:")
    with pytest.raises(courier.InvalidArgument) as info:
        engine.log_set_field("", "x")
    _refused(info, "name")
    with pytest.raises(courier.InvalidArgument) as info:
        engine.batch([("GET", "/json")], max_in_flight=-1)
    _refused(info, "max_in_flight")
    with pytest.raises(courier.InvalidArgument) as info:
        engine.cache.register_policy(5)  # below the user range
    _refused(info, "policy_id")
    with pytest.raises(courier.InvalidArgument) as info:
        engine.frozen.add_resend_policy("courier.mine")  # reserved
    _refused(info, "policy_id")


@pytest.mark.parametrize("keyword,value", [("max_files", 0), ("max_bytes", -1)])
def test_add_log_file_names_the_refused_argument(keyword: str, value: int, engine: courier.Engine, tmp_path) -> None:
    # the C core's message names it (courier_log_add_file); the binding passes it through
    with pytest.raises(courier.InvalidArgument) as info:
        engine.add_log_file(tmp_path / "x.log", **{keyword: value})
    _refused(info, keyword)
