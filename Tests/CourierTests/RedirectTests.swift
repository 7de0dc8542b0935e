// RedirectTests.swift — what the facade adds to redirects and timeouts: the redirect hook as a
// Swift closure (seeing each hop, changing it, stopping and refusing), the chain on the response,
// the settings reaching the C core, the new codes and which timeout fired.

import Courier
import Foundation
import XCTest

final class RedirectTests: LoopbackTestCase {
    func testTheHookSeesEachHopAndTheResponseTellsTheChain() async throws {
        let seen = Locked<[(status: Int, url: String)]>([])
        let request = Request.get("/redirect-chain/2").redirectHook { response, next in
            seen.mutate { $0.append((status: response.status, url: next.url)) }
            return .follow
        }
        let response = try await engine.send(request)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(seen.get().map(\.status), [302, 302])
        XCTAssertEqual(seen.get().map(\.url), ["\(server.baseURL)/redirect-chain/1", "\(server.baseURL)/redirect-chain/0"])
        XCTAssertEqual(response.redirects, [
            Redirect(url: "\(server.baseURL)/redirect-chain/2", status: 302),
            Redirect(url: "\(server.baseURL)/redirect-chain/1", status: 302),
        ])
        XCTAssertEqual(response.url, "\(server.baseURL)/redirect-chain/0")
        XCTAssertEqual(response.metrics.redirects, 2)
    }

    func testTheHookMayChangeStopOrRefuseTheHop() async throws {
        let changed = try await engine.send(Request.post("/redirect?to=/echo&status=307").json("{}").redirectHook { _, next in
            try next.setURL("\(self.server.baseURL)/echo/changed")
            try next.setHeader("X-Hook", "yes")
            return .follow
        })
        let echo = try Echo(changed)
        XCTAssertEqual(echo.path, "/echo/changed")
        XCTAssertEqual(echo.method, "POST")
        XCTAssertEqual(echo.body, "{}")
        XCTAssertEqual(echo.header("X-Hook"), "yes")

        let stopped = try await engine.send(Request.get("/redirect?to=/echo").redirectHook { _, _ in .stop })
        XCTAssertEqual(stopped.status, 302)
        XCTAssertEqual(stopped.header("Location"), "/echo")

        let error = await assertThrows(.redirectRefused) {
            try await self.engine.send(Request.get("/redirect?to=/echo").redirectHook { _, _ in .refuse })
        }
        XCTAssertEqual(error?.response?.status, 302)
        XCTAssertEqual(server.count("/echo"), 0) // stopped and refused hops never went out
        XCTAssertEqual(server.count("/echo/changed"), 1)
    }

    func testSettingsReachTheEngine() async throws {
        let notFollowing = try makeEngine {
            $0.followRedirects = false
            $0.maxRedirects = 1
        }
        defer { notFollowing.close() }
        let response = try await notFollowing.send(.get("/redirect?to=/echo&status=308"))
        XCTAssertEqual(response.status, 308)
        XCTAssertTrue(response.redirects.isEmpty)
        let error = await assertThrows(.tooManyRedirects) {
            try await notFollowing.send(Request.get("/redirect-chain/2").followRedirects(true))
        }
        XCTAssertEqual(error?.response?.status, 302)

        let hooked = try makeEngine { $0.redirectHook = { _, _ in .stop } }
        defer { hooked.close() }
        let defaults = Configuration()
        XCTAssertNil(defaults.redirectHook)
        XCTAssertTrue(defaults.followRedirects)
        XCTAssertEqual(defaults.maxRedirects, 20)
        XCTAssertFalse(defaults.allowRedirectDowngrade)
        let stopped = try await hooked.send(.get("/redirect?to=/echo"))
        XCTAssertEqual(stopped.status, 302)
    }

    func testTimeoutsSayWhichFired() async throws {
        let idle = await assertThrows(.timeout) {
            try await self.engine.send(Request.get("/hang").idleTimeout(0.2))
        }
        XCTAssertEqual(idle?.timeoutKind, .idle)
        let total = await assertThrows(.timeout) {
            try await self.engine.send(Request.get("/delay/5000").timeout(0.3))
        }
        XCTAssertEqual(total?.timeoutKind, .total)
        let garbage = await assertThrows(.protocolError) { try await self.engine.send(.get("/raw/icy")) }
        XCTAssertNil(garbage?.timeoutKind)
        let idleEngine = try makeEngine {
            $0.idleTimeout = 0.2
            $0.connectTimeout = 5
        }
        defer { idleEngine.close() }
        let engineIdle = await assertThrows(.timeout) { try await idleEngine.send(.get("/slow-body/5000")) }
        XCTAssertEqual(engineIdle?.timeoutKind, .idle)
        let off = try await idleEngine.send(Request.get("/slow-body/300").idleTimeout(0))
        XCTAssertEqual(off.body.count, 100)
    }
}
