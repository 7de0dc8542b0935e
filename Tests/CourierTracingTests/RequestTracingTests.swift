// RequestTracingTests.swift — CourierTracing against the loopback test server with
// swift-distributed-tracing's InMemoryTracer: a span per request with the HTTP client semantic
// conventions, the context injected from the task's ServiceContext (the tracer's own keys, and a
// W3C traceparent from a tracer that propagates W3C), retries and redirects as span events, error
// types, and a frozen request's resend in the trace it was frozen in.
// Built with the trait Tracing on (Package.swift); without it the module is empty.

#if Tracing
import Courier
import CourierTestServer
import CourierTracing
import Foundation
import InMemoryTracing
import Tracing
import XCTest

/// One `cts_server` on 127.0.0.1 and a free port.
final class TracingServer: @unchecked Sendable {
    private var server: OpaquePointer?
    let port: Int

    init() throws {
        var created: OpaquePointer?
        guard cts_server_start(&created, "127.0.0.1", 0) == 0, let created else {
            throw NSError(domain: "CourierTestServer", code: 1)
        }
        server = created
        port = Int(cts_server_port(created))
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }
    func count(_ path: String) -> Int { server.map { Int(cts_server_path_count($0, path)) } ?? 0 }
    func stop() {
        if let server { cts_server_stop(server) }
        server = nil
    }

    deinit { stop() }
}

/// The header lines /echo saw.
func echoedHeaders(_ response: Response) throws -> [String: String] {
    let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
    var headers: [String: String] = [:]
    for pair in object?["headers"] as? [[String]] ?? [] where pair.count == 2 { headers[pair[0].lowercased()] = pair[1] }
    return headers
}

/// A port nobody listens on.
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
    }
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return Int(UInt16(bigEndian: addr.sin_port))
}

final class RequestTracingTests: XCTestCase {
    var server: TracingServer!
    var tracer: InMemoryTracer!
    var engine: Engine!

    override func setUpWithError() throws {
        server = try TracingServer()
        tracer = InMemoryTracer()
        var configuration = Configuration(baseURL: server.baseURL)
        configuration.timeout = 20
        configuration.temporaryStore = true
        configuration.addTracing(RequestTracing(tracer: tracer))
        engine = try Engine(configuration: configuration)
    }

    override func tearDown() {
        engine?.close()
        server?.stop()
    }

    func attribute(_ span: FinishedInMemorySpan, _ key: String) -> SpanAttribute? { span.attributes.get(key) }

    func testASpanPerRequestWithTheSemanticConventions() async throws {
        let response = try await engine.send(.get("/echo?a=1"))
        XCTAssertEqual(response.status, 200)
        let spans = tracer.finishedSpans
        XCTAssertEqual(spans.count, 1)
        let span = try XCTUnwrap(spans.first)
        XCTAssertEqual(span.operationName, "GET")
        XCTAssertEqual(span.kind, .client)
        XCTAssertEqual(attribute(span, "http.request.method"), "GET")
        XCTAssertEqual(attribute(span, "url.full"), .string(server.baseURL + "/echo?a=1"))
        XCTAssertEqual(attribute(span, "server.address"), "127.0.0.1")
        XCTAssertEqual(attribute(span, "server.port"), .int64(Int64(server.port)))
        XCTAssertEqual(attribute(span, "http.response.status_code"), .int64(200))
        XCTAssertNil(attribute(span, "http.request.resend_count"))
        XCTAssertNil(attribute(span, "error.type"))
        XCTAssertNotEqual(span.status?.code, .error)
    }

    func testContextInjectedFromTheTasksServiceContext() async throws {
        let parent = tracer.startSpan("parent")
        var context = ServiceContext.topLevel
        context = parent.context
        let response = try await ServiceContext.withValue(context) {
            try await engine.send(.get("/echo"))
        }
        parent.end()
        let headers = try echoedHeaders(response)
        let span = try XCTUnwrap(tracer.finishedSpans.first { $0.operationName == "GET" })
        XCTAssertEqual(span.traceID, parent.traceID) // a child of the task's span
        XCTAssertEqual(span.parentSpanID, parent.spanID)
        // what went on the wire is the request's span, not the parent
        XCTAssertEqual(headers[InMemoryTracer.traceIDKey], span.traceID)
        XCTAssertEqual(headers[InMemoryTracer.spanIDKey], span.spanID)
    }

