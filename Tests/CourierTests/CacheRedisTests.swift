// CacheRedisTests.swift — the cache on Redis through the Swift facade: two engines with different
// local stores share one Redis cache (`Configuration.cacheStore` = a redis:// URL of a
// redis-server the test starts with scripts/redis-fixture), and Redis down is
// CourierError.redis from the manager while requests still get the network's answer. Without
// redis-server the tests fail, saying so (scripts/setup installs it); they are skipped only in a
// build without Redis (the package trait Redis off).

import Courier
import Foundation
import XCTest

final class CacheRedisTests: RedisTestCase {
    private func engine(cacheStore: String) throws -> Engine {
        var c = Configuration()
        c.baseURL = server.baseURL
        c.temporaryStore = true
        c.cacheStore = cacheStore
        return try Engine(configuration: c)
    }

    func testTwoEnginesShareOneRedisCache() async throws {
        XCTAssertFalse(redisURL.isEmpty)
        let request = Request.get("/cache").parameter("body", "shared").cachePolicy(.cacheFirst)
        let a = try engine(cacheStore: redisURL)
        let first = try await a.send(request)
        XCTAssertEqual(first.cacheStatus, .network)
        a.close()
        let b = try engine(cacheStore: redisURL) // another temporary local store
        defer { b.close() }
        let second = try await b.send(request)
        XCTAssertTrue(second.fromCache)
        XCTAssertEqual(second.cacheStatus, .hit)
        XCTAssertEqual(second.text, "shared")
        XCTAssertEqual(server.count("/cache"), 1)
        let size = try b.cache.size()
        XCTAssertEqual(size.count, 1)
        let removed = try b.cache.removeAll()
        XCTAssertEqual(removed, 1)
    }

    /// The tool's cache commands on the Redis cache (`--cache-store URL`).
    func testToolCacheCommandsOnRedis() throws {
        let e = try engine(cacheStore: redisURL)
        try e.cache.put(key: "tool-entry", body: Data("z".utf8), expiry: 600)
        e.close()
        let store = NSTemporaryDirectory() + "courier-tool-redis-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: store) }
        let (status, output) = try runCourierTool(["cache", "ls", "--store", store, "--cache-store", redisURL])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("tool-entry"), output)
        let (statsStatus, stats) = try runCourierTool(["cache", "stats", "--store", store, "--cache-store", redisURL, "--json"])
        XCTAssertEqual(statsStatus, 0, stats)
        let object = try JSONSerialization.jsonObject(with: Data(stats.utf8)) as? [String: Any]
        XCTAssertEqual(object?["count"] as? Int, 1)
        XCTAssertEqual(object?["cache"] as? String, redisURL)
        let (clearStatus, cleared) = try runCourierTool(["cache", "clear", "--store", store, "--cache-store", redisURL])
        XCTAssertEqual(clearStatus, 0, cleared)
        XCTAssertTrue(cleared.contains("removed 1 entries"), cleared)
    }

    func testRedisDownIsAClearError() async throws {
        let spare = try LoopbackServer() // a free port: bound, then closed
        let port = spare.port
        spare.stop()
        let e = try engine(cacheStore: "redis://127.0.0.1:\(port)/0")
        defer { e.close() }
        do {
            _ = try e.cache.size()
            XCTFail("the size of a cache on a Redis that is down")
        } catch {
            XCTAssertEqual((error as? CourierError)?.code, .redis)
        }
        let response = try await e.send(Request.get("/cache").parameter("body", "net").cachePolicy(.cacheFirst))
        XCTAssertEqual(response.cacheStatus, .network)
        XCTAssertEqual(response.text, "net")
    }

    func testBadURLIsRefused() {
        var c = Configuration()
        c.cacheStore = "redis://127.0.0.1:0/0"
        c.temporaryStore = true
        XCTAssertThrowsError(try Engine(configuration: c)) {
            XCTAssertEqual(($0 as? CourierError)?.code, .invalidArgument)
        }
    }
}
