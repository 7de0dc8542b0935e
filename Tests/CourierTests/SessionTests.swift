// SessionTests.swift — what the facade adds to adapters, retriers and the authenticator: async
// protocol methods run in tasks (an adapter that awaits and replaces the body, a retrier's
// decisions), the authenticator's refresh with 20 concurrent 401s and one refresh, a failing
// refresh rethrown as the very error to every waiter, and the loop guard's code.

import Courier
import Foundation
import XCTest

private struct Upper: Adapter {
    func adapt(_ request: AdaptableRequest) async throws -> AdaptableRequest {
        try? await Task.sleep(nanoseconds: 1_000_000) // adapts after a suspension: the worker goes on
        var changed = request
        let upper = Data((request.body ?? Data()).map { $0 >= 97 && $0 <= 122 ? $0 - 32 : $0 })
        changed.body = upper
        changed.headers.replace(name: "X-Body-Sum", value: String(upper.reduce(0) { $0 + Int($1) }))
        return changed
    }
}

private struct SigningFailed: Error, Equatable {}

/// Fetches /session/token through the engine it is given (opted out of the authenticator).
private final class Tokens: Authenticator, @unchecked Sendable {
    let engine = Locked<Engine?>(nil)
    let refreshes = Locked(0)
    let failing: Bool

    init(failing: Bool = false) { self.failing = failing }

    func refresh(_ credential: String?) async throws -> AuthCredential {
        refreshes.mutate { $0 += 1 }
        if failing { throw SigningFailed() }
        guard let engine = engine.get() else { throw SigningFailed() }
        let response = try await engine.send(.post("/session/token").authenticated(false))
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return AuthCredential(object?["token"] as? String ?? "")
    }
}

final class SessionTests: LoopbackTestCase {
    private func json(_ response: Response) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    }

    func testAsyncAdapterReplacesTheBody() async throws {
        let adapted = try makeEngine { $0 = $0.adapter(Upper()) }
        let response = try await adapted.send(.post("/echo").body(Data("hello".utf8), contentType: "text/plain"))
        let echo = try json(response)
        XCTAssertEqual(echo["body"] as? String, "HELLO")
        let headers = try XCTUnwrap(echo["headers"] as? [[String]])
        XCTAssertTrue(headers.contains(["X-Body-Sum", "372"]))
        adapted.close()
    }

    func testAThrowingAdapterFailsWithItsError() async throws {
        let request = Request.get("/echo/adapter-throws").adapter(AnyAdapter { _ in throw SigningFailed() })
        do {
            _ = try await engine.send(request)
            XCTFail("expected the adapter's error")
        } catch let error as SigningFailed {
            XCTAssertEqual(error, SigningFailed())
        }
    }

    func testRetrierDecides() async throws {
        let asked = Locked<[Int]>([])
        let retrying = try makeEngine {
            $0 = $0.retrier(AnyRetrier { failure in
                asked.mutate { $0.append(failure.attempt) }
                XCTAssertEqual(failure.response?.status, 503)
                return failure.attempt < 3 ? .retryAfter(0.001) : .doNotRetry
            })
        }
        do {
            _ = try await retrying.send(.post("/status/503"))
            XCTFail("expected a 503")
        } catch CourierError.httpStatus {}
        XCTAssertEqual(asked.get(), [1, 2, 3])
        retrying.close()
    }

    func testTwentyConcurrent401sOneRefresh() async throws {
        let tokens = Tokens()
        let engine = try makeEngine {
            $0.maxConnectionsPerHost = 32
            $0.maxConnections = 32
            $0 = $0.authenticator(tokens, origin: self.server.baseURL, credential: AuthCredential("stale"))
        }
        tokens.engine.set(engine)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 {
                group.addTask { try await engine.send(.get("/session/protected").coalesce(false)).status }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses, Array(repeating: 200, count: 20))
        XCTAssertEqual(tokens.refreshes.get(), 1)
        tokens.engine.set(nil)
        engine.close()
    }

    func testAFailingRefreshFailsEveryWaiterWithItsError() async throws {
        let tokens = Tokens(failing: true)
        let engine = try makeEngine {
            $0 = $0.authenticator(tokens, origin: self.server.baseURL, credential: AuthCredential("stale"))
        }
        for _ in 0..<3 {
            do {
                _ = try await engine.send(.get("/session/protected"))
                XCTFail("expected the refresh's error")
            } catch let error as SigningFailed {
                XCTAssertEqual(error, SigningFailed())
            }
        }
        XCTAssertEqual(tokens.refreshes.get(), 3) // one per request: each refused request refreshed anew
        engine.close()
    }

    func testTheLoopGuard() async throws {
        struct Bogus: Authenticator {
            func refresh(_ credential: String?) async throws -> AuthCredential { AuthCredential("bogus") }
        }
        let engine = try makeEngine {
            $0 = $0.authenticator(Bogus(), origin: self.server.baseURL, credential: AuthCredential("stale"))
        }
        do {
            _ = try await engine.send(.get("/session/protected"))
            XCTFail("expected credentialRefused")
        } catch CourierError.credentialRefused {}
        XCTAssertThrowsError(try self.engine.setCredential(AuthCredential("x"))) // no authenticator there
        engine.close()
    }
}