    func testW3CTraceparentInjected() async throws {
        let w3c = W3CTracer()
        var configuration = Configuration(baseURL: server.baseURL)
        configuration.temporaryStore = true
        configuration.addTracing(RequestTracing(tracer: w3c))
        let traced = try Engine(configuration: configuration)
        defer { traced.close() }
        let events = Locked<[RequestEvent]>([])
        try traced.addEventMonitor(kinds: [.finished]) { event in events.mutate { $0.append(event) } }
        let parent = w3c.inner.startSpan("parent")
        let response = try await ServiceContext.withValue(parent.context) {
            try await traced.send(.get("/echo"))
        }
        parent.end()
        let span = try XCTUnwrap(w3c.inner.finishedSpans.first { $0.operationName == "GET" })
        let traceparent = "00-\(span.traceID)-\(span.spanID)-01"
        XCTAssertEqual(try echoedHeaders(response)["traceparent"], traceparent)
        XCTAssertEqual(span.traceID, parent.traceID)
        // the engine's events carry the context the request went out with
        XCTAssertEqual(events.get().first?.traceParent, traceparent)
    }

    func testRetriesAndRedirectsAreSpanEvents() async throws {
        let policy = RetryPolicy(maxRetries: 2, baseDelay: 0.001, maxDelay: 0.002, ignoreRetryAfter: true)
        do {
            _ = try await engine.send(.get("/status/503").retry(policy))
            XCTFail("a 503 must fail")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .httpStatus)
        }
        _ = try await engine.send(.get("/redirect?to=%2Fredirect%3Fto%3D%252Fecho%26status%3D307"))

        let spans = tracer.finishedSpans
        XCTAssertEqual(spans.count, 2)
        let failed = try XCTUnwrap(spans.first { $0.attributes.get("url.full") == .string(server.baseURL + "/status/503") })
        XCTAssertEqual(failed.events.map { $0.name }, ["courier.retry", "courier.retry"])
        XCTAssertEqual(failed.events.first?.attributes.get("courier.attempt"), .int64(2))
        XCTAssertEqual(failed.events.first?.attributes.get("http.response.status_code"), .int64(503))
        XCTAssertEqual(attribute(failed, "http.request.resend_count"), .int64(2))
        XCTAssertEqual(attribute(failed, "error.type"), "503")
        XCTAssertEqual(attribute(failed, "http.response.status_code"), .int64(503))
        XCTAssertEqual(failed.status?.code, .error)

