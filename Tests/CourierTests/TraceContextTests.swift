// TraceContextTests.swift — a request's W3C trace context (Request.traceContext), the events that
// carry it, redirect events, and the send's id an interceptor sees.

import Courier
import Foundation
import XCTest

final class TraceContextTests: LoopbackTestCase {
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    func testTheContextGoesOutAndEventsCarryIt() async throws {
        let events = Locked<[RequestEvent]>([])
        try engine.addEventMonitor(kinds: [.willSend, .redirected, .finished]) { event in events.mutate { $0.append(event) } }
        let response = try await engine.send(.get("/redirect?to=%2Fecho").header("traceparent", "stale")
            .traceContext(traceparent: traceparent, tracestate: "a=1"))
        let echo = try Echo(response)
        XCTAssertEqual(echo.headers("traceparent"), [traceparent])
        XCTAssertEqual(echo.headers("tracestate"), ["a=1"])
        let seen = events.get()
        XCTAssertEqual(seen.map(\.kind), [.willSend, .redirected, .finished])
        XCTAssertTrue(seen.allSatisfy { $0.traceParent == traceparent && $0.traceState == "a=1" })
        let redirect = seen[1]
        XCTAssertEqual(redirect.status, 302)
        XCTAssertEqual(redirect.attempt, 1)
        XCTAssertEqual(redirect.url, server.baseURL + "/echo")
        XCTAssertEqual(seen[2].resendCount, 1)
        XCTAssertNil(seen[2].errorType)
    }

    func testAMalformedContextFailsTheSend() async throws {
        do {
            _ = try await engine.send(.get("/echo").traceContext(traceparent: "00-nope"))
            XCTFail("a malformed traceparent must fail the send")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .invalidArgument)
        }
        XCTAssertEqual(server.count("/echo"), 0)
    }

    func testFinishedNamesTheFailure() async throws {
        let events = Locked<[RequestEvent]>([])
        try engine.addEventMonitor(kinds: [.finished]) { event in events.mutate { $0.append(event) } }
        _ = try? await engine.send(.get("/status/503"))
        XCTAssertEqual(events.get().first?.errorType, "503")
        XCTAssertNil(events.get().first?.traceParent)
    }

    func testAnInterceptorSeesTheIdOfItsSend() async throws {
        let seen = Locked<RequestID?>(nil)
        let traced = try makeEngine {
            $0.interceptors.append(ClosureInterceptor(adapt: { request in seen.set(request.requestID) }))
        }
        defer { traced.close() }
        let response = try await traced.send(.get("/echo"))
        XCTAssertEqual(seen.get(), response.requestID)
    }

    func testMonitorsOfTheConfigurationAreAddedAtOpen() async throws {
        let kinds = Locked<[RequestEvent.Kind]>([])
        let monitored = try makeEngine {
            $0.eventMonitors = [ClosureEventMonitor(kinds: [.finished]) { event in kinds.mutate { $0.append(event.kind) } }]
        }
        defer { monitored.close() }
        _ = try await monitored.send(.get("/echo"))
        XCTAssertEqual(kinds.get(), [.finished])
    }
}
