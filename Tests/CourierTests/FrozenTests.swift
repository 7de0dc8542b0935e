// FrozenTests.swift — frozen requests and reachability through the Swift facade: freezing while
// offline and when the server is gone, the manager, replay in order with the idempotency key, the
// events as an AsyncStream, as observers and as notifications, and the reachability status,
// listeners and fast offline failures. A real loopback server and real LMDB files.

import Courier
import CourierTestServer
import Foundation
import XCTest

final class FrozenTests: LoopbackTestCase {
    var store = ""

    override func configuration() -> Configuration {
        if store.isEmpty { store = NSTemporaryDirectory() + "courier-frozen-tests-" + UUID().uuidString }
        var configuration = super.configuration()
        configuration.storeDirectory = store
        configuration.frozenReplay = FrozenReplay(concurrency: 4, backoffBase: 0.02, backoffMax: 0.1)
        configuration.frozenPoll = 0.2
        return configuration
    }

    override func tearDown() {
        super.tearDown()
        try? FileManager.default.removeItem(atPath: store)
    }

    /// Sends and returns the CourierError it ends with (nil on success).
    func failure(_ request: Request) async -> CourierError? {
        do {
            _ = try await engine.send(request)
            return nil
        } catch {
            return error as? CourierError
        }
    }

    /// With no store directory a frozen request is kept in the default store, named by the app
    /// id, and the next engine finds it (the old default, a temporary store, lost it at close).
    func testFrozenRequestOutlivesTheEngineInTheDefaultStore() async throws {
        let appID = "org.example.frozen-\(UUID().uuidString.prefix(8))"
        func open() throws -> Engine {
            try makeEngine {
                $0.storeDirectory = nil
                $0.temporaryStore = false
                $0.appID = appID
            }
        }
        let first = try open()
        XCTAssertEqual(first.storeDirectory, Self.dataHome + "/" + appID + "/courier")
        first.reachability.setOffline()
        do {
            _ = try await first.send(.post("/echo/like").parameter("post", "7").freeze(.auto))
            XCTFail("sent")
        } catch let error as CourierError {
            XCTAssertEqual(error.code, .frozen)
        }
        first.close()
        let second = try open()
        defer { second.close() }
        XCTAssertEqual(try second.frozen.count(), 1)
        try? FileManager.default.removeItem(atPath: Self.dataHome + "/" + appID)
    }

    /// An app id that is not one path component is refused at open.
    func testBadAppIDIsRefused() {
        var configuration = Configuration()
        configuration.appID = "a/b"
        XCTAssertThrowsError(try Engine(configuration: configuration)) { error in
            XCTAssertEqual((error as? CourierError)?.code, .invalidArgument)
        }
    }

