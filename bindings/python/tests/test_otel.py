"""Engine(tracing=...): OpenTelemetry client spans from the engine's events, traceparent injected."""
from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import courier  # noqa: E402
from courier.otel import Tracing  # noqa: E402
from conftest import wait_until  # noqa: E402


@pytest.fixture
def traced(base_url, tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with courier.Engine(base_url=base_url, store=str(tmp_path / "store"), tracing=provider, logger=False) as e:
        yield e, provider.get_tracer("test"), exporter


def client_spans(exporter):
    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT]


def test_a_span_per_request_with_the_http_conventions(traced, server) -> None:
    engine, tracer, exporter = traced
    with tracer.start_as_current_span("parent") as parent:
        echo = engine.get("/echo").json()
    (span,) = client_spans(exporter)
    assert span.name == "GET" and span.parent.span_id == parent.get_span_context().span_id
    a = span.attributes
    assert a["http.request.method"] == "GET" and a["url.full"] == f"{server.url}/echo"
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
    assert a["http.response.status_code"] == 200 and "error.type" not in a
    assert span.status.status_code == StatusCode.UNSET
    traceparent = [v for n, v in echo["headers"] if n.lower() == "traceparent"]
    ctx = span.get_span_context()
    assert traceparent == [f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"]


def test_failures_redirects_and_statuses(traced, closed_port) -> None:
    engine, _, exporter = traced
    engine.get("/redirect-chain/2")
    with pytest.raises(courier.CannotConnect):
        engine.get(f"http://127.0.0.1:{closed_port}/")
    with pytest.raises(courier.HTTPStatusError):
        engine.get("/status/503")
    redirected, refused, unavailable = client_spans(exporter)
    assert redirected.attributes["http.request.resend_count"] == 2
    assert [e.name for e in redirected.events] == ["courier.redirect", "courier.redirect"]
    assert [e.attributes["courier.redirect.number"] for e in redirected.events] == [1, 2]
    assert refused.attributes["error.type"] == "cannot_connect" and refused.status.status_code == StatusCode.ERROR
    assert "http.response.status_code" not in refused.attributes
    assert unavailable.attributes["error.type"] == "503"
    assert unavailable.attributes["http.response.status_code"] == 503


def test_retries_count_as_resends(traced) -> None:
    engine, _, exporter = traced
    with pytest.raises(courier.HTTPStatusError):
        engine.get("/status/503", retry=courier.Retry(2, base_delay=0.001, max_delay=0.001))
    (span,) = client_spans(exporter)
    assert span.attributes["http.request.resend_count"] == 2
    assert [e.name for e in span.events] == ["courier.retry", "courier.retry"]


def test_async_sends_take_the_tasks_context(traced) -> None:
    engine, tracer, exporter = traced

    async def one(n: int) -> int:
        with tracer.start_as_current_span(f"task{n}") as parent:
            await courier.AsyncEngine(engine=engine).get("/echo", params={"n": n})
            return parent.get_span_context().span_id

    async def main() -> list[int]:
        return list(await asyncio.gather(*(one(n) for n in range(4))))

    parents = asyncio.run(main())
    spans = client_spans(exporter)
    by_query = {s.attributes["url.full"].rsplit("=", 1)[1]: s.parent.span_id for s in spans}
    assert by_query == {str(n): parents[n] for n in range(4)}


def test_a_send_refused_after_the_interceptors_ends_its_span(traced) -> None:
    engine, _, exporter = traced
    with pytest.raises(courier.NotFound):
        engine.get("/echo", transport="not-registered")  # refused after the tracing's interceptor
    (span,) = client_spans(exporter)  # ended at the refusal, inside the send
    assert span.attributes["error.type"] == "not_found" and span.status.status_code == StatusCode.ERROR
    assert "http.response.status_code" not in span.attributes
    assert span.attributes["url.full"].endswith("/echo")


def test_refused_sends_leave_no_span_behind(base_url, tmp_path, server) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider)

    def refuse_marked(outgoing) -> None:
        if outgoing.header("X-Refuse") is not None:
            raise courier.InvalidHeader("refused")

    # the tracing first, then an interceptor that refuses: its span had started
    with courier.Engine(base_url=base_url, store=str(tmp_path / "store"), logger=False,
                        interceptors=[tracing, courier.Interceptor(before_send=refuse_marked)]) as engine:
        tracing.attach(engine)
        for _ in range(3):
            with pytest.raises(courier.NotFound):
                engine.get("/echo", transport="not-registered")
            with pytest.raises(courier.InvalidHeader):
                engine.get("/echo", headers={"X-Refuse": "1"})
        assert tracing.spans == {}  # nothing left in the map
        engine.get("/echo")
        assert tracing.spans == {}
    spans = client_spans(exporter)
    assert [s.attributes.get("error.type") for s in spans] == ["not_found", "invalid_header"] * 3 + [None]
    assert all(s.status.status_code == StatusCode.ERROR for s in spans[:6])


def test_a_websockets_handshake_is_a_span_that_ends(base_url, tmp_path, server) -> None:
    """The opening handshake is a send (the interceptors run in websocket()): its span ends when the
    handshake does, with the 101, or the failure. Before, it stayed in Tracing.spans for ever."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider)
    with courier.Engine(base_url=base_url, store=str(tmp_path / "store"), logger=False,
                        interceptors=[tracing]) as engine:
        tracing.attach(engine)
        with engine.websocket("/ws/echo") as ws:
            assert tracing.spans == {}  # ended before websocket() returned it open
            ws.send("hi")
            assert ws.recv(timeout=10) == "hi"
        with pytest.raises(courier.WebSocketHandshakeError):
            engine.websocket("/status/403")
        assert tracing.spans == {}
    opened, refused = client_spans(exporter)  # the closing handshake is no request
    assert opened.attributes["url.full"] == f"{server.url}/ws/echo"
    assert opened.attributes["http.response.status_code"] == 101 and "error.type" not in opened.attributes
    assert opened.status.status_code == StatusCode.UNSET
    assert refused.attributes["error.type"] == "ws_handshake" and refused.status.status_code == StatusCode.ERROR
    assert refused.attributes["http.response.status_code"] == 403


def test_a_frozen_request_replays_in_the_trace_it_was_frozen_under(traced) -> None:
    engine, tracer, exporter = traced
    engine.set_offline()
    with tracer.start_as_current_span("checkout"):
        with pytest.raises(courier.Frozen):
            engine.post("/echo", json={"order": 1}, freeze=courier.Freeze("manual", id="order-1"))
    (frozen,) = client_spans(exporter)
    assert frozen.attributes["error.type"] == "frozen"
    engine.set_online()
    engine.frozen.resend("order-1")  # sent by the journal's thread, where no span is current
    assert wait_until(lambda: len(client_spans(exporter)) == 2)
    replay = client_spans(exporter)[1]
    assert replay.context.trace_id == frozen.context.trace_id
    assert replay.parent.span_id == frozen.context.span_id
    assert replay.attributes["http.response.status_code"] == 200 and "error.type" not in replay.attributes


def test_no_tracing_no_header(engine) -> None:
    echo = engine.get("/echo").json()
    assert not [n for n, _ in echo["headers"] if n.lower() == "traceparent"]