        let redirected = try XCTUnwrap(spans.first { $0.spanID != failed.spanID })
        XCTAssertEqual(redirected.events.map { $0.name }, ["courier.redirect", "courier.redirect"])
        XCTAssertEqual(redirected.events.map { $0.attributes.get("http.response.status_code") }, [.int64(302), .int64(307)] as [SpanAttribute?])
        XCTAssertEqual(redirected.events.last?.attributes.get("url.full"), .string(server.baseURL + "/echo"))
        XCTAssertEqual(redirected.events.last?.attributes.get("courier.redirect.number"), .int64(2))
        XCTAssertEqual(attribute(redirected, "http.request.resend_count"), .int64(2))
        XCTAssertEqual(attribute(redirected, "http.response.status_code"), .int64(200))
        XCTAssertNil(attribute(redirected, "error.type"))
    }

    func testAFailureWithoutAResponseHasTheCodesName() async throws {
        do {
            _ = try await engine.send(.get("http://127.0.0.1:\(freePort())/x"))
            XCTFail("nobody listens there")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .cannotConnect)
        }
        let span = try XCTUnwrap(tracer.finishedSpans.first)
        XCTAssertEqual(attribute(span, "error.type"), "cannot_connect")
        XCTAssertNil(attribute(span, "http.response.status_code"))
        XCTAssertEqual(span.status?.code, .error)
    }

    func testASendRefusedAfterTheInterceptorsEndsItsSpan() async throws {
        // The tracing first, then an interceptor that refuses marked requests: both refusals come
        // after the tracing's adapt started a span.
        let tracer = InMemoryTracer()
        let tracing = RequestTracing(tracer: tracer)
        var configuration = Configuration(baseURL: server.baseURL)
        configuration.temporaryStore = true
        configuration.addTracing(tracing)
        configuration.interceptors.append(ClosureInterceptor(adapt: { request in
            if request.header("X-Refuse") != nil { throw CourierError(.invalidHeader, message: "refused") }
        }))
        let refusing = try Engine(configuration: configuration)
        defer { refusing.close() }

        do {
            _ = try await refusing.send(.get("/echo").transport("not-registered"))
            XCTFail("no transport of that name")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .notFound)
        }
        do {
            _ = try await refusing.send(.get("/echo?refused").header("X-Refuse", "1"))
            XCTFail("the second interceptor refuses it")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .invalidHeader)
        }
        // Each ended at its refusal (before the send threw), exported with its error, and left the map.
        let spans = tracer.finishedSpans
        XCTAssertEqual(spans.count, 2)
        XCTAssertEqual(spans.map { attribute($0, "error.type") }, ["not_found", "invalid_header"] as [SpanAttribute?])
        XCTAssertEqual(spans.map { $0.status?.code }, [.error, .error])
        XCTAssertEqual(spans.map { attribute($0, "url.full") },
                       [.string(server.baseURL + "/echo"), .string(server.baseURL + "/echo?refused")])
        XCTAssertNil(spans.first.flatMap { attribute($0, "http.response.status_code") })
        XCTAssertEqual(tracing.activeCount, 0)
        XCTAssertEqual(server.count("/echo"), 0) // nothing was sent
    }

    func testAWebSocketsHandshakeIsASpanThatEnds() async throws {
        // The opening handshake is a send (its interceptors run in webSocket): its span ends when
        // the handshake does, with the 101, or with the failure. Before, it never ended.
        let tracer = InMemoryTracer()
        let tracing = RequestTracing(tracer: tracer)
        var configuration = Configuration(baseURL: server.baseURL)
        configuration.temporaryStore = true
        configuration.addTracing(tracing)
        let traced = try Engine(configuration: configuration)
        defer { traced.close() }

        let ws = try await traced.webSocket(.get("/ws/echo"))
        XCTAssertEqual(tracing.activeCount, 0) // ended before webSocket returned it open
        try await ws.send("hi")
        let echoed = try await ws.receive()
        XCTAssertEqual(echoed, .text("hi"))
        try ws.close()
        do {
            while true { _ = try await ws.receive() }
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .wsClosed)
        }
        var spans = tracer.finishedSpans
        XCTAssertEqual(spans.count, 1) // the closing handshake is no request
        let opened = try XCTUnwrap(spans.first)
        XCTAssertEqual(opened.operationName, "GET")
        XCTAssertEqual(attribute(opened, "url.full"), .string(server.baseURL + "/ws/echo"))
        XCTAssertEqual(attribute(opened, "http.response.status_code"), .int64(101))
        XCTAssertNil(attribute(opened, "error.type"))
        XCTAssertNotEqual(opened.status?.code, .error)

        do {
            _ = try await traced.webSocket(.get("/status/403"))
            XCTFail("a 403 is no 101")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .wsHandshake)
        }
        spans = tracer.finishedSpans
        XCTAssertEqual(spans.count, 2)
        let refused = try XCTUnwrap(spans.last)
        XCTAssertEqual(attribute(refused, "error.type"), "ws_handshake")
        XCTAssertEqual(attribute(refused, "http.response.status_code"), .int64(403))
        XCTAssertEqual(refused.status?.code, .error)
        XCTAssertEqual(tracing.activeCount, 0)
    }

    func testAFrozenRequestIsResentInTheTraceItWasFrozenIn() async throws {
        engine.reachability.setOffline()
        do {
            _ = try await engine.send(.post("/echo/like").body(Data("x".utf8), contentType: "text/plain").freeze(.auto))
            XCTFail("offline: frozen")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .frozen)
        }
        let frozen = try XCTUnwrap(tracer.finishedSpans.first)
        XCTAssertEqual(attribute(frozen, "error.type"), "frozen")
        tracer.clearFinishedSpans()

        engine.reachability.setOnline() // the journal resends it
        let idle = await engine.frozen.idle(timeout: 20)
        XCTAssertTrue(idle)
        XCTAssertEqual(server.count("/echo/like"), 1)
        let resent = try XCTUnwrap(tracer.finishedSpans.first)
        XCTAssertEqual(resent.traceID, frozen.traceID) // same trace: the context was stored with it
        XCTAssertEqual(resent.parentSpanID, frozen.spanID)
        XCTAssertEqual(attribute(resent, "http.response.status_code"), .int64(200))
    }

    func testAConfigurationWithoutTracingAddsNothing() throws {
        let configuration = Configuration(baseURL: server.baseURL)
        XCTAssertTrue(configuration.interceptors.isEmpty)
        XCTAssertTrue(configuration.eventMonitors.isEmpty)
    }
}

// MARK: - Helpers

final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func mutate<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}

/// An InMemoryTracer that propagates W3C `traceparent` (ids as W3C's hex), as an OpenTelemetry
/// tracer does.
struct W3CTracer: Tracer {
    typealias Span = InMemorySpan
    let inner: InMemoryTracer

    init() {
        let next = Locked(0)
        func hex(_ width: Int) -> @Sendable () -> String {
            { let n = next.mutate { $0 += 1; return $0 }; return String(repeating: "0", count: width - 4) + String(format: "%04x", n) }
        }
        inner = InMemoryTracer(idGenerator: .init(nextTraceID: hex(32), nextSpanID: hex(16)))
    }

    func startSpan<Instant: TracerInstant>(_ operationName: String, context: @autoclosure () -> ServiceContext,
                                           ofKind kind: SpanKind, at instant: @autoclosure () -> Instant,
                                           function: String, file fileID: String, line: UInt) -> InMemorySpan {
        inner.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function,
                        file: fileID, line: line)
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {
        guard let value = extractor.extract(key: "traceparent", from: carrier) else { return }
        let parts = value.split(separator: "-")
        guard parts.count == 4 else { return }
        context.inMemorySpanContext = InMemorySpanContext(traceID: String(parts[1]), spanID: String(parts[2]), parentSpanID: nil)
    }
}

#endif // Tracing