    func testFreezeWhileOfflineAndReplayWhenOnline() async throws {
        let events = engine.frozen.events()
        engine.reachability.setOffline()
        XCTAssertEqual(engine.reachability.status, .offline)
        let request = Request.post("/echo/like").body(Data("liked=1".utf8), contentType: "text/plain")
            .header("X-App", "demo").freeze(.auto, expiry: 3600)
        let error = await failure(request)
        XCTAssertEqual(error?.code, .frozen)
        let id = try XCTUnwrap(error?.freezeID)
        XCTAssertEqual(id.count, 32)

        let list = try engine.frozen.list()
        XCTAssertEqual(list.count, 1)
        let frozen = try XCTUnwrap(try engine.frozen.get(id))
        XCTAssertEqual(frozen, list.first)
        XCTAssertEqual(frozen.method, "POST")
        XCTAssertEqual(frozen.url, server.baseURL + "/echo/like")
        XCTAssertEqual(frozen.host, server.baseURL)
        XCTAssertEqual(frozen.body, Data("liked=1".utf8))
        XCTAssertEqual(frozen.policy, .auto)
        XCTAssertFalse(frozen.unordered)
        XCTAssertEqual(frozen.attempts, 0)
        XCTAssertEqual(frozen.expires.timeIntervalSince(frozen.created), 3600, accuracy: 0.01)
        XCTAssertTrue(frozen.headers.contains { $0.name == "Idempotency-Key" && $0.value == frozen.idempotencyKey })
        XCTAssertTrue(frozen.headers.contains { $0.name == "X-App" && $0.value == "demo" })
        XCTAssertTrue(frozen.json.contains("\"idempotency_key\""))
        XCTAssertEqual(server.count("/echo/like"), 0)

        engine.reachability.setOnline() // replays
        var seen: [FrozenEvent] = []
        for await event in events {
            seen.append(event)
            if event.kind == .resentSucceeded { break }
        }
        XCTAssertEqual(seen.map(\.kind), [.frozen, .resentSucceeded])
        let resent = try XCTUnwrap(seen.last)
        XCTAssertEqual(resent.freezeID, id)
        XCTAssertTrue(resent.isFinal)
        XCTAssertEqual(resent.attempts, 1)
        let echo = try Echo(try XCTUnwrap(resent.response))
        XCTAssertEqual(echo.header("Idempotency-Key"), frozen.idempotencyKey)
        XCTAssertEqual(echo.body, "liked=1")
        XCTAssertEqual(server.count("/echo/like"), 1)
        XCTAssertEqual(try engine.frozen.count(), 0)
        let outcome = try XCTUnwrap(try engine.frozen.lastOutcome(id))
        XCTAssertNil(outcome.code)
        XCTAssertEqual(outcome.status, 200)
    }

    func testServerGoneFreezesAndTheStoreReplaysInOrder() async throws {
        let port = server.port
        server.stop()
        var ids: [String] = []
        for i in 0..<5 {
            let error = await failure(Request.post("/echo/\(i)").json("{\"n\":\(i)}").freeze(.auto))
            XCTAssertEqual(error?.code, .frozen)
            ids.append(error?.freezeID ?? "")
        }
        XCTAssertEqual(try engine.frozen.list().map(\.id), ids) // oldest first
        engine.close()

        // The server is back on its port; a new engine on the store replays them in order.
        var restarted: OpaquePointer?
        XCTAssertEqual(cts_server_start(&restarted, "127.0.0.1", Int32(port)), 0)
        defer { if let restarted { cts_server_stop(restarted) } }
        engine = try makeEngine { $0.frozenPaused = true }
        let order = Locked<[String]>([])
        let keys = Locked<[String]>([])
        let token = try engine.frozen.addObserver(for: [.resentSucceeded]) { event in
            order.mutate { $0.append(event.freezeID) }
            if let response = event.response, let echo = try? Echo(response) {
                keys.mutate { $0.append(echo.header("Idempotency-Key") ?? "") }
            }
        }
        let expected = try engine.frozen.list().map(\.idempotencyKey)
        engine.frozen.resume()
        try engine.frozen.replay() // now, whatever the backoff
        waitUntil("every request replayed", timeout: 30) { order.get().count == 5 }
        XCTAssertTrue(engine.frozen.waitUntilIdle(timeout: 30))
        XCTAssertEqual(order.get(), ids)
        XCTAssertEqual(keys.get(), expected)
        for i in 0..<5 { XCTAssertEqual(cts_server_path_count(restarted, "/echo/\(i)"), 1) }
        XCTAssertEqual(try engine.frozen.count(), 0)
        token.cancel()
    }

