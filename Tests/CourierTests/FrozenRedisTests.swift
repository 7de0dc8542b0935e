// FrozenRedisTests.swift — the journal on Redis through the Swift facade: a request frozen by one
// engine (its own store directory) is listed and replayed by another that names the same Redis;
// an engine opens with Redis down, and its frozen-request calls throw CourierError.redis. A
// redis-server of the test's own (scripts/redis-fixture: AOF, appendfsync always) and the loopback
// server. The journal's logic is the C core's.

import Courier
import Foundation
import XCTest

final class FrozenRedisTests: RedisTestCase {
    /// A freeze fewer replicas confirm than `frozenReplicas` asks (this server has none) throws
    /// `.replicasUnconfirmed`, not `.frozen`; it is in the journal all the same.
    func testFreezeUnconfirmedByReplicasIsNotFrozen() async throws {
        let engine = try makeEngine {
            $0.frozenStore = redisURL + "#swift-replicas"
            $0.frozenPaused = true
            $0.frozenReplicas = FrozenReplicas(count: 1, timeout: 0.2)
        }
        defer { engine.close() }
        engine.reachability.setOffline()
        do {
            _ = try await engine.send(.post("/echo/replicas").body(Data("n=1".utf8), contentType: "text/plain")
                .freeze(.auto))
            XCTFail("sent")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .replicasUnconfirmed)
            XCTAssertNil(error.freezeID)
        }
        XCTAssertEqual(try engine.frozen.count(), 1)
    }

    func testFrozenByOneEngineReplayedByAnother() async throws {
        let url = redisURL + "#swift"
        func open(_ paused: Bool) throws -> Engine {
            try makeEngine {
                $0.frozenStore = url
                $0.frozenPaused = paused
                $0.frozenPoll = 0.1
            }
        }
        let first = try open(true)
        first.reachability.setOffline()
        do {
            _ = try await first.send(.post("/echo/redis").body(Data("n=1".utf8), contentType: "text/plain")
                .freeze(.auto).freezeID("swift-1"))
            XCTFail("sent")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .frozen)
            XCTAssertEqual(error.freezeID, "swift-1")
        }
        first.close()
        // The tool's `frozen` commands on the same journal (when the courier executable is built).
        let toolStore = NSTemporaryDirectory() + "courier-redis-tool-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: toolStore) }
        if let tool = try? runCourierTool(["frozen", "ls", "--store", toolStore, "--journal", url, "--json"]) {
            XCTAssertEqual(tool.status, 0)
            XCTAssertTrue(tool.output.contains("swift-1"), tool.output)
        }

        let second = try open(false) // another store directory (temporary), the same Redis
        defer { second.close() }
        let listed = try second.frozen.list()
        XCTAssertEqual(listed.map(\.id), ["swift-1"])
        XCTAssertEqual(listed.first?.body, Data("n=1".utf8))
        try second.frozen.replay()
        waitUntil("replayed") { server.count("/echo/redis") == 1 }
        XCTAssertTrue(second.frozen.waitUntilIdle(timeout: 20))
        XCTAssertEqual(try second.frozen.count(), 0)
        XCTAssertEqual(try second.frozen.lastOutcome("swift-1")?.status, 200)
    }

    /// One host's ordered requests split between two engines replaying one journal: when one
    /// engine's answer makes a record the other holds the host's head, the other sends it at once
    /// (the core's handoff: docs/design/redis-handoff.md), not at its next poll. Both poll every
    /// 60 s and the drain must end within 30 s. The first request is held 5 s by the server, so the
    /// first engine, which sent it, takes no more; the second block is taken by the second
    /// engine's first pass; Redis' pending lists (XPENDING) show the split before the head is
    /// answered.
    func testSplitOrderedBacklogIsHandedOff() async throws {
        let url = redisURL + "#swift-handoff"
        let stream = "{courier:journal:swift-handoff}:stream"
        func freeze(_ paths: [String]) async throws {
            let freezer = try makeEngine {
                $0.frozenStore = url
                $0.frozenPaused = true
            }
            defer { freezer.close() }
            freezer.reachability.setOffline()
            for path in paths {
                do {
                    _ = try await freezer.send(.post(path).body(Data("x".utf8), contentType: "text/plain").freeze(.auto))
                    XCTFail("sent")
                } catch let error as CourierError {
                    XCTAssertEqual(error.code, .frozen)
                }
            }
        }
        // (entries pending, consumers holding some), from XPENDING's summary
        func pending() -> (count: Int, holders: Int) {
            guard let pipe = popen("redis-cli -u '\(redisURL)' XPENDING '\(stream)' courier-replay", "r") else {
                return (-1, 0)
            }
            var words: [String] = []
            var buffer = [CChar](repeating: 0, count: 4096)
            while fgets(&buffer, Int32(buffer.count), pipe) != nil {
                words.append(String(cString: buffer).trimmingCharacters(in: .whitespacesAndNewlines))
            }
            pclose(pipe)
            guard let count = words.first.flatMap({ Int($0) }) else { return (-1, 0) }
            return (count, (words.count - 3) / 2)
        }
        func replayer() throws -> Engine {
            try makeEngine {
                $0.frozenStore = url
                $0.frozenPoll = 60
                $0.timeout = 30
            }
        }
        try await freeze(["/delay/5000"] + (1..<10).map { "/echo/handoff-\($0)" })
        let first = try replayer()
        defer { first.close() }
        waitUntil("the first block is taken") { pending().count == 10 }
        try await freeze((10..<20).map { "/echo/handoff-\($0)" })
        let second = try replayer()
        defer { second.close() }
        waitUntil("the second block is taken") { pending().count == 20 }
        XCTAssertEqual(pending().holders, 2) // the backlog is split: both engines hold some
        waitUntil("drained", timeout: 30) { (try? first.frozen.count()) == 0 }
        XCTAssertEqual(try second.frozen.count(), 0)
    }

    /// Redis down never fails the open (issue 28, trap 7): the journal connects when Redis answers;
    /// until then its calls throw `.redis`.
    func testRedisDownIsARedisError() throws {
        var configuration = configuration()
        configuration.frozenStore = "redis://127.0.0.1:1/0"
        let engine = try Engine(configuration: configuration)
        defer { engine.close() }
        XCTAssertThrowsError(try engine.frozen.count()) { error in
            XCTAssertEqual((error as? CourierError)?.code, .redis, "\(error)")
        }
    }
}
