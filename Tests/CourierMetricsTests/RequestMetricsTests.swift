// RequestMetricsTests.swift — CourierMetrics against the loopback test server with swift-metrics'
// TestMetrics: requests by status class, durations, cache hits and misses, frozen requests queued
// and replayed.
// Built with the trait Metrics on (Package.swift); without it the module is empty.

#if Metrics
import Courier
import CourierMetrics
import CourierTestServer
import Foundation
import MetricsTestKit
import XCTest

/// One `cts_server` on 127.0.0.1 and a free port.
final class MetricsServer: @unchecked Sendable {
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

final class RequestMetricsTests: XCTestCase {
    var server: MetricsServer!
    var metrics: TestMetrics!
    var engine: Engine!

    override func setUpWithError() throws {
        server = try MetricsServer()
        metrics = TestMetrics()
        var configuration = Configuration(baseURL: server.baseURL)
        configuration.timeout = 20
        configuration.temporaryStore = true
        engine = try Engine(configuration: configuration)
        try RequestMetrics(factory: metrics).attach(to: engine)
    }

    override func tearDown() {
        engine?.close()
        server?.stop()
    }

    func total(_ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        dimensions.isEmpty ? metrics.counterTotal(label: label) : metrics.counterTotal(label: label, dimensions: dimensions)
    }

    func testRequestsByStatusClassAndTheirDurations() async throws {
        _ = try await engine.send(.get("/echo"))
        _ = try await engine.send(.get("/echo"))
        _ = try? await engine.send(.get("/status/404"))
        _ = try? await engine.send(.post("/status/503"))
        XCTAssertEqual(total("courier.requests", [("status_class", "2xx"), ("method", "GET")]), 2)
        XCTAssertEqual(total("courier.requests", [("status_class", "4xx"), ("method", "GET")]), 1)
        XCTAssertEqual(total("courier.requests", [("status_class", "5xx"), ("method", "POST")]), 1)
        XCTAssertEqual(total("courier.requests"), 4)
        let timer = try metrics.expectTimer("courier.request.duration", [("status_class", "2xx"), ("method", "GET")])
        XCTAssertEqual(timer.values.count, 2)
        XCTAssertTrue(timer.values.allSatisfy { $0 > 0 })
    }

    func testAFailureWithoutAResponseIsAnError() async throws {
        _ = try? await engine.send(.get("http://127.0.0.1:1/x"))
        XCTAssertEqual(total("courier.requests", [("status_class", "error"), ("method", "GET")]), 1)
    }

    func testASendRefusedAfterTheInterceptorsIsAnErrorWithoutADuration() async throws {
        do {
            _ = try await engine.send(.post("/echo").transport("not-registered"))
            XCTFail("no transport of that name")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .notFound)
        }
        XCTAssertEqual(total("courier.requests", [("status_class", "error"), ("method", "POST")]), 1)
        XCTAssertThrowsError(try metrics.expectTimer("courier.request.duration", [("status_class", "error"), ("method", "POST")]))
    }

    func testAWebSocketsHandshakeCountsAsARequest() async throws {
        // As OkHttp's EventListener ends a WebSocket's call at its handshake: one request, its
        // status class that of the 101 (or of the status that refused it), with its duration.
        let ws = try await engine.webSocket(.get("/ws/echo"))
        try ws.close()
        _ = try? await engine.webSocket(.get("/status/403"))
        XCTAssertEqual(total("courier.requests", [("status_class", "1xx"), ("method", "GET")]), 1)
        XCTAssertEqual(total("courier.requests", [("status_class", "4xx"), ("method", "GET")]), 1)
        XCTAssertEqual(total("courier.requests"), 2)
        let timer = try metrics.expectTimer("courier.request.duration", [("status_class", "1xx"), ("method", "GET")])
        XCTAssertEqual(timer.values.count, 1)
    }

    func testCacheHitsAndMisses() async throws {
        // /origin answers with the Cache-Control asked for: the first is a miss (stored), the second a hit
        let request = Request.get("/origin/metrics").parameter("Cache-Control", "max-age=60").cachePolicy(.http)
        let first = try await engine.send(request)
        let second = try await engine.send(request)
        XCTAssertEqual(first.cacheReason, .miss)
        XCTAssertEqual(second.cacheReason, .fresh)
        XCTAssertEqual(server.count("/origin/metrics"), 1)
        XCTAssertEqual(total("courier.cache.misses"), 1)
        XCTAssertEqual(total("courier.cache.hits"), 1)
        XCTAssertEqual(total("courier.requests"), 2)
    }

    func testFrozenRequestsQueuedAndReplayed() async throws {
        engine.reachability.setOffline()
        for i in 0..<2 {
            _ = try? await engine.send(.post("/echo/f\(i)").body(Data("x".utf8), contentType: "text/plain").freeze(.auto))
        }
        XCTAssertEqual(total("courier.frozen.queued"), 2)
        XCTAssertEqual(total("courier.frozen.replayed"), 0)
        engine.reachability.setOnline()
        let idle = await engine.frozen.idle(timeout: 20)
        XCTAssertTrue(idle)
        XCTAssertEqual(server.count("/echo/f0") + server.count("/echo/f1"), 2)
        // the observer runs on the journal thread: wait (bounded) for its second count
        let end = Date().addingTimeInterval(20)
        while total("courier.frozen.replayed", [("outcome", "succeeded")]) < 2 && Date() < end { usleep(1000) }
        XCTAssertEqual(total("courier.frozen.replayed", [("outcome", "succeeded")]), 2)
        XCTAssertEqual(total("courier.frozen.replayed", [("outcome", "failed")]), 0)
    }
}

#endif // Metrics
