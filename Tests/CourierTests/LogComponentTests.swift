// LogComponentTests.swift — logs that explain through the Swift facade: per-component levels
// changed while the engine runs, the cache's decision lines (JSON fields), and a file sink rotated
// by day on the engine's clock. A real loopback server and real LMDB files.

import Courier
import Foundation
import XCTest

/// The lines of a handler sink, parsed (shared by the suites that read the engine's log lines).
final class JSONLogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [[String: Any]] = []
    func add(_ text: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return }
        lock.lock()
        items.append(object)
        lock.unlock()
    }
    /// The lines of `event` whose `key` is `value` (a string, or a request id as a number).
    func matching(_ event: String, _ key: String, _ value: Any) -> [[String: Any]] {
        lock.lock()
        defer { lock.unlock() }
        return items.filter { item in
            guard item["event"] as? String == event else { return false }
            if let id = value as? UInt64 { return (item[key] as? NSNumber)?.uint64Value == id }
            return item[key] as? String == value as? String
        }
    }
    func matching(_ event: String, requestID: UInt64) -> [[String: Any]] { matching(event, "request_id", requestID) }
}

final class LogComponentTests: LoopbackTestCase {
    func testCacheDecisionLinesFollowTheComponentLevels() async throws {
        let lines = JSONLogLines()
        try engine.addLogSink(.handler { _, text in lines.add(text) })
        engine.setLogLevel(.debug, for: .cache)
        engine.setLogLevel(.off, for: .transport)
        let request = Request.get("/json").cachePolicy(.cacheFirst).cacheExpiry(300)
        let first = try await engine.send(request)
        let second = try await engine.send(request)
        let miss = lines.matching("cache_lookup", requestID: first.requestID.rawValue)
        XCTAssertEqual(miss.first?["decision"] as? String, "network")
        XCTAssertEqual(miss.first?["reason"] as? String, "miss")
        XCTAssertEqual(miss.first?["component"] as? String, "cache")
        XCTAssertEqual(lines.matching("cache_store", requestID: first.requestID.rawValue).first?["stored"] as? Bool, true)
        let hit = lines.matching("cache_lookup", requestID: second.requestID.rawValue)
        XCTAssertEqual(hit.first?["decision"] as? String, "from_cache")
        XCTAssertTrue(lines.matching("finished", requestID: second.requestID.rawValue).isEmpty)
        engine.setLogLevel(.info, for: .transport) // while it runs
        let third = try await engine.send(request)
        XCTAssertEqual(lines.matching("finished", requestID: third.requestID.rawValue).count, 1)
        engine.logLevel = .warning
        XCTAssertEqual(engine.logLevel(for: .journal), .warning)
    }

    func testFileSinkRotatesByDay() throws {
        final class Clock: @unchecked Sendable {
            let lock = NSLock()
            var now = Date(timeIntervalSince1970: 1_700_000_000)
        }
        let clock = Clock()
        let directory = NSTemporaryDirectory() + "courier-log-day-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try makeEngine {
            $0.clock = {
                clock.lock.lock()
                defer { clock.lock.unlock() }
                return clock.now
            }
        }
        defer { engine.close() }
        let path = directory + "/app.log"
        try engine.addLogSink(.file(path, maxBytes: 0, maxFiles: 3, rotation: .daily, level: .info))
        engine.log(.info, "day one")
        clock.lock.lock()
        clock.now += 86400
        clock.lock.unlock()
        engine.log(.info, "day two")
        let older = try String(contentsOfFile: path + ".1", encoding: .utf8)
        let newer = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(older.contains("\"message\":\"day one\""))
        XCTAssertFalse(older.contains("day two"))
        XCTAssertTrue(newer.contains("\"message\":\"day two\""))
    }
}