    func testManagerAndWaitForAppPolicy() async throws {
        engine.reachability.setOffline()
        for id in ["a-1", "a-2", "a-3"] {
            let error = await failure(Request.delete("/echo/\(id)").freeze(.manual).freezeID(id))
            XCTAssertEqual(error?.freezeID, id)
        }
        XCTAssertEqual(try engine.frozen.count(), 3)
        XCTAssertEqual(try engine.frozen.get("a-1")?.policy, .manual)
        XCTAssertNil(try engine.frozen.get("nope"))
        XCTAssertTrue(try engine.frozen.remove("a-2"))
        XCTAssertFalse(try engine.frozen.remove("a-2"))
        engine.reachability.setOnline()
        XCTAssertTrue(engine.frozen.waitUntilIdle(timeout: 30))
        XCTAssertEqual(server.count("/echo/a-1"), 0) // waits for the app
        try engine.frozen.resend("a-1")
        XCTAssertTrue(engine.frozen.waitUntilIdle(timeout: 30))
        XCTAssertEqual(server.count("/echo/a-1"), 1)
        XCTAssertEqual(try engine.frozen.removeAll(), 1)
        XCTAssertEqual(try engine.frozen.count(), 0)
        await assertThrows(.notFound) { try engine.frozen.resend("a-3") }
    }

    func testNotificationsAndObserversInTheSeedsStyle() async throws {
        let center = NotificationCenter()
        let received = Locked<[String]>([])
        let observer = center.addObserver(forName: .courierFrozenRequestResent, object: nil, queue: nil) { note in
            if let event = note.userInfo?[CourierFrozenEventKey] as? FrozenEvent { received.mutate { $0.append(event.freezeID) } }
        }
        defer { center.removeObserver(observer) }
        let posting = try engine.frozen.postNotifications(to: center)
        let failed = Locked<[Int]>([])
        let token = try engine.frozen.addObserver(for: [.resentFailed]) { event in
            failed.mutate { $0.append(event.response?.status ?? 0) }
        }
        engine.reachability.setOffline()
        _ = await failure(Request.post("/echo/n").freeze(.auto).freezeID("n-1"))
        _ = await failure(Request.post("/status/404").freeze(.auto, unordered: true).freezeID("gone"))
        engine.reachability.setOnline()
        XCTAssertTrue(engine.frozen.waitUntilIdle(timeout: 30))
        XCTAssertEqual(received.get(), ["n-1"])
        XCTAssertEqual(failed.get(), [404])
        XCTAssertEqual(try engine.frozen.count(), 0) // a 404 is a final answer
        posting.cancel()
        engine.frozen.removeObserver(token)
    }

    func testOfflineFailsFastUnlessIgnored() async throws {
        engine.reachability.setOffline()
        await assertThrows(.offline) { try await engine.send(.get("/echo/x")) }
        XCTAssertEqual(server.count("/echo/x"), 0)
        let response = try await engine.send(.get("/echo/x").ignoreOffline())
        XCTAssertEqual(response.status, 200)
        engine.reachability.setAutomatic()
        let again = try await engine.send(.get("/echo/y"))
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(engine.reachability.status, .online)
    }

    func testReachabilityListenerAndDetection() async throws {
        let port = server.port
        engine.close()
        engine = try makeEngine { $0.reachability = ReachabilitySettings(fromErrors: true, interval: 0.1) }
        let states = Locked<[ReachabilityStatus]>([])
        let token = try engine.reachability.listen { status in states.mutate { $0.append(status) } }
        _ = try await engine.send(.get("/echo/a"))
        waitUntil("the listener saw online", timeout: 20) { states.get() == [.online] } // flaps may collapse
        server.stop()
        await assertThrows(.cannotConnect) { try await engine.send(.get("/echo/b")) }
        XCTAssertEqual(engine.reachability.status, .offline)
        XCTAssertFalse(engine.reachability.isReachable)
        var restarted: OpaquePointer?
        XCTAssertEqual(cts_server_start(&restarted, "127.0.0.1", Int32(port)), 0)
        defer { if let restarted { cts_server_stop(restarted) } }
        waitUntil("the probe sees the server", timeout: 20) { engine.reachability.status == .online }
        waitUntil("listeners ran", timeout: 20) { states.get().last == .online }
        XCTAssertEqual(Array(states.get().prefix(2)), [.online, .offline])
        token.cancel()
    }
}
