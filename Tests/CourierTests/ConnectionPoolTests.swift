// ConnectionPoolTests.swift — the connection pool's figures from Swift (Engine.poolFigures, over
// courier_pool_get_figures): sequential requests reuse one connection, two hosts are counted
// apart, a request on the wire keeps its connection in use, a closed engine throws; `courier get
// --pool` prints them.

import Courier
import Foundation
import XCTest

final class ConnectionPoolTests: LoopbackTestCase {
    func testSequentialRequestsAndTwoHosts() async throws {
        let port = server.port
        let pooled = try makeEngine {
            $0.resolve = [ResolveEntry(host: "other.test", port: port, addresses: ["127.0.0.1"])]
        }
        defer { pooled.close() }
        XCTAssertEqual(try pooled.poolFigures().hosts, [])
        for _ in 0..<4 { _ = try await pooled.send(.get("http://127.0.0.1:\(port)/echo")) }
        for _ in 0..<2 { _ = try await pooled.send(.get("http://other.test:\(port)/echo")) }
        let figures = try pooled.poolFigures()
        XCTAssertEqual(figures.hosts.count, 2)
        XCTAssertEqual(figures["http://127.0.0.1:\(port)"],
                       PoolHost(host: "http://127.0.0.1:\(port)", open: 1, idle: 1, inUse: 0, opened: 1, reused: 3))
        XCTAssertEqual(figures["http://other.test:\(port)"],
                       PoolHost(host: "http://other.test:\(port)", open: 1, idle: 1, inUse: 0, opened: 1, reused: 1))
        XCTAssertEqual(figures.total, PoolHost(host: nil, open: 2, idle: 2, inUse: 0, opened: 2, reused: 4))
        XCTAssertNil(figures["http://nowhere.test:1"])
    }

    func testSlowRequestIsInUseAndClosedEngineThrows() async throws {
        let port = server.port
        let pooled = try makeEngine { _ in }
        let slow = Task { try await pooled.send(.get("http://127.0.0.1:\(port)/delay/1200")) }
        waitUntil("the request is on its connection") { (try? pooled.poolFigures().total.inUse) == 1 }
        XCTAssertEqual(try pooled.poolFigures().total.open, 1)
        _ = try await slow.value
        let after = try pooled.poolFigures().total
        XCTAssertEqual(after.inUse, 0)
        XCTAssertEqual(after.idle, 1)
        pooled.close()
        XCTAssertThrowsError(try pooled.poolFigures()) {
            XCTAssertEqual(($0 as? CourierError)?.code, .closed)
        }
    }

    /// `courier get --pool` prints the figures after the request: a line per host on stderr, a
    /// "pool" object with --json-output.
    func testToolPrintsThePool() throws {
        let url = server.baseURL + "/json"
        let host = "http://127.0.0.1:\(server.port)"
        let plain = try runCourierToolCapturingErrors(["get", "--pool", url])
        XCTAssertEqual(plain.status, 0)
        XCTAssertTrue(plain.errors.contains("pool: \(host)  open 1 (idle 1, in use 0)  made 1, reused 0"), plain.errors)
        let json = try runCourierTool(["get", "--pool", "--json-output", url])
        XCTAssertEqual(json.status, 0)
        let object = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
        let pool = object?["pool"] as? [String: Any]
        let total = pool?["total"] as? [String: Any]
        XCTAssertEqual(total?["opened"] as? Int, 1)
        XCTAssertEqual(total?["idle"] as? Int, 1)
        XCTAssertEqual((pool?["hosts"] as? [[String: Any]])?.first?["host"] as? String, host)
    }
}
