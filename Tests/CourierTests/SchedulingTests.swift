// SchedulingTests.swift — the C core's scheduling through the facade: retry, coalescing of
// identical GETs, the frequent-request guard, priorities under a connection limit.

import Courier
import Foundation
import XCTest

final class SchedulingTests: LoopbackTestCase {
    // MARK: - Retry

    func testRetriesAnIdempotentRequestThenGivesTheLastAnswer() async throws {
        let policy = RetryPolicy(maxRetries: 2, baseDelay: 0.01, maxDelay: 0.05)
        let error = await assertThrows(.httpStatus) { try await self.engine.send(.get("/status/503").retry(policy)) }
        XCTAssertEqual(error?.response?.attempts, 3)
        XCTAssertGreaterThan(error?.response?.retryWait ?? 0, 0)
        XCTAssertEqual(server.count("/status/503"), 3)

        await assertThrows(.httpStatus) { try await self.engine.send(.post("/status/503").retry(policy)) }
        XCTAssertEqual(server.count("/status/503"), 4, "POST is not retried unless asked")
        var nonIdempotent = policy
        nonIdempotent.nonIdempotent = true
        await assertThrows(.httpStatus) { try await self.engine.send(.post("/status/503").retry(nonIdempotent)) }
        XCTAssertEqual(server.count("/status/503"), 7)

        let once = try await engine.send(.get("/status/200").retry(policy))
        XCTAssertEqual(once.attempts, 1)
        XCTAssertEqual(once.retryWait, 0)
        XCTAssertEqual(Response(status: 200).attempts, 1)
    }

    func testEngineRetryPolicyAppliesUnlessTheRequestHasItsOwn() async throws {
        let retrying = try makeEngine { $0.retry = RetryPolicy(maxRetries: 1, baseDelay: 0.01, maxDelay: 0.02) }
        defer { retrying.close() }
        await assertThrows(.httpStatus) { try await retrying.send(.get("/status/500")) }
        XCTAssertEqual(server.count("/status/500"), 2)
        await assertThrows(.httpStatus) { try await retrying.send(.get("/status/500").retry(.disabled)) }
        XCTAssertEqual(server.count("/status/500"), 3)
    }

    func testRefusedRetryRules() async throws {
        await assertThrows(.invalidArgument) {
            try await self.engine.send(.get("/echo").retry(RetryPolicy(maxRetries: -1)))
        }
        await assertThrows(.invalidArgument) {
            try await self.engine.send(.get("/echo").retry(RetryPolicy(maxRetries: 1, baseDelay: 2, maxDelay: 1)))
        }
        XCTAssertThrowsError(try makeEngine { $0.retry = RetryPolicy(maxRetries: 1, baseDelay: -1) }) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
        }
    }

    // MARK: - Coalescing

    func testIdenticalGetsInFlightShareOneRequest() async throws {
        let engine = self.engine!
        async let first = engine.send(.get("/delay/300"))
        async let second = engine.send(.get("/delay/300"))
        let (a, b) = try await (first, second)
        XCTAssertEqual(a.body, b.body)
        XCTAssertNotEqual(a.requestID, b.requestID)
        XCTAssertEqual(server.count("/delay/300"), 1)

        async let third = engine.send(.get("/delay/301").coalesce(false))
        async let fourth = engine.send(.get("/delay/301").coalesce(false))
        _ = try await (third, fourth)
        XCTAssertEqual(server.count("/delay/301"), 2)
    }

    // MARK: - Frequent-request guard

    func testTheFrequentRequestGuardRefusesRepeats() async throws {
        let guarded = try makeEngine { $0.frequentGuard = 60 }
        defer { guarded.close() }
        _ = try await guarded.send(.get("/echo/once"))
        await assertThrows(.tooFrequent) { try await guarded.send(.get("/echo/once")) }
        XCTAssertEqual(server.count("/echo/once"), 1)
        _ = try await guarded.send(.get("/echo/once").parameter("other", "1"))
        _ = try await guarded.send(.get("/echo/free").frequentGuard(false))
        _ = try await guarded.send(.get("/echo/free").frequentGuard(false))
        XCTAssertEqual(server.count("/echo/free"), 2)

        do {
            _ = try await guarded.send(.get("/echo/once"))
            XCTFail("a repeat was sent")
        } catch CourierError.tooFrequent {
            // expected
        }
    }

    // MARK: - Priorities

    func testHighPriorityStartsFirstUnderTheConnectionLimit() throws {
        let single = try makeEngine { $0.maxConnectionsPerHost = 1 }
        defer { single.close() }
        let order = Locked<[String]>([])
        let done = expectation(description: "all answered")
        done.expectedFulfillmentCount = 4
        let record: @Sendable (String) -> @Sendable (Result<Response, CourierError>) -> Void = { name in
            { @Sendable _ in
                order.mutate { $0.append(name) }
                done.fulfill()
            }
        }
        single.send(.get("/delay/200"), completion: record("busy"))
        waitUntil("the first request is on the wire") { self.server.count("/delay/200") == 1 }
        single.send(.get("/echo/low").priority(.low), completion: record("low"))
        single.send(.get("/echo/normal"), completion: record("normal"))
        single.send(.get("/echo/high").priority(.high), completion: record("high"))
        wait(for: [done], timeout: 20)
        XCTAssertEqual(order.get(), ["busy", "high", "normal", "low"])
    }

    func testSendWithRetryTimesIsCountedByTheServer() async throws {
        let before = server.count("/status/503")
        do {
            _ = try await engine.send(.get("/status/503"), retry: RetryPolicy(maxRetries: 2, baseDelay: 0.001, maxDelay: 0.01))
            XCTFail("expected an HTTP error")
        } catch let error as CourierError where error.code == .httpStatus {
            XCTAssertEqual(error.response?.attempts, 3)
        }
        XCTAssertEqual(server.count("/status/503") - before, 3)
        XCTAssertEqual(RetryPolicy.times(3).maxRetries, 3)
    }
}
