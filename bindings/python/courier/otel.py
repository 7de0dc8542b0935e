"""OpenTelemetry client spans for an engine's requests (``Engine(tracing=True)``; the
``courier[otel]`` extra, ``opentelemetry-api``, which is imported only when tracing is asked for).

Built from the engine's interceptors and events (the C core gives a before-send interceptor the
send's id, the id its events carry: that is what ties the two together):

* the engine's before-send interceptor (on the sending thread, inside ``courier_send``, where the
  caller's context is current, also for an ``AsyncEngine``'s task) starts a ``CLIENT`` span under
  the send's id (``courier_outgoing_request_id``, given before the interceptors run), a child of
  the current span (or, with no current span, of the ``traceparent`` the request already carries:
  a frozen request's replay), with the HTTP client semantic conventions known then
  (``http.request.method``, ``url.full`` without user information, ``server.address``,
  ``server.port``) and injects its context into the request's headers through the configured
  propagator (W3C ``traceparent``, and ``tracestate``/``baggage`` when there are any, by default);
* the ``retried`` events add a span event ``courier.retry`` each (``attempt``, ``delay_ms``,
  ``courier.code``), and the ``redirected`` events a ``courier.redirect`` each (``url.full`` of the
  next hop, ``http.response.status_code`` the 3xx, ``courier.redirect.number``);
* the ``finished`` event (on the worker thread) ends the span with ``http.response.status_code``,
  ``http.request.resend_count`` (the event's ``resend_count``: retries and redirects the engine
  made; absent when none) and, for a failure, ``error.type`` (the event's ``error_type``, the C
  core's for every language: the status as a string, ``"503"``, when a status failed it, else the
  code's name: ``cannot_connect``, ``timeout``, ``frozen``...) with the span's status ERROR. An
  answer from the cache is a span too, with ``courier.cache_hit`` true.

The engine's redirects are followed inside one span (one span per request, resend count for the
hops). Swift's CourierTracing makes the same spans (docs/design/tracing.md). A frozen request keeps the trace context it was frozen under: the journal stores the
request's header lines, ``traceparent`` among them, and its replay (on the journal's thread, where
no span is current) is a span whose parent is that context, in the same trace as the span that
ended with ``error.type`` ``frozen``. A send the engine refuses after its interceptors ran (a
``transport=`` not registered, an interceptor after this one raising, the frequent-request guard)
ends its span at once, inside the send before it raises: the C core gives it a ``finished`` event
on the sending thread, with the refusal's ``error_type`` (``not_found``) and no status. A
WebSocket's opening handshake is a send too (``Engine.websocket``): its span ends when the
handshake does, before ``websocket()`` returns or raises: status 101, or the failure's
``error.type`` (``ws_handshake``, with the refusing status when there was one).
"""
from __future__ import annotations

import logging
from typing import Any, Optional
from urllib.parse import urlsplit, urlunsplit

__all__ = ["Tracing"]

_KNOWN_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})
_FINISHED, _FROM_CACHE, _RETRIED, _REDIRECTED = 4, 5, 6, 8  # courier_event_kind


def _url_full(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"REDACTED:REDACTED@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class Tracing:
    """The spans of one engine: an interceptor (``before_send``) and a monitor (:meth:`attach`).
    ``Engine(tracing=True)`` makes one with the global tracer provider; ``tracing=provider`` with
    that ``TracerProvider``."""

    def __init__(self, provider: Optional[Any] = None) -> None:
        try:
            from opentelemetry import propagate, trace
        except ImportError as e:  # pragma: no cover - the extra is not installed
            raise ImportError('Engine(tracing=...) needs opentelemetry-api: pip install "courier[otel]"') from e
        self._propagate = propagate
        self._trace = trace
        self.tracer = (provider or trace.get_tracer_provider()).get_tracer("courier")
        self.spans: dict[int, Any] = {}  # by request id, from before-send to finished

    def before_send(self, outgoing: Any) -> None:
        """The interceptor. Telemetry never fails a send: an exception here (a propagator's, a
        tracer's) is logged at debug on ``courier.otel`` and the request goes untraced."""
        try:
            self._start(outgoing)
        except Exception:  # pragma: no cover - a broken SDK or propagator
            logging.getLogger("courier.otel").debug("tracing failed; the request goes untraced", exc_info=True)

    def _start(self, outgoing: Any) -> None:
        request_id = outgoing.request_id
        if not request_id:  # pragma: no cover - a library older than the id in before-send
            return
        method = outgoing.method
        url = outgoing.url
        parts = urlsplit(url)
        known = method in _KNOWN_METHODS
        attributes: dict[str, Any] = {"http.request.method": method if known else "_OTHER",
                                      "url.full": _url_full(url), "server.address": parts.hostname or "",
                                      "server.port": parts.port or (443 if parts.scheme == "https" else 80)}
        if not known:
            attributes["http.request.method_original"] = method
        parent = None  # the current context
        if not self._trace.get_current_span().get_span_context().is_valid:
            # no span here (the journal's thread replaying a frozen request): the trace context the
            # request carries, which the journal stored with its headers when it was frozen
            carried = {name: value for name in ("traceparent", "tracestate")
                       if (value := outgoing.header(name)) is not None}
            if carried:
                parent = self._propagate.extract(carried)
        span = self.tracer.start_span(method if known else "HTTP", kind=self._trace.SpanKind.CLIENT,
                                      attributes=attributes, context=parent)
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier, context=self._trace.set_span_in_context(span))
        for name, value in carrier.items():
            outgoing.set_header(name, value)
        self.spans[request_id] = span

    def attach(self, engine: Any) -> None:
        """Adds the monitor that ends the spans (the engine is open)."""
        engine.add_monitor(self._event, kinds=("retried", "redirected", "from_cache", "finished"))

    def _event(self, ev: Any) -> None:
        try:
            self._record(ev)
        except Exception:  # pragma: no cover - as before_send: never the engine's failure
            logging.getLogger("courier.otel").debug("tracing failed at an event", exc_info=True)

    def _record(self, ev: Any) -> None:
        kind = int(ev.kind)
        if kind != _FINISHED:
            span = self.spans.get(ev.request_id)
            if span is None:
                return
            if kind == _RETRIED:
                span.add_event("courier.retry", {"attempt": ev.attempt, "delay_ms": int(ev.delay * 1000),
                                                 "courier.code": ev.code})
            elif kind == _REDIRECTED:
                span.add_event("courier.redirect", {"url.full": _url_full(ev.url or ""),
                                                    "http.response.status_code": ev.http_status,
                                                    "courier.redirect.number": ev.attempt})
            else:
                span.set_attribute("courier.cache_hit", True)
            return
        span = self.spans.pop(ev.request_id, None)
        if span is None:
            return
        if ev.http_status:
            span.set_attribute("http.response.status_code", ev.http_status)
        if ev.resend_count > 0:
            span.set_attribute("http.request.resend_count", ev.resend_count)
        if ev.error_type is not None:
            span.set_attribute("error.type", ev.error_type)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        span.end()
