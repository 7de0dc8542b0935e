// RedisFixture.swift — a redis-server of a test's own for the tests of the stores on Redis
// (CacheRedisTests, FrozenRedisTests): scripts/redis-fixture (a free loopback port, a temporary
// directory, AOF with appendfsync always), run through popen: Foundation's Process never sees the
// script exit (it leaves the redis-server daemon behind) and waitUntilExit hangs.

import Courier
import Foundation
import XCTest

final class RedisFixture {
    let directory = NSTemporaryDirectory() + "courier-redis-" + UUID().uuidString
    private(set) var url = ""

    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/redis-fixture").path

    /// Skips the test in a library built without Redis (the package trait Redis off); else starts
    /// redis-server (failing the test, saying why, when it cannot).
    init() throws {
        do {
            var c = Configuration()
            c.temporaryStore = true
            c.cacheStore = "redis://127.0.0.1:1/0"
            try Engine(configuration: c).close()
        } catch let error as CourierError where error.code == .redisUnsupported {
            throw XCTSkip("this library was built without Redis (the package trait Redis is off)")
        } catch {}
        let (status, out) = run(["start", directory])
        XCTAssertEqual(status, 0, "redis-server did not start (scripts/setup installs it)")
        url = out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops the server and removes its files.
    func stop() {
        _ = run(["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func run(_ args: [String]) -> (Int32, String) {
        let command = (["bash", Self.script] + args).map { "'\($0)'" }.joined(separator: " ")
        guard let pipe = popen(command, "r") else { return (-1, "") }
        var output = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), pipe) != nil { output += String(cString: buffer) }
        return (pclose(pipe), output)
    }
}

/// A LoopbackTestCase with a redis-server of its own for each test (`redisURL`).
class RedisTestCase: LoopbackTestCase {
    private var redis: RedisFixture?
    var redisURL = ""

    override func setUpWithError() throws {
        let fixture = try RedisFixture()
        redis = fixture
        redisURL = fixture.url
        try super.setUpWithError()
    }

    override func tearDown() {
        super.tearDown()
        redis?.stop()
    }
}
