// NetworkKindsTests.swift — the network path's kind from a source the test controls, "not on
// cellular", limits per kind, and the machine's loopback link read through netlink.

import Courier
import Foundation
import XCTest

final class NetworkKindsTests: LoopbackTestCase {
    func testNotOnCellularFailsWhileThePathIsCellular() async throws {
        engine.reachability.report(.online, kind: .cellular, expensive: true)
        XCTAssertEqual(engine.reachability.path.kind, .cellular)
        XCTAssertTrue(engine.reachability.path.expensive)
        do {
            _ = try await engine.send(.get("/echo").allowCellular(false))
            XCTFail("sent over cellular")
        } catch CourierError.cellular {}
        let allowed = try await engine.send(.get("/echo"))
        XCTAssertEqual(allowed.status, 200)
        engine.reachability.report(.unknown, kind: .wifi)
        let onWifi = try await engine.send(.get("/echo").allowCellular(false))
        XCTAssertEqual(onWifi.status, 200)
    }

    func testLimitsPerKindApplyToTheQueue() async throws {
        let limited = try makeEngine {
            $0.networkLimits = [.cellular: NetworkLimits(maxConnectionsPerHost: 1)]
        }
        defer { limited.close() }
        limited.reachability.report(.unknown, kind: .cellular)
        for _ in 0..<3 { limited.send(.get("/hang").coalesce(false)) { _ in } }
        waitUntil("one on the wire, two waiting") { limited.pending == (queued: 2, active: 1) }
        limited.reachability.report(.unknown, kind: .wired)
        waitUntil("all three on the wire") { limited.pending.active == 3 }
        limited.cancelAll()
    }

    func testTheLoopbackLinkIsReadThroughNetlink() throws {
        #if os(Linux)
        let lo = try NetworkKind.ofInterface("lo")
        XCTAssertEqual(lo.kind, .other)
        XCTAssertFalse(lo.expensive)
        XCTAssertThrowsError(try NetworkKind.ofInterface("no-such-if0")) {
            XCTAssertEqual(($0 as? CourierError)?.code, .notFound)
        }
        #endif
    }
}
