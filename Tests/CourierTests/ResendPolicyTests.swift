// ResendPolicyTests.swift — resend policies and per-component log levels through the Swift facade:
// a policy that sends only small bodies, one that deletes after N attempts, an unknown id refused
// at send, and the journal's decision lines (JSON fields). A real loopback server and real LMDB files.

import Courier
import Foundation
import XCTest

final class ResendPolicyTests: LoopbackTestCase {
    var store = ""

    override func configuration() -> Configuration {
        if store.isEmpty { store = NSTemporaryDirectory() + "courier-policy-tests-" + UUID().uuidString }
        var configuration = super.configuration()
        configuration.storeDirectory = store
        configuration.frozenReplay = FrozenReplay(concurrency: 2, backoffBase: 0.01, backoffMax: 0.02)
        configuration.frozenPoll = 0.1
        configuration.retry = RetryPolicy(maxRetries: 0)
        return configuration
    }

    override func tearDown() {
        super.tearDown()
        try? FileManager.default.removeItem(atPath: store)
    }

    private func freeze(_ request: Request) async {
        do {
            _ = try await engine.send(request)
            XCTFail("sent")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .frozen)
        } catch {
            XCTFail("\(error)")
        }
    }

    func testPolicyThatSendsOnlySmallBodies() async throws {
        let lines = JSONLogLines()
        try engine.addLogSink(.handler { _, text in lines.add(text) })
        engine.setLogLevel(.debug, for: .journal)
        XCTAssertEqual(engine.logLevel(for: .journal), .debug)
        XCTAssertEqual(engine.logLevel(for: .cache), .info)
        try engine.frozen.addResendPolicy("small-bodies", ClosureResendPolicy(canSend: { request, _, _ in
            (request.body?.count ?? 0) < 16
        }))
        engine.reachability.setOffline()
        await freeze(.post("/echo/small").body(Data("tiny".utf8), contentType: "text/plain")
            .freeze(.auto, unordered: true).freezeID("small").resendPolicy("small-bodies"))
        await freeze(.post("/echo/big").body(Data(repeating: 120, count: 100), contentType: "text/plain")
            .freeze(.auto, unordered: true).freezeID("big").resendPolicy("small-bodies"))
        XCTAssertEqual(try engine.frozen.get("big")?.resendPolicy, "small-bodies")
        engine.reachability.setOnline()
        XCTAssertTrue(engine.frozen.waitUntilIdle(timeout: 10))
        XCTAssertEqual(server.count("/echo/small"), 1)
        XCTAssertEqual(server.count("/echo/big"), 0)
        XCTAssertEqual(try engine.frozen.list().map(\.id), ["big"])
        let held = lines.matching("journal_policy", "freeze_id", "big")
        XCTAssertFalse(held.isEmpty)
        XCTAssertEqual(held.first?["decision"] as? String, "hold")
        XCTAssertEqual(held.first?["reason"] as? String, "can_send_false")
        XCTAssertEqual(held.first?["policy"] as? String, "small-bodies")
    }

    func testPolicyThatDeletesAfterTwoAttempts() async throws {
        try engine.frozen.addResendPolicy("two-tries", ClosureResendPolicy(canDelete: { request, _, _ in
            request.attempts >= 2
        }))
        let events = engine.frozen.events([.deleted])
        engine.reachability.setOffline()
        await freeze(.post("/status/503").body(Data("x".utf8), contentType: "text/plain")
            .freeze(.auto).freezeID("flaky").resendPolicy("two-tries"))
        engine.reachability.setOnline()
        var deleted: FrozenEvent?
        for await event in events {
            deleted = event
            break
        }
        XCTAssertEqual(deleted?.freezeID, "flaky")
        XCTAssertEqual(deleted?.reason, "can_delete")
        XCTAssertEqual(deleted?.error?.code, .deletedByPolicy)
        XCTAssertEqual(server.count("/status/503"), 2)
        XCTAssertEqual(try engine.frozen.count(), 0)
        XCTAssertEqual(try engine.frozen.lastOutcome("flaky")?.code, .deletedByPolicy)
        XCTAssertTrue(try engine.frozen.removeResendPolicy("two-tries"))
        XCTAssertFalse(try engine.frozen.removeResendPolicy("two-tries"))
    }

    /// A second process sharing the store (the `courier` tool) does not have the policy: it keeps
    /// the request, never sends or deletes it, and says so; this process then sends it.
    func testPolicyUnknownToASecondProcess() async throws {
        try engine.frozen.addResendPolicy("app.sync", ClosureResendPolicy())
        engine.reachability.setOffline()
        await freeze(.post("/echo/shared").body(Data("hello".utf8), contentType: "text/plain")
            .freeze(.auto).freezeID("shared").resendPolicy("app.sync"))
        engine.close()
        let (status, output) = try runCourierTool(["frozen", "replay", "--store", store, "--json", "--timeout", "10"])
        XCTAssertEqual(status, 0, output)
        let summary = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], output)
        XCTAssertEqual(summary["kept_unknown_policy"] as? Int, 1, output)
        XCTAssertEqual(summary["left"] as? Int, 1, output)
        XCTAssertEqual(summary["sent"] as? Int, 0, output)
        XCTAssertEqual(server.count("/echo/shared"), 0)
        let again = try makeEngine { $0.frozenPaused = true }
        defer { again.close() }
        XCTAssertEqual(try again.frozen.get("shared")?.attempts, 0)
        try again.frozen.addResendPolicy("app.sync", ClosureResendPolicy())
        again.frozen.resume()
        try again.frozen.replay()
        XCTAssertTrue(again.frozen.waitUntilIdle(timeout: 10))
        XCTAssertEqual(server.count("/echo/shared"), 1)
        XCTAssertEqual(try again.frozen.count(), 0)
    }

    func testUnknownAndReservedIdsAreRefused() async throws {
        do {
            _ = try await engine.send(.post("/echo").freeze(.auto).resendPolicy("nobody"))
            XCTFail("sent")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .resendPolicyUnknown)
        }
        XCTAssertThrowsError(try engine.frozen.addResendPolicy("courier.mine", ClosureResendPolicy())) { error in
            XCTAssertEqual((error as? CourierError)?.code, .invalidArgument)
        }
        engine.reachability.setOffline()
        await freeze(.post("/echo/boot").freeze(.auto).freezeID("boot").resendPolicy(.start))
        XCTAssertEqual(try engine.frozen.get("boot")?.resendPolicy, BuiltinResendPolicy.start.rawValue)
    }
}
